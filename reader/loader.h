// The dsc loader: streams augmented, normalised batches out of a dsc file.
//
//   dsc::LoaderOptions opt = dsc::LoaderOptions::CifarTrain();
//   opt.seed = 1;
//   dsc::Loader loader("cifar10-train.beton", opt);
//   for (uint64_t epoch = 0; epoch < 24; ++epoch)
//     for (const dsc::Batch& b : loader.epoch(epoch))
//       train_step(b.images_as<float>(), b.labels[0], b.size);
//
// A fixed pool of worker threads decodes each sample straight into its slot of a reusable batch
// buffer; batches arrive in order; at most `prefetch` batches are prepared ahead of the one the
// consumer holds, so memory is (prefetch + 1) x one batch, whatever the dataset size (plus at most
// `max_leases` batches while batches are leased: see BatchLease).
//
// Determinism: global batch k of epoch e depends only on the file, the options and the seed: never on
// the thread count or timing, nor (random, sequential) on the rank count. state()/restore() checkpoint
// the position in global batches; a restored loader continues with exactly the batches an
// uninterrupted run would have produced, on any rank count (docs/determinism.md).
//
// Errors: a damaged sample (corrupt payload, checksum mismatch with verify = true) surfaces as a
// dsc::Error thrown from the iteration, naming the file and the sample index. Leaving a loop early,
// throwing out of it, or destroying the loader mid-epoch stops the workers without hanging.
//
// Options: LoaderOptions below. Each user-facing one is also a row of reader/option_table.h, which
// gives it its name as a `dsc bench` / `dsc train` flag and a Python keyword, its checks and messages.
//
// What a loader hands out has headers of its own, included here: Batch and BatchLease
// (reader/batch.h), LoaderState (reader/loader_state.h), StageStats and RemoteWorkerStats
// (reader/stage_stats.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "format/error.h"
#include "kernels/augment.h"
#include "kernels/limits.h"
#include "reader/batch.h"
#include "reader/dataset.h"
#include "reader/fingerprint.h"
#include "reader/loader_state.h"
#include "reader/order.h"
#include "reader/stage_stats.h"

namespace dsc {

class RemoteExecutor;
struct RemoteContext;
struct RemoteOptions;
using RemoteConnector =
    std::function<std::unique_ptr<RemoteExecutor>(const std::string& address, const RemoteOptions&, const RemoteContext&)>;

// Auxiliary CPU workers (`dsc serve`) that decode and augment for this loader over the network,
// beside its own threads (docs/remote.md, reader/executor.h). Batches stay byte-identical to a local
// run's whatever the mix of executors and whatever fails.
struct RemoteOptions {
  std::vector<std::string> addresses;  // "host:port" of each worker
  std::string token;                   // sent with every call; workers off loopback require one
  std::string tls_root;                // PEM of the CA of the workers' certificates; empty: plaintext
  // Local decode threads beside the workers: -1 = LoaderOptions::threads; 0 = none while a worker is
  // reachable (one thread stands by and decodes while none is).
  int local_threads = -1;
  bool compression = false;  // zstd on the wire
  // Makes the executors: dsc::remote::Connector() (link dsc::remote). Required with addresses.
  RemoteConnector connect;

  // Advanced: how requests travel. The defaults suit most links (docs/remote.md, "Tuning").
  struct Transport {
    uint32_t in_flight = 2;  // requests in flight per worker
    // Samples per request (at most a batch); 0 = about 4 MiB of output per request, which amortises a
    // call's cost without making replies so large that a slow worker holds a batch up.
    uint32_t chunk = 0;
    // Float outputs travel as uint8, as a uint8 loader would deliver them (every transform applied), and
    // the loader's driver threads only normalise them into the batch's dtype and layout: a quarter of
    // float32's bytes and less CPU on both sides, the same batches. false: workers send the finished bytes.
    bool ship_uint8 = true;
    // With ship_uint8: a JPEG this loader would decode to planes (no crop) travels as its YCbCr planes
    // when they are fewer bytes than RGB, converted and augmented here (reader/executor.h SampleForm):
    // fewer bytes and less worker CPU for more of this process's CPU, for a link or workers that
    // cannot keep up.
    bool planes = false;
    // Requests to a plaintext worker go on its data port (a TCP connection of their own, remote/data.h)
    // instead of gRPC, which costs this process less CPU per image. false: gRPC only (e.g. a firewall
    // that opens only the gRPC port). With tls_root they always go on gRPC.
    bool data_path = true;
    // Per request: 0 = max(1 s, 10 x the median request time), and 30 s until 3 requests are timed.
    uint32_t deadline_ms = 0;
    uint32_t connect_timeout_ms = 3000;
  } transport;
};

struct LoaderOptions {
  uint32_t batch_size = 512;  // samples per batch on this rank; ignored when global_batch_size is set
  // Samples per global batch (all ranks together); each rank delivers global_batch_size / world_size
  // of them, and world_size must divide it. 0 = batch_size x world_size. Fix this, not batch_size, to
  // keep a run's batches the same when the rank count changes (reader/order.h, docs/determinism.md).
  uint32_t global_batch_size = 0;
  int threads = 0;        // decode threads; 0 = all cores
  // Continuous thread autotuning: `threads` is then the maximum. All of them start, but only as many
  // as the consumer needs take work (reader/autotune.h): more while it waits for batches, fewer while
  // batches pile up; the rest park. Loader::active_threads() tells the current count, and a tracer
  // gets it as the "loader threads" counter. Batches are identical either way.
  bool autotune = false;
  uint32_t prefetch = 3;  // batches prepared ahead of the one the consumer holds
  uint32_t max_leases = 2;  // extra batch buffers that stand in for leased ones (see BatchLease)
  // Beyond max_leases: bytes of further buffers that leased batches may take, made as they are needed
  // and freed as they come back, instead of waiting for a lease (backpressure). 0 = none, C++'s
  // default; the Python module's is a quarter of this machine's memory (a loop that keeps batches).
  uint64_t lease_memory = 0;
  // How front ends hand labels out: 64 (int64, torch's type for class indices) or 32. Batch::labels
  // stay int32; the Python module reads this.
  uint8_t label_bits = 64;
  Order order = Order::kRandom;
  uint64_t seed = 0;
  // Which augmentation draw: loaders that differ only in `view` read the same samples in the same
  // order (it leaves the order alone) and augment each independently, so N of them, each with its own
  // crop and transforms, give N views of every sample (DINO's global and local crops; Python's dsc.Views).
  uint32_t view = 0;
  uint32_t rank = 0, world_size = 1;  // distributed: each rank reads its own shard
  bool drop_last = false;
  uint64_t quasi_window = 0;          // see OrderOptions
  std::vector<uint32_t> subset;       // load only these samples (see OrderOptions)
  kernels::AugmentSpec augment;       // crop, flip, translate, cutout, normalise
  // Transforms after decode and crop, before flip / translate / cutout / normalise: a list's canonical
  // text (kernels/transforms.h; the "transforms" option). Empty: none.
  std::string transforms;
  DType dtype = DType::kFloat32;      // kUint8 requires kNHWC and no normalisation (normalise on the GPU)
  Layout layout = Layout::kNCHW;
  // JPEG chroma upsampling. false (default): box upsampling, bit-identical to libjpeg-turbo's decode
  // with TurboJPEG's TJFLAG_FASTUPSAMPLE, and decoded through the fused path (planes -> colour
  // conversion + augmentation + normalisation in one pass). true: libjpeg's default triangle filter,
  // bit-identical to what PIL / torchvision / OpenCV decode, and slower.
  bool fancy_upsampling = false;
  // The IDCT of CPU JPEG decodes: false, libjpeg's accurate one (dsc's default); true, the fast integer
  // one with fancy upsampling, as TurboJPEG's TJFLAG_FASTDCT decodes: FFCV's pixels exactly.
  bool fast_idct = false;
  // Crop transforms on JPEGs: decode at the smallest DCT scale k/8 that keeps the crop at least the
  // output size (the resized image then differs a little from PIL's full-size result), or, when
  // false, always at full size (Pillow's result exactly, with fancy_upsampling; slower on large crops).
  bool dct_scaling = true;
  // Crop transforms on JPEGs without restart markers (FFCV's files, photos as stored): bytes of
  // entropy-decoder entry points kept (kernels/jpeg_seek.h, about 3 KB a photo), so that from an
  // image's second crop on only the MCUs the crop covers are decoded, not every row down to it. 0: off.
  uint64_t jpeg_index_budget = uint64_t(256) << 20;
  bool verify = false;                // check each block's checksum on first touch
  bool use_pread = false;             // pread instead of mmap (network filesystems)
  // quasi_random on a mapped file: page cache the loader keeps for the file, in bytes (or what the
  // blocks of the ring's prefetch + 1 batches need, if more); the blocks of the coming batches are
  // read ahead in plan order and dropped once used (reader/readahead.h). 0 = no readahead (the
  // kernel's own).
  uint64_t cache_budget = 256ull << 20;
  // quasi_random with readahead: bytes of the coming blocks asked for ahead of use (within the
  // budget), so the block the workers need next is not queued behind reads far ahead. 0 = the budget.
  uint64_t readahead_bytes = 64ull << 20;
  // A URL (http://, https://): the folder of its local cache ("" = $DSC_CACHE_DIR, else
  // ~/.cache/dsc); cache_budget bounds the blocks kept there (docs/streaming.md).
  std::string cache_dir;
  uint64_t max_pixels = kernels::kDefaultMaxPixels;  // larger images are refused before any allocation
  bool collect_stats = false;         // per-stage timings (dsc bench, dsc train's verdict)
  // Deferred augmentation (the GPU path): workers decode (and crop/resize, when a crop transform is
  // set) into uint8 NHWC and stop there; the transform list (Batch::steps), then flip, translate,
  // cutout and normalisation (Batch::params) are applied later, on the GPU (gpu::Augmenter) or by
  // kernels::RunStepsCpu and kernels::AugmentBatchCpu. Requires dtype kUint8 / kNHWC.
  bool defer_augment = false;
  // Who decodes JPEG payloads. kGpu (needs defer_augment): the workers do not decode the payloads the
  // GPU decoder supports; they stage them (kernels/jpeg_twin_batch.h; with a crop transform only the
  // restart intervals the crop needs, kernels/jpeg_twin_crop.h) in the batch buffer after the images,
  // and gpu::Augmenter decodes (and crops and resizes) them on the device (Batch::staged). Other
  // payloads (progressive, arithmetic, raw, crops decoded DCT-scaled...) are decoded here as with kCpu, counted per reason
  // in StageStats::twin_fallback. Batches are the same whatever the decoder once finished, with box
  // or fancy_upsampling (a fancy crop decodes a margin of intervals around it).
  enum class Decoder : uint8_t { kCpu, kGpu };
  Decoder decoder = Decoder::kCpu;
  // kGpu: room for one batch's staged payloads, in bytes (0 = batch_size x max(image bytes, 4 KiB) +
  // 1 MiB). A payload that does not fit is decoded on the CPU (counted as "too large").
  uint64_t gpu_staging_bytes = 0;
  // Batch buffer memory (e.g. pinned host memory for fast copies to a GPU). When unset: aligned_alloc,
  // in transparent huge pages (madvise) for buffers of 4 MiB or more (environment DSC_NO_HUGEPAGES=1: not).
  // Set both or neither. With leases, a buffer may be released after the loader is destroyed: the
  // hooks are copied, and what they capture must stay usable until the last lease is released.
  std::function<void*(size_t)> allocate;
  std::function<void(void*)> release;
  RemoteOptions remote;               // auxiliary CPU workers (none by default)
  // The image field this loader decodes, by name (format 1.3 files hold several: a second view, a
  // depth map); empty: the first. Loaders that differ only in `image` read the same samples in the
  // same order and draw the same crops and flips, so images of the same size come out aligned (a
  // `view` of its own each: drawn independently). Boxes, points and masks follow the first image only.
  std::string image;
  // Output channels: 0 = the images' own (1 when every image of the field is grayscale, else 3), 1 or
  // 3. 1 from colour images is torchvision's Grayscale(1); a grayscale image gives its own values.
  // With 1, normalisation takes mean[0] and std[0].
  uint8_t channels = 0;
  // Typed fields (format 1.2) to deliver as Batch::fields, by name, in this order; empty: every field
  // of the file but the image and the labels. A name the file lacks is an OptionError.
  std::vector<std::string> fields;
  // Joint geometry: typed fields that follow the image's crop, resize, flip and translate. The first is
  // a variable array [N, 4] float32 of boxes (x, y, w, h in image pixels, as COCO); the others, per-box
  // fields with the same N (category ids, crowd flags, ...). A box that leaves the output is dropped
  // with its rows of the others, so counts stay consistent (kernels/geometry.h).
  std::vector<std::string> boxes;
  // Points that follow the image's geometry the same way: float32 arrays whose last dimension is 2
  // (x, y) or 3 (x, y, v as COCO's keypoints), variable ([N, 2|3]) or fixed ([..., 2|3]). Every point
  // is kept and mapped; one that leaves the crop or the output gets v = 0 when it has a v.
  std::vector<std::string> points;
  class Tracer* tracer = nullptr;     // records a timeline when set (reader/trace.h); must outlive the loader
  // Called every `wait_poll_ms` while the consumer waits for a batch, on the consumer's thread with no
  // lock held; it may throw to abandon the wait (the Python module checks for Ctrl-C there).
  std::function<void()> wait_poll;
  uint32_t wait_poll_ms = 100;

  // FFCV's CIFAR-10 pipelines: flip + translate(2) + cutout(4) (fills = CIFAR mean) + normalise, and
  // normalise only; float32 NCHW, batch 512. ImageNet train: RandomResizedCrop(224, scale (0.08, 1),
  // ratio (3/4, 4/3)) + flip + normalise; test: Resize(256) + CenterCrop(224) + normalise, sequential.
  // Resizes are Pillow's antialiased BILINEAR, as torchvision's transforms on PIL images.
  static LoaderOptions CifarTrain();
  static LoaderOptions CifarTest();
  static LoaderOptions ImagenetTrain();
  static LoaderOptions ImagenetTest();
};

// The seed the augmentation draws from: LoaderOptions::seed for view 0, else a mix of seed and view
// (splitmix64's finaliser), so views are independent of each other and of the order.
inline uint64_t AugmentSeed(const LoaderOptions& o) {
  if (o.view == 0) return o.seed;
  uint64_t z = o.seed + 0x9E3779B97F4A7C15ull * (uint64_t(o.view) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// OptionError (format/error.h): an option with an invalid value, thrown when a Loader is built; the
// message names the option and the value. The CLI exits 2 (usage error) on it.

// Throws OptionError for a bad option. With the output image's width and height (0: unknown) it also
// checks the options bounded by them (translate, cutout). The Loader's constructor calls it.
void ValidateOptions(const LoaderOptions& o, uint32_t width = 0, uint32_t height = 0);
// The options a rank runs with: batch_size becomes global_batch_size / world_size (world_size must
// divide it; OptionError otherwise), and global_batch_size is set from batch_size when it was 0.
LoaderOptions WithRankBatch(LoaderOptions o);
// Throws OptionError when the batch buffers a loader may hold at once (the ring and the spares for
// leases: prefetch + 1 + max_leases of `buffer_bytes` each, plus kBatchSampleOverhead per sample)
// exceed this machine's physical memory: an absurd batch x prefetch fails at construction, not after
// minutes of paging.
void CheckBufferMemory(const LoaderOptions& o, uint64_t buffer_bytes);
// A batch buffer's bytes per sample besides its images: augmentation parameters, 2 label fields, the
// index, the padding and fallback flags.
inline constexpr uint64_t kBatchSampleOverhead = sizeof(kernels::SampleParams) + 2 * sizeof(int32_t) + sizeof(uint32_t) + 2;

class Pipeline;

class Loader {
 public:
  Loader(const std::string& path, const LoaderOptions& options);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  class Iterator;
  class EpochRange;

  // The batches of epoch `e`, starting at `first_batch`. Starting a range ends any previous one.
  EpochRange epoch(uint64_t e, uint64_t first_batch = 0);
  // Continues from state(): after restore(), the batches an uninterrupted run would have produced next;
  // at an epoch's end, the next epoch. quasi_random restored on another rank count: the rest of the
  // epoch is a new plan (batches numbered from 0) covering exactly the samples not yet consumed.
  EpochRange resume();
  LoaderState state() const;
  // Throws dsc::Error when the state is of another run (RunIdentity) or cannot be continued here.
  void restore(const LoaderState& s);

  uint64_t batches_per_epoch() const;  // batches of a full epoch on this rank
  uint32_t height() const;
  uint32_t width() const;
  // Changes a crop transform's output size (FFCV's progressive resizing, e.g. 160 -> 192 px) without
  // rebuilding the loader: the next epoch()/resume() range produces w x h images (batch buffers grow
  // as needed); the current range, if any, and leased batches keep the old size. Throws OptionError
  // for a size ValidateOptions refuses or when no crop transform is set (the image size is fixed).
  void set_output_size(uint32_t w, uint32_t h);
  const Dataset& dataset() const;
  const LoaderOptions& options() const;
  int threads() const;
  // Threads taking work now: threads(), or with autotune the controller's current count.
  int active_threads() const;
  StageStats stats() const;
  void reset_stats();
  // Leases `b`, the batch the current iterator holds (see BatchLease).
  BatchLease lease(const Batch& b);
  // Batch buffers alive (ring, spares and leased ones; at most prefetch + 1 + max_leases), and how
  // many of them are leased now.
  size_t buffers_allocated() const;
  size_t leased() const;
  // Whether the next batch has no buffer to be made in: its slot waits for a leased batch to be
  // released (a consumer that holds more than max_leases batches and waits for the next one would
  // wait for itself).
  bool awaits_buffer() const;
  // Remote workers (LoaderOptions::remote), in address order; empty without them.
  std::vector<RemoteWorkerStats> remote_stats() const;

 private:
  std::unique_ptr<Pipeline> p_;
};

class Loader::Iterator {
 public:
  const Batch& operator*() const { return *batch_; }
  const Batch* operator->() const { return batch_; }
  Iterator& operator++();
  bool operator!=(const Iterator& o) const { return batch_ != o.batch_; }
  // Keeps the current batch valid past ++it (see BatchLease).
  BatchLease lease() const;

 private:
  friend class Loader::EpochRange;
  Pipeline* p_ = nullptr;
  uint64_t job_ = 0;
  const Batch* batch_ = nullptr;  // nullptr at the end
};

class Loader::EpochRange {
 public:
  ~EpochRange();
  EpochRange(EpochRange&& o) noexcept;
  EpochRange(const EpochRange&) = delete;
  Iterator begin();
  Iterator end() { return Iterator(); }
  // Batches in this range's epoch plan, numbered 0 .. size() - 1 (a range started at batch k hands out
  // those from k): batches_per_epoch(), except for the rest of a quasi_random epoch resumed on another
  // rank count. 0 once another range has started.
  uint64_t size() const;

 private:
  friend class Loader;
  EpochRange(Pipeline* p, uint64_t job) : p_(p), job_(job) {}
  Pipeline* p_;
  uint64_t job_;
};

}  // namespace dsc
