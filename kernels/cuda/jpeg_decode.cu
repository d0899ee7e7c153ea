#include "kernels/cuda/jpeg_decode.h"

#include <cuda_runtime.h>

#include "kernels/jpeg_twin_batch.h"

namespace dsc::kernels::cuda {

namespace {

bool Check(cudaError_t e, const char* what, std::string* error) {
  if (e == cudaSuccess) return true;
  if (error) *error = std::string(what) + ": " + cudaGetErrorString(e);
  return false;
}

__global__ void EntropyKernel(const uint8_t* buf, uint32_t units, int16_t* coef, int* status) {
  const uint32_t u = blockIdx.x * blockDim.x + threadIdx.x;
  if (u < units) TwinDecodeUnit(buf, u, coef, status);
}

__global__ void IdctKernel(const uint8_t* buf, uint64_t blocks, const int16_t* coef, uint8_t* planes, int* status) {
  const uint64_t b = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b < blocks) TwinIdctBatchBlock(buf, b, coef, planes, status);
}

// Grid: x over pixels of the largest image, y over images (no gridDim.z cap on the batch).
__global__ void PixelKernel(const uint8_t* buf, const uint8_t* planes, uint8_t* rgb) {
  const uint32_t i = blockIdx.y;
  const TwinImage& im = TwinImages(buf)[i];
  const uint32_t n = uint32_t(im.frame.width) * im.frame.height;
  for (uint32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < n; p += gridDim.x * blockDim.x)
    TwinBatchPixel(buf, i, p, planes, rgb);
}

}  // namespace

bool AllocateTwinBuffers(size_t staged_bytes, size_t max_blocks, size_t max_rgb_bytes, size_t max_images,
                         TwinDeviceBuffers* out, std::string* error) {
  TwinDeviceBuffers b;
  bool ok = Check(cudaMalloc(&b.staged, staged_bytes), "cudaMalloc staged", error) &&
            Check(cudaMalloc(&b.coef, max_blocks * 64 * sizeof(int16_t)), "cudaMalloc coef", error) &&
            Check(cudaMalloc(&b.planes, max_blocks * 64), "cudaMalloc planes", error) &&
            Check(cudaMalloc(&b.rgb, max_rgb_bytes), "cudaMalloc rgb", error) &&
            Check(cudaMalloc(&b.status, max_images * sizeof(int)), "cudaMalloc status", error);
  b.staged_capacity = staged_bytes;
  b.block_capacity = max_blocks;
  b.rgb_capacity = max_rgb_bytes;
  b.image_capacity = max_images;
  if (!ok) {
    FreeTwinBuffers(&b);
    return false;
  }
  *out = b;
  return true;
}

void FreeTwinBuffers(TwinDeviceBuffers* b) {
  cudaFree(b->staged);
  cudaFree(b->coef);
  cudaFree(b->planes);
  cudaFree(b->rgb);
  cudaFree(b->status);
  *b = TwinDeviceBuffers();
}

bool AllocatePinned(size_t bytes, uint8_t** out, std::string* error) {
  return Check(cudaMallocHost(reinterpret_cast<void**>(out), bytes), "cudaMallocHost", error);
}
void FreePinned(uint8_t* p) { cudaFreeHost(p); }

bool LaunchTwinDecode(const uint8_t* staged, size_t staged_bytes, const TwinDeviceBuffers& d, void* stream,
                      std::string* error) {
  const auto& h = *reinterpret_cast<const TwinBatchHeader*>(staged);
  if (staged_bytes > d.staged_capacity || h.total_blocks > d.block_capacity || h.rgb_bytes > d.rgb_capacity ||
      h.images > d.image_capacity) {
    if (error) *error = "batch larger than the device buffers";
    return false;
  }
  if (h.images == 0) return true;
  if (!Check(cudaMemcpyAsync(d.staged, staged, staged_bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream)),
             "cudaMemcpyAsync", error))
    return false;
  return LaunchTwinKernels(h, d.staged, d.coef, d.planes, d.rgb, d.status, stream, error);
}

bool LaunchTwinKernels(const TwinBatchHeader& h, const uint8_t* staged, int16_t* coef, uint8_t* planes, uint8_t* rgb,
                       int* status, void* stream, std::string* error) {
  if (h.images == 0) return true;
  auto s = static_cast<cudaStream_t>(stream);
  if (!Check(cudaMemsetAsync(status, 0, h.images * sizeof(int), s), "cudaMemsetAsync", error)) return false;
  constexpr int kThreads = 128;
  EntropyKernel<<<(h.units + kThreads - 1) / kThreads, kThreads, 0, s>>>(staged, h.units, coef, status);
  IdctKernel<<<unsigned((h.total_blocks + kThreads - 1) / kThreads), kThreads, 0, s>>>(staged, h.total_blocks, coef,
                                                                                     planes, status);
  const dim3 grid(64, h.images);
  PixelKernel<<<grid, 256, 0, s>>>(staged, planes, rgb);
  return Check(cudaGetLastError(), "kernel launch", error);
}

}  // namespace dsc::kernels::cuda
