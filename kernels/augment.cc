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

void MakeParams(const AugmentSpec& s, int w, int h, uint64_t seed, uint64_t epoch, uint64_t index, CropRect* rect,
                SampleParams* p) {
  Rng rng(seed, epoch, index, kStreamAugment);
  const int out_w = s.crop == CropMode::kNone ? w : s.out_w;
  const int out_h = s.crop == CropMode::kNone ? h : s.out_h;
  CropRect r{0, 0, w, h};
  if (s.crop == CropMode::kRandomResized) {
    r = RandomResizedRect(s, w, h, &rng);
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

void RebaseParams(const CropRect& r, int buf_x, int buf_y, int scale_num, SampleParams* p) {
  // Region in the decoded buffer: (r.x * scale - buf_x, ...), in Q16; scale = scale_num / 8.
  p->src_x = ((int64_t(r.x) * scale_num) << 13) - (int64_t(buf_x) << 16);
  p->src_y = ((int64_t(r.y) * scale_num) << 13) - (int64_t(buf_y) << 16);
  p->src_w = (int64_t(r.w) * scale_num) << 13;
  p->src_h = (int64_t(r.h) * scale_num) << 13;
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
