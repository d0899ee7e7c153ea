// The list transforms as drawn steps, for the deferred (GPU) path. Transform::Plan draws what a
// transform does to one sample (the same draws as Apply) and records it as TransformSteps with every
// random parameter fixed; the GPU then applies a batch's steps with the per-element code below
// (kernels/cuda/transform_steps.cu), and RunStepsCpu runs that same code on the CPU, which is how the
// tests hold it to the reference ops of kernels/transform_ops.cc (TransformList::Apply).
//
// A batch's steps: `per_sample` steps for each sample (TransformList::MaxSteps()), kStepNone where a
// sample draws fewer. Step j runs for every sample before step j + 1 does: first the statistics some
// steps need from the image as it is then (a grey mean, channel histograms, blur weights), then each
// output pixel from the previous step's image into a second buffer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/hd.h"
#include "kernels/transform_ops.h"

namespace dsc::kernels {

enum StepKind : int32_t {
  kStepNone, kStepPadCrop, kStepFlipH, kStepFlipV, kStepBrightness, kStepContrast, kStepSaturation, kStepHue,
  kStepGray, kStepSolarize, kStepPosterize, kStepAutocontrast, kStepEqualize, kStepInvert, kStepSharpness,
  kStepBlur, kStepAffine, kStepPerspective, kStepErase, kStepKinds
};

// The largest gaussian_blur kernel side the device path takes (a list with a larger one is refused
// with defer_augment).
constexpr int kMaxBlurTaps = 65;

struct TransformStep {
  int32_t kind = kStepNone;
  // kStepPadCrop: pad_left, pad_top, left, top; kStepErase: top, left, h, w; kStepPosterize: bits;
  // kStepBlur: kernel width, height.
  int32_t i[4] = {0, 0, 0, 0};
  int32_t mode = 0;      // kStepPadCrop: PadMode; kStepAffine, kStepPerspective: 1 bilinear, 0 nearest
  int32_t has_fill = 0;  // kStepAffine, kStepPerspective: fill given (else torchvision's fill=None)
  double a = 0, b = 0;   // blend factor (brightness ... sharpness), hue factor, solarize threshold, blur sigmas
  float g[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // kStepAffine: AffineGridOf; kStepPerspective: PerspectiveGridOf
  float fill[3] = {0, 0, 0};              // kStepPadCrop, kStepErase: the value; warps: the fill
};

// What a step needs from its whole input image, per sample.
struct StepStats {
  float mean = 0;        // kStepContrast: the grey image's mean
  uint8_t lut[3][256];   // kStepAutocontrast, kStepEqualize: each channel's table
  float kx[kMaxBlurTaps], ky[kMaxBlurTaps];  // kStepBlur: the 1-D kernels
};

DSC_HD bool StepNeedsHistogram(int kind) { return kind == kStepAutocontrast || kind == kStepEqualize; }
DSC_HD bool StepNeedsStats(int kind) { return StepNeedsHistogram(kind) || kind == kStepContrast || kind == kStepBlur; }

// The statistics of step `s` from its input's channel histograms (hist[c][v]: pixels with value v in
// channel c; only for StepNeedsHistogram) and the sum of its grey values over `pixels` pixels
// (kStepContrast). Integers until the last division, so any summation order gives the same result.
DSC_HD void FinishStats(const TransformStep& s, const uint32_t (*hist)[256], uint64_t gray_sum, uint64_t pixels,
                        StepStats* st) {
  if (s.kind == kStepContrast) st->mean = pixels ? float(double(gray_sum) / double(pixels)) : 0.f;
  if (s.kind == kStepBlur) {
    GaussianKernel1d(s.i[0], s.a, st->kx);
    GaussianKernel1d(s.i[1], s.b, st->ky);
  }
  if (!StepNeedsHistogram(s.kind)) return;
  for (int c = 0; c < 3; ++c) {
    uint8_t* lut = st->lut[c];
    for (int v = 0; v < 256; ++v) lut[v] = uint8_t(v);
    const uint32_t* h = hist[c];
    if (s.kind == kStepAutocontrast) {
      // ((img - min) * (255 / (max - min))).clamp(0, 255).to(uint8), a flat channel left as it is.
      int lo = 0, hi = 255;
      while (lo < 255 && h[lo] == 0) ++lo;
      while (hi > 0 && h[hi] == 0) --hi;
      if (hi <= lo) continue;
      const float scale = 255.f / float(hi - lo);
      for (int v = lo; v <= hi; ++v) lut[v] = TruncU8(float(v - lo) * scale);
    } else {
      // _scale_channel, as Equalize in transform_ops.cc.
      int last = 255;
      while (last > 0 && h[last] == 0) --last;
      int64_t nonzero = 0;
      for (int v = 0; v < last; ++v) nonzero += h[v];
      const int64_t step = nonzero / 255;
      if (step == 0) continue;
      int64_t cum = 0;
      for (int v = 0; v < 256; ++v) {
        const int64_t q = (cum + step / 2) / step;
        lut[v] = uint8_t(q < 255 ? q : 255);
        cum += h[v];
      }
    }
  }
}

// Output pixel (x, y) of step `s` on the w x h packed RGB image `in` (its stats `st`), into out[0..2].
DSC_HD void StepElement(const TransformStep& s, const StepStats& st, const uint8_t* in, int w, int h, int x, int y,
                        uint8_t* out) {
  const uint8_t* p = in + (size_t(y) * size_t(w) + size_t(x)) * 3;
  switch (s.kind) {
    case kStepPadCrop: {
      const int sx = PadIndex(s.i[2] + x - s.i[0], w, s.mode), sy = PadIndex(s.i[3] + y - s.i[1], h, s.mode);
      if (sx < 0 || sy < 0) {
        for (int c = 0; c < 3; ++c) out[c] = uint8_t(s.fill[c]);
        return;
      }
      p = in + (size_t(sy) * size_t(w) + size_t(sx)) * 3;
      break;
    }
    case kStepFlipH: p = in + (size_t(y) * size_t(w) + size_t(w - 1 - x)) * 3; break;
    case kStepFlipV: p = in + (size_t(h - 1 - y) * size_t(w) + size_t(x)) * 3; break;
    case kStepBrightness: {
      const BlendFactors f = MakeBlend(s.a);
      for (int c = 0; c < 3; ++c) out[c] = TruncU8(f.r * float(p[c]) + f.rc * 0.f);
      return;
    }
    case kStepContrast: {
      const BlendFactors f = MakeBlend(s.a);
      const float o = f.rc * st.mean;
      for (int c = 0; c < 3; ++c) out[c] = TruncU8(f.r * float(p[c]) + o);
      return;
    }
    case kStepSaturation: {
      const BlendFactors f = MakeBlend(s.a);
      const float r = float(p[0]), g = float(p[1]), b = float(p[2]);
      const float o = f.rc * float(int((0.2989f * r + 0.587f * g) + 0.114f * b));
      out[0] = TruncU8(f.r * r + o);
      out[1] = TruncU8(f.r * g + o);
      out[2] = TruncU8(f.r * b + o);
      return;
    }
    case kStepHue: return HuePixel(p, float(s.a), out);
    case kStepGray: out[0] = out[1] = out[2] = Gray(p[0], p[1], p[2]); return;
    case kStepSolarize:
      for (int c = 0; c < 3; ++c) out[c] = SolarizeValue(p[c], float(s.a));
      return;
    case kStepPosterize:
      for (int c = 0; c < 3; ++c) out[c] = PosterizeValue(p[c], s.i[0]);
      return;
    case kStepAutocontrast:
    case kStepEqualize:
      for (int c = 0; c < 3; ++c) out[c] = st.lut[c][p[c]];
      return;
    case kStepInvert:
      for (int c = 0; c < 3; ++c) out[c] = uint8_t(255 - p[c]);
      return;
    case kStepSharpness: {
      // The 3 x 3 (1 1 1 / 1 5 1 / 1 1 1) / 13 blur on the interior (borders keep the image), blended.
      if (w <= 2 || h <= 2) break;  // torchvision leaves such an image as it is
      const BlendFactors f = MakeBlend(s.a);
      const bool interior = x > 0 && x < w - 1 && y > 0 && y < h - 1;
      const size_t stride = size_t(w) * 3;
      for (int c = 0; c < 3; ++c) {
        uint8_t deg = p[c];
        if (interior) {
          const uint8_t* u = p + c - stride;
          const uint8_t* m = p + c;
          const uint8_t* d = p + c + stride;
          const float k1 = 1.f / 13.f, k5 = 5.f / 13.f;
          float acc = k1 * float(u[-3]);
          acc += k1 * float(u[0]);
          acc += k1 * float(u[3]);
          acc += k1 * float(m[-3]);
          acc += k5 * float(m[0]);
          acc += k1 * float(m[3]);
          acc += k1 * float(d[-3]);
          acc += k1 * float(d[0]);
          acc += k1 * float(d[3]);
          deg = RoundU8(acc);
        }
        out[c] = TruncU8(f.r * float(p[c]) + f.rc * float(deg));
      }
      return;
    }
    case kStepBlur: {
      // The 2-D kernel as torch.mm makes it (each weight one float32 product), reflect padding.
      const int kx = s.i[0], ky = s.i[1], rx = kx / 2, ry = ky / 2;
      float acc[3] = {0.f, 0.f, 0.f};
      for (int j = 0; j < ky; ++j) {
        const uint8_t* row = in + size_t(ReflectIndex(y + j - ry, h)) * size_t(w) * 3;
        for (int i = 0; i < kx; ++i) {
          const float k = st.ky[j] * st.kx[i];
          const uint8_t* q = row + size_t(ReflectIndex(x + i - rx, w)) * 3;
          for (int c = 0; c < 3; ++c) acc[c] += k * float(q[c]);
        }
      }
      for (int c = 0; c < 3; ++c) out[c] = RoundU8(acc[c]);
      return;
    }
    case kStepAffine:
    case kStepPerspective: {
      const float fw = float(w), fh = float(h);
      float ix, iy;
      if (s.kind == kStepAffine) AffineSource(s.g, AffineBase(w, x), AffineBase(h, y), fw, fh, &ix, &iy);
      else PerspectiveSource(s.g, PerspectiveBase(w, x), PerspectiveBase(h, y), fw, fh, &ix, &iy);
      return GridSampleAt(in, w, h, ix, iy, s.mode, s.has_fill ? s.fill : nullptr, out);
    }
    case kStepErase:
      if (y >= s.i[0] && y < s.i[0] + s.i[2] && x >= s.i[1] && x < s.i[1] + s.i[3]) {
        for (int c = 0; c < 3; ++c) out[c] = uint8_t(s.fill[c]);
        return;
      }
      break;
    default: break;
  }
  for (int c = 0; c < 3; ++c) out[c] = p[c];
}

// The CPU twin of the device path: steps [n * per_sample] over n packed w x h RGB images, in place
// (`scratch` holds the second buffer). The same per-element code, stats and step order as the kernels.
void RunStepsCpu(const TransformStep* steps, int per_sample, uint8_t* images, int n, int w, int h,
                 std::vector<uint8_t>* scratch);

}  // namespace dsc::kernels
