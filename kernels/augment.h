// Per-sample augmentation parameters and the per-pixel work of the loader's transforms:
// RandomResizedCrop / CenterCrop (where MakeParams says; the resize itself is Pillow's resampler,
// kernels/crop_resize.h), RandomHorizontalFlip, RandomTranslate, Cutout and Normalize. The per-element
// functions are DSC_HD: the CUDA launcher runs exactly this code, and CPU tests check the fast CPU
// rows against it. Geometry is fixed-point integer math and normalisation is a 256-entry table, so
// CPU and GPU results are bit-identical.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/hd.h"

namespace dsc::kernels {

enum class CropMode : uint8_t { kNone = 0, kRandomResized = 1, kCenter = 2 };

struct AugmentSpec {
  CropMode crop = CropMode::kNone;
  int out_w = 0, out_h = 0;                       // crop modes: output size; else the image size
  float scale_min = 0.08f, scale_max = 1.0f;      // RandomResizedCrop area fraction
  float ratio_min = 3.0f / 4, ratio_max = 4.0f / 3;  // RandomResizedCrop aspect ratio
  float center_ratio = 224.0f / 256;             // CenterCrop: crop side = ratio x shorter side
  // CenterCrop: > 0 selects torchvision's Resize(resize) + CenterCrop(out): the image is resized so
  // its shorter side is `resize` (antialiased bilinear over the whole image), and the centred
  // out_w x out_h window of that is the output (center_ratio is then unused). 0: the centred crop of
  // side center_ratio x shorter side is resized to the output (FFCV's CenterCropRGBImageDecoder).
  int resize = 0;
  bool flip = false;                              // RandomHorizontalFlip(p = 0.5)
  int translate = 0;                              // RandomTranslate(padding): shift in [-p, p]
  int cutout = 0;                                 // Cutout(size): a size x size square
  uint8_t fill[3] = {0, 0, 0};                    // fill for translate and cutout
  bool normalize = false;
  float mean[3] = {0, 0, 0}, std[3] = {1, 1, 1};  // in pixel units (0..255)
};

// Where an output pixel comes from. The source region is in Q16 fixed point, relative to the decoded
// buffer (which may be a DCT-scaled crop of the original image): for crop modes the crop, which the
// loader resizes to the output with Pillow's resampler (kernels/resample.h, "crop, then resize"); for
// Resize + CenterCrop the window's span in source pixels. With defer_augment, Batch::params instead
// describe the deferred work over the already resized uint8 image (region = the whole output).
struct SampleParams {
  int64_t src_x = 0, src_y = 0, src_w = 0, src_h = 0;  // Q16
  int32_t dx = 0, dy = 0;                              // translate: out(x, y) = in(x - dx, y - dy)
  int32_t cut_x = -1, cut_y = -1;                      // cutout top-left; -1: none
  int32_t flip = 0;
};

// The rectangle of original image pixels a sample needs decoded (before any DCT scaling): the crop
// for crop modes; for Resize + CenterCrop the window's span widened by the filter's reach, so that
// every tap of the resize lies inside it.
struct CropRect {
  int x = 0, y = 0, w = 0, h = 0;
};

// torchvision's Resize(s.resize) + CenterCrop(s.out_w, s.out_h) geometry for a w x h image: the
// resized image's size and the window's top-left in it.
struct ResizeWindow {
  int w = 0, h = 0, left = 0, top = 0;
};
ResizeWindow CenterWindow(const AugmentSpec& s, int w, int h);

// Draws a sample's random choices from Rng(seed, epoch, index, kStreamAugment). CPU only.
// `rect` receives the crop in source pixels; params get it in Q16 relative to the full image.
void MakeParams(const AugmentSpec& spec, int src_w, int src_h, uint64_t seed, uint64_t epoch, uint64_t index,
                CropRect* rect, SampleParams* params);
// Re-expresses params' region (relative to the original image, as MakeParams gives it) for a decoded
// buffer that holds the image scaled by scale_num / 8 (DCT scaling) from (buf_x, buf_y) on, in scaled
// pixels.
void RebaseParams(int buf_x, int buf_y, int scale_num, SampleParams* params);

// uint8 RGB of output pixel (x, y) of an out_w x out_h output: the bilinear sample (no antialiasing)
// of params' source region, then translate, flip and cutout. The deferred (GPU) path runs it with the
// region = the whole, already resized image, where it is a plain copy plus those transforms; the
// loader's own resize is Pillow's (kernels/resample.h). `src` holds src_w x src_h RGB pixels (the
// decoded buffer), rows `stride` bytes apart.
DSC_HD void OutputPixel(const SampleParams& p, const AugmentSpec& s, int out_w, int out_h, const uint8_t* src,
                        int src_w, int src_h, int stride, int x, int y, uint8_t rgb[3]) {
  const bool cut = p.cut_x >= 0 && x >= p.cut_x && x < p.cut_x + s.cutout && y >= p.cut_y && y < p.cut_y + s.cutout;
  const int tx = x - p.dx, ty = y - p.dy;
  if (cut || tx < 0 || ty < 0 || tx >= out_w || ty >= out_h) {
    rgb[0] = s.fill[0];
    rgb[1] = s.fill[1];
    rgb[2] = s.fill[2];
    return;
  }
  const int fx = p.flip ? out_w - 1 - tx : tx;
  // Pixel centres: source coordinate (Q16) = region origin + (fx + 0.5) * region / out - 0.5.
  int64_t sx = p.src_x + ((2 * int64_t(fx) + 1) * p.src_w) / (2 * int64_t(out_w)) - 32768;
  int64_t sy = p.src_y + ((2 * int64_t(ty) + 1) * p.src_h) / (2 * int64_t(out_h)) - 32768;
  const int64_t max_x = int64_t(src_w - 1) << 16, max_y = int64_t(src_h - 1) << 16;
  sx = sx < 0 ? 0 : (sx > max_x ? max_x : sx);
  sy = sy < 0 ? 0 : (sy > max_y ? max_y : sy);
  const int x0 = int(sx >> 16), y0 = int(sy >> 16);
  const int wx = int((sx >> 8) & 0xFF), wy = int((sy >> 8) & 0xFF);
  const int x1 = x0 + (x0 < src_w - 1), y1 = y0 + (y0 < src_h - 1);
  const uint8_t* r0 = src + size_t(y0) * stride;
  const uint8_t* r1 = src + size_t(y1) * stride;
  for (int c = 0; c < 3; ++c) {
    const int top = r0[x0 * 3 + c] * (256 - wx) + r0[x1 * 3 + c] * wx;
    const int bot = r1[x0 * 3 + c] * (256 - wx) + r1[x1 * 3 + c] * wx;
    rgb[c] = uint8_t((top * (256 - wy) + bot * wy + 32768) >> 16);
  }
}

// IEEE half from float, round to nearest even (no dependence on hardware conversion instructions).
DSC_HD uint16_t FloatToHalf(float f) {
  union {
    float f;
    uint32_t u;
  } v = {f};
  const uint32_t sign = (v.u >> 16) & 0x8000u;
  const uint32_t abs = v.u & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) return uint16_t(sign | 0x7C00u | (abs > 0x7F800000u ? 0x200u : 0));  // inf / nan
  if (abs >= 0x477FF000u) return uint16_t(sign | 0x7C00u);  // overflow to inf
  if (abs < 0x38800000u) {                                   // subnormal or zero
    if (abs < 0x33000000u) return uint16_t(sign);
    const uint32_t mant = (abs & 0x7FFFFFu) | 0x800000u;
    const int shift = 126 - int(abs >> 23);  // half units = mant * 2^(exp - 126)
    const uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t mid = 1u << (shift - 1);
    return uint16_t(sign | (half + (rem > mid || (rem == mid && (half & 1)))));
  }
  const uint32_t base = ((abs >> 13) - (112u << 10));
  const uint32_t rem = abs & 0x1FFFu;
  return uint16_t(sign | (base + (rem > 0x1000u || (rem == 0x1000u && (base & 1)))));
}

// Normalisation is defined as v * scale + bias with scale = 1 / std and bias = -mean / std, computed
// in float as one multiply then one add (never fused), so CPU tables, CPU vector loops and the CUDA
// kernel agree bit for bit.
void NormalizeCoefficients(const AugmentSpec& s, float scale[3], float bias[3]);
DSC_HD float Normalize(uint8_t v, float scale, float bias) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(__fmul_rn(float(v), scale), bias);
#else
  return float(v) * scale + bias;
#endif
}
// Value v of channel c maps to table[c * 256 + v].
void MakeNormalizeTable(const AugmentSpec& s, float table[3 * 256]);

}  // namespace dsc::kernels
