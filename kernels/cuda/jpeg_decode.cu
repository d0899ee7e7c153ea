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
__global__ void PixelKernel(const uint8_t* buf, const uint8_t* planes, uint8_t* rgb, uint8_t* decoded) {
  const uint32_t i = blockIdx.y;
  const TwinImage& im = TwinImages(buf)[i];
  const uint32_t n = uint32_t(im.frame.width) * im.frame.height;
  for (uint32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < n; p += gridDim.x * blockDim.x)
    TwinBatchPixel(buf, i, p, planes, rgb, decoded);
}

// Crops, grid y over crops (like PixelKernel's images). Taps: one thread per axis entry.
__global__ void CropTapsKernel(const uint8_t* buf, int32_t* taps, int* status) {
  const uint32_t c = blockIdx.y;
  const TwinCrop& k = TwinCrops(buf)[c];
  const uint32_t n = uint32_t(k.h.n + k.v.n);
  for (uint32_t e = blockIdx.x * blockDim.x + threadIdx.x; e < n; e += gridDim.x * blockDim.x)
    TwinCropTaps(buf, c, e, taps, status);
}

// The resize: one thread per output pixel of a 16 x 16 tile, grid x over the tiles of the largest
// crop (a smaller crop's extra tiles return), y over crops.
constexpr int kTile = 16;
__global__ void CropPixelKernel(const uint8_t* buf, const uint8_t* decoded, const int32_t* taps, uint8_t* rgb) {
  const uint32_t c = blockIdx.y;
  const TwinCrop& k = TwinCrops(buf)[c];
  const uint32_t tiles_x = (uint32_t(k.h.n) + kTile - 1) / kTile;
  const uint32_t tx = blockIdx.x % tiles_x, ty = blockIdx.x / tiles_x;
  const uint32_t x = tx * kTile + threadIdx.x, y = ty * kTile + threadIdx.y;
  if (x < uint32_t(k.h.n) && y < uint32_t(k.v.n)) TwinCropPixel(buf, c, y * uint32_t(k.h.n) + x, decoded, taps, rgb);
}

}  // namespace

bool AllocateTwinBuffers(size_t staged_bytes, size_t max_blocks, size_t max_rgb_bytes, size_t max_images,
                         TwinDeviceBuffers* out, std::string* error, size_t max_decoded_bytes, size_t max_tap_ints) {
  TwinDeviceBuffers b;
  bool ok = Check(cudaMalloc(&b.staged, staged_bytes), "cudaMalloc staged", error) &&
            Check(cudaMalloc(&b.coef, max_blocks * 64 * sizeof(int16_t)), "cudaMalloc coef", error) &&
            Check(cudaMalloc(&b.planes, max_blocks * 64), "cudaMalloc planes", error) &&
            Check(cudaMalloc(&b.rgb, max_rgb_bytes), "cudaMalloc rgb", error) &&
            Check(cudaMalloc(&b.status, max_images * sizeof(int)), "cudaMalloc status", error) &&
            Check(cudaMalloc(&b.decoded, max_decoded_bytes), "cudaMalloc decoded", error) &&
            Check(cudaMalloc(&b.taps, max_tap_ints * sizeof(int32_t)), "cudaMalloc taps", error);
  b.decoded_capacity = max_decoded_bytes;
  b.tap_capacity = max_tap_ints;
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
  cudaFree(b->decoded);
  cudaFree(b->taps);
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
      h.images > d.image_capacity || h.decoded_bytes > d.decoded_capacity || h.tap_ints > d.tap_capacity) {
    if (error) *error = "batch larger than the device buffers";
    return false;
  }
  if (h.images == 0) return true;
  if (!Check(cudaMemcpyAsync(d.staged, staged, staged_bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream)),
             "cudaMemcpyAsync", error))
    return false;
  return LaunchTwinKernels(h, d.staged, d.coef, d.planes, d.rgb, d.status, d.decoded, d.taps, stream, error);
}

bool LaunchTwinKernels(const TwinBatchHeader& h, const uint8_t* staged, int16_t* coef, uint8_t* planes, uint8_t* rgb,
                       int* status, uint8_t* decoded, int32_t* taps, void* stream, std::string* error) {
  if (h.images == 0) return true;
  auto s = static_cast<cudaStream_t>(stream);
  if (!Check(cudaMemsetAsync(status, 0, h.images * sizeof(int), s), "cudaMemsetAsync", error)) return false;
  constexpr int kThreads = 128;
  EntropyKernel<<<(h.units + kThreads - 1) / kThreads, kThreads, 0, s>>>(staged, h.units, coef, status);
  IdctKernel<<<unsigned((h.total_blocks + kThreads - 1) / kThreads), kThreads, 0, s>>>(staged, h.total_blocks, coef,
                                                                                     planes, status);
  const dim3 grid(64, h.images);
  PixelKernel<<<grid, 256, 0, s>>>(staged, planes, rgb, decoded);
  if (h.crops) {
    if (h.crops > 65535) {  // gridDim.y; the loader's batches hold far fewer crops than this
      if (error) *error = "more than 65535 crops in one batch";
      return false;
    }
    CropTapsKernel<<<dim3((h.max_crop_entries + 127) / 128, h.crops), 128, 0, s>>>(staged, taps, status);
    const uint32_t tiles = (h.max_crop_pixels + kTile * kTile - 1) / (kTile * kTile);
    // Enough tiles for any crop's shape: a crop of w x h pixels needs ceil(w/16) * ceil(h/16) tiles,
    // at most (w*h + w + h + 1) / 256 + ...: bounded by the largest crop's pixels + entries.
    const uint32_t bound = tiles + (h.max_crop_entries + kTile - 1) / kTile + 1;
    CropPixelKernel<<<dim3(bound, h.crops), dim3(kTile, kTile), 0, s>>>(staged, decoded, taps, rgb);
  }
  return Check(cudaGetLastError(), "kernel launch", error);
}

}  // namespace dsc::kernels::cuda
