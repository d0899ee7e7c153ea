// Per-pixel arithmetic of the list transforms (kernels/transforms.h), written as torchvision 0.14's
// tensor code computes it on uint8 images: float32 products and sums in its order (no fused
// multiply-add: dsc_kernels builds with -ffp-contract=off), truncation where torchvision casts
// float -> uint8 with .to(), round-half-even where it calls torch.round first. DSC_HD, so a device
// path runs the same expressions.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/hd.h"

namespace dsc::kernels {

// float -> uint8 as torch's .to(torch.uint8) after .clamp(0, 255): truncation toward zero.
// (Through int: the conversion the vector units have.)
DSC_HD uint8_t TruncU8(float v) { return uint8_t(int(v < 0.f ? 0.f : (v > 255.f ? 255.f : v))); }
// torch.round (half to even) then the cast, as _cast_squeeze_out does for uint8.
DSC_HD uint8_t RoundU8(float v) {
  v = nearbyintf(v);
  return uint8_t(v < 0.f ? 0.f : (v > 255.f ? 255.f : v));
}

// _blend(img1, img2, ratio) = (ratio * img1 + (1 - ratio) * img2).clamp(0, 255).to(uint8), with the
// Python scalars ratio and 1 - ratio (computed in double) taken as float32 by the tensor ops.
struct BlendFactors {
  float r, rc;
};
DSC_HD BlendFactors MakeBlend(double ratio) { return {float(ratio), float(1.0 - ratio)}; }
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

// torch.linspace(start, end, steps) in float32, element i (the two-sided formula torch uses).
DSC_HD float LinspaceF32(float start, float end, int steps, int i) {
  if (steps <= 1) return start;
  const float step = (end - start) / float(steps - 1);
  return i < steps / 2 ? start + step * float(i) : end - step * float(steps - i - 1);
}

// Reflect (no edge repeat) of coordinate i into [0, n): torch's "reflect" padding.
DSC_HD int ReflectIndex(int i, int n) {
  if (n == 1) return 0;
  const int period = 2 * (n - 1);
  i %= period;
  if (i < 0) i += period;
  return i < n ? i : period - i;
}
// Symmetric (edge repeated) of coordinate i into [0, n).
DSC_HD int SymmetricIndex(int i, int n) {
  const int period = 2 * n;
  i %= period;
  if (i < 0) i += period;
  return i < n ? i : period - 1 - i;
}

// Which pixel coordinate i of an axis of n pixels, padded as F.pad pads (mode: PadMode's value, 0
// constant, 1 edge, 2 reflect, 3 symmetric), reads: a coordinate in [0, n), or -1 for the fill.
DSC_HD int PadIndex(int i, int n, int mode) {
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case 1: return i < 0 ? 0 : n - 1;
    case 2: return ReflectIndex(i, n);
    case 3: return SymmetricIndex(i, n);
    default: return -1;
  }
}

// torchvision's _get_gaussian_kernel1d in float32 (k <= kMaxBlurTaps on the device path). The
// exponential is taken in double and rounded once, so the host and a GPU agree on every weight.
DSC_HD void GaussianKernel1d(int k, double sigma, float* out) {
  const float half = float((k - 1) * 0.5);
  const float sg = float(sigma);
  float sum = 0.f;
  for (int i = 0; i < k; ++i) {
    const float x = LinspaceF32(-half, half, k, i) / sg;
    out[i] = float(exp(double(-0.5f * (x * x))));
    sum += out[i];
  }
  for (int i = 0; i < k; ++i) out[i] /= sum;
}

// The sampling grids of F_t.affine and F_t.perspective: the source position (ix, iy) that output pixel
// (x, y) of a w x h image reads, as torchvision computes it in float32 (then grid_sample's
// unnormalisation ((g + 1) * size - 1) / 2). AffineGrid's g: theta^T scaled by (0.5 w, 0.5 h);
// PerspectiveGrid's: the coefficients c0..c5 so scaled, then c6 and c7.
DSC_HD float AffineBase(int n, int i) { return LinspaceF32(float(-n * 0.5 + 0.5), float(n * 0.5 + 0.5 - 1), n, i); }
DSC_HD float PerspectiveBase(int n, int i) { return LinspaceF32(0.5f, float(n) + 0.5f - 1.f, n, i); }
DSC_HD void AffineSource(const float g[6], float xb, float yb, float fw, float fh, float* ix, float* iy) {
  const float gx = xb * g[0] + yb * g[1] + g[2];
  const float gy = xb * g[3] + yb * g[4] + g[5];
  *ix = ((gx + 1.f) * fw - 1.f) / 2.f;
  *iy = ((gy + 1.f) * fh - 1.f) / 2.f;
}
DSC_HD void PerspectiveSource(const float g[8], float xb, float yb, float fw, float fh, float* ix, float* iy) {
  const float den = xb * g[6] + yb * g[7] + 1.f;
  const float gx = (xb * g[0] + yb * g[1] + g[2]) / den - 1.f;
  const float gy = (xb * g[3] + yb * g[4] + g[5]) / den - 1.f;
  *ix = ((gx + 1.f) * fw - 1.f) / 2.f;
  *iy = ((gy + 1.f) * fh - 1.f) / 2.f;
}

// grid_sample (align_corners = False, zero padding) at unnormalised source position (ix, iy) of a
// w x h RGB image, into d: nearest or bilinear (interp 0 / 1); with `fill`, F_t._apply_grid_transform's
// mask blend.
DSC_HD void GridSampleAt(const uint8_t* src, int w, int h, float ix, float iy, int bilinear, const float* fill, uint8_t* d) {
  const float fw = float(w), fh = float(h);
  if (!bilinear) {
    const float nx = nearbyintf(ix), ny = nearbyintf(iy);
    const bool in = nx >= 0 && nx <= fw - 1 && ny >= 0 && ny <= fh - 1;
    for (int c = 0; c < 3; ++c) d[c] = in ? src[(size_t(ny) * size_t(w) + size_t(nx)) * 3 + size_t(c)] : (fill ? RoundU8(fill[c]) : 0);
    return;
  }
  if (!(ix > -2.f && ix < fw + 1.f && iy > -2.f && iy < fh + 1.f)) {  // every tap outside (also NaN)
    for (int c = 0; c < 3; ++c) d[c] = fill ? RoundU8(fill[c]) : 0;
    return;
  }
  const float x0f = floorf(ix), y0f = floorf(iy);
  const float wx = ix - x0f, ex = 1.f - wx, ny_ = iy - y0f, sy_ = 1.f - ny_;
  const float wts[4] = {sy_ * ex, sy_ * wx, ny_ * ex, ny_ * wx};  // nw, ne, sw, se
  const int x0 = int(x0f), y0 = int(y0f);
  const int tx[4] = {x0, x0 + 1, x0, x0 + 1}, ty[4] = {y0, y0, y0 + 1, y0 + 1};
  float v[3] = {0.f, 0.f, 0.f}, mask = 0.f;
  for (int k = 0; k < 4; ++k) {
    const bool in = tx[k] >= 0 && tx[k] < w && ty[k] >= 0 && ty[k] < h;
    for (int c = 0; c < 3; ++c) {
      const float val = in ? float(src[(size_t(ty[k]) * size_t(w) + size_t(tx[k])) * 3 + size_t(c)]) : 0.f;
      v[c] = k == 0 ? val * wts[k] : v[c] + val * wts[k];
    }
    mask = k == 0 ? (in ? wts[k] : 0.f) : mask + (in ? wts[k] : 0.f);
  }
  for (int c = 0; c < 3; ++c) d[c] = RoundU8(fill ? v[c] * mask + (1.f - mask) * fill[c] : v[c]);
}

// solarize: torch.where(img >= threshold, 255 - img, img), the comparison in float32.
DSC_HD uint8_t SolarizeValue(uint8_t v, float threshold) { return float(v) >= threshold ? uint8_t(255 - v) : v; }
// posterize: img & -(2 ** (8 - bits)).
DSC_HD uint8_t PosterizeValue(uint8_t v, int bits) { return uint8_t(v & uint8_t(0xFF << (8 - bits))); }

}  // namespace dsc::kernels
