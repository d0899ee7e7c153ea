// CUDA launcher for kernels/transform_steps.h: the list transforms' steps over a batch, step by step.
#pragma once
#include <cuda_runtime.h>

#include "kernels/transform_steps.h"

namespace dsc::kernels {

// Step j of each of the n samples (steps: [n * per_sample], device memory) from the packed w x h RGB
// images `in` into `out` (both n images, device memory); `stats` holds n StepStats of scratch. With
// `stats_needed` false (no sample's step j has StepNeedsStats) the statistics kernel is skipped.
// Asynchronous on `stream`.
cudaError_t LaunchTransformStep(const TransformStep* steps, int per_sample, int j, const uint8_t* in, uint8_t* out,
                                StepStats* stats, int n, int w, int h, bool stats_needed, cudaStream_t stream);

}  // namespace dsc::kernels
