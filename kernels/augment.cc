#include "kernels/augment.h"

#include <algorithm>
#include <cmath>

#include "kernels/random.h"

namespace dsc::kernels {

namespace {

// torchvision's RandomResizedCrop.get_params, with dsc's counter-based generator.
CropRect RandomResizedRect(const AugmentSpec& s, int w, int h, Rng* rng) {
  const double area = double(w) * h;
  const double log_lo = std::log(double(s.ratio_min)), log_hi = std::log(double(s.ratio_max));
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (s.scale_min + (s.scale_max - s.scale_min) * rng->Uniform());
    const double aspect = std::exp(log_lo + (log_hi - log_lo) * rng->Uniform());
    const int cw = int(std::lround(std::sqrt(target * aspect)));
    const int ch = int(std::lround(std::sqrt(target / aspect)));
    if (cw > 0 && ch > 0 && cw <= w && ch <= h) {
      const int y = int(rng->Below(uint64_t(h - ch + 1)));
      const int x = int(rng->Below(uint64_t(w - cw + 1)));
      return {x, y, cw, ch};
    }
  }
  // Fallback: the whole image, clamped to the ratio range, centred.
  const double in_ratio = double(w) / h;
  int cw = w, ch = h;
  if (in_ratio < s.ratio_min) ch = int(std::lround(w / double(s.ratio_min)));
  else if (in_ratio > s.ratio_max) cw = int(std::lround(h * double(s.ratio_max)));
  cw = std::clamp(cw, 1, w);
  ch = std::clamp(ch, 1, h);
  return {(w - cw) / 2, (h - ch) / 2, cw, ch};
}

}  // namespace

static void Draws(const AugmentSpec& s, int out_w, int out_h, Rng* rng, SampleParams* p);

void MakeParams(const AugmentSpec& s, int w, int h, uint64_t seed, uint64_t epoch, uint64_t index, CropRect* rect,
                SampleParams* p) {
  Rng rng(seed, epoch, index, kStreamAugment);
  const int out_w = s.crop == CropMode::kNone ? w : s.out_w;
  const int out_h = s.crop == CropMode::kNone ? h : s.out_h;
  CropRect r{0, 0, w, h};
  if (s.crop == CropMode::kRandomResized) {
    r = RandomResizedRect(s, w, h, &rng);
  } else if (s.crop == CropMode::kCenter && s.resize > 0) {
    // The window's span in source pixels, widened by the filter's reach (bilinear: one output step,
    // at least one pixel) plus slack for the rounding of a DCT-scaled decode (half a scaled pixel is
    // at most 4 source pixels).
    const ResizeWindow win = CenterWindow(s, w, h);
    const double fx = double(w) / win.w, fy = double(h) / win.h;
    const int mx = int(std::ceil(std::max(1.0, fx))) + 6, my = int(std::ceil(std::max(1.0, fy))) + 6;
    const int x0 = std::max(0, int(std::floor(win.left * fx)) - mx);
    const int y0 = std::max(0, int(std::floor(win.top * fy)) - my);
    const int x1 = std::min(w, int(std::ceil((win.left + out_w) * fx)) + mx);
    const int y1 = std::min(h, int(std::ceil((win.top + out_h) * fy)) + my);
    *rect = {x0, y0, x1 - x0, y1 - y0};
    *p = SampleParams();
    p->src_x = std::llround(win.left * fx * 65536);
    p->src_y = std::llround(win.top * fy * 65536);
    p->src_w = std::llround(out_w * fx * 65536);
    p->src_h = std::llround(out_h * fy * 65536);
    Draws(s, out_w, out_h, &rng, p);
    return;
  } else if (s.crop == CropMode::kCenter) {
    const int side = std::max(1, int(std::lround(s.center_ratio * std::min(w, h))));
    const double aspect = double(out_w) / out_h;
    int cw = side, ch = side;
    if (aspect > 1) ch = std::max(1, int(std::lround(side / aspect)));
    if (aspect < 1) cw = std::max(1, int(std::lround(side * aspect)));
    r = {(w - cw) / 2, (h - ch) / 2, std::min(cw, w), std::min(ch, h)};
  }
  *rect = r;
  *p = SampleParams();
  p->src_x = int64_t(r.x) << 16;
  p->src_y = int64_t(r.y) << 16;
  p->src_w = int64_t(r.w) << 16;
  p->src_h = int64_t(r.h) << 16;
  Draws(s, out_w, out_h, &rng, p);
}

static void Draws(const AugmentSpec& s, int out_w, int out_h, Rng* rng_, SampleParams* p) {
  Rng& rng = *rng_;
  // The draws below happen in a fixed order whatever the spec enables, so enabling one transform
  // never changes another's choices.
  const uint64_t flip = rng.Next() & 1;
  const int span = 2 * s.translate + 1;
  const int dx = int(rng.Below(uint64_t(span))) - s.translate;
  const int dy = int(rng.Below(uint64_t(span))) - s.translate;
  const int cx = int(rng.Below(uint64_t(std::max(1, out_w - s.cutout + 1))));
  const int cy = int(rng.Below(uint64_t(std::max(1, out_h - s.cutout + 1))));
  p->flip = s.flip ? int32_t(flip) : 0;
  if (s.translate > 0) {
    p->dx = dx;
    p->dy = dy;
  }
  if (s.cutout > 0) {
    p->cut_x = cx;
    p->cut_y = cy;
  }
}

void RebaseParams(int buf_x, int buf_y, int scale_num, SampleParams* p) {
  // Region in the decoded buffer: (x * scale - buf_x, ...), in Q16; scale = scale_num / 8 (exact for
  // the integer crops: x << 16 times k / 8 keeps 13 fraction bits).
  p->src_x = p->src_x * scale_num / 8 - (int64_t(buf_x) << 16);
  p->src_y = p->src_y * scale_num / 8 - (int64_t(buf_y) << 16);
  p->src_w = p->src_w * scale_num / 8;
  p->src_h = p->src_h * scale_num / 8;
}

ResizeWindow CenterWindow(const AugmentSpec& s, int w, int h) {
  // torchvision's _compute_resized_output_size: the shorter side becomes s.resize, the longer one
  // int(resize * long / short) (truncated, in double as Python computes it); CenterCrop's offsets are
  // int(round((size - crop) / 2.0)), Python's round (half to even).
  ResizeWindow r;
  const int sh = std::min(w, h), lg = std::max(w, h);
  // Clamped so that a sliver (1 x 65535 with resize 40000) cannot overflow int: torchvision's size
  // there is billions of pixels, a window no decode could serve anyway.
  const int nl = int(std::min(double(s.resize) * lg / sh, double(1 << 30)));
  r.w = w <= h ? s.resize : nl;
  r.h = w <= h ? nl : s.resize;
  r.left = int(std::nearbyint((r.w - s.out_w) / 2.0));
  r.top = int(std::nearbyint((r.h - s.out_h) / 2.0));
  return r;
}

void NormalizeCoefficients(const AugmentSpec& s, float scale[3], float bias[3]) {
  for (int c = 0; c < 3; ++c) {
    scale[c] = s.normalize ? 1.0f / s.std[c] : 1.0f;
    bias[c] = s.normalize ? -s.mean[c] * scale[c] : 0.0f;
  }
}

void MakeNormalizeTable(const AugmentSpec& s, float table[3 * 256]) {
  float scale[3], bias[3];
  NormalizeCoefficients(s, scale, bias);
  for (int c = 0; c < 3; ++c)
    for (int v = 0; v < 256; ++v) table[c * 256 + v] = Normalize(uint8_t(v), scale[c], bias[c]);
}

}  // namespace dsc::kernels
