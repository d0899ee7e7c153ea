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

AugmentGeometry MakeAugmentGeometry(int width, int height, int n, unsigned max_grid) {
  AugmentGeometry g;
  g.width = width;
  g.height = height;
  g.n = n;
  if (width <= 0 || height <= 0 || n <= 0 || max_grid == 0) return g;  // nothing to launch
  g.tiles_x = (uint64_t(width) + AugmentGeometry::kTileW - 1) / AugmentGeometry::kTileW;
  g.tiles_y = (uint64_t(height) + AugmentGeometry::kTileH - 1) / AugmentGeometry::kTileH;
  g.tiles = g.tiles_x * g.tiles_y * uint64_t(n);
  g.grid = unsigned(g.tiles < max_grid ? g.tiles : max_grid);
  return g;
}

void AugmentBatchCpu(const DeferredAugment& a, const uint8_t* images, const SampleParams* params, int n, void* out) {
  for (int s = 0; s < n; ++s)
    for (int y = 0; y < a.height; ++y)
      for (int x = 0; x < a.width; ++x) AugmentElement(a, images, params, s, y, x, out);
}

}  // namespace dsc::kernels
