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

// Each field's bytes, gathered from its pieces.
std::vector<uint8_t> Gather(const std::vector<dsc::BytePiece>& pieces, uint64_t bytes) {
  std::vector<uint8_t> out(bytes);
  uint64_t total = 0;
  for (const auto& p : pieces) total += p.size;
  if (total != bytes) std::abort();
  if (bytes) dsc::remote::CopyPieces(pieces, out.data());
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
  if (split.compressed != whole.compressed || split.images_size != whole.images_size || split.sample_error != whole.sample_error ||
      split.has_params != whole.has_params || split.has_forms != whole.has_forms || split.has_images != whole.has_images)
    std::abort();
  if (Gather(split.params, split.params_bytes) != Gather(whole.params, whole.params_bytes) ||
      Gather(split.forms, split.forms_bytes) != Gather(whole.forms, whole.forms_bytes) ||
      Gather(split.images, split.images_bytes) != Gather(whole.images, whole.images_bytes))
    std::abort();
  return 0;
}
