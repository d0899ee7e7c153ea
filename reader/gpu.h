// The GPU half of the pipeline (built when the CUDA toolkit is found; compiled and CPU-verified here,
// never run on a GPU in this project's CI).
//
//   LoaderOptions opt = LoaderOptions::CifarTrain();
//   opt.defer_augment = true; opt.dtype = DType::kUint8; opt.layout = Layout::kNHWC;
//   opt.allocate = gpu::PinnedAllocate; opt.release = gpu::PinnedRelease;   // fast async copies
//   Loader loader(path, opt);
//   gpu::Augmenter aug(opt.augment, loader.width(), loader.height(), opt.batch_size, DType::kFloat16, Layout::kNCHW);
//   for (const Batch& b : loader.epoch(e)) {
//     gpu::DeviceBatch d = aug.Process(b);             // async on dsc's stream
//     cudaStreamWaitEvent(my_stream, (cudaEvent_t)d.ready, 0);
//     ... use d.images on my_stream ...
//   }
//
// Without a usable GPU (cudaGetDeviceCount fails or finds none), Available() is false with the reason,
// and callers fall back to the CPU path (the same results: kernels::AugmentBatchCpu runs the kernel's
// per-element code).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "reader/loader.h"

namespace dsc::gpu {

// Whether a CUDA device is usable; `why` receives the reason when not.
bool Available(std::string* why = nullptr);
bool BuiltWithCuda();

// Pinned (page-locked) host memory for LoaderOptions::allocate / release.
void* PinnedAllocate(size_t bytes);
void PinnedRelease(void* p);

struct DeviceBatch {
  void* images = nullptr;     // device pointer, shape (size, 3, h, w) for NCHW or (size, h, w, 3)
  uint32_t size = 0, height = 0, width = 0;
  DType dtype = DType::kFloat32;
  Layout layout = Layout::kNCHW;
  int device = 0;
  void* ready = nullptr;      // cudaEvent_t recorded after the kernel; wait on it before reading
  void* stream = nullptr;     // cudaStream_t dsc used
};

// Blocks the calling thread until the batch's kernel has finished (for consumers that cannot make a
// CUDA stream wait on DeviceBatch::ready, e.g. libtorch builds without the c10::cuda headers).
void Wait(const DeviceBatch& d);

class Augmenter {
 public:
  // Throws dsc::Error when no GPU is usable (check Available() first to fall back).
  Augmenter(const kernels::AugmentSpec& spec, uint32_t width, uint32_t height, uint32_t max_batch, DType dtype,
            Layout layout, int device = 0);
  ~Augmenter();
  Augmenter(const Augmenter&) = delete;
  Augmenter& operator=(const Augmenter&) = delete;
  // `b` must come from a loader with defer_augment (uint8 NHWC + params). The result is valid until
  // the next Process call.
  DeviceBatch Process(const Batch& b);

 private:
  struct Impl;
  Impl* impl_ = nullptr;
};

}  // namespace dsc::gpu
