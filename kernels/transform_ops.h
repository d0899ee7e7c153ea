// Per-pixel arithmetic of the list transforms (kernels/transforms.h), written as torchvision 0.14's
// tensor code computes it on uint8 images: float32 products and sums in its order (no fused
// multiply-add: dsc_kernels builds with -ffp-contract=off), truncation where torchvision casts
// float -> uint8 with .to(), round-half-even where it calls torch.round first. DSC_HD, so a device
// path runs the same expressions.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/hd.h"

namespace dsc::kernels {

// float -> uint8 as torch's .to(torch.uint8) after .clamp(0, 255): truncation toward zero.
// (Through int: the conversion the vector units have.)
DSC_HD uint8_t TruncU8(float v) { return uint8_t(int(v < 0.f ? 0.f : (v > 255.f ? 255.f : v))); }
// torch.round (half to even) then the cast, as _cast_squeeze_out does for uint8.
DSC_HD uint8_t RoundU8(float v) {
  v = std::nearbyint(v);
  return uint8_t(v < 0.f ? 0.f : (v > 255.f ? 255.f : v));
}

// _blend(img1, img2, ratio) = (ratio * img1 + (1 - ratio) * img2).clamp(0, 255).to(uint8), with the
// Python scalars ratio and 1 - ratio (computed in double) taken as float32 by the tensor ops.
struct BlendFactors {
  float r, rc;
};
inline BlendFactors MakeBlend(double ratio) { return {float(ratio), float(1.0 - ratio)}; }
DSC_HD uint8_t Blend(uint8_t a, float b, BlendFactors f) { return TruncU8(f.r * float(a) + f.rc * b); }

// rgb_to_grayscale: (0.2989 r + 0.587 g + 0.114 b).to(uint8), summed left to right in float32.
DSC_HD uint8_t Gray(uint8_t r, uint8_t g, uint8_t b) {
  const float v = 0.2989f * float(r) + 0.587f * float(g) + 0.114f * float(b);
  return uint8_t(v);
}

// adjust_hue for one pixel: _rgb2hsv, h = (h + factor) % 1, _hsv2rgb, (x * 255).to(uint8).
DSC_HD void HuePixel(const uint8_t in[3], float factor, uint8_t out[3]) {
  const float r = float(in[0]) / 255.f, g = float(in[1]) / 255.f, b = float(in[2]) / 255.f;
  const float maxc = fmaxf(r, fmaxf(g, b)), minc = fminf(r, fminf(g, b));
  const bool eqc = maxc == minc;
  const float cr = maxc - minc;
  const float s = cr / (eqc ? 1.f : maxc);
  const float div = eqc ? 1.f : cr;
  const float rc = (maxc - r) / div, gc = (maxc - g) / div, bc = (maxc - b) / div;
  const float hr = maxc == r ? (bc - gc) : 0.f;
  const float hg = (maxc == g && maxc != r) ? (2.f + rc - bc) : 0.f;
  const float hb = (maxc != g && maxc != r) ? (4.f + gc - rc) : 0.f;
  float h = fmodf(((hr + hg) + hb) / 6.f + 1.f, 1.f);
  // Python's % on tensors is torch.remainder: the result takes the divisor's sign.
  h = h + factor;
  h = h - floorf(h);
  const float v = maxc;
  const float i6 = floorf(h * 6.f);
  const float f = h * 6.f - i6;
  int i = int(i6) % 6;
  if (i < 0) i += 6;
  const float p = fminf(fmaxf(v * (1.f - s), 0.f), 1.f);
  const float q = fminf(fmaxf(v * (1.f - s * f), 0.f), 1.f);
  const float t = fminf(fmaxf(v * (1.f - s * (1.f - f)), 0.f), 1.f);
  float o0, o1, o2;
  switch (i) {
    case 0: o0 = v, o1 = t, o2 = p; break;
    case 1: o0 = q, o1 = v, o2 = p; break;
    case 2: o0 = p, o1 = v, o2 = t; break;
    case 3: o0 = p, o1 = q, o2 = v; break;
    case 4: o0 = t, o1 = p, o2 = v; break;
    default: o0 = v, o1 = p, o2 = q; break;
  }
  out[0] = uint8_t(o0 * 255.f);
  out[1] = uint8_t(o1 * 255.f);
  out[2] = uint8_t(o2 * 255.f);
}

// solarize: torch.where(img >= threshold, 255 - img, img), the comparison in float32.
DSC_HD uint8_t SolarizeValue(uint8_t v, float threshold) { return float(v) >= threshold ? uint8_t(255 - v) : v; }
// posterize: img & -(2 ** (8 - bits)).
DSC_HD uint8_t PosterizeValue(uint8_t v, int bits) { return uint8_t(v & uint8_t(0xFF << (8 - bits))); }

}  // namespace dsc::kernels
