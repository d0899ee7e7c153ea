// Internal to the loader (not for users; see reader/loader.h): the engine behind dsc::Loader, a fixed
// worker pool filling a ring of (prefetch + 1) batch slots.
//
// Work is handed out in chunks of consecutive samples of one batch (reader/work_queue.h), in batch
// order. A worker may fill batch k only while k < released + slots (released = batches the consumer
// has given back), which bounds memory and gives backpressure. The consumer waits for its batch's
// completion count, so batches are delivered in order whatever finishes first.
//
// Where each part lives:
//   reader/pipeline.cc          the ring and its workers: jobs, delivery, leases, the autotuner's glue
//   reader/pipeline_state.cc    checkpoints: state(), restore(), resume()'s point, the epoch plans
//   reader/remote_drivers.cc    the remote workers' driver threads (reader/remote_drivers.h)
//   reader/batch_memory.h       batch buffers, their pool and leases
//   reader/work_queue.h         claiming tasks, retries, reservations
//   reader/loader.cc            the Loader facade over this class
#pragma once
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "reader/autotune.h"
#include "reader/batch_fields.h"
#include "reader/batch_memory.h"
#include "reader/loader.h"
#include "reader/readahead.h"
#include "reader/remote_drivers.h"
#include "reader/sample_processor.h"
#include "reader/sample_work.h"
#include "reader/trace.h"
#include "reader/work_queue.h"

namespace dsc {

// The order options of a loader's epoch plans (reader/order.h), from its options.
OrderOptions OrderOptionsOf(const LoaderOptions& o);

struct Slot {
  ~Slot() { delete buf.load(); }
  // Owned. nullptr after its batch was leased, until a worker writing the slot's next batch takes a
  // spare from the pool; an atomic load on the hot path, no lock.
  std::atomic<BatchBuffer*> buf{nullptr};
  std::atomic<uint32_t> done{0};
  std::mutex error_mu;
  std::string error;
};

class Pipeline {
 public:
  Pipeline(const std::string& path, const LoaderOptions& o);
  ~Pipeline() { Shutdown(); }

  // Stops and joins every thread started: from the destructor, or a constructor that failed midway.
  void Shutdown();
  void SetOutputSize(uint32_t w, uint32_t h);
  // Starts a job for (epoch, first batch); returns its id.
  uint64_t Start(uint64_t epoch, uint64_t first_batch);
  // Hands out the next batch, or nullptr at the end of the epoch. Throws on a damaged sample.
  const Batch* Next(uint64_t job);
  // Leases the batch the consumer holds: its buffer leaves the ring (a worker puts a spare in its
  // place) and lives as long as the lease's last copy. `job` 0: any job (Loader::lease).
  BatchLease Lease(const Batch* batch, uint64_t job = 0);
  size_t BuffersAllocated();
  size_t Leased();
  // Whether the batch the consumer waits for has no buffer to be decoded into (its slot waits for a
  // lease to come back).
  bool AwaitsBuffer();
  // Stops the current job and waits until every worker is idle.
  void Cancel();

  bool IsJob(uint64_t job) {
    std::lock_guard<std::mutex> l(mu_);
    return job == job_;
  }
  uint64_t JobBatches(uint64_t job) {
    std::lock_guard<std::mutex> l(mu_);
    return job == job_ ? plan_.batches : 0;
  }

  // Checkpoints (reader/pipeline_state.cc).
  LoaderState State();
  void Restore(const LoaderState& s);
  // Where resume() starts: the pending batch, or the next epoch's first once this one is done.
  std::pair<uint64_t, uint64_t> ResumePoint();
  uint64_t batches_per_epoch() const;
  // The plan of epoch e: a full epoch, or after a restore on another rank count (quasi_random) the
  // rest of the restored epoch.
  EpochPlan Plan(uint64_t e) const;

  StageStats Stats();
  void ResetStats();
  std::vector<RemoteWorkerStats> RemoteStats() { return remotes_.Stats(); }

  const LoaderOptions& options() const { return opt_; }
  const Dataset& dataset() const { return ds_; }
  uint32_t width() const { return width_; }
  uint32_t height() const { return height_; }
  int threads() const { return threads_; }
  int active_threads() const { return active_local_.load(std::memory_order_relaxed); }
  uint64_t epoch() const { return epoch_; }
  uint64_t pending_batch() const { return next_deliver_; }

  // Index entries are read at random in a shuffled epoch: each is fetched this many samples ahead.
  static constexpr uint32_t kPrefetchAhead = 4;

 private:
  static constexpr uint32_t kChunk = 16;  // samples per local task
  uint32_t chunk_size() const { return std::max<uint32_t>(1, std::min<uint32_t>(kChunk, opt_.batch_size)); }

  // Batches of this epoch handed out; the one the consumer holds counts. Under mu_.
  uint64_t HandedOutLocked() const { return next_deliver_ + (holding_ ? 1 : 0); }

  // A size from set_output_size, applied while every worker is idle (after Cancel).
  void ApplyOutputSize();

  // A buffer: the images, then (Decoder::kGpu) the staging area.
  size_t ImageBytes() const { return (sample_bytes_ * opt_.batch_size + 63) / 64 * 64; }
  size_t BufferBytes() const { return std::max<size_t>(ImageBytes() + staging_, 64); }

  void ResetSlot(Slot* s) {
    s->done.store(0);
    s->error.clear();
  }

  // ---- The ring's workers (reader/pipeline.cc) ----

  void WorkerLoop(int t);
  void RunJob(int t, SampleProcessor* proc, uint64_t epoch, uint64_t seed, StageStats* st, uint32_t track);
  void RunTask(uint64_t task, SampleProcessor* proc, uint64_t epoch, uint64_t seed, StageStats* st, uint32_t track);
  // Decoder::kGpu, on the thread completing batch k: stages the samples its workers left undecoded
  // and decodes here those that do not fit (reader/gpu_stage.h).
  void StageBatch(Slot* s, BatchBuffer* b, uint32_t len, SampleProcessor* proc, uint64_t epoch, uint64_t seed,
                  StageStats* st, uint32_t track);

  // Whether local thread t takes work now: the first active_local_ (all, or the autotuner's count), and
  // with remote workers thread 0 whenever none is up (remote only: it stands by).
  bool MayWork(int t) const {
    return t < active_local_.load(std::memory_order_relaxed) || (t == 0 && !remotes_.empty() && remotes_.up() == 0);
  }

  // ---- What local workers and remote drivers share: writing a batch into its slot ----

  // Waits until batch k may be written (k < released + slots). false when cancelled.
  bool WaitForSlot(uint64_t k) {
    if (queue_.InRing(k, std::memory_order_acquire)) return true;
    std::unique_lock<std::mutex> l(mu_);
    work_cv_.wait(l, [&] { return cancel_.load() || queue_.InRing(k); });
    return !cancel_.load();
  }

  // A batch of `len` samples is complete when they are done plus this: one more with Decoder::kGpu
  // (staged) and for an empty batch (its buffer taken, RunEmpty).
  uint32_t Extra(uint32_t len) const { return staging_ || len == 0 ? 1 : 0; }
  // Whether slot s holds its batch of `len` samples complete.
  bool Complete(Slot* s, uint32_t len) const { return s->done.load() >= len + Extra(len); }

  // Marks `n` samples of slot s done; wakes the consumer when its batch is complete. `last` (with
  // Decoder::kGpu) runs on the thread that marks the batch's last sample, before the consumer sees it.
  template <typename Last>
  void Done(Slot* s, uint32_t n, uint32_t len, Last last) {
    uint32_t now = s->done.fetch_add(n) + n;
    if (Extra(len) && now == len) {
      last();
      now = s->done.fetch_add(1) + 1;
    }
    if (now >= len + Extra(len)) {
      std::lock_guard<std::mutex> l(mu_);
      done_cv_.notify_all();
    }
  }
  void Done(Slot* s, uint32_t n, uint32_t len) { Done(s, n, len, [] {}); }

  void SetError(Slot* s, const std::string& e) {
    std::lock_guard<std::mutex> l(s->error_mu);
    if (s->error.empty()) s->error = e;
  }

  // The slot's buffer for writing batch k, or nullptr (cancelled, or the allocation failed: the
  // slot's error says so and the chunk counts as done).
  BatchBuffer* WritableBuffer(Slot* s, uint32_t n, uint32_t len) {
    BatchBuffer* b = s->buf.load(std::memory_order_acquire);
    if (!b && !(b = pool_->WaitFor(&s->buf, cancel_))) return nullptr;  // its last batch is leased and no spare is free
    if (!b->images || b->bytes < sample_bytes_ * opt_.batch_size) {  // a failed Ensure
      SetError(s, "cannot allocate a batch buffer of " + std::to_string(BufferBytes()) + " bytes");
      Done(s, n, len);
      return nullptr;
    }
    return b;
  }

  void PrefetchEntry(uint64_t k, uint32_t j) { ds_.PrefetchEntry(plan_.samples[k * opt_.batch_size + j]); }

  // Labels, index and padding flag of position j of batch k (cheap: from the index).
  void Collate(BatchBuffer* b, uint64_t k, uint32_t j) {
    const uint64_t pos = k * opt_.batch_size + j;
    const uint32_t sample = plan_.samples[pos];
    b->indices[j] = sample;
    b->padding[j] = plan_.padding[pos];
    const auto e = ds_.entry(sample);
    b->labels[0][j] = e.label[0];
    b->labels[1][j] = e.label[1];
  }

  // An empty batch (a rank's last in sequential order on several ranks) has no sample to write, but
  // the consumer needs a buffer (the slot's may be leased) holding no staged payloads of an earlier
  // batch; its first chunk's task provides one and completes it.
  void RunEmpty(Slot* s) {
    BatchBuffer* b = WritableBuffer(s, 0, 0);  // on failure, the batch is complete with its error
    if (!b) return;
    b->staged_bytes = 0;
    Done(s, 0, 0);
  }

  // ---- Remote workers (reader/remote_drivers.cc) ----

  RemoteContext MakeRemoteContext() const;
  void StartRemote();
  void DriverLoop(size_t w);
  void RunRemote(Remote& rm, size_t w, DriverState* d);

  // ---- Autotune (reader/autotune.h): only threads 0 .. active_local_ - 1 take tasks; the others park ----

  void StartAutotune();
  // A worker processed `samples` since `start_ns`: the controller's capacity measure.
  void NoteBusy(uint64_t start_ns, uint32_t samples);
  // Batch k (len samples) is handed out at now_ns after a wait of wait_ns: one observation. mu_ held.
  void Autotune(uint64_t k, uint32_t len, uint64_t wait_ns, uint64_t now_ns);

  LoaderOptions opt_;
  Dataset ds_;
  std::vector<size_t> field_ids_;  // the typed fields delivered (reader/batch_fields.h)
  BoxGeometry boxes_;              // LoaderOptions::boxes
  // defer_augment with a transform list: the list whose steps each batch carries (Batch::steps).
  kernels::TransformList deferred_list_;
  std::vector<kernels::TransformStep> plan_scratch_;
  OrderOptions order_;
  uint32_t width_ = 0, height_ = 0;
  uint32_t pending_w_ = 0, pending_h_ = 0;  // set_output_size's, for the next Start
  uint64_t geometry_ = 0;                   // counts applied output sizes (workers rebuild their processor)
  std::shared_ptr<const SampleWork> work_;  // replaced by set_output_size; workers keep theirs alive
  size_t sample_bytes_ = 0;
  size_t staging_ = 0;  // Decoder::kGpu: bytes of a buffer's staging area (else 0)
  std::vector<std::unique_ptr<Slot>> slots_;
  std::shared_ptr<BufferPool> pool_;
  int threads_ = 1;
  std::vector<std::thread> workers_;
  std::vector<StageStats> stats_;
  uint64_t wait_ns_ = 0;
  uint32_t consumer_track_ = 0;         // with a tracer
  std::vector<uint32_t> worker_tracks_;
  std::unique_ptr<BlockReadahead> readahead_;  // quasi_random on a mapping (reader/readahead.h)
  uint64_t advised_base_ = 0;

  std::unique_ptr<Autotuner> tuner_;    // LoaderOptions::autotune; used on the consumer's thread
  std::atomic<int> active_local_{1};     // threads allowed to take tasks
  std::atomic<uint64_t> busy_ns_{0}, busy_samples_{0};  // workers' processing, for the controller
  uint64_t seen_busy_ns_ = 0, seen_busy_samples_ = 0, last_delivery_ns_ = 0;

  uint32_t threads_counter_ = 0;         // with a tracer and autotune

  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_, idle_cv_;
  bool stop_ = false;
  std::atomic<bool> cancel_{false};
  uint64_t job_ = 0;
  int active_ = 0;
  bool holding_ = false;
  const Batch* held_batch_ = nullptr;      // what Next() handed out, while holding_
  std::shared_ptr<LeaseBlock> held_lease_;  // the held batch's lease, once it was leased
  EpochPlan plan_;
  uint64_t epoch_ = 0, next_deliver_ = 0;
  std::vector<uint8_t> excluded_;  // samples left out of epoch excluded_epoch_ (see Restore)
  uint64_t excluded_epoch_ = ~0ull;
  WorkQueue queue_;     // claiming tasks; its ring is slots_
  uint32_t chunk_ = 1;  // samples per task

  // Remote workers. Threads: `in_flight` drivers per worker, each running one request at a time.
  RemoteWorkers remotes_;
  std::vector<std::thread> drivers_;
  bool standby_ = false;              // remote only: local thread 0 works while no worker is up
  uint64_t remote_chunks_ = 1;        // local tasks per request
  bool wire_uint8_ = false;           // RemoteOptions::transport.ship_uint8 applies: replies are finished here
  RequestTimes request_times_;
};

}  // namespace dsc
