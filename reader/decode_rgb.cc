#include "reader/decode_rgb.h"

#include <zstd.h>

#include <cstring>

#include "format/error.h"
#include "format/layout.h"
#include "reader/mmap_guard.h"

namespace dsc {

namespace {
std::string Dims(const format::IndexEntry& e) { return std::to_string(e.width) + "x" + std::to_string(e.height); }
}  // namespace

void CheckPixelLimit(const Dataset& ds, uint64_t i, const format::IndexEntry& e, uint64_t max_pixels) {
  const uint64_t pixels = uint64_t(e.width) * e.height;
  if (pixels > max_pixels)
    throw Error(ds.path() + ": sample " + std::to_string(i) + ": image is " + Dims(e) + " (" + std::to_string(pixels) +
                " pixels), over the limit of " + std::to_string(max_pixels) + " (--max-pixels, LoaderOptions::max_pixels)");
}

SampleDecoder::SampleDecoder(const Dataset& ds, DecodeOptions options)
    : ds_(ds), options_(options), jpeg_(std::make_unique<kernels::JpegDecoder>()) {}

SampleDecoder::~SampleDecoder() = default;

void SampleDecoder::Decode(uint64_t i, std::vector<uint8_t>* rgb, uint32_t image) {
  if (mmap_guard::RunGuarded([&] { DecodeUnguarded(i, rgb, image); })) return;
  // The fault may have left libjpeg mid-decode: start from a fresh decompressor.
  jpeg_ = std::make_unique<kernels::JpegDecoder>();
  throw ds_.Unreadable(i);
}

void SampleDecoder::CheckPayload(uint64_t i, uint32_t image) {
  if (mmap_guard::RunGuarded([&] { DecodeUnguarded(i, nullptr, image); })) return;
  jpeg_ = std::make_unique<kernels::JpegDecoder>();
  throw ds_.Unreadable(i);
}

// rgb == nullptr: the checks against the index only (CheckPayload).
void SampleDecoder::DecodeUnguarded(uint64_t i, std::vector<uint8_t>* rgb, uint32_t image) {
  const Dataset::Parts parts = ds_.ReadPayloadParts(i, &scratch_, true, image);
  const format::IndexEntry& e = parts.entry;
  const std::string field = image ? "image '" + ds_.meta().fields[image].name + "': " : std::string();
  auto fail = [&](const std::string& why) { return Error(ds_.path() + ": sample " + std::to_string(i) + ": " + field + why); };
  if (rgb) CheckPixelLimit(ds_, i, e, options_.max_pixels);  // a large image is no damage, only too large to decode
  const size_t n = size_t(e.width) * e.height * 3;
  const Payload& p = parts.body;
  // Each case checks the payload's own description of the image against the index before allocating.
  switch (format::Encoding(e.encoding)) {
    case format::Encoding::kRaw:
      if (p.size != n) throw fail("raw payload holds " + std::to_string(p.size) + " bytes, index says " + Dims(e));
      if (!rgb) return;
      rgb->resize(n);
      std::memcpy(rgb->data(), p.data, n);
      return;
    case format::Encoding::kRawZstd: {
      const unsigned long long want = ZSTD_getFrameContentSize(p.data, p.size);
      if (want != n)
        throw fail("zstd frame holds " + (want >= ZSTD_CONTENTSIZE_ERROR ? std::string("an unknown number of") : std::to_string(want)) +
                   " bytes, index says " + Dims(e) + " (" + std::to_string(n) + " bytes)");
      if (!rgb) return;
      rgb->resize(n);
      const size_t r = ZSTD_decompress(rgb->data(), n, p.data, p.size);
      if (ZSTD_isError(r) || r != n) throw fail(std::string("corrupt zstd payload: ") + (ZSTD_isError(r) ? ZSTD_getErrorName(r) : "short"));
      return;
    }
    case format::Encoding::kJpeg: {
      int w = 0, h = 0;
      if (!jpeg_->ReadHeader(parts.head.data, parts.head.size, p.data, p.size, &w, &h))
        throw fail("corrupt JPEG: " + jpeg_->error());
      if (w != e.width || h != e.height)
        throw fail("JPEG header says " + std::to_string(w) + "x" + std::to_string(h) + ", index says " + Dims(e));
      // FFCV's index has no channel count: it decodes any JPEG to RGB, a grayscale one too.
      if (jpeg_->components() != e.channels && !(ds_.view().ffcv() && jpeg_->components() == 1))
        throw fail("JPEG has " + std::to_string(jpeg_->components()) + " component(s), index says " +
                   std::to_string(e.channels) + " channel(s)");
      if (!rgb) return;
      rgb->resize(n);
      jpeg_->set_fast_idct(options_.fast_idct);  // FFCV's decode: fast IDCT, fancy upsampling
      if (!jpeg_->DecodeRGB(rgb->data(), size_t(e.width) * 3, options_.fancy_upsampling || options_.fast_idct))
        throw fail("corrupt JPEG: " + jpeg_->error());
      return;
    }
  }
  throw fail("unknown encoding");
}

void DecodeSampleRGB(const Dataset& ds, uint64_t i, kernels::JpegCodec*, std::vector<uint8_t>*, std::vector<uint8_t>* rgb) {
  SampleDecoder(ds, {.fancy_upsampling = true}).Decode(i, rgb);
}

}  // namespace dsc
