// Decodes one stored sample to packed RGB, whatever its encoding. Used by `dsc export`, `dsc verify
// --decode` and tests; the loader's hot path decodes straight into batch slots instead.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/jpeg_codec.h"
#include "kernels/jpeg_decoder.h"
#include "kernels/limits.h"
#include "reader/dataset.h"

namespace dsc {

struct DecodeOptions {
  // JPEG chroma upsampling. false (default): box, what the loader decodes by default (what training
  // sees); true: libjpeg's triangle filter, bit-identical to PIL's Image.open(f).convert("RGB").
  bool fancy_upsampling = false;
  uint64_t max_pixels = kernels::kDefaultMaxPixels;  // larger images are refused before any allocation
  // libjpeg's fast integer IDCT with fancy upsampling: TurboJPEG's TJFLAG_FASTDCT decode, FFCV's pixels.
  bool fast_idct = false;
};

// Decodes samples of one dataset. Not thread-safe: one per thread.
class SampleDecoder {
 public:
  explicit SampleDecoder(const Dataset& ds, DecodeOptions options = {});
  ~SampleDecoder();
  SampleDecoder(const SampleDecoder&) = delete;
  SampleDecoder& operator=(const SampleDecoder&) = delete;
  // Fills *rgb with height*width*3 bytes. Checks the pixel limit and the payload's own header against
  // the index entry before allocating. Throws dsc::Error naming the file and sample on bad data, or
  // when the file's bytes are no longer readable (a mapped file truncated while open).
  // `image`: of that image field (a field index; Dataset::entry(i, image)), the first by default.
  void Decode(uint64_t i, std::vector<uint8_t>* rgb, uint32_t image = 0);
  // The same checks of the payload's header against the index entry (JPEG SOF size and components,
  // zstd frame content size, raw size), without decoding: throws what Decode would for them.
  void CheckPayload(uint64_t i, uint32_t image = 0);

 private:
  void DecodeUnguarded(uint64_t i, std::vector<uint8_t>* rgb, uint32_t image);
  const Dataset& ds_;
  DecodeOptions options_;
  std::unique_ptr<kernels::JpegDecoder> jpeg_;
  format::ReadBuffer scratch_;
};

// Throws dsc::Error naming the file and sample when the entry's width x height exceeds max_pixels.
void CheckPixelLimit(const Dataset& ds, uint64_t i, const format::IndexEntry& e, uint64_t max_pixels);

// Fancy upsampling (libjpeg-turbo's default decode), default pixel limit. `codec` and `scratch` are
// unused; kept for existing callers.
void DecodeSampleRGB(const Dataset& ds, uint64_t i, kernels::JpegCodec* codec, std::vector<uint8_t>* scratch,
                     std::vector<uint8_t>* rgb);

}  // namespace dsc
