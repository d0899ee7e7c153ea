// Per-element kernels against independent references: float->half against the compiler's own
// conversion, the AVX2 rows against the portable rows (only where the CPU has AVX2: elsewhere both
// calls run the same scalar code, so the comparison is skipped, not faked), OutputPixel against
// textbook definitions. (MakeParams and its distributions: kernels_params_test.cc.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "kernels/augment.h"
#include "kernels/color.h"
#include "kernels/cpu.h"
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

// Without AVX2 the dispatching functions run the scalar code, so "fast equals reference" would compare
// the scalar code with itself: those tests skip, saying so. The textbook checks run everywhere.
TEST(NormalizeRow, FollowsTheTextbookFormula) {
  std::mt19937 rng(2);
  const float scale[3] = {1 / 51.5865f, 1 / 50.847f, 1 / 51.255f};
  const float bias[3] = {-125.307f / 51.5865f, -122.961f / 50.847f, -113.8575f / 51.255f};
  const double mean[3] = {125.307, 122.961, 113.8575}, sd[3] = {51.5865, 50.847, 51.255};
  for (size_t w : {1u, 15u, 16u, 17u, 32u, 224u, 333u}) {
    std::vector<uint8_t> rgb(w * 3);
    for (auto& v : rgb) v = uint8_t(rng());
    std::vector<float> a(w * 3), rev(w * 3);
    NormalizeRowPlanar(rgb.data(), w, a.data(), a.data() + w, a.data() + 2 * w, scale, bias);
    for (size_t c = 0; c < 3; ++c)
      for (size_t x = 0; x < w; ++x) ASSERT_NEAR(a[c * w + x], (rgb[3 * x + c] - mean[c]) / sd[c], 1e-5) << "w=" << w;
    // Mirrored rows are the same values, reversed.
    NormalizeRowPlanar(rgb.data(), w, rev.data(), rev.data() + w, rev.data() + 2 * w, scale, bias, /*reverse=*/true);
    for (size_t c = 0; c < 3; ++c)
      for (size_t x = 0; x < w; ++x) ASSERT_EQ(rev[c * w + x], a[c * w + w - 1 - x]);
  }
}

TEST(NormalizeRow, Avx2EqualsScalarBitForBit) {
  if (!UseAvx2()) GTEST_SKIP() << "no AVX2 here (or DSC_FORCE_SCALAR=1): NormalizeRowPlanar is the scalar code itself";
  std::mt19937 rng(2);
  const float scale[3] = {1 / 51.5865f, 1 / 50.847f, 1 / 51.255f};
  const float bias[3] = {-125.307f / 51.5865f, -122.961f / 50.847f, -113.8575f / 51.255f};
  // Every SIMD width this CPU has (the AVX-512 twin, then AVX2 only), rows 64-byte aligned (streaming
  // stores) or not.
  for (bool avx2_only : {false, true}) {
    LimitToAvx2(avx2_only);
    for (size_t w : {1u, 15u, 16u, 17u, 32u, 48u, 224u, 333u}) {
      std::vector<uint8_t> rgb(w * 3);
      for (auto& v : rgb) v = uint8_t(rng());
      const size_t plane = (w + 15) / 16 * 16;
      for (size_t shift : {0u, 1u, 8u})
        for (bool rev : {false, true}) {
          std::vector<float> buf(3 * plane + 32), b(w * 3);
          float* a = buf.data() + (64 - reinterpret_cast<uintptr_t>(buf.data()) % 64) % 64 / 4 + shift;
          NormalizeRowPlanar(rgb.data(), w, a, a + plane, a + 2 * plane, scale, bias, rev);
          StreamFence();
          NormalizeRowPlanarScalar(rgb.data(), w, b.data(), b.data() + w, b.data() + 2 * w, scale, bias, rev);
          for (size_t c = 0; c < 3; ++c)
            ASSERT_EQ(std::memcmp(a + c * plane, b.data() + c * w, w * 4), 0)
                << "w=" << w << " reverse=" << rev << " shift=" << shift << " avx2_only=" << avx2_only;
        }
    }
  }
  LimitToAvx2(false);
}

// The dispatchers read one level that LimitToAvx2 and ForceScalar set (kernels/cpu.h): each switch
// shows at once, and forcing scalar is not undone by lifting the AVX2 limit. ForceScalar lasts for the
// process, so it runs in a child (a death test's fork).
TEST(Cpu, SimdSwitchesShowInTheDispatchAtOnce) {
  const bool avx2 = UseAvx2(), avx512 = UseAvx512();
  EXPECT_TRUE(!avx512 || avx2);
  LimitToAvx2(true);
  EXPECT_EQ(UseAvx2(), avx2);
  EXPECT_FALSE(UseAvx512());
  LimitToAvx2(false);
  EXPECT_EQ(UseAvx512(), avx512);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ForceScalar();
        const bool off = !UseAvx2() && !UseAvx512() && ScalarForced();
        LimitToAvx2(false);
        std::exit(off && !UseAvx2() && !UseAvx512() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(Color, RowsFollowTheLibjpegFormula) {
  std::mt19937 rng(3);
  for (size_t w : {1u, 7u, 8u, 32u, 33u, 250u}) {
    for (int hshift : {0, 1}) {
      std::vector<uint8_t> y(w), cb(w), cr(w);
      for (size_t i = 0; i < w; ++i) {
        y[i] = uint8_t(rng());
        cb[i] = uint8_t(rng());
        cr[i] = uint8_t(rng());
      }
      std::vector<uint8_t> a(3 * w);
      ColorConvertRow(y.data(), cb.data(), cr.data(), w, hshift, a.data(), a.data() + w, a.data() + 2 * w);
      for (size_t x = 0; x < w; ++x) {  // within rounding of the textbook JFIF equations
        const double Y = y[x], Cb = cb[x >> hshift] - 128.0, Cr = cr[x >> hshift] - 128.0;
        ASSERT_NEAR(a[x], std::clamp(Y + 1.402 * Cr, 0.0, 255.0), 1.0);
        ASSERT_NEAR(a[w + x], std::clamp(Y - 0.344136 * Cb - 0.714136 * Cr, 0.0, 255.0), 1.0);
        ASSERT_NEAR(a[2 * w + x], std::clamp(Y + 1.772 * Cb, 0.0, 255.0), 1.0);
      }
    }
    std::vector<uint8_t> in(w);
    for (auto& v : in) v = uint8_t(rng());
    alignas(32) float f[256];
    for (bool rev : {false, true}) {
      NormalizePlaneRow(in.data(), w, f, 0.5f, -3.0f, rev);
      for (size_t x = 0; x < w; ++x) ASSERT_EQ(f[rev ? w - 1 - x : x], float(in[x]) * 0.5f - 3.0f);
    }
  }
}

TEST(Color, Avx2RowsEqualScalar) {
  // color.cc picks its AVX2 rows with the same CPU check as normalize_row.cc.
  if (!UseAvx2()) GTEST_SKIP() << "no AVX2 here (or DSC_FORCE_SCALAR=1): the colour rows are the scalar code itself";
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
    }
    std::vector<uint8_t> in(w);
    for (auto& v : in) v = uint8_t(rng());
    alignas(32) float fa[256], fb[256];
    for (bool rev : {false, true}) {
      NormalizePlaneRow(in.data(), w, fa, 0.5f, -3.0f, rev);
      NormalizePlaneRowScalar(in.data(), w, fb, 0.5f, -3.0f, rev);
      ASSERT_EQ(std::memcmp(fa, fb, w * 4), 0) << "w=" << w << " reverse=" << rev;
    }
  }
}

TEST(Color, InterleaveAndMirrorRowsFollowTheirDefinitions) {
  // The scalar references against the definitions, and the dispatched rows (AVX2 where the CPU has
  // it) against the references, at widths around the 16-pixel vector step.
  std::mt19937 rng(5);
  for (size_t w : {1u, 2u, 15u, 16u, 17u, 31u, 32u, 33u, 48u, 224u, 227u}) {
    std::vector<uint8_t> planes(3 * w), rgb(3 * w);
    for (auto& v : planes) v = uint8_t(rng());
    for (auto& v : rgb) v = uint8_t(rng());
    const uint8_t *r = planes.data(), *g = r + w, *b = g + w;
    for (bool rev : {false, true}) {
      std::vector<uint8_t> ref(3 * w), fast(3 * w + 1, 0xA5);  // one guard byte past the row
      InterleaveRowScalar(r, g, b, w, ref.data(), rev);
      for (size_t x = 0; x < w; ++x) {
        const size_t s = rev ? w - 1 - x : x;
        ASSERT_EQ(ref[3 * x], r[s]);
        ASSERT_EQ(ref[3 * x + 1], g[s]);
        ASSERT_EQ(ref[3 * x + 2], b[s]);
      }
      InterleaveRow(r, g, b, w, fast.data(), rev);
      ASSERT_EQ(std::vector<uint8_t>(fast.begin(), fast.end() - 1), ref) << "w=" << w << " reverse=" << rev;
      ASSERT_EQ(fast.back(), 0xA5) << "w=" << w;
    }
    std::vector<uint8_t> ref(3 * w), fast(3 * w + 1, 0xA5);
    MirrorRgbRowScalar(rgb.data(), w, ref.data());
    for (size_t x = 0; x < w; ++x)
      for (size_t c = 0; c < 3; ++c) ASSERT_EQ(ref[3 * x + c], rgb[3 * (w - 1 - x) + c]);
    MirrorRgbRow(rgb.data(), w, fast.data());
    ASSERT_EQ(std::vector<uint8_t>(fast.begin(), fast.end() - 1), ref) << "w=" << w;
    ASSERT_EQ(fast.back(), 0xA5) << "w=" << w;
  }
}

// Runs body at every SIMD width this CPU has: its own (AVX-512 where it has it), then AVX2 only, so an
// AVX-512 machine checks the AVX2 kernels too. The limit is lifted again even when body fails.
template <class Body>
void AtEachSimdWidth(Body body) {
  struct Lift {
    ~Lift() { LimitToAvx2(false); }
  } lift;
  for (bool avx2_only : {false, true}) {
    LimitToAvx2(avx2_only);
    SCOPED_TRACE(avx2_only ? "AVX2 only" : "native SIMD width");
    body();
  }
}

TEST(Color, YccRowToFloatAndRgbFollowTheirDefinitions) {
  // The scalar references against the generic path they replace (convert the row, assemble it shifted
  // with fill and cutout, normalise each plane or interleave them, mirrored or not), and the
  // dispatched rows (AVX-512 or AVX2 at widths of 16k where the CPU has them) against the references: every
  // float bit for bit, a guard past the row, 64-byte aligned rows (streaming stores) and misaligned
  // ones, source rows allocated at their exact size.
  std::mt19937 rng(17);
  const uint8_t fill[3] = {7, 128, 250};
  const float scale[3] = {1 / 58.395f, 1 / 57.12f, 1 / 57.375f}, bias[3] = {-2.1179f, -2.0357f, -1.8044f};
  int fast_rows = 0;
  AtEachSimdWidth([&] {
  for (int w : {16, 17, 32, 33, 48, 224}) {
    for (int mode : {0, 1, 2}) {  // hshift 0, 1, and rows already RGB (YccRow::rgb)
      const int hshift = mode == 1;
      const int cw = (w + (1 << hshift) - 1) >> hshift;
      std::vector<uint8_t> y(static_cast<size_t>(w)), cb(static_cast<size_t>(cw)), cr(static_cast<size_t>(cw));
      for (int t = 0; t < 60; ++t) {
        for (auto& v : y) v = uint8_t(rng());
        for (auto& v : cb) v = uint8_t(rng());
        for (auto& v : cr) v = uint8_t(rng());
        YccRow q;
        q.w = w;
        q.hshift = hshift;
        q.rgb = mode == 2;
        const bool inside = t % 10 != 9;
        q.shift = int(rng() % 11) - 5;
        if (inside) {
          q.y = y.data(), q.cb = cb.data(), q.cr = cr.data();
          q.lo = std::max(q.shift, 0);
          q.hi = std::min(w, w + q.shift);
        }
        if (t % 3) {
          q.cut_from = int(rng() % unsigned(w));
          q.cut_to = std::min(w, q.cut_from + 1 + int(rng() % 20));
        }
        const bool mirror = t % 2;
        // The generic path, from the other references.
        std::vector<uint8_t> conv(3 * size_t(w)), row(3 * size_t(w));
        if (q.rgb) {
          std::copy(y.begin(), y.end(), conv.begin());
          std::copy(cb.begin(), cb.end(), conv.begin() + w);
          std::copy(cr.begin(), cr.end(), conv.begin() + 2 * w);
        } else {
          ColorConvertRowScalar(y.data(), cb.data(), cr.data(), size_t(w), hshift, conv.data(), conv.data() + w,
                                conv.data() + 2 * w);
        }
        std::vector<float> want(3 * size_t(w));
        for (int c = 0; c < 3; ++c) {
          for (int x = 0; x < w; ++x) {
            const bool src = x >= q.lo && x < q.hi && !(x >= q.cut_from && x < q.cut_to);
            row[size_t(c * w + x)] = src ? conv[size_t(c * w + x - q.shift)] : fill[c];
          }
          NormalizePlaneRowScalar(row.data() + c * w, size_t(w), want.data() + c * w, scale[c], bias[c], mirror);
        }
        std::vector<float> ref(3 * size_t(w));
        YccRowToFloatScalar(q, fill, scale, bias, mirror, ref.data(), ref.data() + w, ref.data() + 2 * w);
        ASSERT_EQ(std::memcmp(ref.data(), want.data(), ref.size() * sizeof(float)), 0) << "w=" << w << " t=" << t;
        for (size_t misalign : {0u, 1u}) {
          const size_t stride = (size_t(w) + 16 + 15) / 16 * 16;  // rows 64-byte aligned, with a guard
          float* out = static_cast<float*>(std::aligned_alloc(64, 3 * stride * sizeof(float)));
          for (size_t i = 0; i < 3 * stride; ++i) out[i] = -99.f;
          float* r = out + misalign;
          YccRowToFloat(q, fill, scale, bias, mirror, r, r + stride, r + 2 * stride);
          for (int c = 0; c < 3; ++c) {
            EXPECT_EQ(std::memcmp(r + c * stride, ref.data() + c * w, size_t(w) * sizeof(float)), 0)
                << "w=" << w << " hshift=" << hshift << " t=" << t << " channel " << c << " misalign " << misalign;
            EXPECT_EQ(r[c * stride + size_t(w)], -99.f) << "guard, w=" << w;
          }
          std::free(out);
        }
        // The uint8 row: the scalar reference against the generic path's interleave of the assembled
        // planes, the dispatched row against the reference, a guard byte past it.
        std::vector<uint8_t> want8(3 * size_t(w)), ref8(3 * size_t(w)), fast8(3 * size_t(w) + 1, 0xA5);
        InterleaveRowScalar(row.data(), row.data() + w, row.data() + 2 * w, size_t(w), want8.data(), mirror);
        YccRowToRgbScalar(q, fill, mirror, ref8.data());
        ASSERT_EQ(ref8, want8) << "w=" << w << " t=" << t;
        YccRowToRgb(q, fill, mirror, fast8.data());
        EXPECT_EQ(std::vector<uint8_t>(fast8.begin(), fast8.end() - 1), ref8) << "w=" << w << " hshift=" << hshift << " t=" << t;
        EXPECT_EQ(fast8.back(), 0xA5) << "w=" << w;
        fast_rows += YccRowIsFast(size_t(w), hshift);
      }
    }
  }
  });
  if (UseAvx2()) {
    EXPECT_EQ(fast_rows, 2 * 4 * 3 * 60);  // w = 16, 32, 48, 224 at both shifts and as RGB, at both SIMD widths
  }
}

TEST(Color, YccRowsWriteEachRowAsItsReference) {
  // An image's rows in one call (the constants set up once): each row of varied bounds, shift, cut and
  // source (rows outside the image too) equal to its scalar reference, at row strides that keep every
  // row 64-byte aligned (streaming stores) or not, with guards between and after the rows.
  std::mt19937 rng(23);
  const uint8_t fill[3] = {9, 200, 31};
  const float scale[3] = {1 / 58.395f, 1 / 57.12f, 1 / 57.375f}, bias[3] = {-2.1179f, -2.0357f, -1.8044f};
  AtEachSimdWidth([&] {
  for (int w : {16, 32, 48, 224, 40}) {
    for (int mode : {0, 1, 2}) {  // hshift 0, 1, and rows already RGB (YccRow::rgb)
      const int hshift = mode == 1;
      const int n = 11, cw = (w + (1 << hshift) - 1) >> hshift;
      std::vector<uint8_t> y(size_t(n * w)), cb(size_t(n * cw)), cr(size_t(n * cw));
      for (auto* v : {&y, &cb, &cr})
        for (auto& b : *v) b = uint8_t(rng());
      std::vector<YccRow> rows(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) {
        YccRow& q = rows[size_t(i)];
        q.w = w, q.hshift = hshift, q.rgb = mode == 2;
        q.shift = int(rng() % 9) - 4;
        if (i % 5 != 4) {  // every fifth row lies outside the image: fill
          const int src = int(rng() % unsigned(n));
          q.y = y.data() + src * w, q.cb = cb.data() + src * cw, q.cr = cr.data() + src * cw;
          q.lo = std::max(q.shift, 0), q.hi = std::min(w, w + q.shift);
        }
        if (i % 3 == 1) {
          q.cut_from = int(rng() % unsigned(w));
          q.cut_to = std::min(w, q.cut_from + 1 + int(rng() % 12));
        }
      }
      for (const bool mirror : {false, true}) {
        for (const size_t stride : {(size_t(w) + 16 + 15) / 16 * 16, size_t(w) + 3}) {  // floats per row
          const size_t plane = (size_t(n) * stride + 16 + 15) / 16 * 16;  // each plane 64-byte aligned
          float* out = static_cast<float*>(std::aligned_alloc(64, (3 * plane * sizeof(float) + 63) / 64 * 64));
          std::fill(out, out + 3 * plane, -99.f);
          YccRowsToFloat(rows.data(), size_t(n), fill, scale, bias, mirror, out, out + plane, out + 2 * plane, stride);
          std::vector<float> ref(3 * size_t(w));
          for (int i = 0; i < n; ++i) {
            YccRowToFloatScalar(rows[size_t(i)], fill, scale, bias, mirror, ref.data(), ref.data() + w, ref.data() + 2 * w);
            for (int c = 0; c < 3; ++c) {
              const float* got = out + size_t(c) * plane + size_t(i) * stride;
              EXPECT_EQ(std::memcmp(got, ref.data() + c * w, size_t(w) * sizeof(float)), 0)
                  << "w=" << w << " hshift=" << hshift << " row " << i << " channel " << c << " stride " << stride
                  << " mirror " << mirror;
              EXPECT_EQ(got[w], -99.f) << "guard after row " << i << ", w=" << w << " stride " << stride;
            }
          }
          std::free(out);
        }
        const size_t rgb_stride = 3 * size_t(w) + 5;
        std::vector<uint8_t> rgb(size_t(n) * rgb_stride, 0xA5), ref8(3 * size_t(w));
        YccRowsToRgb(rows.data(), size_t(n), fill, mirror, rgb.data(), rgb_stride);
        for (int i = 0; i < n; ++i) {
          YccRowToRgbScalar(rows[size_t(i)], fill, mirror, ref8.data());
          const uint8_t* got = rgb.data() + size_t(i) * rgb_stride;
          EXPECT_EQ(std::vector<uint8_t>(got, got + 3 * w), ref8) << "w=" << w << " hshift=" << hshift << " row " << i;
          EXPECT_EQ(got[3 * w], 0xA5) << "guard after row " << i << ", w=" << w;
        }
      }
    }
  }
  });
}

TEST(Color, YccRowsToPlanesEqualsColorConvertRow) {
  // An image's rows converted in one call (AVX-512 where the rows allow it) against the scalar row
  // conversion, with guards after each row.
  std::mt19937 rng(29);
  AtEachSimdWidth([&] {
    for (int w : {16, 32, 48, 224, 40}) {
      for (int hshift : {0, 1}) {
        const int n = 7, cw = (w + (1 << hshift) - 1) >> hshift;
        std::vector<uint8_t> y(size_t(n * w)), cb(size_t(n * cw)), cr(size_t(n * cw));
        for (auto* v : {&y, &cb, &cr})
          for (auto& b : *v) b = uint8_t(rng());
        std::vector<YccRow> rows(static_cast<size_t>(n));
        for (int i = 0; i < n; ++i) {
          YccRow& q = rows[size_t(i)];
          q.w = w, q.hshift = hshift;
          const int src = (i * 3) % n;
          q.y = y.data() + src * w, q.cb = cb.data() + src * cw, q.cr = cr.data() + src * cw;
        }
        const size_t stride = size_t(w) + 3, plane = size_t(n) * stride;
        std::vector<uint8_t> out(3 * plane, 0xA5), ref(3 * size_t(w));
        YccRowsToPlanes(rows.data(), size_t(n), out.data(), out.data() + plane, out.data() + 2 * plane, stride);
        for (int i = 0; i < n; ++i) {
          const YccRow& q = rows[size_t(i)];
          ColorConvertRowScalar(q.y, q.cb, q.cr, size_t(w), hshift, ref.data(), ref.data() + w, ref.data() + 2 * w);
          for (int c = 0; c < 3; ++c) {
            const uint8_t* got = out.data() + size_t(c) * plane + size_t(i) * stride;
            EXPECT_EQ(std::vector<uint8_t>(got, got + w), std::vector<uint8_t>(ref.data() + c * w, ref.data() + (c + 1) * w))
                << "w=" << w << " hshift=" << hshift << " row " << i << " channel " << c;
            EXPECT_EQ(got[w], 0xA5) << "guard after row " << i;
          }
        }
      }
    }
  });
}

TEST(Color, YccRowToRgbEqualsYccToRgbForEveryColour) {
  // Every (y, cb, cr): the dispatched rows (16-bit arithmetic with AVX-512 or AVX2) against
  // YccToRgb, libjpeg's formula, one row of y = 0..255 per (cb, cr); the float row against Normalize
  // of it (the AVX2 byte row leaves the clamping to its pack, the float row clamps itself).
  const int w = 256;
  std::vector<uint8_t> y(w), cb(w), cr(w), got(3 * size_t(w));
  std::vector<float> fgot(3 * size_t(w));
  const float scale[3] = {0.0171f, 0.0175f, 0.0174f}, bias[3] = {-2.12f, -2.04f, -1.80f};
  for (int i = 0; i < w; ++i) y[size_t(i)] = uint8_t(i);
  YccRow q;
  q.y = y.data(), q.cb = cb.data(), q.cr = cr.data();
  q.w = w, q.lo = 0, q.hi = w;
  const uint8_t fill[3] = {0, 0, 0};
  AtEachSimdWidth([&] {
  int wrong = 0;
  for (int b = 0; b < 256; ++b) {
    for (int r = 0; r < 256; ++r) {
      std::fill(cb.begin(), cb.end(), uint8_t(b));
      std::fill(cr.begin(), cr.end(), uint8_t(r));
      YccRowToRgb(q, fill, /*mirror=*/false, got.data());
      YccRowToFloat(q, fill, scale, bias, /*mirror=*/false, fgot.data(), fgot.data() + w, fgot.data() + 2 * w);
      for (int i = 0; i < w; ++i) {
        uint8_t want[3];
        YccToRgb(i, b, r, &want[0], &want[1], &want[2]);
        if (std::memcmp(want, &got[3 * size_t(i)], 3) != 0 && ++wrong <= 5)
          ADD_FAILURE() << "y=" << i << " cb=" << b << " cr=" << r << ": got " << int(got[3 * size_t(i)]) << ","
                        << int(got[3 * size_t(i) + 1]) << "," << int(got[3 * size_t(i) + 2]) << " want " << int(want[0])
                        << "," << int(want[1]) << "," << int(want[2]);
        for (int c = 0; c < 3; ++c) {
          const float fwant = Normalize(want[c], scale[c], bias[c]);
          if (std::memcmp(&fwant, &fgot[size_t(c * w + i)], sizeof(float)) != 0 && ++wrong <= 5)
            ADD_FAILURE() << "float: y=" << i << " cb=" << b << " cr=" << r << " channel " << c << ": got "
                          << fgot[size_t(c * w + i)] << " want " << fwant;
        }
      }
    }
  }
  EXPECT_EQ(wrong, 0);
  });
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

}  // namespace
}  // namespace dsc::test
