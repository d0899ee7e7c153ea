// gpu.h with the CUDA runtime API (Debian's libtorch has no CUDA, so dsc talks to CUDA directly).
// Run on an H100 (bench/RESULTS.md); CI, without a GPU, runs the host-side logic only.
#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "format/error.h"
#include "kernels/cuda/batch_augment.h"
#include "kernels/cuda/jpeg_decode.h"
#include "kernels/cuda/transform_steps.h"
#include "kernels/jpeg_twin_batch.h"
#include "reader/gpu.h"
#include "reader/gpu_ring.h"
#include "reader/gpu_stage.h"

#ifndef DSC_CUDA_ARCHITECTURES
#define DSC_CUDA_ARCHITECTURES "unknown"
#endif

namespace dsc::gpu {

namespace {

std::string ErrorText(cudaError_t e) {
  return std::string(cudaGetErrorString(e)) + " (error " + std::to_string(int(e)) + ")";
}

void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string("CUDA: ") + what + ": " + ErrorText(e));
}

std::string Version(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

// Makes `device` current for a scope and restores the caller's current device after it: dsc never
// leaves a thread on another device than the one it found. -1 keeps the current one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    Check(cudaGetDevice(&prev_), "cudaGetDevice");
    if (device >= 0 && device != prev_) {
      Check(cudaSetDevice(device), "cudaSetDevice");
      switched_ = true;
    }
  }
  ~DeviceGuard() {
    if (switched_) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = 0;
  bool switched_ = false;
};

int ResolveDevice(int device) {
  if (device >= 0) return device;
  int d = 0;
  Check(cudaGetDevice(&d), "cudaGetDevice");
  return d;
}

// Versions and device count: none of these calls creates a context.
bool CheckDriver(std::string* why, int device, int* count) {
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);  // 0 when no driver is installed
  const std::string versions = "CUDA runtime " + Version(runtime) + ", driver " + (driver ? Version(driver) : "none");
  cudaError_t e = cudaGetDeviceCount(count);
  if (driver == 0) {
    if (why) *why = versions + ": no NVIDIA driver is installed (cudaGetDeviceCount: " + ErrorText(e) + ")";
    return false;
  }
  if (e == cudaErrorInsufficientDriver || (e == cudaSuccess && driver < runtime)) {
    if (why)
      *why = versions + ": the driver is older than the runtime dsc was built with (CUDA error 35); install a driver for CUDA " +
             Version(runtime) + " or newer";
    return false;
  }
  if (e != cudaSuccess) {
    if (why) *why = versions + ": cudaGetDeviceCount: " + ErrorText(e);
    return false;
  }
  if (*count == 0) {
    if (why) *why = versions + ": no CUDA device";
    return false;
  }
  if (device >= *count) {
    if (why) *why = versions + ": device " + std::to_string(device) + " requested, " + std::to_string(*count) + " present";
    return false;
  }
  return true;
}

}  // namespace

bool BuiltWithCuda() { return true; }

bool Available(std::string* why, int device) {
  int count = 0;
  if (!CheckDriver(why, device, &count)) return false;
  try {
    const int d = ResolveDevice(device);
    DeviceGuard guard(d);
    cudaFuncAttributes attr{};
    const cudaError_t e = kernels::AugmentKernelAttributes(&attr);
    if (e != cudaSuccess) {
      if (why)
        *why = "device " + std::to_string(d) + " (sm_" + std::to_string(ComputeCapability(d)) +
               ") cannot run dsc's kernels: " + ErrorText(e) + "; this build has sm " DSC_CUDA_ARCHITECTURES;
      return false;
    }
  } catch (const Error& e) {
    if (why) *why = e.what();
    return false;
  }
  return true;
}

int DeviceCount() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

void SetCurrentDevice(int device) { Check(cudaSetDevice(device), ("cudaSetDevice(" + std::to_string(device) + ")").c_str()); }

int ComputeCapability(int device) {
  int d = device, major = 0, minor = 0;
  if (d < 0 && cudaGetDevice(&d) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d) != cudaSuccess)
    return 0;
  return major * 10 + minor;
}

std::string Describe(int device) {
  int runtime = 0, driver = 0, count = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::string s = "CUDA runtime " + Version(runtime) + ", driver " + (driver ? Version(driver) : "none") +
                  ", built for sm " DSC_CUDA_ARCHITECTURES;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return s + ", no device";
  int d = device;
  if (d < 0 && cudaGetDevice(&d) != cudaSuccess) return s;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, d) == cudaSuccess)
    s += ", device " + std::to_string(d) + ": " + prop.name + " (sm_" + std::to_string(prop.major * 10 + prop.minor) + ")";
  return s;
}

void UsePinnedMemory(LoaderOptions& o, int device) {
  const int d = ResolveDevice(device);
  o.allocate = [d](size_t bytes) -> void* {
    DeviceGuard guard(d);
    void* p = nullptr;
    if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) return nullptr;
    return p;
  };
  o.release = [d](void* p) {  // runs in destructors (a lease's): must not throw
    int prev = -1;
    const bool switched = cudaGetDevice(&prev) == cudaSuccess && prev != d && cudaSetDevice(d) == cudaSuccess;
    cudaFreeHost(p);
    if (switched) cudaSetDevice(prev);
  };
}

void Wait(const DeviceBatch& d) {
  if (d.ready) Check(cudaEventSynchronize(static_cast<cudaEvent_t>(d.ready)), "cudaEventSynchronize");
}

void CopyToHost(const DeviceBatch& d, void* dst) {
  DeviceGuard guard(d.device);
  Wait(d);
  const size_t bytes = size_t(d.size) * 3 * d.height * d.width * DTypeSize(d.dtype);
  Check(cudaMemcpy(dst, d.images, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy device to host");
}

void* LegacyDefaultStream() { return static_cast<void*>(cudaStreamLegacy); }

namespace {

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

StreamPtr MakeStream() {
  cudaStream_t s = nullptr;
  Check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  return StreamPtr(s);
}

EventPtr MakeEvent() {
  cudaEvent_t e = nullptr;
  // Blocking sync: a wait for the GPU (the ring waiting for a consumer, a slot's decode check) puts
  // the host thread to sleep. CUDA's default spins while the process has fewer contexts than cores,
  // which on the H100 machine burnt a whole core in `dsc bench --decoder gpu` (GPU-bound) and would
  // take it from the loader's threads in training.
  Check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming | cudaEventBlockingSync), "cudaEventCreate");
  return EventPtr(e);
}

DevicePtr DeviceAlloc(size_t bytes, const char* what) {
  void* p = nullptr;
  Check(cudaMalloc(&p, bytes), what);
  return DevicePtr(p);
}

// StreamOps over CUDA events; the ring runs on the Augmenter's device (its callers hold a guard).
struct CudaStreamOps final : StreamOps {
  void Record(void* event, void* stream) override {
    Check(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)), "cudaEventRecord");
  }
  bool Done(void* event) override {
    const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (e == cudaErrorNotReady) return false;
    Check(e, "cudaEventQuery");
    return true;
  }
  void Wait(void* event) override {
    Check(cudaEventSynchronize(static_cast<cudaEvent_t>(event)), "cudaEventSynchronize");
  }
};

struct PinnedDeleter {
  void operator()(int* p) const { cudaFreeHost(p); }
};

struct Slot {
  DevicePtr images, params, out;
  EventPtr copied, ready, consumed;
  // GPU JPEG decode: the decode status of the slot's last staged images (pinned, copied back after
  // the kernels; `decoded` follows the copy) and their samples, checked before the slot is reused.
  std::unique_ptr<int, PinnedDeleter> status;
  EventPtr decoded;
  std::vector<uint32_t> samples;
  bool check = false;
};

}  // namespace

struct Augmenter::Impl {
  kernels::DeferredAugment a;
  int device = 0;
  uint32_t max_batch = 0;
  std::string path;  // AugmenterOptions::path
  DType dtype;
  Layout layout;
  CudaStreamOps ops;
  // GPU JPEG decode (staging_bytes > 0): each slot's images buffer has room for the staged payloads
  // after the images; one coefficient / plane / status scratch serves every slot (one stream).
  size_t input_bytes = 0;  // a slot's images buffer
  uint64_t max_blocks = 0;
  DevicePtr coef, planes, status;
  // Crops (kernels/jpeg_twin_crop.h) decode their source's intervals, not an output-sized image:
  // the scratch grows to what a batch needs (after the stream drained: every slot shares it).
  uint64_t max_decoded = 0, max_taps = 0;
  DevicePtr decoded, taps;
  // Deferred list transforms (Batch::steps): the steps, a second image buffer and per-sample stats,
  // shared by every slot (one stream), grown to the first batch that carries steps.
  size_t max_steps = 0;
  DevicePtr steps, images2, stats;
  // Runs the batch's steps on `images` (its n images); returns where the result is (images or images2).
  uint8_t* RunSteps(const Batch& b, uint8_t* images, cudaStream_t stream) {
    const size_t k = b.steps_per_sample, count = size_t(b.size) * k;
    if (!images2) {
      Check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      images2 = DeviceAlloc(size_t(max_batch) * size_t(a.width) * size_t(a.height) * 3, "cudaMalloc transform images");
      stats = DeviceAlloc(sizeof(kernels::StepStats) * max_batch, "cudaMalloc transform stats");
    }
    if (count > max_steps) {
      Check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      steps.reset();
      max_steps = count;
      steps = DeviceAlloc(sizeof(kernels::TransformStep) * count, "cudaMalloc transform steps");
    }
    auto* dev_steps = static_cast<kernels::TransformStep*>(steps.get());
    Check(cudaMemcpyAsync(dev_steps, b.steps, sizeof(kernels::TransformStep) * count, cudaMemcpyHostToDevice, stream),
          "copy transform steps");
    uint8_t* in = images;
    uint8_t* out = static_cast<uint8_t*>(images2.get());
    for (size_t j = 0; j < k; ++j) {
      bool any = false, stats_needed = false;  // a step no sample takes is skipped
      for (uint32_t n = 0; n < b.size; ++n) {
        const int kind = b.steps[n * k + j].kind;
        any = any || kind != kernels::kStepNone;
        stats_needed = stats_needed || kernels::StepNeedsStats(kind);
      }
      if (!any) continue;
      Check(kernels::LaunchTransformStep(dev_steps, int(k), int(j), in, out, static_cast<kernels::StepStats*>(stats.get()),
                                         int(b.size), a.width, a.height, stats_needed, stream),
            "transform step kernel");
      std::swap(in, out);
    }
    return in;
  }
  void EnsureScratch(const kernels::TwinBatchHeader& h, cudaStream_t stream) {
    if (h.total_blocks <= max_blocks && h.decoded_bytes <= max_decoded && h.tap_ints <= max_taps) return;
    Check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    if (h.total_blocks > max_blocks) {
      coef.reset();
      planes.reset();
      max_blocks = h.total_blocks + h.total_blocks / 2;
      coef = DeviceAlloc(max_blocks * 64 * sizeof(int16_t), "cudaMalloc coefficients");
      planes = DeviceAlloc(max_blocks * 64, "cudaMalloc planes");
    }
    if (h.decoded_bytes > max_decoded) {
      decoded.reset();
      max_decoded = h.decoded_bytes + h.decoded_bytes / 2;
      decoded = DeviceAlloc(max_decoded, "cudaMalloc decoded crops");
    }
    if (h.tap_ints > max_taps) {
      taps.reset();
      max_taps = h.tap_ints + h.tap_ints / 2;
      taps = DeviceAlloc(max_taps * sizeof(int32_t), "cudaMalloc crop taps");
    }
  }

  // Throws naming the samples when slot s's last staged images failed to decode (its `decoded`
  // event has completed or is waited for here).
  void CheckSlot(Slot& s) {
    Check(cudaEventSynchronize(s.decoded.get()), "cudaEventSynchronize");
    s.check = false;
    const std::string err = StagedErrors(s.samples, s.status.get(), path);
    if (!err.empty()) throw Error(err);
  }
  // Checks the slots whose decode has completed, without waiting.
  void CheckDecoded() {
    for (Slot& s : slots) {
      if (!s.check) continue;
      const cudaError_t e = cudaEventQuery(s.decoded.get());
      if (e == cudaErrorNotReady) continue;
      Check(e, "cudaEventQuery");
      CheckSlot(s);
    }
  }
  // Declared before the stream so they are destroyed after it: the stream's deleter waits for the
  // work that still uses them.
  std::vector<Slot> slots;
  StreamPtr stream;
  std::unique_ptr<BufferRing> ring;
};

Augmenter::Augmenter(const kernels::AugmentSpec& spec, uint32_t width, uint32_t height, uint32_t max_batch, DType dtype,
                     Layout layout, const AugmenterOptions& options) {
  std::string why;
  if (!Available(&why, options.device)) throw Error("no usable GPU: " + why);
  if (dtype == DType::kUint8) throw Error("the GPU stage outputs float32 or float16");
  if (options.slots == 0 || options.max_leases == 0) throw Error("gpu::Augmenter needs at least one slot and one lease");
  // Built in a holder and handed over only when complete: a throw below releases every handle made so far.
  auto m = std::make_unique<Impl>();
  m->a = kernels::MakeDeferredAugment(spec, int(width), int(height), dtype == DType::kFloat16 ? kernels::kOutFloat16 : kernels::kOutFloat32,
                                      layout == Layout::kNCHW ? kernels::kOutNCHW : kernels::kOutNHWC);
  m->device = ResolveDevice(options.device);
  m->max_batch = max_batch;
  m->path = options.path;
  m->dtype = dtype;
  m->layout = layout;
  DeviceGuard guard(m->device);
  m->stream = MakeStream();
  const size_t pixels = size_t(max_batch) * width * height * 3;
  // The loader's buffer: the images (rounded up to 64 bytes), then the staging area.
  m->input_bytes = options.staging_bytes ? (pixels + 63) / 64 * 64 + size_t(options.staging_bytes) : pixels;
  if (options.staging_bytes) {
    // At most 3 components of (2 x 2)-block MCUs covering the image, per image.
    m->max_blocks = uint64_t(max_batch) * 3 * 4 * ((width + 15) / 16) * ((height + 15) / 16);
    m->coef = DeviceAlloc(m->max_blocks * 64 * sizeof(int16_t), "cudaMalloc coefficients");
    m->planes = DeviceAlloc(m->max_blocks * 64, "cudaMalloc planes");
    m->status = DeviceAlloc(sizeof(int) * max_batch, "cudaMalloc status");
  }
  std::vector<BufferRing::SlotEvents> events;
  m->slots.resize(options.slots);
  for (Slot& s : m->slots) {
    s.images = DeviceAlloc(m->input_bytes, "cudaMalloc images");
    if (options.staging_bytes) {
      int* host = nullptr;
      Check(cudaMallocHost(reinterpret_cast<void**>(&host), sizeof(int) * max_batch), "cudaMallocHost status");
      s.status.reset(host);
      s.decoded = MakeEvent();
    }
    s.params = DeviceAlloc(sizeof(kernels::SampleParams) * max_batch, "cudaMalloc params");
    s.out = DeviceAlloc(pixels * DTypeSize(dtype), "cudaMalloc output");
    s.copied = MakeEvent();
    s.ready = MakeEvent();
    s.consumed = MakeEvent();
    events.push_back({s.copied.get(), s.consumed.get()});
  }
  m->ring = std::make_unique<BufferRing>(&m->ops, std::move(events), options.max_leases);
  impl_ = std::move(m);
}

Augmenter::~Augmenter() {
  if (!impl_) return;
  try {
    DeviceGuard guard(impl_->device);
    impl_->ring->Drain();  // consumers done with the buffers, copies done with the leases
    impl_->ring.reset();
    impl_->stream.reset();  // waits for dsc's stream
    impl_->slots.clear();
  } catch (const Error&) {
    // A failing device at teardown: nothing sensible is left to do but release what we can.
  }
}

DeviceBatch Augmenter::Process(BatchLease batch) { return Run(std::move(batch), false, nullptr); }

DeviceBatch Augmenter::ProcessFor(BatchLease batch, void* consumer_stream) {
  return Run(std::move(batch), true, consumer_stream);
}

DeviceBatch Augmenter::Run(BatchLease lease, bool auto_return, void* consumer_stream) {
  Impl& m = *impl_;
  if (!lease) throw Error("gpu::Augmenter: an empty lease");
  const Batch& b = *lease;
  if (b.dtype != DType::kUint8 || b.layout != Layout::kNHWC || !b.params)
    throw Error("gpu::Augmenter needs batches from a loader with defer_augment (uint8 NHWC)");
  if (b.size > m.max_batch || int(b.width) != m.a.width || int(b.height) != m.a.height)
    throw Error("gpu::Augmenter: batch shape differs from the one it was made for");
  if (b.staged && !m.status)
    throw Error("gpu::Augmenter: the batch carries staged JPEG payloads (decoder gpu) but the Augmenter was made "
                "without AugmenterOptions::staging_bytes");
  DeviceGuard guard(m.device);
  m.CheckDecoded();
  const size_t i = m.ring->Acquire();
  Slot& s = m.slots[i];
  if (s.check) m.CheckSlot(s);  // its last batch's decode is complete: the ring waited for its consumer
  auto* images = static_cast<uint8_t*>(s.images.get());
  auto* params = static_cast<kernels::SampleParams*>(s.params.get());
  cudaStream_t stream = m.stream.get();
  try {
    // Asynchronous from the leased pinned batch: the ring keeps the lease until `copied` completes.
    // With staged payloads, one copy from the images to the end of the staged bytes.
    const auto* host = static_cast<const uint8_t*>(b.images);
    const size_t staged_at = b.staged ? size_t(b.staged - host) : 0;
    const size_t bytes = b.staged ? staged_at + b.staged_bytes : b.image_bytes() * b.size;
    if (bytes > m.input_bytes) throw Error("gpu::Augmenter: the batch's staged payloads exceed staging_bytes");
    Check(cudaMemcpyAsync(images, b.images, bytes, cudaMemcpyHostToDevice, stream), "copy images");
    Check(cudaMemcpyAsync(params, b.params, sizeof(kernels::SampleParams) * b.size, cudaMemcpyHostToDevice, stream),
          "copy params");
    Check(cudaEventRecord(s.copied.get(), stream), "cudaEventRecord");
    if (b.staged) {
      const auto& h = kernels::TwinHeader(b.staged);
      if (h.images > m.max_batch || h.rgb_bytes > b.image_bytes() * b.size)
        throw Error("gpu::Augmenter: a staged batch larger than its buffers");
      m.EnsureScratch(h, stream);
      std::string why;
      if (!kernels::cuda::LaunchTwinKernels(h, images + staged_at, static_cast<int16_t*>(m.coef.get()),
                                            static_cast<uint8_t*>(m.planes.get()), images,
                                            static_cast<int*>(m.status.get()), static_cast<uint8_t*>(m.decoded.get()),
                                            static_cast<int32_t*>(m.taps.get()), stream, &why))
        throw Error("CUDA: JPEG decode: " + why);
      Check(cudaMemcpyAsync(s.status.get(), m.status.get(), sizeof(int) * h.images, cudaMemcpyDeviceToHost, stream),
            "copy decode status");
      Check(cudaEventRecord(s.decoded.get(), stream), "cudaEventRecord");
      s.samples = StagedSamples(b);
      s.check = true;
    }
    const uint8_t* augment_in = b.steps && b.steps_per_sample ? m.RunSteps(b, images, stream) : images;
    Check(kernels::LaunchAugmentBatch(m.a, augment_in, params, int(b.size), s.out.get(), stream), "augment kernel");
    Check(cudaEventRecord(s.ready.get(), stream), "cudaEventRecord");
    if (auto_return)
      Check(cudaStreamWaitEvent(static_cast<cudaStream_t>(consumer_stream), s.ready.get(), 0), "cudaStreamWaitEvent");
  } catch (...) {
    cudaStreamSynchronize(stream);  // no copy may still read the leased batch once the lease is dropped
    throw;
  }
  DeviceBatch d;
  d.images = s.out.get();
  d.size = b.size;
  d.height = b.height;
  d.width = b.width;
  d.dtype = m.dtype;
  d.layout = m.layout;
  d.device = m.device;
  d.ready = s.ready.get();
  d.stream = stream;
  d.slot = uint32_t(i);
  d.ticket = m.ring->Hand(i, std::move(lease), auto_return, consumer_stream);
  return d;
}

void Augmenter::Finish() {
  Impl& m = *impl_;
  DeviceGuard guard(m.device);
  Check(cudaStreamSynchronize(m.stream.get()), "cudaStreamSynchronize");
  for (Slot& s : m.slots)
    if (s.check) m.CheckSlot(s);
}

void Augmenter::Release(const DeviceBatch& d, void* stream) {
  DeviceGuard guard(impl_->device);
  impl_->ring->Return(d.slot, d.ticket, stream);
}

}  // namespace dsc::gpu
