#include "kernels/normalize_row.h"

#include "kernels/augment.h"
#include "kernels/cpu.h"


#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace dsc::kernels {

void NormalizeRowPlanarScalar(const uint8_t* rgb, size_t w, float* r, float* g, float* b, const float scale[3],
                              const float bias[3], bool reverse) {
  for (size_t x = 0; x < w; ++x) {
    const size_t o = reverse ? w - 1 - x : x;
    r[o] = Normalize(rgb[3 * x], scale[0], bias[0]);
    g[o] = Normalize(rgb[3 * x + 1], scale[1], bias[1]);
    b[o] = Normalize(rgb[3 * x + 2], scale[2], bias[2]);
  }
}

#if defined(__x86_64__)

namespace {

// 16 interleaved RGB pixels (48 bytes at p) as their 16 R, 16 G and 16 B bytes: three loads, byte
// shuffles gather each channel's values.
__attribute__((target("avx2"))) inline void Split16(const uint8_t* p, __m128i ch[3]) {
  const __m128i r0 = _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i r1 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1);
  const __m128i r2 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13);
  const __m128i g0 = _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i g1 = _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1);
  const __m128i g2 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14);
  const __m128i b0 = _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i b1 = _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1);
  const __m128i b2 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15);
  const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i m = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16));
  const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32));
  ch[0] = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, r0), _mm_shuffle_epi8(m, r1)), _mm_shuffle_epi8(c, r2));
  ch[1] = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, g0), _mm_shuffle_epi8(m, g1)), _mm_shuffle_epi8(c, g2));
  ch[2] = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, b0), _mm_shuffle_epi8(m, b1)), _mm_shuffle_epi8(c, b2));
}

// Converts 8 bytes and stores them at out (reversed when rev).
__attribute__((target("avx2"))) inline void Store8(__m128i bytes, __m256 scale, __m256 bias, float* out, bool rev) {
  __m256 v = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)), scale), bias);
  if (rev) v = _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0));
  _mm256_storeu_ps(out, v);
}

__attribute__((target("avx2"))) void NormalizeRowPlanarAvx2(const uint8_t* rgb, size_t w, float* r, float* g,
                                                             float* b, const float scale[3], const float bias[3],
                                                             bool rev) {
  const __m256 sr = _mm256_set1_ps(scale[0]), sg = _mm256_set1_ps(scale[1]), sb = _mm256_set1_ps(scale[2]);
  const __m256 br = _mm256_set1_ps(bias[0]), bg = _mm256_set1_ps(bias[1]), bb = _mm256_set1_ps(bias[2]);
  // Ordinary stores, unlike the AVX-512 version's streaming ones: the CPUs that take this path (mostly
  // AMD EPYCs before Zen 4) keep the batch in their large L3, where streaming stores cost more CPU.
  size_t x = 0;
  for (; x + 16 <= w; x += 16) {
    __m128i ch[3];
    Split16(rgb + 3 * x, ch);
    const __m128i R = ch[0], G = ch[1], B = ch[2];
    const size_t o0 = rev ? w - x - 8 : x, o1 = rev ? w - x - 16 : x + 8;
    Store8(R, sr, br, r + o0, rev);
    Store8(_mm_srli_si128(R, 8), sr, br, r + o1, rev);
    Store8(G, sg, bg, g + o0, rev);
    Store8(_mm_srli_si128(G, 8), sg, bg, g + o1, rev);
    Store8(B, sb, bb, b + o0, rev);
    Store8(_mm_srli_si128(B, 8), sb, bb, b + o1, rev);
  }
  // The tail: pixels x..w-1 land at x..w-1, or mirrored at 0..w-1-x.
  if (x == w) return;
  if (rev) NormalizeRowPlanarScalar(rgb + 3 * x, w - x, r, g, b, scale, bias, true);
  else NormalizeRowPlanarScalar(rgb + 3 * x, w - x, r + x, g + x, b + x, scale, bias);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's _mm512_undefined_* (see resample.cc)
#endif
// NormalizeRowPlanarAvx2 with 16-float vectors: each store is a whole 64-byte line, which a streaming
// store writes out at once. Streams when the three rows are 64-byte aligned (and w % 16 == 0 when
// mirrored); the tail of the row as AVX2 does it.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void NormalizeRowPlanarAvx512(const uint8_t* rgb, size_t w,
                                                                                   float* r, float* g, float* b,
                                                                                   const float scale[3],
                                                                                   const float bias[3], bool rev) {
  const __m512 sc[3] = {_mm512_set1_ps(scale[0]), _mm512_set1_ps(scale[1]), _mm512_set1_ps(scale[2])};
  const __m512 bi[3] = {_mm512_set1_ps(bias[0]), _mm512_set1_ps(bias[1]), _mm512_set1_ps(bias[2])};
  const __m512i reverse = _mm512_setr_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const bool stream = ((reinterpret_cast<uintptr_t>(r) | reinterpret_cast<uintptr_t>(g) | reinterpret_cast<uintptr_t>(b)) & 63) == 0 &&
                      (!rev || w % 16 == 0);
  float* out[3] = {r, g, b};
  size_t x = 0;
  for (; x + 16 <= w; x += 16) {
    __m128i ch[3];
    Split16(rgb + 3 * x, ch);
    const size_t o = rev ? w - x - 16 : x;
    for (int k = 0; k < 3; ++k) {
      __m512 v = _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(ch[k])), sc[k]), bi[k]);
      if (rev) v = _mm512_permutexvar_ps(reverse, v);
      if (stream) _mm512_stream_ps(out[k] + o, v);
      else _mm512_storeu_ps(out[k] + o, v);
    }
  }
  if (x == w) return;  // rows of a multiple of 16 (CIFAR's 32): no calls for an empty tail
  if (rev) NormalizeRowPlanarAvx2(rgb + 3 * x, w - x, r, g, b, scale, bias, true);
  else NormalizeRowPlanarAvx2(rgb + 3 * x, w - x, r + x, g + x, b + x, scale, bias, false);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace

void NormalizeRowPlanar(const uint8_t* rgb, size_t w, float* r, float* g, float* b, const float scale[3],
                        const float bias[3], bool reverse) {
  if (UseAvx512()) return NormalizeRowPlanarAvx512(rgb, w, r, g, b, scale, bias, reverse);
  if (UseAvx2()) return NormalizeRowPlanarAvx2(rgb, w, r, g, b, scale, bias, reverse);
  NormalizeRowPlanarScalar(rgb, w, r, g, b, scale, bias, reverse);
}

void StreamFence() { _mm_sfence(); }

#else

void StreamFence() {}

void NormalizeRowPlanar(const uint8_t* rgb, size_t w, float* r, float* g, float* b, const float scale[3],
                        const float bias[3], bool reverse) {
  NormalizeRowPlanarScalar(rgb, w, r, g, b, scale, bias, reverse);
}

#endif

}  // namespace dsc::kernels
