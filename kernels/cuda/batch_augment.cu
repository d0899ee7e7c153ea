#include "kernels/cuda/batch_augment.h"

namespace dsc::kernels {

namespace {

__global__ void AugmentKernel(DeferredAugment a, AugmentGeometry g, const uint8_t* images, const SampleParams* params,
                              void* out) {
  for (uint64_t tile = blockIdx.x; tile < g.tiles; tile += gridDim.x) {
    int n, y, x;
    if (TileElement(g, tile, threadIdx.x, threadIdx.y, &n, &y, &x)) AugmentElement(a, images, params, n, y, x, out);
  }
}

}  // namespace

cudaError_t LaunchAugmentBatch(const DeferredAugment& a, const uint8_t* images, const SampleParams* params, int n,
                               void* out, cudaStream_t stream) {
  const AugmentGeometry g = MakeAugmentGeometry(a.width, a.height, n);
  if (g.grid == 0) return cudaSuccess;
  AugmentKernel<<<dim3(g.grid), dim3(AugmentGeometry::kTileW, AugmentGeometry::kTileH), 0, stream>>>(a, g, images, params, out);
  return cudaGetLastError();
}

cudaError_t AugmentKernelAttributes(cudaFuncAttributes* attr) {
  return cudaFuncGetAttributes(attr, reinterpret_cast<const void*>(&AugmentKernel));
}

}  // namespace dsc::kernels
