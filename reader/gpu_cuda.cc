// gpu.h with the CUDA runtime API (Debian's libtorch has no CUDA, so dsc talks to CUDA directly).
#include <cuda_runtime.h>

#include "format/error.h"
#include "kernels/cuda/batch_augment.h"
#include "reader/gpu.h"

namespace dsc::gpu {

namespace {

void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e) + " (error " + std::to_string(int(e)) + ")");
}

}  // namespace

bool BuiltWithCuda() { return true; }

bool Available(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e) + " (error " + std::to_string(int(e)) + ")";
    return false;
  }
  if (n == 0) {
    if (why) *why = "no CUDA device";
    return false;
  }
  return true;
}

void* PinnedAllocate(size_t bytes) {
  void* p = nullptr;
  if (cudaHostAlloc(&p, bytes, cudaHostAllocDefault) != cudaSuccess) return nullptr;
  return p;
}

void PinnedRelease(void* p) { cudaFreeHost(p); }

void Wait(const DeviceBatch& d) {
  if (d.ready) Check(cudaEventSynchronize(static_cast<cudaEvent_t>(d.ready)), "cudaEventSynchronize");
}

struct Augmenter::Impl {
  kernels::DeferredAugment a;
  int device = 0;
  cudaStream_t stream = nullptr;
  cudaEvent_t ready = nullptr, copied = nullptr;
  uint8_t* d_images = nullptr;
  kernels::SampleParams* d_params = nullptr;
  void* d_out = nullptr;
  uint32_t max_batch = 0;
  DType dtype;
  Layout layout;
};

Augmenter::Augmenter(const kernels::AugmentSpec& spec, uint32_t width, uint32_t height, uint32_t max_batch, DType dtype,
                     Layout layout, int device)
    : impl_(new Impl) {
  std::string why;
  if (!Available(&why)) {
    delete impl_;
    throw Error("no usable GPU: " + why);
  }
  if (dtype == DType::kUint8) throw Error("the GPU stage outputs float32 or float16");
  Impl& m = *impl_;
  m.a = kernels::MakeDeferredAugment(spec, int(width), int(height), dtype == DType::kFloat16 ? kernels::kOutFloat16 : kernels::kOutFloat32,
                                     layout == Layout::kNCHW ? kernels::kOutNCHW : kernels::kOutNHWC);
  m.device = device;
  m.max_batch = max_batch;
  m.dtype = dtype;
  m.layout = layout;
  Check(cudaSetDevice(device), "cudaSetDevice");
  Check(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  Check(cudaEventCreateWithFlags(&m.ready, cudaEventDisableTiming), "cudaEventCreate");
  Check(cudaEventCreateWithFlags(&m.copied, cudaEventDisableTiming), "cudaEventCreate");
  const size_t pixels = size_t(max_batch) * width * height * 3;
  Check(cudaMalloc(&m.d_images, pixels), "cudaMalloc images");
  Check(cudaMalloc(&m.d_params, sizeof(kernels::SampleParams) * max_batch), "cudaMalloc params");
  Check(cudaMalloc(&m.d_out, pixels * DTypeSize(dtype)), "cudaMalloc output");
}

Augmenter::~Augmenter() {
  Impl& m = *impl_;
  if (m.stream) cudaStreamSynchronize(m.stream);
  cudaFree(m.d_images);
  cudaFree(m.d_params);
  cudaFree(m.d_out);
  if (m.ready) cudaEventDestroy(m.ready);
  if (m.copied) cudaEventDestroy(m.copied);
  if (m.stream) cudaStreamDestroy(m.stream);
  delete impl_;
}

DeviceBatch Augmenter::Process(const Batch& b) {
  Impl& m = *impl_;
  if (b.dtype != DType::kUint8 || b.layout != Layout::kNHWC || !b.params)
    throw Error("gpu::Augmenter needs batches from a loader with defer_augment (uint8 NHWC)");
  if (b.size > m.max_batch || int(b.width) != m.a.width || int(b.height) != m.a.height)
    throw Error("gpu::Augmenter: batch shape differs from the one it was made for");
  Check(cudaSetDevice(m.device), "cudaSetDevice");
  Check(cudaMemcpyAsync(m.d_images, b.images, b.image_bytes() * b.size, cudaMemcpyHostToDevice, m.stream), "copy images");
  Check(cudaMemcpyAsync(m.d_params, b.params, sizeof(kernels::SampleParams) * b.size, cudaMemcpyHostToDevice, m.stream),
        "copy params");
  Check(cudaEventRecord(m.copied, m.stream), "cudaEventRecord");
  Check(kernels::LaunchAugmentBatch(m.a, m.d_images, m.d_params, int(b.size), m.d_out, m.stream), "augment kernel");
  Check(cudaEventRecord(m.ready, m.stream), "cudaEventRecord");
  // The loader refills this host batch once the consumer asks for the next one, so the copies (not
  // the kernel) must be finished before returning.
  Check(cudaEventSynchronize(m.copied), "cudaEventSynchronize");
  DeviceBatch d;
  d.images = m.d_out;
  d.size = b.size;
  d.height = b.height;
  d.width = b.width;
  d.dtype = m.dtype;
  d.layout = m.layout;
  d.device = m.device;
  d.ready = m.ready;
  d.stream = m.stream;
  return d;
}

}  // namespace dsc::gpu
