// The deferred (GPU) half of the pipeline: flip / translate / cutout, uint8 -> float32 or float16,
// normalisation and layout, for a whole batch of uint8 NHWC images and their per-sample parameters
// (Batch::params from a loader with defer_augment). AugmentElement is the per-element code the CUDA
// kernel runs; AugmentBatchCpu runs the same code on the CPU, which is how it is tested here.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/augment.h"
#include "kernels/hd.h"

namespace dsc::kernels {

enum OutDType : int { kOutFloat32 = 0, kOutFloat16 = 1 };
enum OutLayout : int { kOutNCHW = 0, kOutNHWC = 1 };

struct DeferredAugment {
  AugmentSpec spec;  // flip/translate/cutout/fill (crop is done before, on the CPU)
  float scale[3] = {1, 1, 1}, bias[3] = {0, 0, 0};  // NormalizeCoefficients(spec)
  int width = 0, height = 0;
  int dtype = kOutFloat32;
  int layout = kOutNCHW;
};

DeferredAugment MakeDeferredAugment(const AugmentSpec& spec, int width, int height, int dtype, int layout);

// Output pixel (x, y) of sample n: all three channels.
DSC_HD void AugmentElement(const DeferredAugment& a, const uint8_t* images, const SampleParams* params, int n, int y,
                           int x, void* out) {
  const int w = a.width, h = a.height;
  uint8_t rgb[3];
  OutputPixel(params[n], a.spec, w, h, images + size_t(n) * h * w * 3, w, h, w * 3, x, y, rgb);
  for (int c = 0; c < 3; ++c) {
    const float v = Normalize(rgb[c], a.scale[c], a.bias[c]);
    const size_t idx = a.layout == kOutNCHW ? ((size_t(n) * 3 + c) * h + y) * w + x : ((size_t(n) * h + y) * w + x) * 3 + c;
    if (a.dtype == kOutFloat32) static_cast<float*>(out)[idx] = v;
    else static_cast<uint16_t*>(out)[idx] = FloatToHalf(v);
  }
}

// The CPU twin of the CUDA kernel: the same per-element code over the whole batch.
void AugmentBatchCpu(const DeferredAugment& a, const uint8_t* images, const SampleParams* params, int n, void* out);

}  // namespace dsc::kernels
