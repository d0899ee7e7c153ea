// ProcessReply (remote/worker.proto) in protobuf's wire format, written and read by hand: the one codec
// of the reply, used by the worker and the loader alike. By hand because a reply's images are megabytes:
// the worker decodes them straight into the memory the transport sends, and the loader reads them where
// they landed in its receive buffers, with no protobuf message in between. The other messages are small
// and go through the generated code.
//
// The worker writes the fields in field-number order, images last, so that a reader knows how the
// images are coded before it reaches them. The parser takes the fields in any order, as protobuf does.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "reader/executor.h"

namespace dsc::remote {

constexpr size_t kMaxSampleErrorBytes = 65536;  // the longest sample_error a reply may carry

// A reply's fields before its images, ending with the images field's key and length (`images_bytes`,
// as sent: compressed or not); the images' bytes follow it on the wire. `forms` may be null: no
// forms field.
std::string EncodeReplyHead(bool compressed, uint64_t images_size, const uint8_t* params, size_t params_bytes,
                            const uint8_t* forms, size_t forms_bytes, uint64_t images_bytes);
// A whole reply that carries only a damaged sample's message.
std::string EncodeSampleErrorReply(const std::string& message);

// A reply read where it lies: its bytes fields are pieces of the received buffers (valid while they
// are). A field that comes twice keeps its last value, as in protobuf.
struct ReplyView {
  struct Bytes {
    bool present = false;  // the field was there (an empty one too)
    uint64_t size = 0;
    std::vector<BytePiece> pieces;
  };
  bool compressed = false;
  uint64_t images_size = 0;
  std::string sample_error;
  Bytes params, forms, images;
};

// Reads a reply spread over n pieces (gRPC's slices or the data path's buffers). "" on success, else
// what is malformed ("truncated params", ...); never reads outside the pieces.
std::string ParseReply(const BytePiece* pieces, size_t n, ReplyView* out);

// Copies every byte of `pieces`, in order, to `out`.
void CopyPieces(const std::vector<BytePiece>& pieces, uint8_t* out);

}  // namespace dsc::remote
