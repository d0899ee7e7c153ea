// The resampler's x86 passes (kernels/resample_x86.cc) and what they share with the scalar reference
// in kernels/resample.cc, whose bytes they reproduce exactly (tests/resample_test.cc compares them).
// Internal to kernels/.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/resample.h"

namespace dsc::kernels::resample_internal {

// The horizontal axis padded to `taps` taps for every output pixel: pixel x reads source pixels
// x0 + start[x] .. x0 + start[x] + taps - 1 (moved left at the right edge so it stays inside the row;
// the extra taps weigh 0) with the weights k[x * taps ..]. Only source pixels [x0, x0 + width) are read,
// so only those are turned sideways.
struct HorizontalSimd {
  int taps = 0, x0 = 0, width = 0;
  std::vector<int32_t> start, k;
};

struct Plan {
  ResampleAxis h, v;
  HorizontalSimd hs;  // h for the AVX2 pass, when `simd` and it fits (hs_ok)
  bool need_h = false, need_v = false, simd = false, hs_ok = false;
  int y_first = 0, y_last = 0;  // source rows the vertical pass reads
};

// The scalar passes (kernels/resample.cc): the reference, and what the SIMD passes fall back to.
// Horizontal: `rows` rows of `in` (`in_stride` bytes apart) into `out` (ow pixels each). Vertical:
// bytes [b0, b1) of each row of `in` (rows of `stride` bytes), output rows [y0, y1).
void HorizontalScalar(const uint8_t* in, size_t in_stride, int rows, const Plan& p, uint8_t* out, int ow);
void VerticalScalar(const uint8_t* in, size_t stride, const ResampleAxis& a, uint8_t* out, int y0, int y1, size_t b0,
                    size_t b1);

#if defined(__x86_64__)
// FillAxis<kBilinear>'s outputs [0, returned), four at a time (AVX2).
int FillBilinearAvx2(int in_size, float in0, float in1, int out_size, int o0, int n, int shift, bool mirror, ResampleAxis* a);
// The passes with AVX2 and with AVX-512 (the callers check the CPU: kernels/cpu.h).
void HorizontalAvx2(const uint8_t* in, size_t in_stride, int rows, const Plan& p, uint8_t* out, int ow);
void VerticalAvx2(const uint8_t* in, size_t stride, const ResampleAxis& a, uint8_t* out, int y0, int y1);
void HorizontalAvx512(const uint8_t* in, size_t in_stride, int rows, const Plan& p, uint8_t* out, int ow);
void VerticalAvx512(const uint8_t* in, size_t stride, const ResampleAxis& a, uint8_t* out, int y0, int y1);
#endif

}  // namespace dsc::kernels::resample_internal
