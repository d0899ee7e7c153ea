#include "kernels/color.h"

#include <algorithm>

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

void InterleaveRowScalar(const uint8_t* r, const uint8_t* g, const uint8_t* b, size_t w, uint8_t* rgb, bool reverse) {
  for (size_t x = 0; x < w; ++x) {
    const size_t s = reverse ? w - 1 - x : x;
    rgb[3 * x] = r[s];
    rgb[3 * x + 1] = g[s];
    rgb[3 * x + 2] = b[s];
  }
}

void MirrorRgbRowScalar(const uint8_t* in, size_t w, uint8_t* out) {
  for (size_t x = 0; x < w; ++x)
    for (size_t c = 0; c < 3; ++c) out[3 * x + c] = in[3 * (w - 1 - x) + c];
}

void YccRowToFloatScalar(const YccRow& q, const uint8_t fill[3], const float scale[3], const float bias[3], bool mirror,
                         float* r, float* g, float* b) {
  float* out[3] = {r, g, b};
  for (int x = 0; x < q.w; ++x) {
    uint8_t px[3] = {fill[0], fill[1], fill[2]};
    if (x >= q.lo && x < q.hi && !(x >= q.cut_from && x < q.cut_to)) {
      const int s = x - q.shift;
      if (q.rgb) px[0] = q.y[s], px[1] = q.cb[s], px[2] = q.cr[s];
      else YccToRgb(q.y[s], q.cb[s >> q.hshift], q.cr[s >> q.hshift], &px[0], &px[1], &px[2]);
    }
    for (int c = 0; c < 3; ++c) out[c][mirror ? q.w - 1 - x : x] = Normalize(px[c], scale[c], bias[c]);
  }
}

void YccRowToRgbScalar(const YccRow& q, const uint8_t fill[3], bool mirror, uint8_t* rgb) {
  for (int x = 0; x < q.w; ++x) {
    uint8_t* px = rgb + 3 * (mirror ? q.w - 1 - x : x);
    px[0] = fill[0], px[1] = fill[1], px[2] = fill[2];
    if (x >= q.lo && x < q.hi && !(x >= q.cut_from && x < q.cut_to)) {
      const int s = x - q.shift;
      if (q.rgb) px[0] = q.y[s], px[1] = q.cb[s], px[2] = q.cr[s];
      else YccToRgb(q.y[s], q.cb[s >> q.hshift], q.cr[s >> q.hshift], &px[0], &px[1], &px[2]);
    }
  }
}

#if defined(__x86_64__)

namespace {

// A permutation of 48 bytes held in three 16-byte blocks, as byte shuffles: output block j is the OR
// of the three input blocks each shuffled by mask[j][k] (lanes that come from another block are -1,
// which pshufb turns to zero). Sixteen RGB pixels are 48 bytes, so interleaving 16 pixels of three
// planes and mirroring 16 pixels are each one such permutation.
struct Shuffle48 {
  alignas(16) int8_t mask[3][3][16];
};

enum class Move { kInterleave, kInterleaveReversed, kMirror };

constexpr Shuffle48 MakeShuffle48(Move move) {
  Shuffle48 s{};
  for (int o = 0; o < 48; ++o) {
    const int pixel = o / 3, channel = o % 3;
    int block = 0, lane = 0;  // where output byte o comes from
    switch (move) {
      case Move::kInterleave: block = channel, lane = pixel; break;
      case Move::kInterleaveReversed: block = channel, lane = 15 - pixel; break;
      case Move::kMirror: block = (3 * (15 - pixel) + channel) / 16, lane = (3 * (15 - pixel) + channel) % 16; break;
    }
    for (int k = 0; k < 3; ++k) s.mask[o / 16][k][o % 16] = int8_t(k == block ? lane : -1);
  }
  return s;
}

constexpr Shuffle48 kInterleave = MakeShuffle48(Move::kInterleave);
constexpr Shuffle48 kInterleaveReversed = MakeShuffle48(Move::kInterleaveReversed);
constexpr Shuffle48 kMirror = MakeShuffle48(Move::kMirror);

__attribute__((target("avx2"))) inline void Permute48(__m128i a, __m128i b, __m128i c, const Shuffle48& s, uint8_t* out) {
  for (int j = 0; j < 3; ++j) {
    const auto* m = reinterpret_cast<const __m128i*>(s.mask[j]);
    const __m128i v = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, _mm_load_si128(m)), _mm_shuffle_epi8(b, _mm_load_si128(m + 1))),
                                   _mm_shuffle_epi8(c, _mm_load_si128(m + 2)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16 * j), v);
  }
}

inline __m128i Load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

__attribute__((target("avx2"))) void InterleaveRowAvx2(const uint8_t* r, const uint8_t* g, const uint8_t* b, size_t w,
                                                        uint8_t* rgb, bool reverse) {
  size_t x = 0;
  for (; x + 16 <= w; x += 16) {  // output pixels x..x+15
    const size_t s = reverse ? w - 16 - x : x;
    Permute48(Load16(r + s), Load16(g + s), Load16(b + s), reverse ? kInterleaveReversed : kInterleave, rgb + 3 * x);
  }
  // The rest: output pixels x..w-1 are source pixels x..w-1, or w-1-x..0 reversed.
  if (reverse) InterleaveRowScalar(r, g, b, w - x, rgb + 3 * x, true);
  else InterleaveRowScalar(r + x, g + x, b + x, w - x, rgb + 3 * x, false);
}

__attribute__((target("avx2"))) void MirrorRgbRowAvx2(const uint8_t* in, size_t w, uint8_t* out) {
  size_t x = 0;
  for (; x + 16 <= w; x += 16) {  // output pixels x..x+15 are input pixels w-1-x..w-16-x
    const uint8_t* p = in + 3 * (w - 16 - x);
    Permute48(Load16(p), Load16(p + 16), Load16(p + 32), kMirror, out + 3 * x);
  }
  MirrorRgbRowScalar(in, w - x, out + 3 * x);  // output pixels x..w-1 are input pixels w-1-x..0
}

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

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's _mm512_undefined_* (see resample.cc)
#endif
// The colour arithmetic of 16 pixels held as int16 (chroma already upsampled), shared by the AVX-512
// and AVX2 steps below.
//
// YccToRgb's products, 16-bit: each constant splits into a multiple of 65536, which only adds a
// multiple of c to the result, and a rest that fits an int16 (c = cb - 128 or cr - 128, -128..127):
//   (91881 c + 32768) >> 16  = c  + ((26345 c + 32768) >> 16)         91881 = 65536 + 26345
//   (116130 c + 32768) >> 16 = 2c + ((-14942 c + 32768) >> 16)        116130 = 2 x 65536 - 14942
//   (-22554 cb - 46802 cr + 32768) >> 16 = -cr + ((-22554 cb + 18734 cr + 32768) >> 16)
// A single product's rounded high half is one mulhrs, (c k' + 16384) >> 15, with k' = k / 2 for an even
// k; for the odd 26345, k' = 13173 gives the same result for every c in -128..127 (as do 13172..13178),
// not for every int16. The green sum is formed exactly in 32 bits with madd. Every (y, cb, cr) is
// checked against YccToRgb (tests/kernels_test.cc), which covers each c of both products.
struct YccMath {
  __m256i c128, zero, v255, kr, kb, kg, half;

  __attribute__((target("avx2"))) YccMath() {
    c128 = _mm256_set1_epi16(128), zero = _mm256_setzero_si256(), v255 = _mm256_set1_epi16(255);
    kr = _mm256_set1_epi16(13173), kb = _mm256_set1_epi16(-14942 / 2);  // mulhrs factors
    kg = _mm256_set1_epi32(int32_t(uint32_t(uint16_t(int16_t(-22554))) | (uint32_t(18734) << 16)));  // (cb, cr) pairs
    half = _mm256_set1_epi32(32768);
  }
  // Y, CB, CR: 0..255 as int16; rgb: the colours as int16, in 0..255 when `clamp` (else -179..434,
  // for a caller whose pack saturates anyway).
  __attribute__((target("avx2"))) void Colours(__m256i Y, __m256i CB, __m256i CR, __m256i rgb[3], bool clamp) const {
    CB = _mm256_sub_epi16(CB, c128);
    CR = _mm256_sub_epi16(CR, c128);
    const __m256i R = _mm256_add_epi16(_mm256_add_epi16(Y, CR), _mm256_mulhrs_epi16(CR, kr));
    const __m256i B = _mm256_add_epi16(_mm256_add_epi16(Y, _mm256_add_epi16(CB, CB)), _mm256_mulhrs_epi16(CB, kb));
    // Green: madd of the (cb, cr) pairs, in 32 bits; unpack and pack work within 128-bit lanes alike,
    // so the pack restores the pixel order.
    const __m256i lo = _mm256_srai_epi32(_mm256_add_epi32(_mm256_madd_epi16(_mm256_unpacklo_epi16(CB, CR), kg), half), 16);
    const __m256i hi = _mm256_srai_epi32(_mm256_add_epi32(_mm256_madd_epi16(_mm256_unpackhi_epi16(CB, CR), kg), half), 16);
    const __m256i G = _mm256_add_epi16(_mm256_sub_epi16(Y, CR), _mm256_packs_epi32(lo, hi));
    if (!clamp) {
      rgb[0] = R, rgb[1] = G, rgb[2] = B;
      return;
    }
    rgb[0] = _mm256_min_epi16(_mm256_max_epi16(R, zero), v255);
    rgb[1] = _mm256_min_epi16(_mm256_max_epi16(G, zero), v255);
    rgb[2] = _mm256_min_epi16(_mm256_max_epi16(B, zero), v255);
  }
};

// YccRow's pixels 16 at a time with AVX-512 (w % 16 == 0): which lanes of a step take a source pixel,
// and their colours as int16 in 0..255 (other lanes hold some colour, replaced by the caller's fill).
// Source bytes are read with masked loads that stop at the row's ends.
struct YccSteps {
  YccMath math;
  __m256i pair[2];
  __m512i index, lo, hi, cut_from, cut_to, chroma_end;  // index: 0..15 as int32

  // The constants of rows of w pixels at hshift; Row sets a row's bounds.
  __attribute__((target("avx512f,avx512bw,avx512vl"))) YccSteps(int w, int hshift) {
    const __m256i lane = _mm256_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    // Chroma sample of lane i at hshift 1, relative to the first: (i + parity of the first pixel) / 2.
    pair[0] = _mm256_srli_epi16(lane, 1);
    pair[1] = _mm256_srli_epi16(_mm256_add_epi16(lane, _mm256_set1_epi16(1)), 1);
    index = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    chroma_end = _mm512_set1_epi32((w + (1 << hshift) - 1) >> hshift);
  }
  __attribute__((target("avx512f,avx512bw,avx512vl"))) void Row(const YccRow& q) {
    lo = _mm512_set1_epi32(q.lo), hi = _mm512_set1_epi32(q.hi);
    cut_from = _mm512_set1_epi32(q.cut_from), cut_to = _mm512_set1_epi32(q.cut_to);
  }
  // The lanes of the step at output pixel ox whose source pixel lies in the row ([lo, hi): the mask of
  // the luma load) and, in *take, those of them that are not cut: vector compares, no branches.
  __attribute__((target("avx512f,avx512bw,avx512vl"))) __mmask16 Lanes(int ox, __mmask16* take) const {
    const __m512i x = _mm512_add_epi32(index, _mm512_set1_epi32(ox));
    const __mmask16 in = _mm512_mask_cmplt_epi32_mask(_mm512_cmpge_epi32_mask(x, lo), x, hi);
    *take = in & __mmask16(~_mm512_mask_cmplt_epi32_mask(_mm512_cmpge_epi32_mask(x, cut_from), x, cut_to));
    return in;
  }
  // `in`: Lanes(ox).
  __attribute__((target("avx512f,avx512bw,avx512vl"))) void Colours(const YccRow& q, int ox, __mmask16 in, __m256i rgb[3]) const {
    const int s = ox - q.shift;                  // the source pixel of lane 0
    if (q.rgb) {
      const uint8_t* row[3] = {q.y, q.cb, q.cr};
      for (int c = 0; c < 3; ++c)
        rgb[c] = _mm256_cvtepu8_epi16(_mm_maskz_loadu_epi8(
            in, reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(row[c]) + uintptr_t(intptr_t(s)))));
      return;
    }
    const int c0 = s >> q.hshift;                // its chroma sample (s may be negative: arithmetic shift)
    const uintptr_t ys = reinterpret_cast<uintptr_t>(q.y) + uintptr_t(intptr_t(s));
    const uintptr_t co = uintptr_t(intptr_t(c0));
    const __m256i Y = _mm256_cvtepu8_epi16(_mm_maskz_loadu_epi8(in, reinterpret_cast<const void*>(ys)));
    // The chroma bytes c0 + j that lie in the chroma row.
    const __m512i cj = _mm512_add_epi32(index, _mm512_set1_epi32(c0));
    const __mmask16 cin = _mm512_mask_cmplt_epi32_mask(_mm512_cmpge_epi32_mask(cj, _mm512_setzero_si512()), cj, chroma_end);
    __m256i CB = _mm256_cvtepu8_epi16(_mm_maskz_loadu_epi8(cin, reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(q.cb) + co)));
    __m256i CR = _mm256_cvtepu8_epi16(_mm_maskz_loadu_epi8(cin, reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(q.cr) + co)));
    if (q.hshift) {
      CB = _mm256_permutexvar_epi16(pair[s & 1], CB);
      CR = _mm256_permutexvar_epi16(pair[s & 1], CR);
    }
    math.Colours(Y, CB, CR, rgb, /*clamp=*/true);
  }
};

// The same steps with AVX2 (the AMD EPYCs before Zen 4 have no AVX-512). Lane masks are int16
// compares (rows of at most kAvx2MaxWidth pixels). Instead of masked loads, 16 bytes are loaded inside
// the row and moved into their lanes with a byte shuffle, so nothing outside the row is read. A
// mirrored row's steps hold their pixels in reverse (lane i is pixel 15 - i of the step, through the
// shuffles' and the compares' indices), so their stores need no permutation. With `halves`, lanes 4-7
// and 8-11 trade pixels as well, so that unpacking the int16 lanes with zeros (which works within
// 128-bit halves) yields the step's pixels 0-7 and 8-15 as int32 in order. Each step's colours come
// back with the fill already in the lanes that take none.
constexpr int kAvx2MaxWidth = 32752;
struct YccSteps2 {
  YccMath math;
  __m256i index, lo, hi, cut_from, cut_to, fill[3];  // int16 lanes
  __m128i iota, pair[2];  // pshufb: the step's pixel of lane i; its chroma byte at hshift 1 by parity

  __attribute__((target("avx2"))) YccSteps2(const uint8_t f[3], bool mirror, bool halves) {
    alignas(32) int16_t ix[16];
    alignas(16) int8_t io[16], pr[2][16];
    for (int i = 0; i < 16; ++i) {
      const int j = halves && ((i & 4) != 0) != ((i & 8) != 0) ? i ^ 12 : i;  // the output position of lane i
      const int k = mirror ? 15 - j : j;
      ix[i] = int16_t(k), io[i] = int8_t(k), pr[0][i] = int8_t(k / 2), pr[1][i] = int8_t((k + 1) / 2);
    }
    index = _mm256_load_si256(reinterpret_cast<const __m256i*>(ix));
    iota = _mm_load_si128(reinterpret_cast<const __m128i*>(io));
    for (int j = 0; j < 2; ++j) pair[j] = _mm_load_si128(reinterpret_cast<const __m128i*>(pr[j]));
    for (int c = 0; c < 3; ++c) fill[c] = _mm256_set1_epi16(int16_t(f[c]));
  }
  // Bounds clamped to [0, w] (the same lanes for x in [0, w), and int16).
  __attribute__((target("avx2"))) void Row(const YccRow& q) {
    auto c = [&q](int v) { return int16_t(std::min(std::max(v, 0), q.w)); };
    lo = _mm256_set1_epi16(c(q.lo)), hi = _mm256_set1_epi16(c(q.hi));
    cut_from = _mm256_set1_epi16(c(q.cut_from)), cut_to = _mm256_set1_epi16(c(q.cut_to));
  }
  // As YccSteps::Lanes, as int16 lanes of all ones or zeros: those that take a source pixel.
  __attribute__((target("avx2"))) __m256i Take(int ox) const {
    const __m256i x = _mm256_add_epi16(index, _mm256_set1_epi16(int16_t(ox)));
    const __m256i in = _mm256_andnot_si256(_mm256_cmpgt_epi16(lo, x), _mm256_cmpgt_epi16(hi, x));
    const __m256i cut = _mm256_andnot_si256(_mm256_cmpgt_epi16(cut_from, x), _mm256_cmpgt_epi16(cut_to, x));
    return _mm256_andnot_si256(cut, in);
  }
  // take: Take(ox), not all zero. clamp: as YccMath::Colours.
  __attribute__((target("avx2"))) void Colours(const YccRow& q, int ox, __m256i take, __m256i rgb[3], bool clamp) const {
    const int s = ox - q.shift, c0 = s >> q.hshift;  // as in YccSteps::Colours
    // 16 bytes of the row from p, clamped into it; lane i takes byte s + iota[i] - p. The lanes that
    // take a source pixel find it there (their pixels lie in the row, at most 16 in a row); the others
    // get some byte, replaced by the fill.
    const int p = std::min(std::max(s, 0), q.w - 16);
    const __m128i at_y = _mm_add_epi8(iota, _mm_set1_epi8(char(s - p)));
    const __m128i Y = _mm_shuffle_epi8(Load16(q.y + p), at_y);
    if (q.rgb) {
      rgb[0] = _mm256_cvtepu8_epi16(Y);
      rgb[1] = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(Load16(q.cb + p), at_y));
      rgb[2] = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(Load16(q.cr + p), at_y));
      for (int c = 0; c < 3; ++c) rgb[c] = _mm256_blendv_epi8(fill[c], rgb[c], take);
      return;
    }
    __m128i CB, CR;
    if (q.hshift == 0) {
      CB = _mm_shuffle_epi8(Load16(q.cb + p), at_y), CR = _mm_shuffle_epi8(Load16(q.cr + p), at_y);
    } else {  // a chroma row of w / 2 bytes, 8 of them at w = 16; lane i takes byte c0 + pair[i]
      const int cw = q.w >> 1, pc = cw >= 16 ? std::min(std::max(c0, 0), cw - 16) : 0;
      const __m128i at = _mm_add_epi8(pair[s & 1], _mm_set1_epi8(char(c0 - pc)));
      if (cw >= 16) {
        CB = _mm_shuffle_epi8(Load16(q.cb + pc), at), CR = _mm_shuffle_epi8(Load16(q.cr + pc), at);
      } else {
        CB = _mm_shuffle_epi8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q.cb)), at);
        CR = _mm_shuffle_epi8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q.cr)), at);
      }
    }
    math.Colours(_mm256_cvtepu8_epi16(Y), _mm256_cvtepu8_epi16(CB), _mm256_cvtepu8_epi16(CR), rgb, clamp);
    for (int c = 0; c < 3; ++c) rgb[c] = _mm256_blendv_epi8(fill[c], rgb[c], take);
  }
};

// Rows of one image: the constants once, then each row's steps (a CIFAR row is two steps, and setting
// up per row cost as much as they did).
__attribute__((target("avx512f,avx512bw,avx512vl"))) void YccRowsToFloatAvx512(const YccRow* rows, size_t n,
                                                                               const uint8_t fill[3], const float scale[3],
                                                                               const float bias[3], bool mirror, float* r,
                                                                               float* g, float* b, size_t stride) {
  __m512 sc[3], bi[3], fl[3];
  for (int c = 0; c < 3; ++c) {
    sc[c] = _mm512_set1_ps(scale[c]);
    bi[c] = _mm512_set1_ps(bias[c]);
    fl[c] = _mm512_set1_ps(Normalize(fill[c], scale[c], bias[c]));
  }
  // Streaming stores when every row starts on a 64-byte boundary.
  const bool stream =
      ((reinterpret_cast<uintptr_t>(r) | reinterpret_cast<uintptr_t>(g) | reinterpret_cast<uintptr_t>(b) | (stride * sizeof(float))) & 63) == 0;
  const __m512i reverse = _mm512_setr_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  YccSteps steps(rows[0].w, rows[0].hshift);
  for (size_t i = 0; i < n; ++i) {
    const YccRow& q = rows[i];
    steps.Row(q);
    float* out[3] = {r + i * stride, g + i * stride, b + i * stride};
    for (int ox = 0; ox < q.w; ox += 16) {
      __mmask16 take;
      const __mmask16 in = steps.Lanes(ox, &take);
      __m512 v[3] = {fl[0], fl[1], fl[2]};
      if (take) {
        __m256i rgb[3];
        steps.Colours(q, ox, in, rgb);
        for (int c = 0; c < 3; ++c)
          v[c] = _mm512_mask_blend_ps(take, fl[c],
                                      _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(rgb[c])), sc[c]), bi[c]));
      }
      const int o = mirror ? q.w - ox - 16 : ox;
      for (int c = 0; c < 3; ++c) {
        const __m512 f = mirror ? _mm512_permutexvar_ps(reverse, v[c]) : v[c];
        if (stream) _mm512_stream_ps(out[c] + o, f);
        else _mm512_storeu_ps(out[c] + o, f);
      }
    }
  }
}

// The same steps packed to bytes and interleaved (mirrored: in reverse) with InterleaveRow's shuffles.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void YccRowsToRgbAvx512(const YccRow* rows, size_t n,
                                                                             const uint8_t fill[3], bool mirror,
                                                                             uint8_t* rgb_out, size_t stride) {
  const __m128i fl[3] = {_mm_set1_epi8(char(fill[0])), _mm_set1_epi8(char(fill[1])), _mm_set1_epi8(char(fill[2]))};
  YccSteps steps(rows[0].w, rows[0].hshift);
  for (size_t i = 0; i < n; ++i) {
    const YccRow& q = rows[i];
    steps.Row(q);
    uint8_t* row = rgb_out + i * stride;
    for (int ox = 0; ox < q.w; ox += 16) {
      __mmask16 take;
      const __mmask16 in = steps.Lanes(ox, &take);
      __m128i v[3] = {fl[0], fl[1], fl[2]};
      if (take) {
        __m256i rgb[3];
        steps.Colours(q, ox, in, rgb);
        for (int c = 0; c < 3; ++c) v[c] = _mm_mask_blend_epi8(take, fl[c], _mm256_cvtepi16_epi8(rgb[c]));
      }
      Permute48(v[0], v[1], v[2], mirror ? kInterleaveReversed : kInterleave, row + 3 * (mirror ? q.w - ox - 16 : ox));
    }
  }
}
__attribute__((target("avx512f,avx512bw,avx512vl"))) void YccRowsToPlanesAvx512(const YccRow* rows, size_t n, uint8_t* r,
                                                                                uint8_t* g, uint8_t* b, size_t stride) {
  YccSteps steps(rows[0].w, rows[0].hshift);
  const __mmask16 all = 0xFFFF;
  for (size_t i = 0; i < n; ++i) {
    YccRow q = rows[i];
    q.shift = 0, q.lo = 0, q.hi = q.w, q.cut_from = q.cut_to = 0;
    uint8_t* out[3] = {r + i * stride, g + i * stride, b + i * stride};
    for (int ox = 0; ox < q.w; ox += 16) {
      __m256i rgb[3];
      steps.Colours(q, ox, all, rgb);
      for (int c = 0; c < 3; ++c) _mm_storeu_si128(reinterpret_cast<__m128i*>(out[c] + ox), _mm256_cvtepi16_epi8(rgb[c]));
    }
  }
}

// YccRowsToFloatAvx512 with the AVX2 steps: 16 pixels as two 8-float halves.
__attribute__((target("avx2"))) void YccRowsToFloatAvx2(const YccRow* rows, size_t n, const uint8_t fill[3],
                                                         const float scale[3], const float bias[3], bool mirror,
                                                         float* r, float* g, float* b, size_t stride) {
  __m256 sc[3], bi[3], fl[3];
  for (int c = 0; c < 3; ++c) {
    sc[c] = _mm256_set1_ps(scale[c]);
    bi[c] = _mm256_set1_ps(bias[c]);
    fl[c] = _mm256_set1_ps(Normalize(fill[c], scale[c], bias[c]));
  }
  YccSteps2 steps(fill, mirror, /*halves=*/true);
  const __m256i zero = _mm256_setzero_si256();
  for (size_t i = 0; i < n; ++i) {
    const YccRow& q = rows[i];
    steps.Row(q);
    float* out[3] = {r + i * stride, g + i * stride, b + i * stride};
    for (int ox = 0; ox < q.w; ox += 16) {
      const __m256i take = steps.Take(ox);
      __m256 v[3][2] = {{fl[0], fl[0]}, {fl[1], fl[1]}, {fl[2], fl[2]}};  // the step's pixels 0-7, 8-15
      if (!_mm256_testz_si256(take, take)) {
        __m256i rgb[3];
        steps.Colours(q, ox, take, rgb, /*clamp=*/true);
        for (int c = 0; c < 3; ++c) {  // 0..255: unpacking with zeros extends them
          const __m256i h[2] = {_mm256_unpacklo_epi16(rgb[c], zero), _mm256_unpackhi_epi16(rgb[c], zero)};
          for (int k = 0; k < 2; ++k) v[c][k] = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(h[k]), sc[c]), bi[c]);
        }
      }
      // Ordinary stores, unlike the AVX-512 twin's streaming ones: the AVX2-only CPUs this runs on have
      // large L3s that hold the batch ring, and streaming stores there cost the loader more CPU.
      const int o = mirror ? q.w - ox - 16 : ox;
      for (int c = 0; c < 3; ++c)
        for (int k = 0; k < 2; ++k) _mm256_storeu_ps(out[c] + o + 8 * k, v[c][k]);
    }
  }
}

__attribute__((target("avx2"))) void YccRowsToRgbAvx2(const YccRow* rows, size_t n, const uint8_t fill[3], bool mirror,
                                                       uint8_t* rgb_out, size_t stride) {
  const __m128i fl[3] = {_mm_set1_epi8(char(fill[0])), _mm_set1_epi8(char(fill[1])), _mm_set1_epi8(char(fill[2]))};
  YccSteps2 steps(fill, mirror, /*halves=*/false);
  for (size_t i = 0; i < n; ++i) {
    const YccRow& q = rows[i];
    steps.Row(q);
    uint8_t* row = rgb_out + i * stride;
    for (int ox = 0; ox < q.w; ox += 16) {
      const __m256i take = steps.Take(ox);
      __m128i v[3] = {fl[0], fl[1], fl[2]};
      if (!_mm256_testz_si256(take, take)) {
        __m256i rgb[3];
        steps.Colours(q, ox, take, rgb, /*clamp=*/false);  // packus saturates
        for (int c = 0; c < 3; ++c) v[c] = _mm_packus_epi16(_mm256_castsi256_si128(rgb[c]), _mm256_extracti128_si256(rgb[c], 1));
      }
      Permute48(v[0], v[1], v[2], kInterleave, row + 3 * (mirror ? q.w - ox - 16 : ox));
    }
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace

bool YccRowIsFast(size_t w, int hshift) {
  return w % 16 == 0 && hshift >= 0 && hshift <= 1 && (UseAvx512() || (UseAvx2() && w <= size_t(kAvx2MaxWidth)));
}

void YccRowsToRgb(const YccRow* rows, size_t n, const uint8_t fill[3], bool mirror, uint8_t* rgb, size_t stride) {
  if (n > 0 && YccRowIsFast(size_t(rows[0].w), rows[0].hshift)) {
    if (UseAvx512()) return YccRowsToRgbAvx512(rows, n, fill, mirror, rgb, stride);
    return YccRowsToRgbAvx2(rows, n, fill, mirror, rgb, stride);
  }
  for (size_t i = 0; i < n; ++i) YccRowToRgbScalar(rows[i], fill, mirror, rgb + i * stride);
}

void YccRowsToFloat(const YccRow* rows, size_t n, const uint8_t fill[3], const float scale[3], const float bias[3],
                    bool mirror, float* r, float* g, float* b, size_t stride) {
  if (n > 0 && YccRowIsFast(size_t(rows[0].w), rows[0].hshift)) {
    if (UseAvx512()) return YccRowsToFloatAvx512(rows, n, fill, scale, bias, mirror, r, g, b, stride);
    return YccRowsToFloatAvx2(rows, n, fill, scale, bias, mirror, r, g, b, stride);
  }
  for (size_t i = 0; i < n; ++i)
    YccRowToFloatScalar(rows[i], fill, scale, bias, mirror, r + i * stride, g + i * stride, b + i * stride);
}

void YccRowsToPlanes(const YccRow* rows, size_t n, uint8_t* r, uint8_t* g, uint8_t* b, size_t stride) {
  if (n > 0 && UseAvx512() && YccRowIsFast(size_t(rows[0].w), rows[0].hshift))
    return YccRowsToPlanesAvx512(rows, n, r, g, b, stride);
  for (size_t i = 0; i < n; ++i)
    ColorConvertRow(rows[i].y, rows[i].cb, rows[i].cr, size_t(rows[i].w), rows[i].hshift, r + i * stride, g + i * stride,
                    b + i * stride);
}

void ColorConvertRow(const uint8_t* y, const uint8_t* cb, const uint8_t* cr, size_t w, int hshift, uint8_t* r,
                     uint8_t* g, uint8_t* b) {
  if (UseAvx2() && hshift <= 1) return ColorConvertRowAvx2(y, cb, cr, w, hshift, r, g, b);
  ColorConvertRowScalar(y, cb, cr, w, hshift, r, g, b);
}

void NormalizePlaneRow(const uint8_t* in, size_t w, float* out, float scale, float bias, bool reverse) {
  if (UseAvx2()) return NormalizePlaneRowAvx2(in, w, out, scale, bias, reverse);
  NormalizePlaneRowScalar(in, w, out, scale, bias, reverse);
}

void InterleaveRow(const uint8_t* r, const uint8_t* g, const uint8_t* b, size_t w, uint8_t* rgb, bool reverse) {
  if (UseAvx2()) return InterleaveRowAvx2(r, g, b, w, rgb, reverse);
  InterleaveRowScalar(r, g, b, w, rgb, reverse);
}

void MirrorRgbRow(const uint8_t* in, size_t w, uint8_t* out) {
  if (UseAvx2()) return MirrorRgbRowAvx2(in, w, out);
  MirrorRgbRowScalar(in, w, out);
}

#else

bool YccRowIsFast(size_t, int) { return false; }

void YccRowsToRgb(const YccRow* rows, size_t n, const uint8_t fill[3], bool mirror, uint8_t* rgb, size_t stride) {
  for (size_t i = 0; i < n; ++i) YccRowToRgbScalar(rows[i], fill, mirror, rgb + i * stride);
}

void YccRowsToFloat(const YccRow* rows, size_t n, const uint8_t fill[3], const float scale[3], const float bias[3],
                    bool mirror, float* r, float* g, float* b, size_t stride) {
  for (size_t i = 0; i < n; ++i)
    YccRowToFloatScalar(rows[i], fill, scale, bias, mirror, r + i * stride, g + i * stride, b + i * stride);
}

void ColorConvertRow(const uint8_t* y, const uint8_t* cb, const uint8_t* cr, size_t w, int hshift, uint8_t* r,
                     uint8_t* g, uint8_t* b) {
  ColorConvertRowScalar(y, cb, cr, w, hshift, r, g, b);
}

void YccRowsToPlanes(const YccRow* rows, size_t n, uint8_t* r, uint8_t* g, uint8_t* b, size_t stride) {
  for (size_t i = 0; i < n; ++i)
    ColorConvertRowScalar(rows[i].y, rows[i].cb, rows[i].cr, size_t(rows[i].w), rows[i].hshift, r + i * stride,
                          g + i * stride, b + i * stride);
}

void NormalizePlaneRow(const uint8_t* in, size_t w, float* out, float scale, float bias, bool reverse) {
  NormalizePlaneRowScalar(in, w, out, scale, bias, reverse);
}

void InterleaveRow(const uint8_t* r, const uint8_t* g, const uint8_t* b, size_t w, uint8_t* rgb, bool reverse) {
  InterleaveRowScalar(r, g, b, w, rgb, reverse);
}

void MirrorRgbRow(const uint8_t* in, size_t w, uint8_t* out) { MirrorRgbRowScalar(in, w, out); }

#endif

}  // namespace dsc::kernels
