// CUDA launcher for kernels/batch_augment.h: one thread per output pixel of a 32 x 8 tile, tiles of
// the whole batch on gridDim.x (AugmentGeometry), so any batch size launches.
#pragma once
#include <cuda_runtime.h>

#include "kernels/batch_augment.h"

namespace dsc::kernels {

// All pointers are device pointers; the launch is asynchronous on `stream`.
cudaError_t LaunchAugmentBatch(const DeferredAugment& a, const uint8_t* images, const SampleParams* params, int n,
                               void* out, cudaStream_t stream);

// The kernel's attributes on the current device: cudaErrorNoKernelImageForDevice (or
// cudaErrorInvalidDeviceFunction) when this build holds no image the device can run.
cudaError_t AugmentKernelAttributes(cudaFuncAttributes* attr);

}  // namespace dsc::kernels
