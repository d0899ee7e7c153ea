// ColorJitter, fast (kernels/color_jitter.h). Every value is the reference's float32 expression
// (transform_ops.h: the same products and sums in the same order, -ffp-contract=off, explicit vector
// multiplies and adds): tables hold those values for each of the 256 inputs, the vector loops compute
// them 16 lanes at a time.
#include "kernels/color_jitter.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "format/error.h"
#include "kernels/color.h"
#include "kernels/cpu.h"
#include "kernels/transform_ops.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace dsc::kernels {

void ColorJitterReference(ImageU8 img, const JitterOps& ops) {
  for (int k = 0; k < ops.n; ++k) {
    switch (ops.id[k]) {
      case 0: AdjustBrightness(img, ops.factor[k]); break;
      case 1: AdjustContrast(img, ops.factor[k]); break;
      case 2: AdjustSaturation(img, ops.factor[k]); break;
      default: AdjustHue(img, ops.factor[k]); break;
    }
  }
}

namespace {

// The per-value ops as tables: out[v] = TruncU8(f.r * v + o), what the reference writes for a value v
// (brightness: o = f.rc * 0; contrast: o = f.rc * mean).
void BlendTableScalar(BlendFactors f, float o, uint8_t out[256]) {
  for (int v = 0; v < 256; ++v) out[v] = TruncU8(f.r * float(v) + o);
}

inline uint32_t GrayValue(float r, float g, float b) { return uint32_t(int((0.2989f * r + 0.587f * g) + 0.114f * b)); }

// The portable loops; lut (nullptr: none) maps each value first.
uint64_t GraySumScalar(uint8_t* const p[3], size_t n, const uint8_t* lut) {
  uint64_t sum = 0;
  for (size_t i = 0; i < n; ++i) {
    uint8_t r = p[0][i], g = p[1][i], b = p[2][i];
    if (lut) r = lut[r], g = lut[g], b = lut[b];
    sum += GrayValue(float(r), float(g), float(b));
  }
  return sum;
}

void SaturateScalar(uint8_t* const p[3], size_t n, const uint8_t* lut, BlendFactors f) {
  for (size_t i = 0; i < n; ++i) {
    uint8_t r = p[0][i], g = p[1][i], b = p[2][i];
    if (lut) r = lut[r], g = lut[g], b = lut[b];
    const float rf = float(r), gf = float(g), bf = float(b);
    const float o = f.rc * float(int(GrayValue(rf, gf, bf)));
    p[0][i] = TruncU8(f.r * rf + o);
    p[1][i] = TruncU8(f.r * gf + o);
    p[2][i] = TruncU8(f.r * bf + o);
  }
}

}  // namespace

#if defined(__x86_64__)
// HuePixel (transform_ops.h) 8 pixels at a time: the same float32 operations lane by lane, and
// selections in place of its branches. Its fmodf(x, 1) takes x in [5/6, 11/6] (x - 1 there is exact),
// its int(i6) % 6 an i6 in [0, 6], and no value is a NaN, so max / min stand for fmaxf / fminf.
#define DSC_AVX2 __attribute__((target("avx2")))
DSC_AVX2 inline __m256 HueLoad(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
DSC_AVX2 inline void HueStore(uint8_t* p, __m256 v) {  // v in [0, 255]: truncation, then packed to bytes
  const __m256i i = _mm256_cvttps_epi32(v);
  const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packus_epi16(w, w));
}
DSC_AVX2 inline __m256 HueEq(__m256 a, __m256 b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
DSC_AVX2 inline __m256 HueSel(__m256 mask, __m256 a, __m256 b) { return _mm256_blendv_ps(b, a, mask); }  // mask ? a : b
DSC_AVX2 inline __m256 HueClamp01(__m256 x) { return _mm256_min_ps(_mm256_max_ps(x, _mm256_setzero_ps()), _mm256_set1_ps(1.f)); }

static DSC_AVX2 size_t HueLanes8(uint8_t* r8, uint8_t* g8, uint8_t* b8, size_t n, float factor) {
  const __m256 k255 = _mm256_set1_ps(255.f), one = _mm256_set1_ps(1.f), zero = _mm256_setzero_ps();
  const __m256 six = _mm256_set1_ps(6.f), two = _mm256_set1_ps(2.f), four = _mm256_set1_ps(4.f);
  const __m256 fac = _mm256_set1_ps(factor);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 r = _mm256_div_ps(HueLoad(r8 + i), k255), g = _mm256_div_ps(HueLoad(g8 + i), k255),
                 b = _mm256_div_ps(HueLoad(b8 + i), k255);
    const __m256 maxc = _mm256_max_ps(r, _mm256_max_ps(g, b)), minc = _mm256_min_ps(r, _mm256_min_ps(g, b));
    const __m256 eqc = HueEq(maxc, minc);
    const __m256 cr = _mm256_sub_ps(maxc, minc);
    const __m256 s = _mm256_div_ps(cr, HueSel(eqc, one, maxc));
    const __m256 div = HueSel(eqc, one, cr);
    const __m256 rc = _mm256_div_ps(_mm256_sub_ps(maxc, r), div), gc = _mm256_div_ps(_mm256_sub_ps(maxc, g), div),
                 bc = _mm256_div_ps(_mm256_sub_ps(maxc, b), div);
    const __m256 is_r = HueEq(maxc, r), is_g = HueEq(maxc, g);
    const __m256 hr = _mm256_and_ps(is_r, _mm256_sub_ps(bc, gc));
    const __m256 hg = _mm256_and_ps(_mm256_andnot_ps(is_r, is_g), _mm256_sub_ps(_mm256_add_ps(two, rc), bc));
    const __m256 hb = _mm256_andnot_ps(_mm256_or_ps(is_r, is_g), _mm256_sub_ps(_mm256_add_ps(four, gc), rc));
    const __m256 h0 = _mm256_add_ps(_mm256_div_ps(_mm256_add_ps(_mm256_add_ps(hr, hg), hb), six), one);
    const __m256 h1 = _mm256_add_ps(HueSel(_mm256_cmp_ps(h0, one, _CMP_GE_OQ), _mm256_sub_ps(h0, one), h0), fac);
    const __m256 h = _mm256_sub_ps(h1, _mm256_floor_ps(h1));
    const __m256 h6 = _mm256_mul_ps(h, six);
    const __m256 i6 = _mm256_floor_ps(h6);
    const __m256 f = _mm256_sub_ps(h6, i6);
    const __m256 sec = HueSel(_mm256_cmp_ps(i6, six, _CMP_GE_OQ), _mm256_sub_ps(i6, six), i6);
    const __m256 v = maxc;
    const __m256 p = HueClamp01(_mm256_mul_ps(v, _mm256_sub_ps(one, s)));
    const __m256 q = HueClamp01(_mm256_mul_ps(v, _mm256_sub_ps(one, _mm256_mul_ps(s, f))));
    const __m256 t = HueClamp01(_mm256_mul_ps(v, _mm256_sub_ps(one, _mm256_mul_ps(s, _mm256_sub_ps(one, f)))));
    const __m256 s0 = HueEq(sec, zero), s1 = HueEq(sec, one), s2 = HueEq(sec, two), s3 = HueEq(sec, _mm256_set1_ps(3.f)),
                 s4 = HueEq(sec, four), s5 = HueEq(sec, _mm256_set1_ps(5.f));
    const __m256 o0 = HueSel(_mm256_or_ps(s0, s5), v, HueSel(s1, q, HueSel(s4, t, p)));
    const __m256 o1 = HueSel(s0, t, HueSel(_mm256_or_ps(s1, s2), v, HueSel(s3, q, p)));
    const __m256 o2 = HueSel(_mm256_or_ps(s0, s1), p, HueSel(s2, t, HueSel(s5, q, v)));
    HueStore(r8 + i, _mm256_mul_ps(o0, k255));
    HueStore(g8 + i, _mm256_mul_ps(o1, k255));
    HueStore(b8 + i, _mm256_mul_ps(o2, k255));
  }
  return i;
}
#undef DSC_AVX2
#endif

#if defined(__x86_64__)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's _mm512_undefined_* (see resample.cc)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
// The same 16 lanes at a time (AVX-512 F): masks in place of the AVX2 blends.
#define DSC_AVX512 __attribute__((target("avx512f")))
DSC_AVX512 inline __m512 HueLoad16(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
DSC_AVX512 inline void HueStore16(uint8_t* p, __m512 v) {  // v in [0, 255]: truncation, then bytes
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(v)));
}
DSC_AVX512 inline __mmask16 HueIs16(__m512 x, float k) { return _mm512_cmp_ps_mask(x, _mm512_set1_ps(k), _CMP_EQ_OQ); }
DSC_AVX512 inline __m512 HueClamp01x16(__m512 x) {
  return _mm512_min_ps(_mm512_max_ps(x, _mm512_setzero_ps()), _mm512_set1_ps(1.f));
}

static DSC_AVX512 size_t HueLanes16(uint8_t* r8, uint8_t* g8, uint8_t* b8, size_t n, float factor) {
  const __m512 k255 = _mm512_set1_ps(255.f), one = _mm512_set1_ps(1.f), six = _mm512_set1_ps(6.f);
  const __m512 two = _mm512_set1_ps(2.f), four = _mm512_set1_ps(4.f), fac = _mm512_set1_ps(factor);
  constexpr int kFloor = _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 r = _mm512_div_ps(HueLoad16(r8 + i), k255), g = _mm512_div_ps(HueLoad16(g8 + i), k255),
                 b = _mm512_div_ps(HueLoad16(b8 + i), k255);
    const __m512 maxc = _mm512_max_ps(r, _mm512_max_ps(g, b)), minc = _mm512_min_ps(r, _mm512_min_ps(g, b));
    const __mmask16 eqc = _mm512_cmp_ps_mask(maxc, minc, _CMP_EQ_OQ);
    const __m512 cr = _mm512_sub_ps(maxc, minc);
    const __m512 s = _mm512_div_ps(cr, _mm512_mask_blend_ps(eqc, maxc, one));
    const __m512 div = _mm512_mask_blend_ps(eqc, cr, one);
    const __m512 rc = _mm512_div_ps(_mm512_sub_ps(maxc, r), div), gc = _mm512_div_ps(_mm512_sub_ps(maxc, g), div),
                 bc = _mm512_div_ps(_mm512_sub_ps(maxc, b), div);
    const __mmask16 is_r = _mm512_cmp_ps_mask(maxc, r, _CMP_EQ_OQ), is_g = _mm512_cmp_ps_mask(maxc, g, _CMP_EQ_OQ);
    const __m512 hr = _mm512_maskz_mov_ps(is_r, _mm512_sub_ps(bc, gc));
    const __m512 hg = _mm512_maskz_mov_ps(__mmask16(is_g & ~is_r), _mm512_sub_ps(_mm512_add_ps(two, rc), bc));
    const __m512 hb = _mm512_maskz_mov_ps(__mmask16(~(is_g | is_r)), _mm512_sub_ps(_mm512_add_ps(four, gc), rc));
    const __m512 h0 = _mm512_add_ps(_mm512_div_ps(_mm512_add_ps(_mm512_add_ps(hr, hg), hb), six), one);
    const __mmask16 ge1 = _mm512_cmp_ps_mask(h0, one, _CMP_GE_OQ);
    const __m512 h1 = _mm512_add_ps(_mm512_mask_blend_ps(ge1, h0, _mm512_sub_ps(h0, one)), fac);
    const __m512 h = _mm512_sub_ps(h1, _mm512_roundscale_ps(h1, kFloor));
    const __m512 h6 = _mm512_mul_ps(h, six);
    const __m512 i6 = _mm512_roundscale_ps(h6, kFloor);
    const __m512 f = _mm512_sub_ps(h6, i6);
    const __mmask16 ge6 = _mm512_cmp_ps_mask(i6, six, _CMP_GE_OQ);
    const __m512 sec = _mm512_mask_blend_ps(ge6, i6, _mm512_sub_ps(i6, six));
    const __m512 v = maxc;
    const __m512 p = HueClamp01x16(_mm512_mul_ps(v, _mm512_sub_ps(one, s)));
    const __m512 q = HueClamp01x16(_mm512_mul_ps(v, _mm512_sub_ps(one, _mm512_mul_ps(s, f))));
    const __m512 t = HueClamp01x16(_mm512_mul_ps(v, _mm512_sub_ps(one, _mm512_mul_ps(s, _mm512_sub_ps(one, f)))));
    const __mmask16 s0 = HueIs16(sec, 0.f), s1 = HueIs16(sec, 1.f), s2 = HueIs16(sec, 2.f), s3 = HueIs16(sec, 3.f),
                    s4 = HueIs16(sec, 4.f), s5 = HueIs16(sec, 5.f);
    // blend(mask, a, b): mask ? b : a.
    const __m512 o0 = _mm512_mask_blend_ps(__mmask16(s0 | s5), _mm512_mask_blend_ps(s1, _mm512_mask_blend_ps(s4, p, t), q), v);
    const __m512 o1 = _mm512_mask_blend_ps(s0, _mm512_mask_blend_ps(__mmask16(s1 | s2), _mm512_mask_blend_ps(s3, p, q), v), t);
    const __m512 o2 = _mm512_mask_blend_ps(__mmask16(s0 | s1), _mm512_mask_blend_ps(s2, _mm512_mask_blend_ps(s5, v, q), t), p);
    HueStore16(r8 + i, _mm512_mul_ps(o0, k255));
    HueStore16(g8 + i, _mm512_mul_ps(o1, k255));
    HueStore16(b8 + i, _mm512_mul_ps(o2, k255));
  }
  return i;
}
#undef DSC_AVX512
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

void HueLanes(uint8_t* r8, uint8_t* g8, uint8_t* b8, size_t n, float factor) {
  size_t i = 0;
#if defined(__x86_64__)
  if (UseAvx512()) i = HueLanes16(r8, g8, b8, n, factor);
  if (UseAvx2()) i += HueLanes8(r8 + i, g8 + i, b8 + i, n - i, factor);
#endif
  for (; i < n; ++i) {
    const uint8_t in[3] = {r8[i], g8[i], b8[i]};
    uint8_t out[3];
    HuePixel(in, factor, out);
    r8[i] = out[0], g8[i] = out[1], b8[i] = out[2];
  }
}

namespace {

void LutScalar(uint8_t* p, size_t n, const uint8_t* lut) {
  for (size_t i = 0; i < n; ++i) p[i] = lut[p[i]];
}

#if defined(__x86_64__)
#define DSC_JITTER_AVX512 1
#define DSC_T __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi")))
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's _mm512_undefined_* (see resample.cc)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

bool CpuHasVbmi() {
  static const bool have = (__builtin_cpu_init(), __builtin_cpu_supports("avx512vbmi"));
  return have;
}

// A 256-entry byte table in four registers; Look maps 64 bytes: two 128-entry permutes, the high
// bit picks between them.
struct Lut512 {
  __m512i t[4];
};
DSC_T inline Lut512 LoadLut(const uint8_t* lut) {
  Lut512 l;
  for (int k = 0; k < 4; ++k) l.t[k] = _mm512_loadu_si512(lut + 64 * k);
  return l;
}
DSC_T inline __m512i Look(const Lut512& l, __m512i v) {
  const __m512i lo = _mm512_permutex2var_epi8(l.t[0], v, l.t[1]);
  const __m512i hi = _mm512_permutex2var_epi8(l.t[2], v, l.t[3]);
  return _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), lo, hi);
}
DSC_T inline __mmask64 Tail(size_t left) { return left >= 64 ? ~__mmask64(0) : (__mmask64(1) << left) - 1; }

// Bytes 16q..16q+15 of v as floats.
template <int Q>
DSC_T inline __m512 Quarter(__m512i v) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(v, Q)));
}

struct Gray512 {
  __m512 kr, kg, kb;
  DSC_T Gray512() : kr(_mm512_set1_ps(0.2989f)), kg(_mm512_set1_ps(0.587f)), kb(_mm512_set1_ps(0.114f)) {}
  // rgb_to_grayscale's value, truncated: (0.2989 r + 0.587 g) + 0.114 b.
  DSC_T __m512i operator()(__m512 r, __m512 g, __m512 b) const {
    return _mm512_cvttps_epi32(
        _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(kr, r), _mm512_mul_ps(kg, g)), _mm512_mul_ps(kb, b)));
  }
};

// Loads 64 pixels' planes (zeros past the end), mapped through lut when given.
struct Pixels64 {
  __m512i r, g, b;
};
DSC_T inline Pixels64 Load64(uint8_t* const p[3], size_t i, __mmask64 m, const Lut512* lut) {
  Pixels64 x{_mm512_maskz_loadu_epi8(m, p[0] + i), _mm512_maskz_loadu_epi8(m, p[1] + i),
             _mm512_maskz_loadu_epi8(m, p[2] + i)};
  if (lut) {
    x.r = _mm512_maskz_mov_epi8(m, Look(*lut, x.r));
    x.g = _mm512_maskz_mov_epi8(m, Look(*lut, x.g));
    x.b = _mm512_maskz_mov_epi8(m, Look(*lut, x.b));
  }
  return x;
}

template <int Q>
DSC_T inline __m512i GrayQuarter(const Gray512& gray, const Pixels64& x) {
  return gray(Quarter<Q>(x.r), Quarter<Q>(x.g), Quarter<Q>(x.b));
}

// Pixels past n load as zeros, whose gray is 0: they add nothing.
DSC_T uint64_t GraySum512(uint8_t* const p[3], size_t n, const uint8_t* lut) {
  const Lut512 l = lut ? LoadLut(lut) : Lut512{};
  const Gray512 gray;
  uint64_t sum = 0;
  for (size_t at = 0; at < n; at += size_t(1) << 20) {  // 2^20 pixels of at most 254: no lane overflows
    const size_t end = std::min(n, at + (size_t(1) << 20));
    __m512i acc = _mm512_setzero_si512();
    for (size_t i = at; i < end; i += 64) {
      const Pixels64 x = Load64(p, i, Tail(end - i), lut ? &l : nullptr);
      acc = _mm512_add_epi32(acc, GrayQuarter<0>(gray, x));
      acc = _mm512_add_epi32(acc, GrayQuarter<1>(gray, x));
      acc = _mm512_add_epi32(acc, GrayQuarter<2>(gray, x));
      acc = _mm512_add_epi32(acc, GrayQuarter<3>(gray, x));
    }
    alignas(64) uint32_t lanes[16];
    _mm512_store_si512(lanes, acc);
    for (uint32_t v : lanes) sum += v;
  }
  return sum;
}

struct Blend512 {
  __m512 r, rc, zero, top;
  DSC_T explicit Blend512(BlendFactors f)
      : r(_mm512_set1_ps(f.r)), rc(_mm512_set1_ps(f.rc)), zero(_mm512_setzero_ps()), top(_mm512_set1_ps(255.f)) {}
  // TruncU8(r * v + o), as 16 int32 lanes.
  DSC_T __m512i operator()(__m512 v, __m512 o) const {
    return _mm512_cvttps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_add_ps(_mm512_mul_ps(r, v), o), zero), top));
  }
};

// TruncU8(r * v + o) before the clamp at 0: the values past 255 clamped in float, the negative ones
// left for Pack64's unsigned saturation.
DSC_T inline __m512i BlendNoFloor(const Blend512& f, __m512 v, __m512 o) {
  return _mm512_cvttps_epi32(_mm512_min_ps(_mm512_add_ps(_mm512_mul_ps(f.r, v), o), f.top));
}

// Four steps of 16 int32 (at most 255) as 64 bytes in order, negatives as 0: the packs saturate, and
// work within 128-bit lanes, so lane L holds dword L of each step; the permute puts them back.
DSC_T inline __m512i Pack64(__m512i a0, __m512i a1, __m512i a2, __m512i a3) {
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_epi32(order, _mm512_packus_epi16(_mm512_packus_epi32(a0, a1), _mm512_packus_epi32(a2, a3)));
}

template <int Q>
DSC_T inline void SaturateQuarter(const Gray512& gray, const Blend512& f, const Pixels64& x, __m512i out[3]) {
  const __m512 r = Quarter<Q>(x.r), g = Quarter<Q>(x.g), b = Quarter<Q>(x.b);
  const __m512 o = _mm512_mul_ps(f.rc, _mm512_cvtepi32_ps(gray(r, g, b)));
  out[0] = BlendNoFloor(f, r, o);
  out[1] = BlendNoFloor(f, g, o);
  out[2] = BlendNoFloor(f, b, o);
}

DSC_T void Saturate512(uint8_t* const p[3], size_t n, const uint8_t* lut, BlendFactors bf) {
  const Lut512 l = lut ? LoadLut(lut) : Lut512{};
  const Gray512 gray;
  const Blend512 f(bf);
  for (size_t i = 0; i < n; i += 64) {
    const __mmask64 m = Tail(n - i);
    const Pixels64 x = Load64(p, i, m, lut ? &l : nullptr);
    __m512i q[4][3];
    SaturateQuarter<0>(gray, f, x, q[0]);
    SaturateQuarter<1>(gray, f, x, q[1]);
    SaturateQuarter<2>(gray, f, x, q[2]);
    SaturateQuarter<3>(gray, f, x, q[3]);
    for (int c = 0; c < 3; ++c) _mm512_mask_storeu_epi8(p[c] + i, m, Pack64(q[0][c], q[1][c], q[2][c], q[3][c]));
  }
}

DSC_T void BlendTable512(BlendFactors bf, float o, uint8_t out[256]) {
  const Blend512 f(bf);
  const __m512 ov = _mm512_set1_ps(o);
  __m512 v = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int k = 0; k < 16; ++k, v = _mm512_add_ps(v, _mm512_set1_ps(16.f)))
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16 * k), _mm512_cvtepi32_epi8(f(v, ov)));
}

// pending[v] = table[pending[v]]
DSC_T void Compose512(const uint8_t table[256], uint8_t pending[256]) {
  const Lut512 l = LoadLut(table);
  for (int k = 0; k < 4; ++k)
    _mm512_storeu_si512(pending + 64 * k, Look(l, _mm512_loadu_si512(pending + 64 * k)));
}

DSC_T void Lut512Plane(uint8_t* p, size_t n, const uint8_t* lut) {
  const Lut512 l = LoadLut(lut);
  for (size_t i = 0; i < n; i += 64) {
    const __mmask64 m = Tail(n - i);
    _mm512_mask_storeu_epi8(p + i, m, Look(l, _mm512_maskz_loadu_epi8(m, p + i)));
  }
}
// Packed RGB to planes, 64 pixels (three registers) at a time: channel c's byte of pixel k is byte
// 3k + c; those in the first two registers come through one two-register permute, the rest from the
// third through another.
struct SplitIndex {
  alignas(64) uint8_t lo[3][64], hi[3][64];
  uint64_t from_hi[3] = {0, 0, 0};
  SplitIndex() {
    for (int c = 0; c < 3; ++c)
      for (int k = 0; k < 64; ++k) {
        const int at = 3 * k + c;
        lo[c][k] = uint8_t(at & 127), hi[c][k] = uint8_t(at & 63);
        if (at >= 128) from_hi[c] |= uint64_t(1) << k;
      }
  }
};
const SplitIndex g_split;

DSC_T void SplitRgb512(const uint8_t* rgb, size_t n, uint8_t* const p[3]) {
  __m512i ilo[3], ihi[3];
  __mmask64 from_hi[3];
  for (int c = 0; c < 3; ++c) {
    ilo[c] = _mm512_load_si512(g_split.lo[c]), ihi[c] = _mm512_load_si512(g_split.hi[c]);
    from_hi[c] = g_split.from_hi[c];
  }
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const uint8_t* s = rgb + 3 * i;
    const __m512i v0 = _mm512_loadu_si512(s), v1 = _mm512_loadu_si512(s + 64), v2 = _mm512_loadu_si512(s + 128);
    for (int c = 0; c < 3; ++c)
      _mm512_storeu_si512(p[c] + i, _mm512_mask_blend_epi8(from_hi[c], _mm512_permutex2var_epi8(v0, ilo[c], v1),
                                                           _mm512_permutexvar_epi8(ihi[c], v2)));
  }
  for (; i < n; ++i) p[0][i] = rgb[3 * i], p[1][i] = rgb[3 * i + 1], p[2][i] = rgb[3 * i + 2];
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#undef DSC_T
#endif

bool UseFast() {
#ifdef DSC_JITTER_AVX512
  return UseAvx512() && CpuHasVbmi();
#else
  return false;
#endif
}

void BlendTable(BlendFactors f, float o, uint8_t out[256]) {
#ifdef DSC_JITTER_AVX512
  if (UseFast()) return BlendTable512(f, o, out);
#endif
  BlendTableScalar(f, o, out);
}

uint64_t GraySum(uint8_t* const p[3], size_t n, const uint8_t* lut) {
#ifdef DSC_JITTER_AVX512
  if (UseFast()) return GraySum512(p, n, lut);
#endif
  return GraySumScalar(p, n, lut);
}

void Saturate(uint8_t* const p[3], size_t n, const uint8_t* lut, BlendFactors f) {
#ifdef DSC_JITTER_AVX512
  if (UseFast()) return Saturate512(p, n, lut, f);
#endif
  SaturateScalar(p, n, lut, f);
}

void ApplyLut(uint8_t* const p[3], size_t n, const uint8_t* lut) {
  for (int c = 0; c < 3; ++c) {
#ifdef DSC_JITTER_AVX512
    if (UseFast()) {
      Lut512Plane(p[c], n, lut);
      continue;
    }
#endif
    LutScalar(p[c], n, lut);
  }
}

void HuePlanes(uint8_t* const p[3], size_t n, double factor) {
  if (!(factor >= -0.5 && factor <= 0.5)) throw Error("adjust_hue: factor " + std::to_string(factor) + " not in [-0.5, 0.5]");
  HueLanes(p[0], p[1], p[2], n, float(factor));
}

}  // namespace

void ColorJitterPlanes(uint8_t* const planes[3], size_t n, const JitterOps& ops) {
  // `pending`: the per-value ops since the last pixel pass, composed; applied by the next pass.
  uint8_t pending[256], table[256];
  bool have = false;
  auto compose = [&] {
    if (!have) std::memcpy(pending, table, 256);
#ifdef DSC_JITTER_AVX512
    else if (UseFast()) Compose512(table, pending);
#endif
    else
      for (int v = 0; v < 256; ++v) pending[v] = table[pending[v]];
    have = true;
  };
  for (int k = 0; k < ops.n; ++k) {
    const double f = ops.factor[k];
    switch (ops.id[k]) {
      case 0: {
        const BlendFactors b = MakeBlend(f);
        BlendTable(b, b.rc * 0.f, table);
        compose();
        break;
      }
      case 1: {  // the mean of the image as the ops so far leave it (AdjustContrast's)
        const uint64_t sum = GraySum(planes, n, have ? pending : nullptr);
        const BlendFactors c = MakeBlend(f);
        BlendTable(c, c.rc * (n ? float(double(sum) / double(n)) : 0.f), table);
        compose();
        break;
      }
      case 2:
        Saturate(planes, n, have ? pending : nullptr, MakeBlend(f));
        have = false;
        break;
      default:
        if (have) ApplyLut(planes, n, pending);
        have = false;
        HuePlanes(planes, n, f);
        break;
    }
  }
  if (have) ApplyLut(planes, n, pending);
}

void ColorJitterRgb(ImageU8 img, const JitterOps& ops, TransformScratch& s) {
  const size_t n = size_t(img.width) * size_t(img.height);
  if (s.bytes.size() < 3 * n) s.bytes.resize(3 * n);
  uint8_t* const planes[3] = {s.bytes.data(), s.bytes.data() + n, s.bytes.data() + 2 * n};
#ifdef DSC_JITTER_AVX512
  if (UseFast()) SplitRgb512(img.data, n, planes);
  else
#endif
    for (size_t i = 0; i < n; ++i) {
      planes[0][i] = img.data[3 * i];
      planes[1][i] = img.data[3 * i + 1];
      planes[2][i] = img.data[3 * i + 2];
    }
  ColorJitterPlanes(planes, n, ops);
  InterleaveRow(planes[0], planes[1], planes[2], n, img.data, false);
}

}  // namespace dsc::kernels
