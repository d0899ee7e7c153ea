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

// Launch geometry of the CUDA kernel: one thread per output pixel of a 2-D tile (kTileW x kTileH
// threads; a 32-pixel row fills a whole warp), and tiles numbered across the batch so that no grid
// dimension caps the batch size: block b handles tiles b, b + grid, b + 2 grid, ... (grid = the
// launch's gridDim.x, at most max_grid). Plain data, so CPU tests enumerate exactly what the kernel does.
struct AugmentGeometry {
  static constexpr unsigned kTileW = 32, kTileH = 8;
  int width = 0, height = 0, n = 0;
  uint64_t tiles_x = 0, tiles_y = 0, tiles = 0;  // tiles = tiles_x * tiles_y * n
  unsigned grid = 0;                             // blocks launched (gridDim.x)
};

// max_grid: CUDA's gridDim.x limit by default; tests pass small values to exercise the tile loop.
AugmentGeometry MakeAugmentGeometry(int width, int height, int n, unsigned max_grid = 0x7fffffffu);

// The output element thread (tx, ty) of tile `tile` writes: false for threads past the image's edge.
DSC_HD bool TileElement(const AugmentGeometry& g, uint64_t tile, unsigned tx, unsigned ty, int* n, int* y, int* x) {
  const uint64_t per_image = g.tiles_x * g.tiles_y;
  const uint64_t in_image = tile % per_image;
  *n = int(tile / per_image);
  *x = int((in_image % g.tiles_x) * AugmentGeometry::kTileW + tx);
  *y = int((in_image / g.tiles_x) * AugmentGeometry::kTileH + ty);
  return *x < g.width && *y < g.height;
}

// The CPU twin of the CUDA kernel: the same per-element code over the whole batch.
void AugmentBatchCpu(const DeferredAugment& a, const uint8_t* images, const SampleParams* params, int n, void* out);

}  // namespace dsc::kernels
