#include "kernels/color.h"

#include "kernels/augment.h"
#include "kernels/cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace dsc::kernels {

void ColorConvertRowScalar(const uint8_t* y, const uint8_t* cb, const uint8_t* cr, size_t w, int hshift, uint8_t* r,
                           uint8_t* g, uint8_t* b) {
  for (size_t x = 0; x < w; ++x) YccToRgb(y[x], cb[x >> hshift], cr[x >> hshift], r + x, g + x, b + x);
}

void NormalizePlaneRowScalar(const uint8_t* in, size_t w, float* out, float scale, float bias, bool reverse) {
  for (size_t x = 0; x < w; ++x) out[reverse ? w - 1 - x : x] = Normalize(in[x], scale, bias);
}

#if defined(__x86_64__)

namespace {

__attribute__((target("avx2"))) inline __m128i Pack8(__m256i v) {
  // 8 int32 in 0..255 -> 8 bytes in the low half.
  const __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
  const __m128i w16 = _mm_packus_epi32(lo, hi);
  return _mm_packus_epi16(w16, w16);
}

__attribute__((target("avx2"))) void ColorConvertRowAvx2(const uint8_t* y, const uint8_t* cb, const uint8_t* cr,
                                                          size_t w, int hshift, uint8_t* r, uint8_t* g, uint8_t* b) {
  const __m256i c128 = _mm256_set1_epi32(128), half = _mm256_set1_epi32(32768);
  const __m256i kr = _mm256_set1_epi32(91881), kgb = _mm256_set1_epi32(-22554), kgr = _mm256_set1_epi32(-46802),
                kb = _mm256_set1_epi32(116130);
  const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
  size_t x = 0;
  for (; x + 8 <= w; x += 8) {
    const __m256i Y = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(y + x)));
    __m256i CB, CR;
    if (hshift) {
      int32_t c4, r4;
      __builtin_memcpy(&c4, cb + (x >> 1), 4);
      __builtin_memcpy(&r4, cr + (x >> 1), 4);
      CB = _mm256_permutevar8x32_epi32(_mm256_cvtepu8_epi32(_mm_cvtsi32_si128(c4)), dup);
      CR = _mm256_permutevar8x32_epi32(_mm256_cvtepu8_epi32(_mm_cvtsi32_si128(r4)), dup);
    } else {
      CB = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(cb + x)));
      CR = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(cr + x)));
    }
    CB = _mm256_sub_epi32(CB, c128);
    CR = _mm256_sub_epi32(CR, c128);
    const __m256i R = _mm256_add_epi32(Y, _mm256_srai_epi32(_mm256_add_epi32(_mm256_mullo_epi32(kr, CR), half), 16));
    const __m256i G = _mm256_add_epi32(
        Y, _mm256_srai_epi32(_mm256_add_epi32(_mm256_add_epi32(_mm256_mullo_epi32(kgb, CB), half), _mm256_mullo_epi32(kgr, CR)), 16));
    const __m256i B = _mm256_add_epi32(Y, _mm256_srai_epi32(_mm256_add_epi32(_mm256_mullo_epi32(kb, CB), half), 16));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(r + x), Pack8(R));  // packus clamps to 0..255
    _mm_storel_epi64(reinterpret_cast<__m128i*>(g + x), Pack8(G));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(b + x), Pack8(B));
  }
  for (; x < w; ++x) YccToRgb(y[x], cb[x >> hshift], cr[x >> hshift], r + x, g + x, b + x);
}

__attribute__((target("avx2"))) void NormalizePlaneRowAvx2(const uint8_t* in, size_t w, float* out, float scale,
                                                            float bias, bool rev) {
  const __m256 s = _mm256_set1_ps(scale), bs = _mm256_set1_ps(bias);
  const __m256i perm = _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0);
  const bool stream = (reinterpret_cast<uintptr_t>(out) & 31) == 0 && (!rev || w % 8 == 0);
  size_t x = 0;
  for (; x + 8 <= w; x += 8) {
    __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + x))));
    v = _mm256_add_ps(_mm256_mul_ps(v, s), bs);
    float* o = out + (rev ? w - x - 8 : x);
    if (rev) v = _mm256_permutevar8x32_ps(v, perm);
    if (stream) _mm256_stream_ps(o, v);
    else _mm256_storeu_ps(o, v);
  }
  for (; x < w; ++x) out[rev ? w - 1 - x : x] = Normalize(in[x], scale, bias);
}

}  // namespace

void ColorConvertRow(const uint8_t* y, const uint8_t* cb, const uint8_t* cr, size_t w, int hshift, uint8_t* r,
                     uint8_t* g, uint8_t* b) {
  if (UseAvx2() && hshift <= 1) return ColorConvertRowAvx2(y, cb, cr, w, hshift, r, g, b);
  ColorConvertRowScalar(y, cb, cr, w, hshift, r, g, b);
}

void NormalizePlaneRow(const uint8_t* in, size_t w, float* out, float scale, float bias, bool reverse) {
  if (UseAvx2()) return NormalizePlaneRowAvx2(in, w, out, scale, bias, reverse);
  NormalizePlaneRowScalar(in, w, out, scale, bias, reverse);
}

#else

void ColorConvertRow(const uint8_t* y, const uint8_t* cb, const uint8_t* cr, size_t w, int hshift, uint8_t* r,
                     uint8_t* g, uint8_t* b) {
  ColorConvertRowScalar(y, cb, cr, w, hshift, r, g, b);
}

void NormalizePlaneRow(const uint8_t* in, size_t w, float* out, float scale, float bias, bool reverse) {
  NormalizePlaneRowScalar(in, w, out, scale, bias, reverse);
}

#endif

}  // namespace dsc::kernels
