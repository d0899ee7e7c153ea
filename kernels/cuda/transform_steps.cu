#include "kernels/cuda/transform_steps.h"

#include "kernels/batch_augment.h"

namespace dsc::kernels {

namespace {

// One block per sample: its channel histograms and grey sum in shared memory (integer atomics, so
// the order of the additions does not matter), then FinishStats as the CPU twin runs it.
__global__ void StepStatsKernel(const TransformStep* steps, int per_sample, int j, const uint8_t* images, int w, int h,
                                StepStats* stats) {
  const TransformStep s = steps[size_t(blockIdx.x) * per_sample + j];
  if (!StepNeedsStats(s.kind)) return;
  __shared__ uint32_t hist[3][256];
  __shared__ unsigned long long gray;
  for (int i = threadIdx.x; i < 3 * 256; i += blockDim.x) hist[i / 256][i % 256] = 0;
  if (threadIdx.x == 0) gray = 0;
  __syncthreads();
  const size_t pixels = size_t(w) * size_t(h);
  const uint8_t* img = images + size_t(blockIdx.x) * pixels * 3;
  const bool histogram = StepNeedsHistogram(s.kind), contrast = s.kind == kStepContrast;
  unsigned long long my_gray = 0;
  for (size_t i = threadIdx.x; i < pixels; i += blockDim.x) {
    const uint8_t* p = img + 3 * i;
    if (histogram)
      for (int c = 0; c < 3; ++c) atomicAdd(&hist[c][p[c]], 1u);
    if (contrast) my_gray += Gray(p[0], p[1], p[2]);
  }
  if (contrast) atomicAdd(&gray, my_gray);
  __syncthreads();
  if (threadIdx.x == 0) FinishStats(s, hist, gray, pixels, &stats[blockIdx.x]);
}

__global__ void StepElementKernel(const TransformStep* steps, int per_sample, int j, AugmentGeometry g,
                                  const uint8_t* in, uint8_t* out, const StepStats* stats) {
  const size_t bytes = size_t(g.width) * size_t(g.height) * 3;
  for (uint64_t tile = blockIdx.x; tile < g.tiles; tile += gridDim.x) {
    int n, y, x;
    if (!TileElement(g, tile, threadIdx.x, threadIdx.y, &n, &y, &x)) continue;
    const TransformStep& s = steps[size_t(n) * per_sample + j];
    StepElement(s, stats[n], in + size_t(n) * bytes, g.width, g.height, x, y,
                out + size_t(n) * bytes + (size_t(y) * size_t(g.width) + size_t(x)) * 3);
  }
}

}  // namespace

cudaError_t LaunchTransformStep(const TransformStep* steps, int per_sample, int j, const uint8_t* in, uint8_t* out,
                                StepStats* stats, int n, int w, int h, bool stats_needed, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (stats_needed) StepStatsKernel<<<dim3(unsigned(n)), dim3(256), 0, stream>>>(steps, per_sample, j, in, w, h, stats);
  const AugmentGeometry g = MakeAugmentGeometry(w, h, n);
  if (g.grid == 0) return cudaGetLastError();
  StepElementKernel<<<dim3(g.grid), dim3(AugmentGeometry::kTileW, AugmentGeometry::kTileH), 0, stream>>>(
      steps, per_sample, j, g, in, out, stats);
  return cudaGetLastError();
}

}  // namespace dsc::kernels
