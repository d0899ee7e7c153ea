// One batch of JPEG payloads laid out for the GPU decoder in a single staging buffer (pinned by the
// CUDA launcher, kernels/cuda/jpeg_decode.h), copied to the device with one asynchronous copy:
//
//   [TwinBatchHeader][table sets and entropy bytes, in order of arrival][TwinImage x images][TwinUnit x units]
//   [TwinCrop x crops]
//
// Compact: only what the batch uses is copied. Shared table sets (dsc's two-piece payloads,
// reader/dataset.h ReadPayloadParts) are parsed once per batch and stored once; each image contributes
// its entropy bytes and its decode units (restart intervals, or the whole image). Offsets are relative
// to the buffer start, so the device copy uses them unchanged. A sample with a crop transform
// (kernels/jpeg_twin_crop.h) contributes only the restart intervals its crop needs, and a TwinCrop:
// its intervals decode into a scratch image, which the crop stage resizes into the sample's output. Plain host code: the staging cost is measured without a GPU (bench/twin_stage_bench).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/jpeg_twin.h"
#include "kernels/jpeg_twin_crop.h"

namespace dsc::kernels {

struct TwinImage {
  TwinFrame frame;
  uint64_t tables;       // buffer offset of its TwinTables
  uint32_t first_unit, units;
  uint64_t data;         // buffer offset of the entropy bytes
  uint64_t coef_block;   // first block in the batch's coefficient / plane arrays
  uint64_t rgb;          // byte offset of the image's RGB output (with a crop: in the decoded scratch)
  uint32_t crop;         // its TwinCrop, or kTwinNoCrop
};
constexpr uint32_t kTwinNoCrop = ~uint32_t(0);

// The resize of a cropped image (TwinImage::crop): the resampler's source is the src_x, src_y,
// sw x sh rectangle of the image's decoded pixels (the CPU path's decoded buffer), its axes the spans
// h and v, whose taps the batch's tap scratch holds from int `taps` on: h.n entries of 2 + ksize_h
// ints (first, count, Q22 weights), then v.n of 2 + ksize_v.
struct TwinCrop {
  ResampleSpan h, v;
  int32_t ksize_h, ksize_v;
  uint32_t image;
  uint32_t src_x, src_y, sw, sh;
  uint64_t out;   // byte offset of its h.n x v.n RGB output
  uint64_t taps;
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
  // Crops: their array, the decoded scratch bytes and tap scratch ints they need, and (for launch
  // grids) the most output pixels and axis entries (h.n + v.n) of one crop.
  uint32_t crops;
  uint64_t crops_at, decoded_bytes, tap_ints;
  uint32_t max_crop_pixels, max_crop_entries;
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
  // With `crop`, the output is the crop's resized image (out_w x out_h of the spec), and only the
  // restart intervals it needs are staged; a crop the twin does not do is unsupported with its
  // reason (kReasonCropScaled, kReasonCropIntervals, ...).
  static constexpr uint64_t kAppend = ~uint64_t(0);
  TwinParseResult Add(const uint8_t* head, size_t head_size, const uint8_t* body, size_t body_size,
                      uint64_t rgb = kAppend, const TwinCropInput* crop = nullptr);
  // Upsampling of the images Added from now on: box (false, the default: TJFLAG_FASTUPSAMPLE) or
  // libjpeg's fancy filter (TwinSetFancy). A crop's fancy (TwinCropInput::fancy) must agree.
  void set_fancy(bool fancy) { fancy_ = fancy; }
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
  std::vector<TwinCrop> crops_;
  std::vector<uint32_t> begin_, end_;  // a scan's interval bounds
  // The last shared head parsed in this batch: payloads whose head is the same bytes reuse its frame
  // and tables and scan only their body.
  const uint8_t* last_head_ = nullptr;
  size_t last_head_size_ = 0;
  TwinFrame last_frame_;
  uint64_t last_tables_ = 0;
  uint64_t append_rgb_ = 0;  // where the next kAppend image's RGB goes
  bool fancy_ = false;
};

// ---- The GPU stages, one call per thread (kernels/cuda/jpeg_decode.cu); buf is the staged batch --------

DSC_HD const TwinBatchHeader& TwinHeader(const uint8_t* buf) { return *reinterpret_cast<const TwinBatchHeader*>(buf); }
DSC_HD const TwinImage* TwinImages(const uint8_t* buf) {
  return reinterpret_cast<const TwinImage*>(buf + TwinHeader(buf).images_at);
}
DSC_HD const TwinCrop* TwinCrops(const uint8_t* buf) {
  return reinterpret_cast<const TwinCrop*>(buf + TwinHeader(buf).crops_at);
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

// Pixel p (row-major) of image i: upsampling + colour into the batch's RGB output (a cropped image:
// into the decoded scratch, header().decoded_bytes).
DSC_HD void TwinBatchPixel(const uint8_t* buf, uint32_t i, uint32_t p, const uint8_t* planes, uint8_t* rgb,
                           uint8_t* decoded) {
  const TwinImage& im = TwinImages(buf)[i];
  const uint32_t x = p % im.frame.width, y = p / im.frame.width;
  uint8_t* out = im.crop == kTwinNoCrop ? rgb : decoded;
  TwinPixel(im.frame, planes + im.coef_block * 64, x, y, out + im.rgb + size_t(p) * 3);
}

// Entry e of crop c's axes (e < h.n: horizontal output e, else vertical output e - h.n): its taps
// into the tap scratch (ResampleSpanTaps, the CPU axes' code). Taps outside the crop's source mark
// the image's status (the CPU path refuses such a resize too).
DSC_HD void TwinCropTaps(const uint8_t* buf, uint32_t c, uint32_t e, int32_t* taps, int* status) {
  const TwinCrop& k = TwinCrops(buf)[c];
  const bool hz = e < uint32_t(k.h.n);
  const uint32_t i = hz ? e : e - uint32_t(k.h.n);
  const int ks = hz ? k.ksize_h : k.ksize_v;
  int32_t* t = taps + k.taps + (hz ? 0 : size_t(k.h.n) * (2 + k.ksize_h)) + size_t(i) * (2 + ks);
  double w[kTwinMaxTaps];
  int first = 0;
  const int n = ResampleSpanTaps(hz ? k.h : k.v, int(i), &first, w, t + 2);
  t[0] = first;
  t[1] = n;
  if (n < 1 || n > ks || first < 0 || uint32_t(first + n) > (hz ? k.sw : k.sh)) status[k.image] = kReasonCropGeometry;
}

// Output pixel p (row-major) of crop c: the horizontal pass's bytes that its vertical taps read,
// recomputed here (no intermediate image; the same integers as the CPU's two passes), then the
// vertical pass. After TwinCropTaps for every entry of the crop.
DSC_HD void TwinCropPixel(const uint8_t* buf, uint32_t c, uint32_t p, const uint8_t* decoded, const int32_t* taps,
                          uint8_t* rgb) {
  const TwinCrop& k = TwinCrops(buf)[c];
  const TwinImage& im = TwinImages(buf)[k.image];
  const uint32_t x = p % uint32_t(k.h.n), y = p / uint32_t(k.h.n);
  const int32_t* th = taps + k.taps + size_t(x) * (2 + k.ksize_h);
  const int32_t* tv = taps + k.taps + size_t(k.h.n) * (2 + k.ksize_h) + size_t(y) * (2 + k.ksize_v);
  uint8_t* o = rgb + k.out + size_t(p) * 3;
  // Out-of-range taps were flagged by TwinCropTaps: write something, read nothing outside.
  if (th[1] < 1 || th[1] > k.ksize_h || th[0] < 0 || uint32_t(th[0] + th[1]) > k.sw || tv[1] < 1 ||
      tv[1] > k.ksize_v || tv[0] < 0 || uint32_t(tv[0] + tv[1]) > k.sh) {
    o[0] = o[1] = o[2] = 0;
    return;
  }
  const size_t stride = size_t(im.frame.width) * 3;
  const uint8_t* src = decoded + im.rgb + (size_t(k.src_y) + size_t(tv[0])) * stride + (size_t(k.src_x) + size_t(th[0])) * 3;
  for (int ch = 0; ch < 3; ++ch) {
    uint32_t acc = ResampleBias();
    for (int t = 0; t < tv[1]; ++t) acc = ResampleMac(acc, ResampleByte(src + size_t(t) * stride + ch, 3, th + 2, th[1]), tv[2 + t]);
    o[ch] = ResampleClip8(acc);
  }
}

// The stages run on the CPU in order: what the GPU launcher does, for tests. coef / planes hold
// header().total_blocks * 64 entries, rgb header().rgb_bytes, status one int per image (0 = ok);
// with crops, decoded header().decoded_bytes and taps header().tap_ints.
void DecodeTwinBatchCpu(const uint8_t* buf, int16_t* coef, uint8_t* planes, uint8_t* rgb, int* status,
                        uint8_t* decoded = nullptr, int32_t* taps = nullptr);

}  // namespace dsc::kernels
