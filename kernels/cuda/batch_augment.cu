#include "kernels/cuda/batch_augment.h"

namespace dsc::kernels {

namespace {

__global__ void AugmentKernel(DeferredAugment a, const uint8_t* images, const SampleParams* params, void* out) {
  const int x = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (x >= a.width) return;
  AugmentElement(a, images, params, int(blockIdx.z), int(blockIdx.y), x, out);
}

}  // namespace

cudaError_t LaunchAugmentBatch(const DeferredAugment& a, const uint8_t* images, const SampleParams* params, int n,
                               void* out, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const dim3 block(128);
  const dim3 grid(unsigned((a.width + 127) / 128), unsigned(a.height), unsigned(n));
  AugmentKernel<<<grid, block, 0, stream>>>(a, images, params, out);
  return cudaGetLastError();
}

}  // namespace dsc::kernels
