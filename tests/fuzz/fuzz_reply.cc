// The ProcessReply parser (remote/codec.h) a loader runs on a worker's bytes. The first byte picks
// where the rest is cut into pieces, as receive buffers cut a reply: every field must parse the same
// however it is split, and no piece may be read outside its bounds.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "remote/codec.h"
#include "tests/fuzz/fuzz_targets.h"

namespace {

// A field's bytes, gathered from its pieces.
std::vector<uint8_t> Gather(const dsc::remote::ReplyView::Bytes& f) {
  uint64_t total = 0;
  for (const auto& p : f.pieces) total += p.size;
  if (total != f.size) std::abort();
  std::vector<uint8_t> out(f.size);
  if (f.size) dsc::remote::CopyPieces(f.pieces, out.data());
  return out;
}

}  // namespace

DSC_FUZZ_TARGET {
  if (size == 0) return 0;
  const size_t step = size_t(data[0]) + 1;  // 1 to 256 bytes a piece
  ++data, --size;
  // Each piece in an exact-size heap block of its own, so that reading past one is caught.
  std::vector<std::unique_ptr<uint8_t[]>> blocks;
  std::vector<dsc::BytePiece> pieces;
  for (size_t at = 0; at < size; at += step) {
    const size_t k = std::min(step, size - at);
    blocks.emplace_back(new uint8_t[k]);
    std::memcpy(blocks.back().get(), data + at, k);
    pieces.push_back({blocks.back().get(), k});
  }
  dsc::remote::ReplyView split, whole;
  const std::string e1 = dsc::remote::ParseReply(pieces.data(), pieces.size(), &split);
  const dsc::BytePiece one{data, size};
  const std::string e2 = dsc::remote::ParseReply(&one, size ? 1 : 0, &whole);
  if (e1 != e2) std::abort();
  if (!e1.empty()) return 0;
  if (split.compressed != whole.compressed || split.images_size != whole.images_size || split.sample_error != whole.sample_error)
    std::abort();
  for (auto f : {&dsc::remote::ReplyView::params, &dsc::remote::ReplyView::forms, &dsc::remote::ReplyView::images})
    if ((split.*f).present != (whole.*f).present || Gather(split.*f) != Gather(whole.*f)) std::abort();
  return 0;
}
