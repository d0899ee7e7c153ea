// gpu.h with the CUDA runtime API (Debian's libtorch has no CUDA, so dsc talks to CUDA directly).
#include <cuda_runtime.h>

#include <memory>

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

// Owning holders for the CUDA handles: each member releases what it holds, so a constructor that
// throws midway (no memory, a failed event) releases everything made before the throw.
struct StreamDeleter {
  void operator()(CUstream_st* s) const {
    cudaStreamSynchronize(s);  // nothing may still read or write the buffers freed after it
    cudaStreamDestroy(s);
  }
};
struct EventDeleter {
  void operator()(CUevent_st* e) const { cudaEventDestroy(e); }
};
struct DeviceDeleter {
  void operator()(void* p) const { cudaFree(p); }
};
using StreamPtr = std::unique_ptr<CUstream_st, StreamDeleter>;
using EventPtr = std::unique_ptr<CUevent_st, EventDeleter>;
using DevicePtr = std::unique_ptr<void, DeviceDeleter>;

namespace {

StreamPtr MakeStream() {
  cudaStream_t s = nullptr;
  Check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  return StreamPtr(s);
}

EventPtr MakeEvent() {
  cudaEvent_t e = nullptr;
  Check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  return EventPtr(e);
}

DevicePtr DeviceAlloc(size_t bytes, const char* what) {
  void* p = nullptr;
  Check(cudaMalloc(&p, bytes), what);
  return DevicePtr(p);
}

}  // namespace

struct Augmenter::Impl {
  kernels::DeferredAugment a;
  int device = 0;
  uint32_t max_batch = 0;
  DType dtype;
  Layout layout;
  // Declared before the stream so they are destroyed after it: the stream's deleter waits for the
  // work that still uses them.
  DevicePtr d_images, d_params, d_out;
  EventPtr ready, copied;
  StreamPtr stream;
};

Augmenter::Augmenter(const kernels::AugmentSpec& spec, uint32_t width, uint32_t height, uint32_t max_batch, DType dtype,
                     Layout layout, int device) {
  std::string why;
  if (!Available(&why)) throw Error("no usable GPU: " + why);
  if (dtype == DType::kUint8) throw Error("the GPU stage outputs float32 or float16");
  // Built in a holder and handed over only when complete: a throw below releases every handle made so far.
  auto m = std::make_unique<Impl>();
  m->a = kernels::MakeDeferredAugment(spec, int(width), int(height), dtype == DType::kFloat16 ? kernels::kOutFloat16 : kernels::kOutFloat32,
                                      layout == Layout::kNCHW ? kernels::kOutNCHW : kernels::kOutNHWC);
  m->device = device;
  m->max_batch = max_batch;
  m->dtype = dtype;
  m->layout = layout;
  Check(cudaSetDevice(device), "cudaSetDevice");
  m->stream = MakeStream();
  m->ready = MakeEvent();
  m->copied = MakeEvent();
  const size_t pixels = size_t(max_batch) * width * height * 3;
  m->d_images = DeviceAlloc(pixels, "cudaMalloc images");
  m->d_params = DeviceAlloc(sizeof(kernels::SampleParams) * max_batch, "cudaMalloc params");
  m->d_out = DeviceAlloc(pixels * DTypeSize(dtype), "cudaMalloc output");
  impl_ = m.release();
}

Augmenter::~Augmenter() {
  if (impl_) cudaSetDevice(impl_->device);
  delete impl_;  // the members release the stream (after waiting for it), events and memory
}

DeviceBatch Augmenter::Process(const Batch& b) {
  Impl& m = *impl_;
  if (b.dtype != DType::kUint8 || b.layout != Layout::kNHWC || !b.params)
    throw Error("gpu::Augmenter needs batches from a loader with defer_augment (uint8 NHWC)");
  if (b.size > m.max_batch || int(b.width) != m.a.width || int(b.height) != m.a.height)
    throw Error("gpu::Augmenter: batch shape differs from the one it was made for");
  Check(cudaSetDevice(m.device), "cudaSetDevice");
  auto* images = static_cast<uint8_t*>(m.d_images.get());
  auto* params = static_cast<kernels::SampleParams*>(m.d_params.get());
  cudaStream_t stream = m.stream.get();
  Check(cudaMemcpyAsync(images, b.images, b.image_bytes() * b.size, cudaMemcpyHostToDevice, stream), "copy images");
  Check(cudaMemcpyAsync(params, b.params, sizeof(kernels::SampleParams) * b.size, cudaMemcpyHostToDevice, stream), "copy params");
  Check(cudaEventRecord(m.copied.get(), stream), "cudaEventRecord");
  Check(kernels::LaunchAugmentBatch(m.a, images, params, int(b.size), m.d_out.get(), stream), "augment kernel");
  Check(cudaEventRecord(m.ready.get(), stream), "cudaEventRecord");
  // The loader refills this host batch once the consumer asks for the next one, so the copies (not
  // the kernel) must be finished before returning.
  Check(cudaEventSynchronize(m.copied.get()), "cudaEventSynchronize");
  DeviceBatch d;
  d.images = m.d_out.get();
  d.size = b.size;
  d.height = b.height;
  d.width = b.width;
  d.dtype = m.dtype;
  d.layout = m.layout;
  d.device = m.device;
  d.ready = m.ready.get();
  d.stream = stream;
  return d;
}

}  // namespace dsc::gpu
