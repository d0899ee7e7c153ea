// The augmentation parameters MakeParams draws against torchvision's definitions, and the
// distributions it draws from over many (seed, epoch, index), with the usual statistical bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "kernels/augment.h"
#include "kernels/random.h"

namespace dsc::test {
namespace {

using namespace dsc::kernels;

// torchvision's Resize(resize) sizes (the shorter side becomes resize, the longer one
// int(resize * long / short)), and a sliver whose longer side would overflow int: the window was
// INT_MIN high and the crop's height negative.
TEST(MakeParams, CenterWindowFollowsTorchvisionAndNeverOverflows) {
  AugmentSpec s;
  s.crop = CropMode::kCenter;
  s.out_w = s.out_h = 224;
  s.resize = 256;
  ResizeWindow r = CenterWindow(s, 500, 375);
  EXPECT_EQ(r.w, 341);  // int(256 * 500 / 375) = int(341.33)
  EXPECT_EQ(r.h, 256);
  EXPECT_EQ(r.left, 58);  // round((341 - 224) / 2) = round(58.5), half to even
  EXPECT_EQ(r.top, 16);
  s.resize = 40000;
  r = CenterWindow(s, 1, 65535);
  EXPECT_EQ(r.w, 40000);
  EXPECT_GT(r.h, 0);
  EXPECT_GE(r.h, r.w);
  CropRect rect;
  SampleParams p;
  MakeParams(s, 1, 65535, 1, 0, 0, &rect, &p);
  EXPECT_GT(rect.h, 0);
  EXPECT_LE(int64_t(rect.y) + rect.h, 65535);
}

TEST(MakeParams, RandomResizedCropFollowsTorchvisionBounds) {
  AugmentSpec s;
  s.crop = CropMode::kRandomResized;
  s.out_w = s.out_h = 224;
  for (uint64_t idx = 0; idx < 2000; ++idx) {
    CropRect r;
    SampleParams p;
    MakeParams(s, 500, 375, 1, 0, idx, &r, &p);
    ASSERT_GT(r.w, 0);
    ASSERT_GT(r.h, 0);
    ASSERT_LE(r.x + r.w, 500);
    ASSERT_LE(r.y + r.h, 375);
    const double area = double(r.w) * r.h / (500.0 * 375);
    const double ratio = double(r.w) / r.h;
    const bool fallback = r.w == 500 || r.h == 375;
    if (!fallback) {
      ASSERT_GE(area, 0.075);
      ASSERT_LE(ratio, 4.0 / 3 + 0.02);
      ASSERT_GE(ratio, 3.0 / 4 - 0.02);
    }
  }
}

// --- The distributions MakeParams draws from, over many (seed, epoch, index) ------------------------
// Fixed seeds make every count below deterministic; the bounds are the usual statistical ones (about
// 4 sigma, or chi-square at p = 0.001), so an implementation drawing from the wrong distribution
// (a flip that never fires, a biased shift, a crop that ignores the ratio) fails them.

// Chi-square critical value at p = 0.001 for `df` degrees of freedom (Wilson-Hilferty).
double ChiSquareCritical(int df) {
  const double k = 2.0 / (9.0 * df), z = 3.0902;  // z of the 0.999 normal quantile
  return df * std::pow(1 - k + z * std::sqrt(k), 3);
}

// Pearson's statistic of `counts` against equal expected counts.
double ChiSquareUniform(const std::vector<int>& counts) {
  double n = 0, chi = 0;
  for (int c : counts) n += c;
  const double e = n / double(counts.size());
  for (int c : counts) chi += (c - e) * (c - e) / e;
  return chi;
}

// Two-sample chi-square (equal sample sizes): are `a` and `b` counts of the same distribution?
double ChiSquareTwoSample(const std::vector<int>& a, const std::vector<int>& b) {
  double chi = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] + b[i] > 0) chi += double(a[i] - b[i]) * (a[i] - b[i]) / double(a[i] + b[i]);
  return chi;
}

// Calls f(params, rect) for 3 seeds x 2 epochs x `per` indices.
template <typename F>
void ForManySamples(const AugmentSpec& s, int w, int h, int per, F f) {
  for (uint64_t seed : {1u, 1234u, 987654321u})
    for (uint64_t epoch : {0u, 7u})
      for (int idx = 0; idx < per; ++idx) {
        CropRect r;
        SampleParams p;
        MakeParams(s, w, h, seed, epoch, uint64_t(idx), &r, &p);
        f(p, r, epoch, idx);
      }
}

TEST(MakeParamsStats, FlipIsAFairCoinIndependentOfIndexAndEpoch) {
  AugmentSpec s;
  s.flip = true;
  const int per = 4000, n = 3 * 2 * per;
  int flips = 0, even_flips = 0, evens = 0;
  std::vector<int> by_epoch[2];  // pushed in (seed, index) order, the same in both epochs
  ForManySamples(s, 32, 32, per, [&](const SampleParams& p, const CropRect&, uint64_t epoch, int idx) {
    ASSERT_TRUE(p.flip == 0 || p.flip == 1);
    flips += p.flip;
    if (idx % 2 == 0) {
      even_flips += p.flip;
      ++evens;
    }
    by_epoch[epoch ? 1 : 0].push_back(p.flip);
  });
  // Binomial(n, 0.5): sigma = sqrt(n) / 2 = 77 for n = 24000; 4 sigma = 310.
  const double sigma = std::sqrt(double(n)) / 2;
  std::printf("flip: %d of %d (expected %d +- %.0f at 4 sigma)\n", flips, n, n / 2, 4 * sigma);
  EXPECT_NEAR(flips, n / 2.0, 4 * sigma);
  EXPECT_NEAR(even_flips, evens / 2.0, 4 * std::sqrt(double(evens)) / 2) << "flip follows the index parity";
  // A sample's flip is redrawn each epoch: the two epochs agree about half of the time.
  ASSERT_EQ(by_epoch[0].size(), size_t(3 * per));
  int agree = 0;
  for (size_t i = 0; i < by_epoch[0].size(); ++i) agree += by_epoch[0][i] == by_epoch[1][i];
  EXPECT_NEAR(agree, 3 * per / 2.0, 4 * std::sqrt(3.0 * per) / 2) << "flip does not depend on the epoch";
  // Disabled, it never fires.
  s.flip = false;
  ForManySamples(s, 32, 32, 200, [](const SampleParams& p, const CropRect&, uint64_t, int) { ASSERT_EQ(p.flip, 0); });
}

TEST(MakeParamsStats, TranslateIsUniformOverMinusTToT) {
  for (int t : {1, 2, 4}) {
    AugmentSpec s;
    s.translate = t;
    const int bins = 2 * t + 1;
    std::vector<int> dx(size_t(bins), 0), dy(size_t(bins), 0), joint(size_t(bins * bins), 0);
    ForManySamples(s, 32, 32, 3000, [&](const SampleParams& p, const CropRect&, uint64_t, int) {
      ASSERT_GE(p.dx, -t);
      ASSERT_LE(p.dx, t);
      ASSERT_GE(p.dy, -t);
      ASSERT_LE(p.dy, t);
      ++dx[size_t(p.dx + t)];
      ++dy[size_t(p.dy + t)];
      ++joint[size_t((p.dy + t) * bins + p.dx + t)];
    });
    const double cx = ChiSquareUniform(dx), cy = ChiSquareUniform(dy), cj = ChiSquareUniform(joint);
    std::printf("translate %d: chi2 dx %.1f, dy %.1f (df %d, bound %.1f); joint %.1f (df %d, bound %.1f)\n", t, cx,
                cy, bins - 1, ChiSquareCritical(bins - 1), cj, bins * bins - 1, ChiSquareCritical(bins * bins - 1));
    EXPECT_LT(cx, ChiSquareCritical(bins - 1)) << "dx not uniform over [-" << t << ", " << t << "]";
    EXPECT_LT(cy, ChiSquareCritical(bins - 1)) << "dy not uniform";
    EXPECT_LT(cj, ChiSquareCritical(bins * bins - 1)) << "dx and dy not independent";
  }
  AugmentSpec off;  // translate 0: no shift at all
  ForManySamples(off, 32, 32, 200, [](const SampleParams& p, const CropRect&, uint64_t, int) {
    ASSERT_EQ(p.dx, 0);
    ASSERT_EQ(p.dy, 0);
  });
}

TEST(MakeParamsStats, CutoutPositionIsUniformOverTheImage) {
  AugmentSpec s;
  s.cutout = 8;
  const int w = 40, h = 24;  // top-left x in [0, 32], y in [0, 16]: FFCV's randint(w - size + 1)
  std::vector<int> xs(w - 8 + 1, 0), ys(h - 8 + 1, 0);
  ForManySamples(s, w, h, 3000, [&](const SampleParams& p, const CropRect&, uint64_t, int) {
    ASSERT_GE(p.cut_x, 0);
    ASSERT_LE(p.cut_x + 8, w);
    ASSERT_GE(p.cut_y, 0);
    ASSERT_LE(p.cut_y + 8, h);
    ++xs[size_t(p.cut_x)];
    ++ys[size_t(p.cut_y)];
  });
  const double cx = ChiSquareUniform(xs), cy = ChiSquareUniform(ys);
  std::printf("cutout: chi2 x %.1f (df %zu, bound %.1f), y %.1f (df %zu, bound %.1f)\n", cx, xs.size() - 1,
              ChiSquareCritical(int(xs.size()) - 1), cy, ys.size() - 1, ChiSquareCritical(int(ys.size()) - 1));
  EXPECT_LT(cx, ChiSquareCritical(int(xs.size()) - 1));
  EXPECT_LT(cy, ChiSquareCritical(int(ys.size()) - 1));
  // Every position is reachable, the last ones included (an off-by-one would leave them empty).
  EXPECT_GT(xs.front(), 0);
  EXPECT_GT(xs.back(), 0);
  EXPECT_GT(ys.back(), 0);
}

TEST(MakeParamsStats, RandomResizedCropScaleAndLogRatioAreUniform) {
  // On a 1000 x 1000 image with scale <= 0.5 every first try fits (the largest side is
  // sqrt(0.5 x 4/3) x 1000 = 816), so the draws are seen unconditioned: area ~ U(scale), log ratio ~
  // U(log ratio), position ~ uniform over the places the crop fits.
  AugmentSpec s;
  s.crop = CropMode::kRandomResized;
  s.out_w = s.out_h = 64;
  s.scale_min = 0.08f;
  s.scale_max = 0.5f;
  const int bins = 10;
  std::vector<int> area(bins, 0), ratio(bins, 0), xpos(bins, 0), ypos(bins, 0);
  const double lo = std::log(3.0 / 4), hi = std::log(4.0 / 3);
  ForManySamples(s, 1000, 1000, 3000, [&](const SampleParams&, const CropRect& r, uint64_t, int) {
    const double a = double(r.w) * r.h / 1e6, lr = std::log(double(r.w) / r.h);
    // Rounding the sides to pixels moves area and ratio by well under 1%.
    ASSERT_GE(a, 0.08 * 0.99);
    ASSERT_LE(a, 0.5 * 1.01);
    ASSERT_GE(lr, lo - 0.01);
    ASSERT_LE(lr, hi + 0.01);
    ASSERT_TRUE(r.x >= 0 && r.y >= 0 && r.x + r.w <= 1000 && r.y + r.h <= 1000);
    ++area[size_t(std::clamp(int((a - 0.08) / 0.42 * bins), 0, bins - 1))];
    ++ratio[size_t(std::clamp(int((lr - lo) / (hi - lo) * bins), 0, bins - 1))];
    if (r.w < 1000) ++xpos[size_t(std::min(bins - 1, int(double(r.x) / (1000 - r.w + 1) * bins)))];
    if (r.h < 1000) ++ypos[size_t(std::min(bins - 1, int(double(r.y) / (1000 - r.h + 1) * bins)))];
  });
  const double crit = ChiSquareCritical(bins - 1);
  std::printf("RandomResizedCrop: chi2 area %.1f, log ratio %.1f, x %.1f, y %.1f (df %d, bound %.1f)\n",
              ChiSquareUniform(area), ChiSquareUniform(ratio), ChiSquareUniform(xpos), ChiSquareUniform(ypos), bins - 1, crit);
  EXPECT_LT(ChiSquareUniform(area), crit) << "area fraction is not U(0.08, 0.5)";
  EXPECT_LT(ChiSquareUniform(ratio), crit) << "log ratio is not U(log 3/4, log 4/3)";
  EXPECT_LT(ChiSquareUniform(xpos), crit);
  EXPECT_LT(ChiSquareUniform(ypos), crit);
}

TEST(MakeParamsStats, RandomResizedCropMatchesTorchvisionsRejectionSampling) {
  // With the default scale (0.08, 1) on a 500 x 375 photo some tries do not fit and are redrawn, which
  // shapes the accepted distribution. An independent simulation of torchvision's get_params (its own
  // generator) gives the reference distribution; the two must agree (two-sample chi-square).
  AugmentSpec s;
  s.crop = CropMode::kRandomResized;
  s.out_w = s.out_h = 224;
  const int W = 500, H = 375, bins = 10;
  const double lo = std::log(3.0 / 4), hi = std::log(4.0 / 3);
  auto bin_of = [&](int w, int h, std::vector<int>* area, std::vector<int>* ratio) {
    const double a = double(w) * h / (double(W) * H), lr = std::log(double(w) / h);
    ++(*area)[size_t(std::clamp(int((a - 0.08) / 0.92 * bins), 0, bins - 1))];
    ++(*ratio)[size_t(std::clamp(int((lr - lo) / (hi - lo) * bins), 0, bins - 1))];
  };
  std::vector<int> area(bins, 0), ratio(bins, 0), ref_area(bins, 0), ref_ratio(bins, 0);
  int n = 0;
  ForManySamples(s, W, H, 3000, [&](const SampleParams&, const CropRect& r, uint64_t, int) {
    bin_of(r.w, r.h, &area, &ratio);
    ++n;
  });
  std::mt19937_64 gen(2024);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  int fallbacks = 0;
  for (int i = 0; i < n; ++i) {
    int w = 0, h = 0;
    for (int attempt = 0; attempt < 10 && w == 0; ++attempt) {
      const double target = W * H * (0.08 + 0.92 * u01(gen));
      const double aspect = std::exp(lo + (hi - lo) * u01(gen));
      const int cw = int(std::round(std::sqrt(target * aspect))), ch = int(std::round(std::sqrt(target / aspect)));
      if (cw > 0 && ch > 0 && cw <= W && ch <= H) w = cw, h = ch;
    }
    if (w == 0) {  // centre crop at the ratio bound nearest the image's (here 4/3 fits: the whole image)
      w = W;
      h = H;
      ++fallbacks;
    }
    bin_of(w, h, &ref_area, &ref_ratio);
  }
  const double ca = ChiSquareTwoSample(area, ref_area), cr = ChiSquareTwoSample(ratio, ref_ratio);
  std::printf("RandomResizedCrop vs torchvision simulation (%d samples, %d reference fallbacks): chi2 area %.1f, "
              "log ratio %.1f (df %d, bound %.1f)\n", n, fallbacks, ca, cr, bins - 1, ChiSquareCritical(bins - 1));
  EXPECT_LT(ca, ChiSquareCritical(bins - 1));
  EXPECT_LT(cr, ChiSquareCritical(bins - 1));
}

TEST(MakeParamsStats, RandomResizedCropFallsBackToTorchvisionsCentreCrop) {
  // Specs no try can satisfy: after 10 tries torchvision takes the whole image clamped to the ratio
  // bound, centred: w = round(h x max_ratio) when the image is wider than max ratio, h = round(w /
  // min_ratio) when narrower. Expected rectangles worked out by hand from that definition.
  struct Case {
    int w, h;
    float rmin, rmax;
    CropRect want;
  };
  for (const Case& c : {Case{500, 375, 0.5f, 0.75f, {109, 0, 281, 375}},   // wider: w = round(375 x 0.75)
                        Case{375, 500, 1.5f, 2.0f, {0, 125, 375, 250}}}) {  // narrower: h = round(375 / 1.5)
    AugmentSpec s;
    s.crop = CropMode::kRandomResized;
    s.out_w = s.out_h = 64;
    s.scale_min = 0.9f;  // with these ratios a 90% area crop never fits
    s.scale_max = 1.0f;
    s.ratio_min = c.rmin;
    s.ratio_max = c.rmax;
    ForManySamples(s, c.w, c.h, 50, [&](const SampleParams&, const CropRect& r, uint64_t, int idx) {
      ASSERT_EQ(r.x, c.want.x) << c.w << "x" << c.h << " sample " << idx;
      ASSERT_EQ(r.y, c.want.y);
      ASSERT_EQ(r.w, c.want.w);
      ASSERT_EQ(r.h, c.want.h);
    });
  }
}

TEST(Rng, BelowIsUniformAndStreamsDiffer) {
  Rng a(1, 2, 3, kStreamAugment), b(1, 2, 3, kStreamOrder), c(1, 2, 3, kStreamAugment);
  EXPECT_NE(a.Next(), b.Next());
  Rng d(1, 2, 3, kStreamAugment);
  EXPECT_EQ(c.Next(), d.Next());
  std::vector<int> counts(7, 0);
  Rng r(5, 0, 0, kStreamOrder);
  for (int i = 0; i < 70000; ++i) ++counts[r.Below(7)];
  for (int k : counts) EXPECT_NEAR(k, 10000, 400);
}

}  // namespace
}  // namespace dsc::test
