// The resampler's AVX2 and AVX-512 passes (kernels/resample_x86.h). Every product and sum is the
// scalar reference's (kernels/resample.cc) modulo 2^32, so the bytes are the same.
#include "kernels/resample_x86.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>
#include <type_traits>

namespace dsc::kernels::resample_internal {

// FillAxis<kBilinear> four outputs at a time, one per 64-bit lane: on each lane the same IEEE
// operations in the same order as ResampleSpanOf, ResampleTaps and ResampleFixed (no FMA), the taps
// past an output's count weighing +0.0 (the sum stays the same; k = 0 as in the padding). Fills outputs
// [0, returned) (a multiple of 4); a group with more taps than the bound is left to the scalar loop.
__attribute__((target("avx2"))) int FillBilinearAvx2(int in_size, float in0, float in1, int out_size, int o0, int n,
                                                     int shift, bool mirror, ResampleAxis* a) {
  const double scale = double(in1 - in0) / out_size;
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = ResampleSupport(ResampleFilter::kBilinear) * filterscale;
  const int ks = a->ksize;
  // No output has more than floor(2 * support) + 1 taps, + 1 for the rounding of its edges (checked).
  const int nt = int(2 * support) + 2 < ks ? int(2 * support) + 2 : ks;
  if (nt > 16) return 0;
  const __m256d vscale = _mm256_set1_pd(scale), vin0 = _mm256_set1_pd(double(in0)), half = _mm256_set1_pd(0.5);
  const __m256d vsupport = _mm256_set1_pd(support), vss = _mm256_set1_pd(1.0 / filterscale);
  const __m256d one = _mm256_set1_pd(1.0), zero = _mm256_setzero_pd(), sign = _mm256_set1_pd(-0.0);
  const __m256d q22 = _mm256_set1_pd(double(1 << kResampleBits));
  const __m128i lo = _mm_setzero_si128(), hi = _mm_set1_epi32(in_size);
  const __m128i lane = mirror ? _mm_setr_epi32(0, -1, -2, -3) : _mm_setr_epi32(0, 1, 2, 3);
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m128i xx = _mm_add_epi32(_mm_set1_epi32(o0 + (mirror ? n - 1 - i : i)), lane);
    const __m256d center = _mm256_add_pd(vin0, _mm256_mul_pd(_mm256_add_pd(_mm256_cvtepi32_pd(xx), half), vscale));
    const __m128i xmin = _mm_max_epi32(_mm256_cvttpd_epi32(_mm256_add_pd(_mm256_sub_pd(center, vsupport), half)), lo);
    const __m128i xmax = _mm_min_epi32(_mm256_cvttpd_epi32(_mm256_add_pd(_mm256_add_pd(center, vsupport), half)), hi);
    const __m128i count = _mm_sub_epi32(xmax, xmin);
    if (_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(count, _mm_set1_epi32(nt))))) break;
    __m256d w[16];
    __m256d ww = zero;
    for (int t = 0; t < nt; ++t) {
      const __m128i xt = _mm_add_epi32(xmin, _mm_set1_epi32(t));
      const __m256d x = _mm256_mul_pd(_mm256_add_pd(_mm256_sub_pd(_mm256_cvtepi32_pd(xt), center), half), vss);
      const __m256d ax = _mm256_andnot_pd(sign, x);
      const __m256d v = _mm256_and_pd(_mm256_cmp_pd(ax, one, _CMP_LT_OQ), _mm256_sub_pd(one, ax));
      const __m256d real = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm_cmpgt_epi32(count, _mm_set1_epi32(t))));
      w[t] = _mm256_and_pd(real, v);
      ww = _mm256_add_pd(ww, w[t]);
    }
    const __m256d nonzero = _mm256_cmp_pd(ww, zero, _CMP_NEQ_UQ);
    alignas(16) int32_t k[16][4];
    for (int t = 0; t < nt; ++t) {
      const __m256d wt = _mm256_blendv_pd(w[t], _mm256_div_pd(w[t], ww), nonzero);
      const __m256d p = _mm256_mul_pd(wt, q22);
      const __m256d neg = _mm256_cmp_pd(wt, zero, _CMP_LT_OQ);
      const __m256d r = _mm256_blendv_pd(_mm256_add_pd(half, p), _mm256_add_pd(_mm256_sub_pd(zero, half), p), neg);
      _mm_store_si128(reinterpret_cast<__m128i*>(k[t]), _mm256_cvttpd_epi32(r));
    }
    alignas(16) int32_t first[4], cnt[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(first), xmin);
    _mm_store_si128(reinterpret_cast<__m128i*>(cnt), count);
    for (int j = 0; j < 4; ++j) {
      a->first[i + j] = first[j] + shift;
      a->count[i + j] = cnt[j] < 0 ? 0 : cnt[j];
      int32_t* kj = &a->k[size_t(i + j) * ks];
      for (int t = 0; t < nt; ++t) kj[t] = k[t][j];
      for (int t = nt; t < ks; ++t) kj[t] = 0;
    }
  }
  return i;
}

// Calls f(std::integral_constant<int, N>{}) with N the tap count when it is 1..6 (the loops unroll), else
// with N = 0 (the count is read at run time).
template <class F>
inline void WithTaps(int taps, F&& f) {
  switch (taps) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 5: return f(std::integral_constant<int, 5>{});
    case 6: return f(std::integral_constant<int, 6>{});
    default: return f(std::integral_constant<int, 0>{});
  }
}

// The AVX2 passes. Every product and sum is the scalar one modulo 2^32 (integer adds in any order), so
// the bytes are the same as the reference's.

// The horizontal pass works on blocks of 8 rows turned on their side, so that it becomes the vertical
// pass' problem: the block is transposed into T, where source byte j (pixel j / 3, channel j % 3) of
// the 8 rows is the 8 bytes T[8j .. 8j + 7]. An output pixel is then, per channel, a sum over taps of
// 8-lane int32 vectors times a broadcast weight (vpmulld: the exact 32-bit products), written to U in
// the same sideways layout and transposed back into the 8 output rows. Every weight is applied to 8
// rows at once and no lane is wasted.

// T[8j + r] = rows[r][j] for j in [j0, j0 + 32): eight 32-byte loads, three rounds of unpacks.
__attribute__((target("avx2"))) inline void TransposeIn32(const uint8_t* const* rows, size_t j0, uint8_t* t) {
  __m256i a[8], b[8], c[8];
  for (int r = 0; r < 8; ++r) a[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[r] + j0));
  for (int r = 0; r < 8; r += 2) {
    b[r] = _mm256_unpacklo_epi8(a[r], a[r + 1]);      // per lane: bytes 0..7 of rows r, r + 1
    b[r + 1] = _mm256_unpackhi_epi8(a[r], a[r + 1]);  // bytes 8..15
  }
  for (int q = 0; q < 2; ++q) {  // rows 0..3, then 4..7
    const __m256i* x = b + 4 * q;
    c[4 * q + 0] = _mm256_unpacklo_epi16(x[0], x[2]);  // bytes 0..3 of 4 rows
    c[4 * q + 1] = _mm256_unpackhi_epi16(x[0], x[2]);  // 4..7
    c[4 * q + 2] = _mm256_unpacklo_epi16(x[1], x[3]);  // 8..11
    c[4 * q + 3] = _mm256_unpackhi_epi16(x[1], x[3]);  // 12..15
  }
  uint8_t* o = t + 8 * j0;
  for (int i = 0; i < 4; ++i) {
    const __m256i lo = _mm256_unpacklo_epi32(c[i], c[i + 4]);  // bytes 4i, 4i + 1 of the 8 rows
    const __m256i hi = _mm256_unpackhi_epi32(c[i], c[i + 4]);  // bytes 4i + 2, 4i + 3
    // Low lanes hold bytes j0 .. j0 + 15, high lanes j0 + 16 .. j0 + 31.
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 32 * i), _mm256_permute2x128_si256(lo, hi, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 128 + 32 * i), _mm256_permute2x128_si256(lo, hi, 0x31));
  }
}

// rows[r][j] = U[8j + r] for j in [0, 32) (rows[r] points at byte j0 of its row): the inverse. In each
// lane the two 8-byte columns become 8 16-bit (column, column + 1) pairs, then an 8x8 16-bit transpose.
__attribute__((target("avx2"))) inline void TransposeOut32(const uint8_t* u, uint8_t* const* rows) {
  const __m256i pair = _mm256_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15,  //
                                        0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
  __m256i x[8], y[8], z[8];
  for (int i = 0; i < 8; ++i) {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(u + 16 * i));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(u + 128 + 16 * i));
    x[i] = _mm256_shuffle_epi8(_mm256_setr_m128i(lo, hi), pair);  // 16-bit element r: row r, bytes 2i, 2i + 1
  }
  for (int i = 0; i < 8; i += 2) {
    y[i] = _mm256_unpacklo_epi16(x[i], x[i + 1]);      // rows 0..3
    y[i + 1] = _mm256_unpackhi_epi16(x[i], x[i + 1]);  // rows 4..7
  }
  for (int q = 0; q < 2; ++q) {
    const __m256i* v = y + 4 * q;
    z[4 * q + 0] = _mm256_unpacklo_epi32(v[0], v[2]);  // rows 0, 1
    z[4 * q + 1] = _mm256_unpackhi_epi32(v[0], v[2]);  // rows 2, 3
    z[4 * q + 2] = _mm256_unpacklo_epi32(v[1], v[3]);  // rows 4, 5
    z[4 * q + 3] = _mm256_unpackhi_epi32(v[1], v[3]);  // rows 6, 7
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(rows[2 * i]), _mm256_unpacklo_epi64(z[i], z[i + 4]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(rows[2 * i + 1]), _mm256_unpackhi_epi64(z[i], z[i + 4]));
  }
}

// Output pixels [0, ow) of one sideways block: for each, 3 channels x 8 rows of Q22 sums, clipped and
// stored as 24 bytes (R of the 8 rows, G, B) at u + 24x. kTaps > 0 is the tap count known at compile
// time; 0 reads it from h.
template <int kTaps>
__attribute__((target("avx2"))) void HorizontalBlock(const uint8_t* t, const HorizontalSimd& h, int ow, uint8_t* u) {
  const __m256i bias = _mm256_set1_epi32(int32_t(ResampleBias()));
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const int taps = kTaps > 0 ? kTaps : h.taps;
  const int32_t* kx = h.k.data();
  for (int x = 0; x < ow; ++x, kx += taps) {
    const uint8_t* s = t + size_t(h.start[x]) * 24;
    __m256i r = bias, g = bias, b = bias;
    for (int i = 0; i < taps; ++i, s += 24) {
      const __m256i k = _mm256_set1_epi32(kx[i]);
      r = _mm256_add_epi32(r, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s))), k));
      g = _mm256_add_epi32(g, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + 8))), k));
      b = _mm256_add_epi32(b, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + 16))), k));
    }
    // Arithmetic shift, then the saturating packs clamp to 0..255 exactly like ResampleClip8.
    r = _mm256_srai_epi32(r, kResampleBits);
    g = _mm256_srai_epi32(g, kResampleBits);
    b = _mm256_srai_epi32(b, kResampleBits);
    // Dwords R0-3 G0-3 B0-3 B0-3 | R4-7 G4-7 B4-7 B4-7, reordered to R0-7 G0-7 B0-7 (and 8 spare bytes,
    // overwritten by the next pixel or landing in U's padding).
    const __m256i bytes = _mm256_packus_epi16(_mm256_packs_epi32(r, g), _mm256_packs_epi32(b, b));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(u + 24 * size_t(x)), _mm256_permutevar8x32_epi32(bytes, order));
  }
}

void HorizontalAvx2(const uint8_t* in, size_t in_stride, int rows, const Plan& p, uint8_t* out, int ow) {
  if (!p.hs_ok) return HorizontalScalar(in, in_stride, rows, p, out, ow);
  const HorizontalSimd& h = p.hs;
  const size_t in_bytes = size_t(h.width) * 3, out_bytes = size_t(ow) * 3;
  in += size_t(h.x0) * 3;
  const size_t in_full = in_bytes & ~size_t(31), out_full = out_bytes & ~size_t(31);
  // Sideways buffers, whole 32-byte column groups plus the spare 8 bytes of the last pixel's store.
  thread_local std::vector<uint8_t> tbuf, ubuf;
  tbuf.resize(8 * ((in_bytes + 31) & ~size_t(31)));
  ubuf.resize(8 * ((out_bytes + 31) & ~size_t(31)) + 32);
  uint8_t* t = tbuf.data();
  uint8_t* u = ubuf.data();
  alignas(32) uint8_t in_tail[8][32] = {}, out_tail[8][32];
  for (int y0 = 0; y0 < rows; y0 += 8) {
    const int n = rows - y0 < 8 ? rows - y0 : 8;
    // A short last block repeats its last row; those results are not stored.
    const uint8_t* src[8];
    uint8_t* dst[8];
    for (int r = 0; r < 8; ++r) src[r] = in + size_t(y0 + (r < n ? r : n - 1)) * in_stride;
    for (size_t j = 0; j < in_full; j += 32) TransposeIn32(src, j, t);
    if (in_full < in_bytes) {
      const uint8_t* tail[8];
      for (int r = 0; r < 8; ++r) {
        std::memcpy(in_tail[r], src[r] + in_full, in_bytes - in_full);
        tail[r] = in_tail[r];
      }
      TransposeIn32(tail, 0, t + 8 * in_full);
    }
    WithTaps(h.taps, [&](auto k) { HorizontalBlock<decltype(k)::value>(t, h, ow, u); });
    for (size_t j = 0; j < out_full; j += 32) {
      for (int r = 0; r < 8; ++r) dst[r] = r < n ? out + size_t(y0 + r) * out_bytes + j : out_tail[r];
      TransposeOut32(u + 8 * j, dst);
    }
    if (out_full < out_bytes) {
      for (int r = 0; r < 8; ++r) dst[r] = out_tail[r];
      TransposeOut32(u + 8 * out_full, dst);
      for (int r = 0; r < n; ++r)
        std::memcpy(out + size_t(y0 + r) * out_bytes + out_full, out_tail[r], out_bytes - out_full);
    }
  }
}

// One output row, 32 bytes per step (four 8-lane int32 accumulators); the row's tail is scalar. kTaps > 0
// is the row's tap count known at compile time (the loop unrolls); 0 reads it from the axis.
template <int kTaps>
__attribute__((target("avx2"))) void VerticalAvx2Row(const uint8_t* in, size_t stride, const ResampleAxis& a,
                                                     uint8_t* out, int y) {
  const __m256i bias = _mm256_set1_epi32(int32_t(ResampleBias()));
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const size_t vec_end = stride & ~size_t(31);
  const uint8_t* s = in + size_t(a.first[y]) * stride;
  const int32_t* k = &a.k[size_t(y) * a.ksize];
  const int n = kTaps > 0 ? kTaps : a.count[y];
  uint8_t* o = out + size_t(y) * stride;
  for (size_t i = 0; i < vec_end; i += 32) {
    __m256i a0 = bias, a1 = bias, a2 = bias, a3 = bias;
    for (int t = 0; t < n; ++t) {
      const uint8_t* p = s + size_t(t) * stride + i;
      const __m256i kt = _mm256_set1_epi32(k[t]);
      a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))), kt));
      a1 = _mm256_add_epi32(a1, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8))), kt));
      a2 = _mm256_add_epi32(a2, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 16))), kt));
      a3 = _mm256_add_epi32(a3, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 24))), kt));
    }
    // Arithmetic shift, then the saturating packs clamp to 0..255 exactly like ResampleClip8.
    const __m256i w01 = _mm256_packs_epi32(_mm256_srai_epi32(a0, kResampleBits), _mm256_srai_epi32(a1, kResampleBits));
    const __m256i w23 = _mm256_packs_epi32(_mm256_srai_epi32(a2, kResampleBits), _mm256_srai_epi32(a3, kResampleBits));
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(w01, w23), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + i), bytes);
  }
  if (vec_end < stride) VerticalScalar(in, stride, a, out, y, y + 1, vec_end, stride);
}

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_epi32(), which -Wmaybe-uninitialized (and,
// for the lane shuffles, -Wuninitialized) reports as a use of an uninitialised value (a false positive:
// every lane is written).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
// VerticalAvx2Row with 16-lane vectors, 64 bytes per step (where AVX-512 runs at full width, twice the
// work per instruction); the row's last bytes with masked loads and store. The packs work within
// 128-bit lanes, so the bytes come out in an order (lane l: elements 4l..4l+3 of each accumulator) that
// `order` undoes.
template <int kTaps>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void VerticalAvx512Row(const uint8_t* in, size_t stride,
                                                                             const ResampleAxis& a, uint8_t* out,
                                                                             int y) {
  const __m512i bias = _mm512_set1_epi32(int32_t(ResampleBias()));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const uint8_t* s = in + size_t(a.first[y]) * stride;
  const int32_t* k = &a.k[size_t(y) * a.ksize];
  const int n = kTaps > 0 ? kTaps : a.count[y];
  uint8_t* o = out + size_t(y) * stride;
  for (size_t i = 0; i < stride; i += 64) {
    const size_t left = stride - i;
    const uint64_t m = left >= 64 ? ~uint64_t(0) : (uint64_t(1) << left) - 1;
    __m512i acc[4] = {bias, bias, bias, bias};
    for (int t = 0; t < n; ++t) {
      const uint8_t* p = s + size_t(t) * stride + i;
      const __m512i kt = _mm512_set1_epi32(k[t]);
      for (int g = 0; g < 4; ++g) {
        const __m128i v = left >= 64 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * g))
                                     : _mm_maskz_loadu_epi8(__mmask16(m >> (16 * g)), p + 16 * g);
        acc[g] = _mm512_add_epi32(acc[g], _mm512_mullo_epi32(_mm512_cvtepu8_epi32(v), kt));
      }
    }
    // Arithmetic shift, then the saturating packs clamp to 0..255 exactly like ResampleClip8.
    const __m512i w01 = _mm512_packs_epi32(_mm512_srai_epi32(acc[0], kResampleBits), _mm512_srai_epi32(acc[1], kResampleBits));
    const __m512i w23 = _mm512_packs_epi32(_mm512_srai_epi32(acc[2], kResampleBits), _mm512_srai_epi32(acc[3], kResampleBits));
    const __m512i bytes = _mm512_permutexvar_epi32(order, _mm512_packus_epi16(w01, w23));
    _mm512_mask_storeu_epi8(o + i, __mmask64(m), bytes);
  }
}

// The horizontal pass on blocks of 16 rows: the block turned on its side in one step, so that column
// j's 16 rows are the 16 bytes T16[16j ..] (source pixel p's three channels at 48p, 48p + 16, 48p + 32),
// the taps are 16-lane vectors, and each output pixel's 48 bytes are split back into the two 8-row
// layouts U that TransposeOut32 undoes.

// Within each 128-bit lane, the 16x16 byte matrix whose row r is lane q of a[r] is transposed in place
// (lane q of a[c] becomes column c): the classic four rounds of unpacks (8, 16, 32, 64 bits).
__attribute__((target("avx512f,avx512bw"))) inline void TransposeLanes16(__m512i* a) {
  __m512i b[16];
  for (int r = 0; r < 16; r += 2) {  // 16-bit pairs (rows r, r + 1): columns 0..7, then 8..15
    b[r] = _mm512_unpacklo_epi8(a[r], a[r + 1]);
    b[r + 1] = _mm512_unpackhi_epi8(a[r], a[r + 1]);
  }
  for (int g = 0; g < 4; ++g) {  // 32-bit groups of rows 4g..4g+3: a[4g + i] holds columns 4i..4i+3
    const __m512i* x = b + 4 * g;
    a[4 * g + 0] = _mm512_unpacklo_epi16(x[0], x[2]);
    a[4 * g + 1] = _mm512_unpackhi_epi16(x[0], x[2]);
    a[4 * g + 2] = _mm512_unpacklo_epi16(x[1], x[3]);
    a[4 * g + 3] = _mm512_unpackhi_epi16(x[1], x[3]);
  }
  for (int h = 0; h < 2; ++h)  // 64-bit groups of rows 8h..8h+7: b[8h + 2i + s] holds columns 4i + 2s, + 1
    for (int i = 0; i < 4; ++i) {
      b[8 * h + 2 * i] = _mm512_unpacklo_epi32(a[8 * h + i], a[8 * h + 4 + i]);
      b[8 * h + 2 * i + 1] = _mm512_unpackhi_epi32(a[8 * h + i], a[8 * h + 4 + i]);
    }
  for (int k = 0; k < 8; ++k) {  // all 16 rows
    a[2 * k] = _mm512_unpacklo_epi64(b[k], b[8 + k]);
    a[2 * k + 1] = _mm512_unpackhi_epi64(b[k], b[8 + k]);
  }
}

// The 4x4 transpose of the 128-bit lanes of e[0], e[s], e[2s], e[3s]: lane i of output o is lane o of e[i * s].
__attribute__((target("avx512f"))) inline void TransposeQuads(const __m512i* e, int s, __m512i* out) {
  const __m512i t0 = _mm512_shuffle_i64x2(e[0], e[s], 0x44), t1 = _mm512_shuffle_i64x2(e[0], e[s], 0xEE);
  const __m512i t2 = _mm512_shuffle_i64x2(e[2 * s], e[3 * s], 0x44), t3 = _mm512_shuffle_i64x2(e[2 * s], e[3 * s], 0xEE);
  out[0] = _mm512_shuffle_i64x2(t0, t2, 0x88);
  out[1] = _mm512_shuffle_i64x2(t0, t2, 0xDD);
  out[2] = _mm512_shuffle_i64x2(t1, t3, 0x88);
  out[3] = _mm512_shuffle_i64x2(t1, t3, 0xDD);
}

// T16[16j + r] = rows[r][j] for r < 16 and j in [j0, j0 + 64): sixteen 64-byte loads, TransposeLanes16
// (column 16q + c in lane q of register c), then lanes regrouped so that each store writes 4 whole columns.
__attribute__((target("avx512f,avx512bw"))) inline void TransposeIn16x64(const uint8_t* const* rows, size_t j0,
                                                                          uint8_t* t16) {
  __m512i a[16], q[4];
  for (int r = 0; r < 16; ++r) a[r] = _mm512_loadu_si512(rows[r] + j0);
  TransposeLanes16(a);
  uint8_t* o = t16 + 16 * j0;
  for (int m = 0; m < 4; ++m) {
    TransposeQuads(a + 4 * m, 1, q);  // q[l]: columns 16l + 4m .. 16l + 4m + 3
    for (int l = 0; l < 4; ++l) _mm512_storeu_si512(o + 16 * (16 * l + 4 * m), q[l]);
  }
}

// The inverse: rows[r][j] = U16[16j + r] for r < 16 and j in [0, 64) (rows[r] points at the block's
// first byte of its row).
__attribute__((target("avx512f,avx512bw"))) inline void TransposeOut16x64(const uint8_t* u16, uint8_t* const* rows) {
  __m512i l[16], a[16];
  for (int k = 0; k < 16; ++k) l[k] = _mm512_loadu_si512(u16 + 64 * k);  // columns 4k .. 4k + 3
  for (int m = 0; m < 4; ++m) TransposeQuads(l + m, 4, a + 4 * m);      // lane q of a[c]: column 16q + c
  TransposeLanes16(a);
  for (int r = 0; r < 16; ++r) _mm512_storeu_si512(rows[r], a[r]);
}

template <int kTaps>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void HorizontalBlock16(const uint8_t* t, const HorizontalSimd& h,
                                                                             int ow, uint8_t* u16) {
  const __m512i bias = _mm512_set1_epi32(int32_t(ResampleBias()));
  // After the packs, 128-bit lane l holds rows 4l..4l+3 as dwords R, G, B, B; the permutation gathers
  // R of rows 0..15, then G, then B (and a spare copy of B).
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const int taps = kTaps > 0 ? kTaps : h.taps;
  const int32_t* kx = h.k.data();
  for (int x = 0; x < ow; ++x, kx += taps) {
    const uint8_t* s = t + size_t(h.start[x]) * 48;
    __m512i r = bias, g = bias, b = bias;
    for (int i = 0; i < taps; ++i, s += 48) {
      const __m512i k = _mm512_set1_epi32(kx[i]);
      r = _mm512_add_epi32(r, _mm512_mullo_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s))), k));
      g = _mm512_add_epi32(g, _mm512_mullo_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16))), k));
      b = _mm512_add_epi32(b, _mm512_mullo_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32))), k));
    }
    r = _mm512_srai_epi32(r, kResampleBits);
    g = _mm512_srai_epi32(g, kResampleBits);
    b = _mm512_srai_epi32(b, kResampleBits);
    const __m512i bytes = _mm512_permutexvar_epi32(order, _mm512_packus_epi16(_mm512_packs_epi32(r, g), _mm512_packs_epi32(b, b)));
    // 48 bytes (plus 16 spare, overwritten by the next pixel or landing in U16's padding).
    _mm512_storeu_si512(u16 + 48 * size_t(x), bytes);
  }
}

void HorizontalAvx512(const uint8_t* in, size_t in_stride, int rows, const Plan& p, uint8_t* out, int ow) {
  if (!p.hs_ok) return HorizontalScalar(in, in_stride, rows, p, out, ow);
  const HorizontalSimd& h = p.hs;
  const size_t in_bytes = size_t(h.width) * 3, out_bytes = size_t(ow) * 3;
  in += size_t(h.x0) * 3;
  const size_t in_full = in_bytes & ~size_t(63), out_full = out_bytes & ~size_t(63);
  const size_t in_cols = (in_bytes + 63) & ~size_t(63), out_cols = (out_bytes + 63) & ~size_t(63);
  thread_local std::vector<uint8_t> tbuf, ubuf;
  tbuf.resize(16 * in_cols);
  ubuf.resize(16 * out_cols + 64);  // + the spare bytes of the last pixel's store
  uint8_t* t16 = tbuf.data();
  uint8_t* u16 = ubuf.data();
  alignas(64) uint8_t in_tail[16][64] = {}, out_tail[16][64];
  for (int y0 = 0; y0 < rows; y0 += 16) {
    const int n = rows - y0 < 16 ? rows - y0 : 16;
    // A short last block repeats its last row; those results are not stored.
    const uint8_t* src[16];
    for (int r = 0; r < 16; ++r) src[r] = in + size_t(y0 + (r < n ? r : n - 1)) * in_stride;
    for (size_t j = 0; j < in_full; j += 64) TransposeIn16x64(src, j, t16);
    if (in_full < in_bytes) {
      const uint8_t* tail[16];
      for (int r = 0; r < 16; ++r) {
        std::memcpy(in_tail[r], src[r] + in_full, in_bytes - in_full);
        tail[r] = in_tail[r];
      }
      TransposeIn16x64(tail, 0, t16 + 16 * in_full);
    }
    WithTaps(h.taps, [&](auto k) { HorizontalBlock16<decltype(k)::value>(t16, h, ow, u16); });
    uint8_t* dst[16];
    for (size_t j = 0; j < out_full; j += 64) {
      for (int r = 0; r < 16; ++r) dst[r] = r < n ? out + size_t(y0 + r) * out_bytes + j : out_tail[r];
      TransposeOut16x64(u16 + 16 * j, dst);
    }
    if (out_full < out_bytes) {
      for (int r = 0; r < 16; ++r) dst[r] = out_tail[r];
      TransposeOut16x64(u16 + 16 * out_full, dst);
      for (int r = 0; r < n; ++r) std::memcpy(out + size_t(y0 + r) * out_bytes + out_full, out_tail[r], out_bytes - out_full);
    }
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

void VerticalAvx512(const uint8_t* in, size_t stride, const ResampleAxis& a, uint8_t* out, int y0, int y1) {
  for (int y = y0; y < y1; ++y) {
    WithTaps(a.count[y], [&](auto k) { VerticalAvx512Row<decltype(k)::value>(in, stride, a, out, y); });
  }
}

void VerticalAvx2(const uint8_t* in, size_t stride, const ResampleAxis& a, uint8_t* out, int y0, int y1) {
  for (int y = y0; y < y1; ++y) {
    WithTaps(a.count[y], [&](auto k) { VerticalAvx2Row<decltype(k)::value>(in, stride, a, out, y); });
  }
}

}  // namespace dsc::kernels::resample_internal

#endif
