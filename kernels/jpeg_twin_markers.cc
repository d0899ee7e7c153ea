// Finding a JPEG payload's markers, and the stager's copy (kernels/jpeg_twin.h): scalar, AVX2 and
// AVX-512 versions side by side, each giving the same list.
#include <cstring>

#include "kernels/cpu.h"
#include "kernels/jpeg_twin.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace dsc::kernels {

// Entropy data holds a stuffed 0xFF 0x00 every few hundred bytes and, in dsc's photos, a restart marker
// every ~160: stopping at each would mispredict a branch per marker. The SIMD finders instead write every
// position of a 64-byte block without a data-dependent branch (two stores always, a loop only for the
// rare block holding more than two), and the caller walks the list, where the branches follow the
// (predictable) restart sequence.
size_t FindTwinMarkersScalar(const uint8_t* d, size_t i, size_t e, size_t n, uint32_t* out) {
  size_t k = 0;
  for (; i < e; ++i)
    if (d[i] == 0xFF && (i + 1 >= n || d[i + 1] != 0)) out[k++] = uint32_t(i);
  return k;
}

namespace {

#if defined(__x86_64__)
// Appends base + each set bit of m (ascending) to out[k...]; out has two entries of slack.
__attribute__((always_inline)) inline size_t PutBits(uint64_t m, size_t base, uint32_t* out, size_t k) {
  const size_t count = size_t(__builtin_popcountll(m));
  out[k] = uint32_t(base + size_t(__builtin_ctzll(m | (uint64_t(1) << 63))));
  m &= m - 1;
  out[k + 1] = uint32_t(base + size_t(__builtin_ctzll(m | (uint64_t(1) << 63))));
  if (count > 2) {
    m &= m - 1;
    for (size_t j = k + 2; m; m &= m - 1) out[j++] = uint32_t(base + size_t(__builtin_ctzll(m)));
  }
  return k + count;
}

// The marker bits of d[at, at + 32) (d[at + 32] readable).
__attribute__((target("avx2"))) inline uint64_t MarkerBits32(const uint8_t* d, size_t at) {
  const __m256i ff = _mm256_set1_epi8(char(0xFF)), zero = _mm256_setzero_si256();
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(d + at));
  const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(d + at + 1));
  return uint64_t(uint32_t(_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, ff))) &
                  ~uint32_t(_mm256_movemask_epi8(_mm256_cmpeq_epi8(w, zero))));
}


__attribute__((target("avx2,popcnt,bmi"))) size_t FindTwinMarkersAvx2(const uint8_t* d, size_t i, size_t e, size_t n,
                                                                      uint32_t* out) {
  size_t k = 0;
  for (; i + 64 <= e && i + 65 <= n; i += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(d + i + kTwinMarkerPrefetch), _MM_HINT_T0);
    k = PutBits(MarkerBits32(d, i) | MarkerBits32(d, i + 32) << 32, i, out, k);
  }
  return k + FindTwinMarkersScalar(d, i, e, n, out + k);
}

__attribute__((target("avx512f,avx512bw,popcnt,bmi"))) size_t FindTwinMarkersAvx512(const uint8_t* d, size_t i, size_t e,
                                                                                    size_t n, uint32_t* out) {
  const __m512i ff = _mm512_set1_epi8(char(0xFF)), zero = _mm512_setzero_si512();
  size_t k = 0;
  for (; i + 64 <= e && i + 65 <= n; i += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(d + i + kTwinMarkerPrefetch), _MM_HINT_T0);
    const __m512i v = _mm512_loadu_si512(d + i), w = _mm512_loadu_si512(d + i + 1);
    const uint64_t m = _mm512_cmpeq_epi8_mask(v, ff) & ~_mm512_cmpeq_epi8_mask(w, zero);
    k = PutBits(m, i, out, k);
  }
  return k + FindTwinMarkersScalar(d, i, e, n, out + k);
}

// TwinCopy's loops. The destination is prefetched for writing a page ahead: the staging buffer's
// lines are mostly not in cache, and waiting for them was most of the copy's time.
constexpr size_t kCopyWriteAhead = 4096;

__attribute__((target("avx512f"))) void CopyAvx512(uint8_t* dst, const uint8_t* src, size_t n) {
  size_t i = 0;
  for (; i + 256 <= n; i += 256) {
    for (size_t l = 0; l < 256; l += 64) __builtin_prefetch(dst + i + kCopyWriteAhead + l, 1);
    const __m512i a = _mm512_loadu_si512(src + i), b = _mm512_loadu_si512(src + i + 64);
    const __m512i c = _mm512_loadu_si512(src + i + 128), d = _mm512_loadu_si512(src + i + 192);
    _mm512_storeu_si512(dst + i, a);
    _mm512_storeu_si512(dst + i + 64, b);
    _mm512_storeu_si512(dst + i + 128, c);
    _mm512_storeu_si512(dst + i + 192, d);
  }
  for (; i + 64 <= n; i += 64) _mm512_storeu_si512(dst + i, _mm512_loadu_si512(src + i));
  std::memcpy(dst + i, src + i, n - i);
}
__attribute__((target("avx2"))) void CopyAvx2(uint8_t* dst, const uint8_t* src, size_t n) {
  size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    for (size_t l = 0; l < 128; l += 64) __builtin_prefetch(dst + i + kCopyWriteAhead + l, 1);
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 64));
    const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 96));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), a);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i + 32), b);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i + 64), c);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i + 96), d);
  }
  for (; i + 32 <= n; i += 32)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
  std::memcpy(dst + i, src + i, n - i);
}
#endif
}  // namespace

void TwinCopy(uint8_t* dst, const uint8_t* src, size_t n) {
#if defined(__x86_64__)
  if (UseAvx512()) return CopyAvx512(dst, src, n);
  if (UseAvx2()) return CopyAvx2(dst, src, n);
#endif
  std::memcpy(dst, src, n);
}

size_t FindTwinMarkers(const uint8_t* d, size_t i, size_t e, size_t n, uint32_t* out) {
#if defined(__x86_64__)
  if (UseAvx512()) return FindTwinMarkersAvx512(d, i, e, n, out);
  if (UseAvx2()) return FindTwinMarkersAvx2(d, i, e, n, out);
#endif
  return FindTwinMarkersScalar(d, i, e, n, out);
}

}  // namespace dsc::kernels
