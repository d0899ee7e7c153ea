#include "kernels/mix.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "format/error.h"
#include "kernels/random.h"

namespace dsc::kernels {

namespace {
double Normal(Rng& rng) {  // Box-Muller
  const double u1 = 1.0 - rng.Uniform(), u2 = rng.Uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}
double Gamma(double a, Rng& rng) {
  if (a < 1) return Gamma(a + 1, rng) * std::pow(1.0 - rng.Uniform(), 1.0 / a);  // boost: Gamma(a+1) U^(1/a)
  const double d = a - 1.0 / 3, c = 1.0 / std::sqrt(9 * d);
  while (true) {
    double x, v;
    do {
      x = Normal(rng);
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = 1.0 - rng.Uniform();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}
}  // namespace

double BetaSample(double a, Rng& rng) {
  const double x = Gamma(a, rng), y = Gamma(a, rng);
  return x + y > 0 ? x / (x + y) : 0.5;
}

MixDraw DrawMix(const MixSpec& s, int width, int height, uint64_t seed, uint64_t epoch, uint64_t batch) {
  Rng rng(seed, epoch, batch, kStreamMix);
  MixDraw d;
  const bool mix_on = rng.Uniform() < s.prob;
  const bool use_cut = s.cutmix_alpha > 0 && (s.mixup_alpha <= 0 || rng.Uniform() < s.switch_prob);
  if (!mix_on || (s.mixup_alpha <= 0 && s.cutmix_alpha <= 0)) return d;
  d.mixed = true;
  d.cutmix = use_cut;
  d.lam = BetaSample(use_cut ? s.cutmix_alpha : s.mixup_alpha, rng);
  if (use_cut) {
    // RandomCutmix: a centre uniform over the image, half-sides r * W, r * H with r = sqrt(1 - lam) / 2,
    // clamped to the image; lam then is the part of the image kept.
    const int rx = int(rng.Below(uint64_t(width))), ry = int(rng.Below(uint64_t(height)));
    const double r = 0.5 * std::sqrt(1.0 - d.lam);
    const int hw = int(r * width), hh = int(r * height);
    d.x0 = std::max(rx - hw, 0), d.y0 = std::max(ry - hh, 0);
    d.x1 = std::min(rx + hw, width), d.y1 = std::min(ry + hh, height);
    d.lam = 1.0 - double(d.x1 - d.x0) * (d.y1 - d.y0) / (double(width) * height);
  }
  return d;
}

MixDraw MixBatch(const MixSpec& s, float* images, int n, int c, int h, int w, bool nchw, const int32_t* labels,
                 float* soft, uint64_t seed, uint64_t epoch, uint64_t batch) {
  if (s.num_classes <= 0) throw Error("mix: num_classes must be positive");
  for (int i = 0; i < n; ++i)
    if (labels[i] < 0 || labels[i] >= s.num_classes)
      throw Error("mix: label " + std::to_string(labels[i]) + " of sample " + std::to_string(i) + " is outside [0, " +
                  std::to_string(s.num_classes) + ")");
  const MixDraw d = DrawMix(s, w, h, seed, epoch, batch);
  const size_t per = size_t(c) * size_t(h) * size_t(w);
  const float lam = float(d.lam), rest = float(1.0 - d.lam);
  if (d.mixed && n > 1) {
    // Sample i takes from sample i - 1 (i = 0 from the last): walk backwards, keeping the last's pixels.
    std::vector<float> last(images + size_t(n - 1) * per, images + size_t(n) * per);
    for (int i = n - 1; i >= 0; --i) {
      float* dst = images + size_t(i) * per;
      const float* src = i > 0 ? images + size_t(i - 1) * per : last.data();
      if (!d.cutmix) {
        for (size_t k = 0; k < per; ++k) dst[k] = lam * dst[k] + rest * src[k];
        continue;
      }
      for (int y = d.y0; y < d.y1; ++y) {
        if (nchw) {
          for (int ch = 0; ch < c; ++ch) {
            const size_t at = (size_t(ch) * size_t(h) + size_t(y)) * size_t(w) + size_t(d.x0);
            std::memcpy(dst + at, src + at, size_t(d.x1 - d.x0) * sizeof(float));
          }
        } else {
          const size_t at = (size_t(y) * size_t(w) + size_t(d.x0)) * size_t(c);
          std::memcpy(dst + at, src + at, size_t(d.x1 - d.x0) * size_t(c) * sizeof(float));
        }
      }
    }
  }
  const float off = s.label_smoothing / float(s.num_classes), on = 1.0f - s.label_smoothing + off;
  for (int i = 0; i < n; ++i) {
    float* row = soft + size_t(i) * size_t(s.num_classes);
    std::fill(row, row + s.num_classes, 0.f);
    const int prev = i > 0 ? i - 1 : n - 1;
    const float self = d.mixed && n > 1 ? lam : 1.f, other = d.mixed && n > 1 ? rest : 0.f;
    for (int k = 0; k < s.num_classes; ++k) row[k] = off * (self + other);
    row[labels[i]] += (on - off) * self;
    row[labels[prev]] += (on - off) * other;
  }
  return d;
}

}  // namespace dsc::kernels
