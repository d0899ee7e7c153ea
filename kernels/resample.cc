#include "kernels/resample.h"

#include <cmath>
#include <cstring>
#include <string>

#include "format/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace dsc::kernels {

ResampleAxis MakeResampleAxis(ResampleFilter f, int in_size, float in0, float in1, int out_size) {
  ResampleAxis a;
  a.ksize = ResampleMaxTaps(f, in0, in1, out_size);
  a.first.resize(size_t(out_size));
  a.count.resize(size_t(out_size));
  a.k.assign(size_t(out_size) * a.ksize, 0);
  std::vector<double> w(size_t(a.ksize));
  for (int i = 0; i < out_size; ++i) {
    const int n = ResampleTaps(f, in_size, in0, in1, out_size, i, &a.first[i], w.data());
    a.count[i] = n;
    for (int t = 0; t < n; ++t) a.k[size_t(i) * a.ksize + t] = ResampleFixed(w[t]);
  }
  return a;
}

namespace {

std::string BoxText(const ResampleBox& b) {
  return "(" + std::to_string(b.x0) + ", " + std::to_string(b.y0) + ", " + std::to_string(b.x1) + ", " +
         std::to_string(b.y1) + ")";
}

// Pillow's checks (_imaging.c _resize), plus finite edges, which Pillow does not check.
void Validate(int sw, int sh, int dw, int dh, const ResampleBox& b) {
  if (sw < 1 || sh < 1)
    throw Error("resample: source size " + std::to_string(sw) + "x" + std::to_string(sh) + " is empty");
  if (dw < 1 || dh < 1)
    throw Error("resample: output size " + std::to_string(dw) + "x" + std::to_string(dh) + " must be > 0");
  if (!std::isfinite(b.x0) || !std::isfinite(b.y0) || !std::isfinite(b.x1) || !std::isfinite(b.y1))
    throw Error("resample: box " + BoxText(b) + " is not finite");
  if (b.x0 < 0 || b.y0 < 0) throw Error("resample: box " + BoxText(b) + " has a negative offset");
  if (b.x1 > sw || b.y1 > sh)
    throw Error("resample: box " + BoxText(b) + " exceeds the " + std::to_string(sw) + "x" + std::to_string(sh) +
                " image");
  if (b.x1 - b.x0 < 0 || b.y1 - b.y0 < 0) throw Error("resample: box " + BoxText(b) + " is inverted");
}

struct Plan {
  ResampleAxis h, v;
  bool need_h = false, need_v = false;
  int y_first = 0, y_last = 0;  // source rows the vertical pass reads
};

// ImagingResampleInner's set-up. Its need_* tests compare box[2] with the output size (not the input
// size); kept as is, it only decides whether an identity pass is skipped.
Plan MakePlan(int sw, int sh, int dw, int dh, ResampleFilter f, const ResampleBox& b) {
  Plan p;
  p.need_h = dw != sw || b.x0 != 0 || b.x1 != dw;
  p.need_v = dh != sh || b.y0 != 0 || b.y1 != dh;
  p.v = MakeResampleAxis(f, sh, b.y0, b.y1, dh);
  p.y_first = p.v.first[0];
  p.y_last = p.v.first[dh - 1] + p.v.count[dh - 1];
  if (p.y_last < p.y_first) p.y_last = p.y_first;
  if (p.need_h) {
    p.h = MakeResampleAxis(f, sw, b.x0, b.x1, dw);
    for (int& y : p.v.first) y -= p.y_first;
  }
  return p;
}

// Horizontal pass over `rows` rows of `in` (iw RGB pixels each) into `out` (ow pixels each).
void HorizontalScalar(const uint8_t* in, int iw, int rows, const ResampleAxis& a, uint8_t* out, int ow) {
  for (int y = 0; y < rows; ++y) {
    const uint8_t* row = in + size_t(y) * iw * 3;
    uint8_t* o = out + size_t(y) * ow * 3;
    for (int x = 0; x < ow; ++x) {
      const uint8_t* s = row + size_t(a.first[x]) * 3;
      const int32_t* k = &a.k[size_t(x) * a.ksize];
      uint32_t r = ResampleBias(), g = ResampleBias(), b = ResampleBias();
      for (int t = 0; t < a.count[x]; ++t) {
        r = ResampleMac(r, s[3 * t], k[t]);
        g = ResampleMac(g, s[3 * t + 1], k[t]);
        b = ResampleMac(b, s[3 * t + 2], k[t]);
      }
      o[3 * x] = ResampleClip8(r);
      o[3 * x + 1] = ResampleClip8(g);
      o[3 * x + 2] = ResampleClip8(b);
    }
  }
}

// Vertical pass over bytes [b0, b1) of each row of `in` (rows of `stride` bytes) for output rows
// [y0, y1).
void VerticalScalar(const uint8_t* in, size_t stride, const ResampleAxis& a, uint8_t* out, int y0, int y1, size_t b0,
                    size_t b1) {
  for (int y = y0; y < y1; ++y) {
    const uint8_t* s = in + size_t(a.first[y]) * stride;
    const int32_t* k = &a.k[size_t(y) * a.ksize];
    uint8_t* o = out + size_t(y) * stride;
    for (size_t i = b0; i < b1; ++i) {
      uint32_t acc = ResampleBias();
      for (int t = 0; t < a.count[y]; ++t) acc = ResampleMac(acc, s[size_t(t) * stride + i], k[t]);
      o[i] = ResampleClip8(acc);
    }
  }
}

using HorizontalFn = void (*)(const uint8_t*, int, int, const ResampleAxis&, uint8_t*, int);
using VerticalFn = void (*)(const uint8_t*, size_t, const ResampleAxis&, uint8_t*, int, int);

void VerticalScalarAll(const uint8_t* in, size_t stride, const ResampleAxis& a, uint8_t* out, int y0, int y1) {
  VerticalScalar(in, stride, a, out, y0, y1, 0, stride);
}

#if defined(__x86_64__)

// The AVX2 passes. Every product and sum is the scalar one modulo 2^32 (integer adds in any order), so
// the bytes are the same as the reference's.

// The horizontal axis reshaped for SIMD: every output pixel reads exactly `taps` (even) source pixels
// from start[x] (moved left at the right edge so it stays inside the row; the extra taps weigh 0).
// Weights are split k = hi * 2^11 + lo (lo in 0..2047) so both halves fit int16 for vpmaddwd; pairs of
// taps are stored as one int32 (two int16), ready to broadcast.
struct HorizontalSimd {
  int taps = 0;
  std::vector<int32_t> start, hi, lo;  // hi/lo: [x * taps / 2 + pair]
};

bool MakeHorizontalSimd(const ResampleAxis& a, int iw, HorizontalSimd* h) {
  int most = 0;
  for (int n : a.count) most = n > most ? n : most;
  h->taps = (most + 1) & ~1;
  if (h->taps == 0 || h->taps > iw) return false;  // narrower than the taps: the scalar pass does it
  const size_t ow = a.count.size();
  h->start.resize(ow);
  h->hi.assign(ow * h->taps / 2, 0);
  h->lo.assign(ow * h->taps / 2, 0);
  for (size_t x = 0; x < ow; ++x) {
    const int s = a.first[x] + h->taps > iw ? iw - h->taps : a.first[x];
    h->start[x] = s;
    for (int t = 0; t < a.count[x]; ++t) {
      const int32_t k = a.k[x * a.ksize + t];
      if (k >= (1 << 26) || k < -(1 << 26)) return false;  // hi would not fit int16
      const int p = a.first[x] - s + t;                      // its place among the padded taps
      const uint32_t hi16 = uint16_t(int16_t(k >> 11)), lo16 = uint16_t(k & 2047);
      const size_t i = x * h->taps / 2 + p / 2;
      const int sh = (p & 1) * 16;
      h->hi[i] = int32_t(uint32_t(h->hi[i]) | (hi16 << sh));
      h->lo[i] = int32_t(uint32_t(h->lo[i]) | (lo16 << sh));
    }
  }
  return true;
}

// 8 bytes at p, or fewer when p + 8 passes `end` (the rest zero): never reads past the buffer. Only
// the last row can reach `end`; the others skip the check.
template <bool kLastRow>
__attribute__((target("avx2"))) inline __m128i Load8(const uint8_t* p, const uint8_t* end) {
  if (!kLastRow || p + 8 <= end) return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  uint8_t b[8] = {};
  std::memcpy(b, p, size_t(end - p));
  return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b));
}

// Two output pixels per step, one per 128-bit lane; each step takes one pair of taps: the six bytes
// R0 G0 B0 R1 G1 B1 become int16 pairs (R0, R1) (G0, G1) (B0, B1) (0, 0) and vpmaddwd gives R, G, B sums.
template <bool kLastRow>
__attribute__((target("avx2"))) void HorizontalAvx2Row(const uint8_t* row, const uint8_t* end, const HorizontalSimd& h,
                                                       uint8_t* o, int ow) {
  const __m256i pairs = _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1,  //
                                         0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
  const __m256i bias = _mm256_set1_epi32(int32_t(ResampleBias()));
  const int np = h.taps / 2;
  for (int x = 0; x < ow; x += 2) {
    const int xb = x + 1 < ow ? x + 1 : x;  // an odd last pixel is computed twice, stored once
    const uint8_t* pa = row + size_t(h.start[x]) * 3;
    const uint8_t* pb = row + size_t(h.start[xb]) * 3;
    const int32_t* ha = &h.hi[size_t(x) * np];
    const int32_t* hb = &h.hi[size_t(xb) * np];
    const int32_t* la = &h.lo[size_t(x) * np];
    const int32_t* lb = &h.lo[size_t(xb) * np];
    __m256i sh = _mm256_setzero_si256(), sl = _mm256_setzero_si256();
    for (int p = 0; p < np; ++p) {
      const __m256i ab = _mm256_inserti128_si256(_mm256_castsi128_si256(Load8<kLastRow>(pa + 6 * p, end)),
                                                 Load8<kLastRow>(pb + 6 * p, end), 1);
      const __m256i v = _mm256_shuffle_epi8(ab, pairs);
      const __m256i kh = _mm256_setr_m128i(_mm_set1_epi32(ha[p]), _mm_set1_epi32(hb[p]));
      const __m256i kl = _mm256_setr_m128i(_mm_set1_epi32(la[p]), _mm_set1_epi32(lb[p]));
      sh = _mm256_add_epi32(sh, _mm256_madd_epi16(v, kh));
      sl = _mm256_add_epi32(sl, _mm256_madd_epi16(v, kl));
    }
    __m256i acc = _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(sh, 11), sl), bias);
    acc = _mm256_srai_epi32(acc, kResampleBits);
    const __m256i packed = _mm256_packus_epi16(_mm256_packs_epi32(acc, acc), _mm256_setzero_si256());
    const uint32_t a = uint32_t(_mm256_extract_epi32(packed, 0)), b = uint32_t(_mm256_extract_epi32(packed, 4));
    std::memcpy(o + 3 * x, &a, 3);
    if (xb != x) std::memcpy(o + 3 * xb, &b, 3);
  }
}

void HorizontalAvx2(const uint8_t* in, int iw, int rows, const ResampleAxis& a, uint8_t* out, int ow) {
  HorizontalSimd h;
  if (!MakeHorizontalSimd(a, iw, &h)) return HorizontalScalar(in, iw, rows, a, out, ow);
  const uint8_t* end = in + size_t(rows) * iw * 3;
  for (int y = 0; y < rows; ++y) {
    const uint8_t* row = in + size_t(y) * iw * 3;
    if (y + 1 < rows) HorizontalAvx2Row<false>(row, end, h, out + size_t(y) * ow * 3, ow);
    else HorizontalAvx2Row<true>(row, end, h, out + size_t(y) * ow * 3, ow);
  }
}

// 32 bytes of a row per step (four 8-lane int32 accumulators); the tail of each row is scalar.
__attribute__((target("avx2"))) void VerticalAvx2(const uint8_t* in, size_t stride, const ResampleAxis& a,
                                                  uint8_t* out, int y0, int y1) {
  const __m256i bias = _mm256_set1_epi32(int32_t(ResampleBias()));
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const size_t vec_end = stride & ~size_t(31);
  for (int y = y0; y < y1; ++y) {
    const uint8_t* s = in + size_t(a.first[y]) * stride;
    const int32_t* k = &a.k[size_t(y) * a.ksize];
    const int n = a.count[y];
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
}

#endif

void Run(const uint8_t* src, int sw, int sh, uint8_t* dst, int dw, int dh, ResampleFilter f, ResampleBox box,
         std::vector<uint8_t>* scratch, HorizontalFn horizontal, VerticalFn vertical) {
  if (box.x1 == 0 && box.y1 == 0 && box.x0 == 0 && box.y0 == 0) box = {0, 0, float(sw), float(sh)};
  Validate(sw, sh, dw, dh, box);
  if (f != ResampleFilter::kBox && f != ResampleFilter::kBilinear && f != ResampleFilter::kBicubic)
    throw Error("resample: unsupported filter " + std::to_string(int(f)));
  const Plan p = MakePlan(sw, sh, dw, dh, f, box);
  if (!p.need_h && !p.need_v) {
    std::memcpy(dst, src, size_t(sw) * sh * 3);
    return;
  }
  if (!p.need_v) {  // dh == sh and every row is used: straight into dst
    horizontal(src, sw, sh, p.h, dst, dw);
    return;
  }
  const uint8_t* in = src;
  if (p.need_h) {
    std::vector<uint8_t> local;
    std::vector<uint8_t>& tmp = scratch ? *scratch : local;
    const int rows = p.y_last - p.y_first;
    tmp.resize(size_t(dw) * rows * 3);
    horizontal(src + size_t(p.y_first) * sw * 3, sw, rows, p.h, tmp.data(), dw);
    vertical(tmp.data(), size_t(dw) * 3, p.v, dst, 0, dh);
    return;
  }
  vertical(in, size_t(sw) * 3, p.v, dst, 0, dh);
}

}  // namespace

void ResampleRgbScalar(const uint8_t* src, int sw, int sh, uint8_t* dst, int dw, int dh, ResampleFilter f,
                       ResampleBox box, std::vector<uint8_t>* scratch) {
  Run(src, sw, sh, dst, dw, dh, f, box, scratch, HorizontalScalar, VerticalScalarAll);
}

bool ResampleHaveAvx2() {
#if defined(__x86_64__)
  static const bool have = __builtin_cpu_supports("avx2");
  return have;
#else
  return false;
#endif
}

void ResampleRgb(const uint8_t* src, int sw, int sh, uint8_t* dst, int dw, int dh, ResampleFilter f,
                 ResampleBox box, std::vector<uint8_t>* scratch) {
#if defined(__x86_64__)
  if (ResampleHaveAvx2()) return Run(src, sw, sh, dst, dw, dh, f, box, scratch, HorizontalAvx2, VerticalAvx2);
#endif
  ResampleRgbScalar(src, sw, sh, dst, dw, dh, f, box, scratch);
}

}  // namespace dsc::kernels
