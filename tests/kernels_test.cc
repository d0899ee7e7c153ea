// Per-element kernels against independent references: float->half against the compiler's own
// conversion, the AVX2 rows against the portable rows, OutputPixel against textbook definitions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "kernels/augment.h"
#include "kernels/color.h"
#include "kernels/normalize_row.h"
#include "kernels/random.h"

namespace dsc::test {
namespace {

using namespace dsc::kernels;

TEST(Half, MatchesTheCompilersConversionEverywhere) {
  std::mt19937 rng(1);
  auto check = [](float f) {
    _Float16 ref = static_cast<_Float16>(f);
    uint16_t bits;
    std::memcpy(&bits, &ref, 2);
    ASSERT_EQ(FloatToHalf(f), bits) << f;
  };
  for (float f : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 65520.0f, 1e-8f, 5.96e-8f, 6.1e-5f, 1e30f, -INFINITY, INFINITY})
    check(f);
  for (int i = 0; i < 2000000; ++i) {
    uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    check(f);
  }
}

TEST(NormalizeRow, Avx2EqualsScalarBitForBit) {
  std::mt19937 rng(2);
  const float scale[3] = {1 / 51.5865f, 1 / 50.847f, 1 / 51.255f};
  const float bias[3] = {-125.307f / 51.5865f, -122.961f / 50.847f, -113.8575f / 51.255f};
  for (size_t w : {1u, 15u, 16u, 17u, 32u, 224u, 333u}) {
    std::vector<uint8_t> rgb(w * 3);
    for (auto& v : rgb) v = uint8_t(rng());
    std::vector<float> a(w * 3), b(w * 3);
    NormalizeRowPlanar(rgb.data(), w, a.data(), a.data() + w, a.data() + 2 * w, scale, bias);
    NormalizeRowPlanarScalar(rgb.data(), w, b.data(), b.data() + w, b.data() + 2 * w, scale, bias);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "w=" << w;
    for (size_t x = 0; x < w; ++x)  // and close to the textbook (v - mean) / std
      ASSERT_NEAR(a[x], (rgb[3 * x] - 125.307) / 51.5865, 1e-5);
    std::vector<float> rev(w * 3);  // mirrored rows are the same values, reversed
    NormalizeRowPlanar(rgb.data(), w, rev.data(), rev.data() + w, rev.data() + 2 * w, scale, bias, /*reverse=*/true);
    for (size_t x = 0; x < w; ++x) ASSERT_EQ(rev[x], a[w - 1 - x]);
  }
  std::printf("AVX2 in use: %s\n", HaveAvx2() ? "yes" : "no");
}

TEST(Color, VectorRowsEqualScalarAndLibjpegFormula) {
  std::mt19937 rng(3);
  for (size_t w : {1u, 7u, 8u, 32u, 33u, 250u}) {
    for (int hshift : {0, 1}) {
      std::vector<uint8_t> y(w), cb(w), cr(w);
      for (size_t i = 0; i < w; ++i) {
        y[i] = uint8_t(rng());
        cb[i] = uint8_t(rng());
        cr[i] = uint8_t(rng());
      }
      std::vector<uint8_t> a(3 * w), b(3 * w);
      ColorConvertRow(y.data(), cb.data(), cr.data(), w, hshift, a.data(), a.data() + w, a.data() + 2 * w);
      ColorConvertRowScalar(y.data(), cb.data(), cr.data(), w, hshift, b.data(), b.data() + w, b.data() + 2 * w);
      ASSERT_EQ(a, b) << "w=" << w << " hshift=" << hshift;
      for (size_t x = 0; x < w; ++x) {  // within rounding of the textbook JFIF equations
        const double Y = y[x], Cb = cb[x >> hshift] - 128.0, Cr = cr[x >> hshift] - 128.0;
        ASSERT_NEAR(a[x], std::clamp(Y + 1.402 * Cr, 0.0, 255.0), 1.0);
        ASSERT_NEAR(a[w + x], std::clamp(Y - 0.344136 * Cb - 0.714136 * Cr, 0.0, 255.0), 1.0);
        ASSERT_NEAR(a[2 * w + x], std::clamp(Y + 1.772 * Cb, 0.0, 255.0), 1.0);
      }
    }
    std::vector<uint8_t> in(w);
    for (auto& v : in) v = uint8_t(rng());
    alignas(32) float fa[256], fb[256];
    for (bool rev : {false, true}) {
      NormalizePlaneRow(in.data(), w, fa, 0.5f, -3.0f, rev);
      NormalizePlaneRowScalar(in.data(), w, fb, 0.5f, -3.0f, rev);
      ASSERT_EQ(std::memcmp(fa, fb, w * 4), 0);
    }
  }
}

TEST(OutputPixel, IdentityCopiesAndTransformsFollowTheirDefinitions) {
  const int w = 9, h = 7;
  std::vector<uint8_t> img(w * h * 3);
  for (size_t i = 0; i < img.size(); ++i) img[i] = uint8_t(i * 13 + 5);
  AugmentSpec s;
  s.translate = 2;
  s.cutout = 3;
  s.flip = true;
  s.fill[0] = 1;
  s.fill[1] = 2;
  s.fill[2] = 3;
  for (uint64_t idx = 0; idx < 300; ++idx) {
    CropRect rect;
    SampleParams p;
    MakeParams(s, w, h, 99, 4, idx, &rect, &p);
    ASSERT_GE(p.dx, -2);
    ASSERT_LE(p.dx, 2);
    ASSERT_TRUE(p.cut_x >= 0 && p.cut_x + 3 <= w && p.cut_y >= 0 && p.cut_y + 3 <= h);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        uint8_t got[3];
        OutputPixel(p, s, w, h, img.data(), w, h, w * 3, x, y, got);
        // Textbook: flip, then translate (shift with fill), then cutout (FFCV's order).
        const bool in_cut = x >= p.cut_x && x < p.cut_x + 3 && y >= p.cut_y && y < p.cut_y + 3;
        const int tx = x - p.dx, ty = y - p.dy;
        const bool inside = tx >= 0 && ty >= 0 && tx < w && ty < h;
        for (int c = 0; c < 3; ++c) {
          uint8_t want = s.fill[c];
          if (!in_cut && inside) want = img[(size_t(ty) * w + (p.flip ? w - 1 - tx : tx)) * 3 + c];
          ASSERT_EQ(got[c], want) << "sample " << idx << " at " << x << "," << y;
        }
      }
  }
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
