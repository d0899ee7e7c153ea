// CUDA launcher for kernels/batch_augment.h: one thread per output pixel, grid (width, height, batch).
#pragma once
#include <cuda_runtime.h>

#include "kernels/batch_augment.h"

namespace dsc::kernels {

// All pointers are device pointers; the launch is asynchronous on `stream`.
cudaError_t LaunchAugmentBatch(const DeferredAugment& a, const uint8_t* images, const SampleParams* params, int n,
                               void* out, cudaStream_t stream);

}  // namespace dsc::kernels
