// One batch of JPEG payloads laid out for the GPU decoder in a single staging buffer (pinned by the
// CUDA launcher, kernels/cuda/jpeg_decode.h), copied to the device with one asynchronous copy:
//
//   [TwinBatchHeader][table sets and entropy bytes, in order of arrival][TwinImage x images][TwinUnit x units]
//
// Compact: only what the batch uses is copied. Shared table sets (dsc's two-piece payloads,
// reader/dataset.h ReadPayloadParts) are parsed once per batch and stored once; each image contributes
// its entropy bytes and its decode units (restart intervals, or the whole image). Offsets are relative
// to the buffer start, so the device copy uses them unchanged. Plain host code: the staging cost is measured without a GPU (bench/twin_stage_bench).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/jpeg_twin.h"

namespace dsc::kernels {

struct TwinImage {
  TwinFrame frame;
  uint64_t tables;       // buffer offset of its TwinTables
  uint32_t first_unit, units;
  uint64_t data;         // buffer offset of the entropy bytes
  uint64_t coef_block;   // first block in the batch's coefficient / plane arrays
  uint64_t rgb;          // byte offset of the image's RGB output
};

struct TwinUnit {
  uint32_t image;
  uint32_t first_mcu, mcus;
  uint32_t begin, end;  // byte range relative to the image's entropy bytes
};

struct TwinBatchHeader {
  uint32_t images, units, table_sets;
  uint64_t images_at, units_at, bytes_used;
  uint64_t total_blocks, rgb_bytes;
};

class TwinBatchStager {
 public:
  // Uses buf[0, capacity) (caller-owned: pinned memory for the GPU, any memory for tests/bench).
  TwinBatchStager(uint8_t* buf, size_t capacity, uint32_t max_images, uint32_t max_units);
  // Starts a new batch (keeps nothing from the last).
  void Reset();
  // Starts a new batch in another buffer (the loader stages each batch in its own buffer).
  void Reset(uint8_t* buf, size_t capacity);
  // Adds one payload. kTwinOk: staged as image header().images - 1. Otherwise the caller decodes it
  // on the CPU (kTwinUnsupported, or kTwinCorrupt); nothing is staged. Out of room (counting the
  // arrays Finish appends) is unsupported with kReasonTooLarge (stage it in the next batch).
  // `rgb`: where the image's RGB output goes, as a byte offset in the caller's output; kAppend: after
  // the previous image's (header().rgb_bytes is then the end of the furthest image).
  static constexpr uint64_t kAppend = ~uint64_t(0);
  TwinParseResult Add(const uint8_t* head, size_t head_size, const uint8_t* body, size_t body_size,
                      uint64_t rgb = kAppend);
  // Appends the image and unit arrays; then buf[0, bytes_used()) is the batch to copy to the device.
  // false when they do not fit (cannot happen after Adds that succeeded).
  bool Finish();
  const TwinBatchHeader& header() const { return *h_; }
  size_t bytes_used() const { return size_t(h_->bytes_used); }

 private:
  uint8_t* buf_;
  size_t cap_;
  TwinBatchHeader* h_;
  uint32_t max_images_, max_units_;
  std::vector<TwinImage> images_;
  std::vector<TwinUnit> units_;
  std::vector<uint32_t> begin_, end_;  // a scan's interval bounds
  // The last shared head parsed in this batch: payloads whose head is the same bytes reuse its frame
  // and tables and scan only their body.
  const uint8_t* last_head_ = nullptr;
  size_t last_head_size_ = 0;
  TwinFrame last_frame_;
  uint64_t last_tables_ = 0;
  uint64_t append_rgb_ = 0;  // where the next kAppend image's RGB goes
};

// ---- The GPU stages, one call per thread (kernels/cuda/jpeg_decode.cu); buf is the staged batch --------

DSC_HD const TwinBatchHeader& TwinHeader(const uint8_t* buf) { return *reinterpret_cast<const TwinBatchHeader*>(buf); }
DSC_HD const TwinImage* TwinImages(const uint8_t* buf) {
  return reinterpret_cast<const TwinImage*>(buf + TwinHeader(buf).images_at);
}

// Entropy-decodes unit u (a restart interval, or a whole small image) into the batch's coefficients.
// A failure marks the image's status (the caller then decodes that sample on the CPU).
DSC_HD void TwinDecodeUnit(const uint8_t* buf, uint32_t u, int16_t* coef, int* status) {
  const TwinUnit& t = reinterpret_cast<const TwinUnit*>(buf + TwinHeader(buf).units_at)[u];
  const TwinImage& im = TwinImages(buf)[t.image];
  const TwinTables& tab = *reinterpret_cast<const TwinTables*>(buf + im.tables);
  const int r = DecodeEntropy(im.frame, tab, buf + im.data + t.begin, t.end - t.begin, t.first_mcu, t.mcus, false,
                              coef + im.coef_block * 64);
  if (r) status[t.image] = r;
}

// The image holding batch block b (binary search over the images' first blocks).
DSC_HD uint32_t TwinImageOfBlock(const uint8_t* buf, uint64_t b) {
  const TwinImage* im = TwinImages(buf);
  uint32_t lo = 0, hi = TwinHeader(buf).images;
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    if (im[mid].coef_block <= b) lo = mid; else hi = mid;
  }
  return lo;
}

// Dequantises + IDCTs batch block b into the planes (same layout as the coefficients, 64 bytes a block).
DSC_HD void TwinIdctBatchBlock(const uint8_t* buf, uint64_t b, const int16_t* coef, uint8_t* planes, int* status) {
  const uint32_t i = TwinImageOfBlock(buf, b);
  const TwinImage& im = TwinImages(buf)[i];
  const TwinTables& tab = *reinterpret_cast<const TwinTables*>(buf + im.tables);
  int c;
  uint32_t bx, by;
  TwinBlockPosition(im.frame, uint32_t(b - im.coef_block), &c, &bx, &by);
  uint8_t* img_planes = planes + im.coef_block * 64;
  const int r = IdctBlock(coef + b * 64, tab.quant[im.frame.comp[c].quant], TwinBlockOut(im.frame, img_planes, c, bx, by),
                          TwinPlaneStride(im.frame, c));
  if (r) status[i] = r;
}

// Pixel p (row-major) of image i: upsampling + colour into the batch's RGB output.
DSC_HD void TwinBatchPixel(const uint8_t* buf, uint32_t i, uint32_t p, const uint8_t* planes, uint8_t* rgb) {
  const TwinImage& im = TwinImages(buf)[i];
  const uint32_t x = p % im.frame.width, y = p / im.frame.width;
  TwinPixel(im.frame, planes + im.coef_block * 64, x, y, rgb + im.rgb + size_t(p) * 3);
}

// The three stages run on the CPU in order: what the GPU launcher does, for tests. coef / planes hold
// header().total_blocks * 64 entries, rgb header().rgb_bytes, status one int per image (0 = ok).
void DecodeTwinBatchCpu(const uint8_t* buf, int16_t* coef, uint8_t* planes, uint8_t* rgb, int* status);

}  // namespace dsc::kernels
