#include "kernels/batch_augment.h"

namespace dsc::kernels {

DeferredAugment MakeDeferredAugment(const AugmentSpec& spec, int width, int height, int dtype, int layout) {
  DeferredAugment a;
  a.spec = spec;
  a.spec.crop = CropMode::kNone;
  NormalizeCoefficients(spec, a.scale, a.bias);
  a.width = width;
  a.height = height;
  a.dtype = dtype;
  a.layout = layout;
  return a;
}

void AugmentBatchCpu(const DeferredAugment& a, const uint8_t* images, const SampleParams* params, int n, void* out) {
  for (int s = 0; s < n; ++s)
    for (int y = 0; y < a.height; ++y)
      for (int x = 0; x < a.width; ++x) AugmentElement(a, images, params, s, y, x, out);
}

}  // namespace dsc::kernels
