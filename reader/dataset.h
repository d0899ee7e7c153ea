// A dsc file opened for reading: validated on open, O(1) access to any sample's payload and labels.
//
//   dsc::Dataset ds("cifar10.beton");             // mmap, metadata validated
//   dsc::Dataset ds("x.beton", {.verify = true});  // also checks each block's checksum on first touch
//
// Thread-safe for concurrent reads.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format/byte_source.h"
#include "format/error.h"
#include "format/file_view.h"

namespace dsc {

struct DatasetOptions {
  bool verify = false;     // check each block's checksum the first time one of its samples is read
  bool use_pread = false;  // pread instead of mmap (network filesystems)
  // A URL (http://, https://, s3://) is streamed into a local cache (docs/streaming.md): its folder
  // ("" = $DSC_CACHE_DIR, else ~/.cache/dsc) and the bytes of blocks kept there.
  std::string cache_dir = {};  // (initialised: DatasetOptions{verify, pread} stays warning-free)
  uint64_t cache_budget = 256ull << 20;
};

// A sample's stored bytes, ready for the decoder (shared JPEG tables already put back).
struct Payload {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

class Dataset {
 public:
  explicit Dataset(const std::string& path, DatasetOptions options = {});
  // Opens an already constructed source (tests use an in-memory one). Takes ownership.
  Dataset(std::unique_ptr<format::ByteSource> source, DatasetOptions options);

  const std::string& path() const { return source_->name(); }
  uint64_t size() const { return view_->sample_count(); }
  const format::FileView& view() const { return *view_; }
  const format::Meta& meta() const { return view_->meta(); }
  const uint8_t* mapped() const { return source_->mapped(); }  // the file's mapping (nullptr with pread)
  const format::ByteSource& source() const { return *source_; }
  bool streamed() const { return source_->remote(); }  // read from a URL through a local cache
  format::IndexEntry entry(uint64_t i) const { return view_->entry(i); }
  // Sample i's entry for image field `image` (a field index): the index entry for the first image
  // (0); for a further image (format 1.3), the same entry (block, labels) with its payload's place and
  // its descriptor's size, encoding and channels, and no shared JPEG table. O(1); reads no payload.
  format::IndexEntry entry(uint64_t i, uint32_t image) const { return image ? FurtherEntry(i, image) : view_->entry(i); }
  // The field index of the image field named `name` ("" = the first); throws OptionError naming the
  // file's image fields when there is none of that name.
  uint32_t ImageField(const std::string& name) const;
  void PrefetchEntry(uint64_t i) const { view_->PrefetchEntry(i); }  // see FileView::PrefetchEntry
  int32_t label(uint64_t i, size_t field = 0) const { return view_->entry(i).label[field]; }

  // The payload of sample i. `scratch` receives the bytes when they cannot be handed out in place
  // (pread backend, or a JPEG stored without its shared tables). Throws dsc::Error naming the file
  // and sample on a checksum mismatch (verify) or an I/O error.
  Payload ReadPayload(uint64_t i, std::vector<uint8_t>* scratch, uint32_t image = 0) const;
  // The payload as stored: `head` is the shared JPEG table set (empty when none), `body` the rest.
  // Together they are the exact bytes ReadPayload returns, without copying them together.
  struct Parts {
    Payload head, body;
    format::IndexEntry entry;  // the sample's index entry, decoded once for the caller
  };
  // On a mapping the payload's pages are touched (faulted in) here, so storage time shows in the read
  // stage; `touch` = false skips that for a caller that has just read the same sample.
  // `image`: of that image field (see entry(i, image)).
  Parts ReadPayloadParts(uint64_t i, std::vector<uint8_t>* scratch, bool touch = true, uint32_t image = 0) const;
  // The same through a ReadBuffer (format/byte_source.h): a streamed file's cached block is read in
  // place, not copied; the parts stay valid until the buffer's next read.
  Parts ReadPayloadParts(uint64_t i, format::ReadBuffer* buf, bool touch = true, uint32_t image = 0) const;

  // The error for sample i's bytes faulting under mmap (reader/mmap_guard.h): the file shrank while
  // open, or its storage failed.
  Error Unreadable(uint64_t i) const;

 private:
  void CheckBlockOnce(uint32_t b) const;
  format::IndexEntry Touch(uint64_t i, uint32_t image) const;  // bounds check, and the block's checksum when verifying
  template <typename ReadBody>
  Parts ReadParts(uint64_t i, bool touch, uint32_t image, const ReadBody& read_body) const;
  format::IndexEntry FurtherEntry(uint64_t i, uint32_t image) const;

  std::unique_ptr<format::ByteSource> source_;
  std::unique_ptr<format::FileView> view_;
  DatasetOptions options_;
  std::unique_ptr<std::atomic<uint8_t>[]> checked_;  // per block: 1 once its checksum matched
};

}  // namespace dsc
