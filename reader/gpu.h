// The GPU half of the pipeline (built when the CUDA toolkit is found; figures in bench/RESULTS.md,
// "On a GPU (H100, H200)"). CI has no GPU, so there the kernel's per-element code, its launch geometry
// and the buffer ring's rules are tested on the CPU.
//
//   cudaSetDevice(local_rank);                              // or pass the device explicitly below
//   std::string why;
//   if (!gpu::Available(&why)) { ... fall back to the CPU path: why says what is missing ... }
//   LoaderOptions opt = LoaderOptions::CifarTrain();
//   opt.defer_augment = true; opt.dtype = DType::kUint8; opt.layout = Layout::kNHWC;
//   gpu::UsePinnedMemory(opt);                              // page-locked batches: asynchronous copies
//   Loader loader(path, opt);
//   gpu::Augmenter aug(opt.augment, loader.width(), loader.height(), opt.batch_size, DType::kFloat16, Layout::kNCHW);
//   // GPU JPEG decode too: opt.decoder = LoaderOptions::Decoder::kGpu above, and
//   //   gpu::AugmenterOptions ao; ao.staging_bytes = gpu::StagingBytesFor(loader);  (pass ao to aug)
//   auto range = loader.epoch(e);
//   for (auto it = range.begin(); it != range.end(); ++it) {
//     gpu::DeviceBatch d = aug.ProcessFor(it.lease(), my_stream);  // my_stream waits for the batch
//     ... enqueue every use of d.images on my_stream ...
//   }                                                       // d is given back at the next ProcessFor
//
// Contract (the ring of device buffers):
// - Process / ProcessFor enqueue the host-to-device copy from the leased (pinned) batch and the
//   kernel on dsc's own stream and return without waiting for either: the copy overlaps the
//   consumer's previous step. dsc keeps the lease until the copy has completed (checked at later
//   calls), so the loader cannot refill that host buffer under the copy.
// - The output lives in one of `slots` device buffers. dsc reuses a buffer only after the consumer
//   has given it back AND the event recorded at that moment on the consumer's stream has completed,
//   so a consumer still reading batch k on its stream never sees batch k + slots written over it.
//   Giving back: ProcessFor(lease, stream) makes `stream` wait for the batch and gives it back
//   automatically at the next Process/ProcessFor call, recording the event on `stream` then (so
//   every use must be enqueued on `stream` before that call); with Process(lease), wait on d.ready
//   yourself and call Release(d, stream) after enqueueing the last use.
// - When every buffer is still held by the consumer, Process throws (instead of waiting forever);
//   when they were given back but their consumer events are pending, Process waits for the oldest
//   (the consumer is `slots` batches behind).
//   Every such wait sleeps (blocking-sync events) instead of spinning a core.
// - Devices: every call runs on the Augmenter's device and restores the calling thread's current
//   device on return. No call before Available()/UsePinnedMemory/the Augmenter's construction touches
//   a GPU, so a Loader built first creates no CUDA context on GPU 0.
// - GPU JPEG decode (LoaderOptions::decoder = Decoder::kGpu, AugmenterOptions::staging_bytes set):
//   the batch's images and its staged payloads (Batch::staged, right after the images in the same
//   pinned buffer) go to the device in one asynchronous copy; the decode kernels
//   (kernels/cuda/jpeg_decode.h) write each staged image into its sample's slot of that copy, the
//   slots of samples the loader decoded on the CPU keep its pixels, then the augment kernel runs as
//   above. Same ring, same contract. A staged payload the kernels find corrupt (rare: the loader
//   checked its structure) makes a later Process / ProcessFor call throw dsc::Error naming the sample
//   (at most `slots` batches later: checking at once would stall the host on the GPU). Finish()
//   checks the rest: call it at the end of every epoch, or the last batches go unchecked.
// - One thread drives an Augmenter. Destroy it after the consumer's uses are enqueued; the destructor
//   waits for them and for dsc's stream.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "reader/loader.h"

namespace dsc::gpu {

// Whether `device` (-1: the calling thread's current device) can run dsc's kernels. When not, `why`
// names the problem: no driver or device, a driver older than the runtime dsc was built with (CUDA
// error 35, with both versions), a device this build has no kernel image for (with its compute
// capability and the architectures built). Checks the kernel image on the device (this creates
// the device's CUDA context), so an unsupported setup fails here and never mid-epoch.
bool Available(std::string* why = nullptr, int device = -1);
bool BuiltWithCuda();
// One line for logs: runtime and driver versions, the device's name and compute capability, the
// architectures built. Without CUDA: why there is none.
std::string Describe(int device = -1);
// Compute capability as major * 10 + minor (80 for A100), 0 when unknown.
int ComputeCapability(int device = -1);
// CUDA devices this process sees (after CUDA_VISIBLE_DEVICES); 0 without CUDA, a driver or a device.
// Creates no context.
int DeviceCount();
// Makes `device` the calling thread's current device (torch.cuda.set_device), for what uses "the
// current device": libtorch's default stream, LegacyDefaultStream(). Throws dsc::Error without CUDA.
void SetCurrentDevice(int device);

// The device a training rank uses, as torchrun users pick it (torch.cuda.set_device(LOCAL_RANK)):
// its local rank's when the machine shows one device per local rank; with fewer devices, local ranks
// share them round robin (local_rank mod count). Without devices, 0. `shared` (may be null) is set
// when ranks of this machine share a device, unless CUDA_VISIBLE_DEVICES already narrowed each
// process's view (`visible_devices_set`: then every process sees its own device 0, not a shared one).
inline int DeviceForLocalRank(int local_rank, int local_world_size, int device_count, bool visible_devices_set,
                              bool* shared = nullptr) {
  if (shared) *shared = device_count > 0 && device_count < local_world_size && !(visible_devices_set && device_count == 1);
  if (device_count <= 0 || local_rank < 0) return 0;
  return local_rank % device_count;
}

// Makes the loader's batch buffers pinned (page-locked) host memory, allocated through `device`'s
// context (-1: the device current on the calling thread now, not when the buffers are allocated),
// so the pinned allocation at Loader construction creates no context on any other GPU. Portable
// pinned memory: any device can copy from it. Without CUDA, plain aligned memory.
void UsePinnedMemory(LoaderOptions& options, int device = -1);

struct DeviceBatch {
  void* images = nullptr;     // device pointer, shape (size, 3, h, w) for NCHW or (size, h, w, 3)
  uint32_t size = 0, height = 0, width = 0;
  DType dtype = DType::kFloat32;
  Layout layout = Layout::kNCHW;
  int device = 0;
  void* ready = nullptr;      // cudaEvent_t recorded after the kernel; wait on it before reading
  void* stream = nullptr;     // cudaStream_t dsc used
  uint32_t slot = 0;          // which ring buffer, and the ticket Release checks
  uint64_t ticket = 0;
};

// Blocks the calling thread until the batch's kernel has finished (for consumers that cannot make a
// CUDA stream wait on DeviceBatch::ready).
void Wait(const DeviceBatch& d);
// Waits for the batch and copies its images (size x 3 x h x w elements) to host memory `dst`: for
// tests and debugging.
void CopyToHost(const DeviceBatch& d, void* dst);
// cudaStreamLegacy: the default stream libtorch uses unless told otherwise, for ProcessFor.
void* LegacyDefaultStream();

struct AugmenterOptions {
  int device = -1;         // -1: the calling thread's current device at construction
  uint32_t slots = 3;      // device output buffers in the ring
  uint32_t max_leases = 2; // leased host batches kept while their copies run (<= LoaderOptions::max_leases)
  // GPU JPEG decode: a Decoder::kGpu loader's staging area (StagingBytesFor); 0 = batches carry no
  // staged payloads (Process refuses those that do).
  uint64_t staging_bytes = 0;
  // The loader's file (Loader::dataset().path()), named with the sample in a staged image's decode
  // error, as the CPU decoder's errors name both.
  std::string path;
};

// The staging area of `loader`'s batches (0 unless its decoder is Decoder::kGpu).
uint64_t StagingBytesFor(const Loader& loader);

class Augmenter {
 public:
  // Throws dsc::Error when no GPU is usable (check Available() first to fall back).
  Augmenter(const kernels::AugmentSpec& spec, uint32_t width, uint32_t height, uint32_t max_batch, DType dtype,
            Layout layout, const AugmenterOptions& options = {});
  ~Augmenter();
  Augmenter(const Augmenter&) = delete;
  Augmenter& operator=(const Augmenter&) = delete;
  // `batch` must come from a loader with defer_augment (uint8 NHWC + params), and may carry staged
  // payloads when made with staging_bytes. See the contract above.
  DeviceBatch Process(BatchLease batch);
  DeviceBatch ProcessFor(BatchLease batch, void* consumer_stream);
  // Gives a batch from Process back: dsc reuses its buffer once the work enqueued on `stream` so far
  // has completed.
  void Release(const DeviceBatch& d, void* stream);
  // Waits for dsc's work enqueued so far (not the consumer's) and throws dsc::Error naming the
  // samples of any staged image the device could not decode, so no batch goes unchecked: call it at
  // the end of an epoch (dsc bench and dsc train do). Without staged payloads, only the wait.
  void Finish();

 private:
  struct Impl;
  DeviceBatch Run(BatchLease batch, bool auto_return, void* consumer_stream);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dsc::gpu
