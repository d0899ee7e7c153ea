// The GPU JPEG decoder's launcher: one staged batch (kernels/jpeg_twin_batch.h, in pinned memory) ->
// one asynchronous host-to-device copy -> entropy decoding (one thread per decode unit: restart
// intervals or whole small images, packed 32 independent units to a warp) -> IDCT (one thread per
// block) -> upsampling + colour (one thread per pixel), RGB in device memory; crops (kernels/
// jpeg_twin_crop.h): their axes' taps (one thread per axis entry), then the resize (one thread per
// output pixel of a 16 x 16 tile). Every stage calls the
// DSC_HD functions the host twin runs. Run on an H100 (bench/RESULTS.md); CI has no GPU.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace dsc::kernels {
struct TwinBatchHeader;
}

namespace dsc::kernels::cuda {

struct TwinDeviceBuffers {
  uint8_t* staged = nullptr;  // >= the stager's capacity
  int16_t* coef = nullptr;    // total_blocks * 64
  uint8_t* planes = nullptr;  // total_blocks * 64
  uint8_t* rgb = nullptr;     // rgb_bytes
  int* status = nullptr;      // one per image
  uint8_t* decoded = nullptr;  // decoded_bytes (crops)
  int32_t* taps = nullptr;     // tap_ints (crops)
  size_t staged_capacity = 0, block_capacity = 0, rgb_capacity = 0, image_capacity = 0;
  size_t decoded_capacity = 0, tap_capacity = 0;
};

// Allocates the device buffers for batches up to these bounds. false (with *error) on a CUDA error.
bool AllocateTwinBuffers(size_t staged_bytes, size_t max_blocks, size_t max_rgb_bytes, size_t max_images,
                         TwinDeviceBuffers* out, std::string* error, size_t max_decoded_bytes = 0,
                         size_t max_tap_ints = 0);
void FreeTwinBuffers(TwinDeviceBuffers* b);
// Pinned host memory for the stager.
bool AllocatePinned(size_t bytes, uint8_t** out, std::string* error);
void FreePinned(uint8_t* p);

// Enqueues the copy of staged[0, staged_bytes) and the three kernels on `stream` (a cudaStream_t).
// The staged buffer must stay untouched until the stream reaches this point (record an event).
bool LaunchTwinDecode(const uint8_t* staged, size_t staged_bytes, const TwinDeviceBuffers& d, void* stream,
                      std::string* error);

// The kernels alone, on a batch already on the device: `h` is the batch's header (read on the host),
// `staged` its device copy, and each image's RGB goes to rgb + TwinImage::rgb. coef / planes hold
// h.total_blocks * 64 entries, status h.images ints (zeroed here), decoded h.decoded_bytes and taps
// h.tap_ints (crops). For the loader's batches, whose staged payloads and images travel in one copy
// (gpu::Augmenter).
bool LaunchTwinKernels(const TwinBatchHeader& h, const uint8_t* staged, int16_t* coef, uint8_t* planes, uint8_t* rgb,
                       int* status, uint8_t* decoded, int32_t* taps, void* stream, std::string* error);

}  // namespace dsc::kernels::cuda
