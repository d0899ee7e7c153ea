// Pillow's separable fixed-point resampler (libImaging/Resample.c, 8 bits per channel) for interleaved
// RGB: Image.resize(size, resample, box=...) with BOX, BILINEAR or BICUBIC gives the same bytes.
//
// Per axis, each output index gets a run of source taps whose float weights (filter support scaled by
// the downscale factor, i.e. antialiased) are normalised to sum 1, then rounded to Q22 fixed point.
// The horizontal pass runs first over the source rows the vertical pass needs, is clipped to uint8,
// then the vertical pass runs. The per-element math below is DSC_HD (no std:: calls) so a CUDA kernel
// can run exactly this code; ResampleRgbScalar is the reference, ResampleRgb picks an AVX2 path at run
// time that gives the same bits.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/hd.h"

namespace dsc::kernels {

enum class ResampleFilter : uint8_t { kBox = 0, kBilinear = 1, kBicubic = 2 };

// Pillow's PRECISION_BITS: 8 bits of result, 2 bits of headroom (bicubic lobes) in an int32.
constexpr int kResampleBits = 32 - 8 - 2;

// The filter's support at scale 1 (Pillow: BOX 0.5, BILINEAR 1, BICUBIC 2).
DSC_HD double ResampleSupport(ResampleFilter f) {
  return f == ResampleFilter::kBox ? 0.5 : f == ResampleFilter::kBilinear ? 1.0 : 2.0;
}

// The filter's weight at distance x (in filter units).
DSC_HD double ResampleWeight(ResampleFilter f, double x) {
  if (f == ResampleFilter::kBox) return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0;
  if (x < 0.0) x = -x;
  if (f == ResampleFilter::kBilinear) return x < 1.0 ? 1.0 - x : 0.0;
  const double a = -0.5;  // Pillow's bicubic
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// A normalised weight in Q22, rounded half away from zero (Pillow's normalize_coeffs_8bpc).
DSC_HD int32_t ResampleFixed(double k) {
  return k < 0 ? int32_t(-0.5 + k * (1 << kResampleBits)) : int32_t(0.5 + k * (1 << kResampleBits));
}

// The accumulator's start value: the rounding bias.
DSC_HD uint32_t ResampleBias() { return uint32_t(1) << (kResampleBits - 1); }

// One tap: acc + v * k. Unsigned, so the (pathological bicubic) overflow wraps like Pillow's int in
// practice and like the SIMD lanes do, instead of being undefined.
DSC_HD uint32_t ResampleMac(uint32_t acc, uint8_t v, int32_t k) { return acc + uint32_t(v) * uint32_t(k); }

// Pillow's clip8: the Q22 sum shifted down (arithmetic) and clamped to 0..255.
DSC_HD uint8_t ResampleClip8(uint32_t acc) {
  const int32_t v = int32_t(acc) >> kResampleBits;
  return uint8_t(v < 0 ? 0 : v > 255 ? 255 : v);
}

// Taps for one output index of one axis (Pillow's precompute_coeffs, one iteration): writes the
// normalised float weights of source indices *first .. *first + count - 1 into w[0 .. count - 1] and
// returns count (at most ResampleMaxTaps). in0/in1 are the box edges as Pillow's float box holds them.
DSC_HD int ResampleTaps(ResampleFilter f, int in_size, float in0, float in1, int out_size, int xx, int* first,
                        double* w) {
  const double scale = double(in1 - in0) / out_size;  // the difference in float, as Pillow does
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = ResampleSupport(f) * filterscale;
  const double center = in0 + (xx + 0.5) * scale;
  const double ss = 1.0 / filterscale;
  int xmin = int(center - support + 0.5);
  if (xmin < 0) xmin = 0;
  int xmax = int(center + support + 0.5);
  if (xmax > in_size) xmax = in_size;
  xmax -= xmin;
  double ww = 0.0;
  for (int x = 0; x < xmax; ++x) {
    w[x] = ResampleWeight(f, (x + xmin - center + 0.5) * ss);
    ww += w[x];
  }
  if (ww != 0.0)
    for (int x = 0; x < xmax; ++x) w[x] /= ww;
  *first = xmin;
  return xmax < 0 ? 0 : xmax;
}

// Output index o's taps as an axis holds them: ResampleTaps, source indices shifted by `shift`, the
// weights in Q22 into k[0 .. returned). w is scratch for ResampleMaxTaps doubles. The one definition
// every axis builder (MakeResampleWindow's scalar loop, the GPU decoder's crop stage) runs.
DSC_HD int ResampleIndexTaps(ResampleFilter f, int in_size, float in0, float in1, int out_size, int o, int shift,
                             int* first, double* w, int32_t* k) {
  const int c = ResampleTaps(f, in_size, in0, in1, out_size, o, first, w);
  *first += shift;
  for (int t = 0; t < c; ++t) k[t] = ResampleFixed(w[t]);
  return c;
}

// One output byte of a pass: `count` source bytes `step` apart weighed by k, rounded and clipped as
// Pillow does. The per-element reference of both passes (horizontal: step 3 within a row; vertical:
// step = the row stride); the SIMD passes are tested against it.
DSC_HD uint8_t ResampleByte(const uint8_t* s, size_t step, const int32_t* k, int count) {
  uint32_t acc = ResampleBias();
  for (int t = 0; t < count; ++t) acc = ResampleMac(acc, s[size_t(t) * step], k[t]);
  return ResampleClip8(acc);
}

// Pillow's ksize: the most taps any output index of this axis can have.
DSC_HD int ResampleMaxTaps(ResampleFilter f, float in0, float in1, int out_size) {
  const double scale = double(in1 - in0) / out_size;
  const double support = ResampleSupport(f) * (scale < 1.0 ? 1.0 : scale);
  int c = int(support);
  if (c < support) ++c;
  return c * 2 + 1;
}

// An axis before its taps are computed: what MakeResampleWindow's arguments come to (outputs
// [o0, o0 + n) of in_size source pixels' span [in0, in1) resized to out_size, source indices shifted
// by `shift`, mirrored when asked). Plain data: the GPU decoder stages it and computes the taps there.
struct ResampleSpan {
  ResampleFilter filter = ResampleFilter::kBilinear;
  bool mirror = false;
  int32_t in_size = 0, out_size = 0, o0 = 0, n = 0, shift = 0;
  float in0 = 0, in1 = 0;
};

// Output i's taps of a span (ResampleIndexTaps at the index the span maps i to).
DSC_HD int ResampleSpanTaps(const ResampleSpan& s, int i, int* first, double* w, int32_t* k) {
  const int o = s.mirror ? s.n - 1 - i : i;
  return ResampleIndexTaps(s.filter, s.in_size, s.in0, s.in1, s.out_size, s.o0 + o, s.shift, first, w, k);
}

// One axis' precomputed taps: output i reads source first[i] .. first[i] + count[i] - 1 with the Q22
// weights k[i * ksize ..].
struct ResampleAxis {
  int ksize = 0;
  std::vector<int32_t> first, count, k;
};
ResampleAxis MakeResampleAxis(ResampleFilter f, int in_size, float in0, float in1, int out_size);

// The taps of outputs [o0, o0 + n) of an axis resized from the span [in0, in1) (Pillow's float box
// edges, in image pixels) to out_size, with the taps clipped to source pixels [lo, hi) as Pillow clips
// them to its image. Two uses: "crop, then resize" (torchvision's RandomResizedCrop through PIL: [lo, hi)
// is the crop, o0 = 0, n = out_size; with an integer crop this is PIL's crop().resize() exactly) and
// "resize, then take a window" (Resize + CenterCrop: [lo, hi) is the whole image, [o0, o0 + n) the
// window; exactly the window of the full resize). Source indices come out relative to `origin` (the
// decoded buffer's first pixel). `mirror`: output i gets output o0 + n - 1 - i's taps (a flip).
// Writes *axis, reusing its memory.
void MakeResampleWindow(ResampleFilter f, int lo, int hi, float in0, float in1, int out_size, int o0, int n, int origin,
                        bool mirror, ResampleAxis* axis);
// MakeResampleWindow in two steps: the span (checked: throws dsc::Error as MakeResampleWindow does),
// then its taps.
ResampleSpan MakeResampleSpan(ResampleFilter f, int lo, int hi, float in0, float in1, int out_size, int o0, int n,
                              int origin, bool mirror);
void MakeResampleAxis(const ResampleSpan& s, ResampleAxis* axis);

// Gets the output rows of ResampleRgbAxes in order, each as soon as it is written (e.g. to normalise it
// into the batch while the next rows are resampled).
class ResampleRowSink {
 public:
  virtual void Row(int y, const uint8_t* rgb) = 0;

 protected:
  ~ResampleRowSink() = default;
};

// Resamples with precomputed axes: dst (h's outputs x v's outputs RGB, rows packed) from src (sw x sh RGB,
// rows `stride` bytes apart). Both passes always run (a one-tap identity pass gives its input back
// exactly). Throws dsc::Error when a tap lies outside the source (before any row is written or sunk).
// With a `sink`, each row of dst goes to sink->Row as soon as it is written (the same bytes; the two
// passes are interleaved). ResampleRgbAxesScalar is the reference.
void ResampleRgbAxes(const uint8_t* src, int sw, int sh, size_t stride, const ResampleAxis& h, const ResampleAxis& v,
                     uint8_t* dst, std::vector<uint8_t>* scratch = nullptr, ResampleRowSink* sink = nullptr);
void ResampleRgbAxesScalar(const uint8_t* src, int sw, int sh, size_t stride, const ResampleAxis& h,
                           const ResampleAxis& v, uint8_t* dst, std::vector<uint8_t>* scratch = nullptr,
                           ResampleRowSink* sink = nullptr);

// The source sub-rectangle, in float pixel coordinates (Pillow's box); x1 == 0 && y1 == 0 means the
// whole image.
struct ResampleBox {
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

// Resamples the `box` region of src (sw x sh RGB, rows of 3 * sw bytes) to dst (dw x dh RGB). Throws
// dsc::Error for what Pillow refuses (sizes < 1, a box outside the image or inverted) and for NaN or
// infinite box edges. `scratch` (optional) keeps the intermediate buffer between calls.
void ResampleRgb(const uint8_t* src, int sw, int sh, uint8_t* dst, int dw, int dh, ResampleFilter f,
                 ResampleBox box = {}, std::vector<uint8_t>* scratch = nullptr);
// The scalar reference (tests compare the two).
void ResampleRgbScalar(const uint8_t* src, int sw, int sh, uint8_t* dst, int dw, int dh, ResampleFilter f,
                       ResampleBox box = {}, std::vector<uint8_t>* scratch = nullptr);

}  // namespace dsc::kernels
