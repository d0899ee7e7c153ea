// The loader's engine: a fixed worker pool filling a ring of (prefetch + 1) batch slots.
//
// Work is handed out in chunks of consecutive samples of one batch through an atomic counter, in
// batch order. A worker may fill batch k only while k < released + slots (released = batches the
// consumer has given back), which bounds memory and gives backpressure. The consumer waits for its
// batch's completion count, so batches are delivered in order whatever finishes first.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "format/error.h"
#include "kernels/cpu.h"
#include "reader/autotune.h"
#include "reader/executor.h"
#include "reader/gpu_stage.h"
#include "reader/huge_pages.h"
#include "reader/loader.h"
#include "reader/mmap_guard.h"
#include "reader/readahead.h"
#include "reader/sample_processor.h"
#include "reader/sample_work.h"
#include "reader/trace.h"

namespace dsc {

namespace {

// Options checked before the file is opened, so that a bad option is reported as such.
const LoaderOptions& Validated(const LoaderOptions& o) {
  ValidateOptions(o);
  return o;
}

uint64_t NowNs() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}


}  // namespace

// Batch images: 64-byte aligned; a large batch (photos: 38 MB of float32 for 64 images) in huge pages
// (reader/huge_pages.h). Freed with std::free.
static void* AllocateBatchImages(size_t bytes) {
  if (!HugePagesWanted() || bytes < 2 * kHugePageBytes) return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  return AllocateHugePages(bytes, nullptr);
}

// One batch's memory: in a ring slot, in the pool's free list, or leased (owned by a LeaseBlock).
struct BatchBuffer {
  ~BatchBuffer() {
    if (images) release(images);
  }
  // Makes room for `need` bytes of images (set_output_size grew the output). On an allocation
  // failure images is null and the batch written to it fails with an error.
  void Ensure(size_t need, const std::function<void*(size_t)>& allocate) {
    if (bytes >= need && images) return;
    if (images) release(images);
    images = nullptr;
    bytes = 0;
    try {
      images = static_cast<uint8_t*>(allocate ? allocate(need) : AllocateBatchImages(need));
    } catch (...) {
    }
    if (images) bytes = need;
  }
  uint8_t* images = nullptr;
  size_t bytes = 0;  // images' capacity
  std::function<void(void*)> release;
  std::vector<kernels::SampleParams> params;
  std::vector<uint8_t> fallback;  // Decoder::kGpu: Batch::fallback
  size_t staged_bytes = 0;        // Decoder::kGpu: Batch::staged_bytes
  std::vector<int32_t> labels[2];
  std::vector<uint32_t> indices;
  std::vector<uint8_t> padding;
  Batch batch;
};

// The buffers outside the ring and the counts that bound them. Shared with every lease, so that a
// lease released after the loader is gone frees its buffer instead of touching a dead pipeline.
struct BufferPool {
  std::mutex mu;
  std::condition_variable cv;  // a leased buffer came back
  std::vector<std::unique_ptr<BatchBuffer>> free;
  // Ring slots given back empty (their buffer leased) with no spare to fill them, in batch order:
  // a returned buffer goes to the first, so the batch the consumer needs next is served first.
  std::deque<std::atomic<BatchBuffer*>*> needy;
  size_t allocated = 0;  // live buffers: ring + free + leased
  size_t leased = 0;
  size_t limit = 0;      // ring slots + max_leases
  bool closed = false;   // the pipeline is gone: returned buffers are freed
  size_t bytes = 0;      // what a buffer's images need now (Loader::set_output_size)
  std::function<void*(size_t)> allocate;

  void Return(std::unique_ptr<BatchBuffer> b) {
    {
      std::lock_guard<std::mutex> l(mu);
      --leased;
      if (!closed) {
        if (!needy.empty()) {
          b->Ensure(bytes, allocate);
          needy.front()->store(b.release());
          needy.pop_front();
        } else {
          free.push_back(std::move(b));
        }
        cv.notify_all();
        return;
      }
      --allocated;
    }
    b.reset();  // outside the lock: the user's release hook may be slow
  }
};

// What a BatchLease shares: the leased buffer, given back to the pool with the last reference.
struct LeaseBlock {
  ~LeaseBlock() { pool->Return(std::move(buf)); }
  std::unique_ptr<BatchBuffer> buf;
  std::shared_ptr<BufferPool> pool;
};

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
  Pipeline(const std::string& path, const LoaderOptions& o)
      : opt_(Validated(o)), ds_(path, DatasetOptions{o.verify, o.use_pread}) {
    if (o.augment.crop != kernels::CropMode::kNone) {
      width_ = uint32_t(o.augment.out_w);
      height_ = uint32_t(o.augment.out_h);
    } else if (ds_.size() > 0) {
      const auto e0 = ds_.entry(0);
      for (uint64_t i = 1; i < ds_.size(); ++i) {
        const auto e = ds_.entry(i);
        if (e.width != e0.width || e.height != e0.height)
          throw Error(path + ": sample " + std::to_string(i) + " is " + std::to_string(e.width) + "x" +
                      std::to_string(e.height) + " but sample 0 is " + std::to_string(e0.width) + "x" +
                      std::to_string(e0.height) + "; batches need one size: add RandomResizedCrop or CenterCrop");
      }
      width_ = e0.width;
      height_ = e0.height;
      // Before the batch buffers are sized from it: an index claiming 65535x65535 images is the file's
      // problem (named as such), not the batch size's.
      if (uint64_t(width_) * height_ > o.max_pixels)
        throw Error(path + ": sample 0 is " + std::to_string(width_) + "x" + std::to_string(height_) + ", more than max_pixels (" +
                    std::to_string(o.max_pixels) + " pixels), and every batch would hold images of that size");
    }
    ValidateOptions(o, width_, height_);  // translate and cutout against the image size
    order_.order = o.order;
    order_.seed = o.seed;
    order_.rank = o.rank;
    order_.world_size = o.world_size;
    order_.batch_size = o.batch_size;
    order_.drop_last = o.drop_last;
    order_.quasi_window = o.quasi_window;
    order_.subset = o.subset;
    PlanEpoch(ds_.view(), order_, 0);  // validates the options early
    work_ = std::make_shared<SampleWork>(opt_, width_, height_);
    sample_bytes_ = work_->sample_bytes();
    staging_ = StagingBytes(opt_, sample_bytes_);
    CheckBufferMemory(o, BufferBytes());
    slots_.resize(size_t(o.prefetch) + 1);
    pool_ = std::make_shared<BufferPool>();
    pool_->limit = slots_.size() + o.max_leases;
    pool_->free.reserve(pool_->limit);  // Return() (in a lease's destructor) then never allocates
    pool_->bytes = BufferBytes();
    pool_->allocate = o.allocate;
    for (auto& s : slots_) {
      s = std::make_unique<Slot>();
      s->buf.store(NewBuffer().release());
      ++pool_->allocated;
    }
    threads_ = o.threads > 0 ? o.threads : kernels::UsableCores();
    if (!o.remote.addresses.empty()) {
      if (o.remote.local_threads >= 0) threads_ = o.remote.local_threads;
      standby_ = threads_ == 0;  // remote only: one local thread decodes while no worker is reachable
      threads_ = std::max(threads_, 1);
    }
    if (o.tracer) {  // rows "loader worker N" and "loader consumer" (reader/trace.h)
      consumer_track_ = o.tracer->AddTrack("loader consumer", "loader");
      for (int t = 0; t < threads_; ++t) worker_tracks_.push_back(o.tracer->AddTrack("loader worker " + std::to_string(t), "loader"));
    }
    stats_.resize(size_t(threads_));
    if (o.order == Order::kQuasiRandom && o.cache_budget > 0 && ds_.mapped())
      readahead_ = std::make_unique<BlockReadahead>(ds_, o.cache_budget, o.readahead_bytes, slots_.size());
    active_local_.store(standby_ ? 0 : threads_);
    // A thread that cannot start (a process or address-space limit) must not leave those started
    // waiting on members about to go: it aborted the process, or hung it destroying a condition variable.
    try {
      if (o.autotune) StartAutotune();
      if (!o.remote.addresses.empty()) StartRemote();
      for (int t = 0; t < threads_; ++t) workers_.emplace_back([this, t] { WorkerLoop(t); });
    } catch (const std::system_error& e) {
      Shutdown();
      throw Error("cannot start the loader's " + std::to_string(threads_) + " threads (" + e.what() +
                  "): use fewer (threads, --threads), or raise the process or address-space limit");
    } catch (...) {
      Shutdown();
      throw;
    }
  }

  ~Pipeline() { Shutdown(); }

  // Stops and joins every thread started: from the destructor, or a constructor that failed midway.
  void Shutdown() {
    Cancel();
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    for (auto& w : workers_) w.join();
    for (auto& d : drivers_) d.join();
    workers_.clear();
    drivers_.clear();
    std::vector<std::unique_ptr<BatchBuffer>> spare;
    {
      std::lock_guard<std::mutex> l(pool_->mu);
      pool_->closed = true;  // leases still out free their buffers when released
      pool_->needy.clear();
      pool_->allocated -= pool_->free.size();
      spare.swap(pool_->free);
    }
  }

  void SetOutputSize(uint32_t w, uint32_t h) {
    if (opt_.augment.crop == kernels::CropMode::kNone)
      throw OptionError("set_output_size: the output is the image size unless a crop transform is set");
    LoaderOptions o = opt_;
    o.augment.out_w = int(std::min<uint32_t>(w, INT32_MAX));
    o.augment.out_h = int(std::min<uint32_t>(h, INT32_MAX));
    ValidateOptions(o, w, h);
    CheckBufferMemory(o, uint64_t(o.batch_size) * w * h * 3 * DTypeSize(o.dtype) + staging_);
    std::lock_guard<std::mutex> l(mu_);
    pending_w_ = w;
    pending_h_ = h;
  }

  // Starts a job for (epoch, first batch); returns its id.
  uint64_t Start(uint64_t epoch, uint64_t first_batch) {
    // Refused before the running epoch is touched: a bad call must not end it.
    EpochPlan plan = Plan(epoch);
    if (first_batch > plan.batches) throw Error("batch " + std::to_string(first_batch) + " is past the end of the epoch");
    Cancel();
    ApplyOutputSize();
    for (auto& s : slots_)  // a batch leased when the last job ended left its slot empty
      if (!s->buf.load()) Refill(s.get());
    std::lock_guard<std::mutex> l(mu_);
    plan_ = std::move(plan);
    epoch_ = epoch;
    next_deliver_ = first_batch;
    released_ = first_batch;
    chunk_ = chunk_size();
    chunks_per_batch_ = (opt_.batch_size + chunk_ - 1) / chunk_;
    next_task_.store(first_batch * chunks_per_batch_);
    total_tasks_ = plan_.batches * chunks_per_batch_;
    reserved_.assign(slots_.size(), 0);
    if (affinity_) {
      batch_window_.assign(plan_.batches, 0);
      for (uint64_t k = 0, w = 0; k < plan_.batches; ++k) {
        while (w + 1 < plan_.window_starts.size() && plan_.window_starts[w + 1] <= k * plan_.batch_size) ++w;
        batch_window_[k] = uint32_t(w);
      }
    }
    for (auto& s : slots_) ResetSlot(s.get());
    if (readahead_) readahead_->Start(plan_, first_batch);
    {
      std::lock_guard<std::mutex> rl(retry_mu_);
      retry_.clear();
      retry_size_.store(0);
      remote_inflight_ = 0;
    }
    cancel_.store(false);
    active_ = threads_ + int(drivers_.size());
    ++job_;
    holding_ = false;
    if (tuner_) {
      tuner_->Restart();
      last_delivery_ns_ = 0;
    }
    work_cv_.notify_all();
    return job_;
  }

  // Hands out the next batch, or nullptr at the end of the epoch. Throws on a damaged sample.
  const Batch* Next(uint64_t job) {
    std::unique_lock<std::mutex> l(mu_);
    if (job != job_ || cancel_.load()) return nullptr;
    if (holding_) {  // give the previous batch back
      Slot* s = slots_[next_deliver_ % slots_.size()].get();
      if (!s->buf.load(std::memory_order_relaxed)) Refill(s);  // it was leased
      ResetSlot(s);
      ++next_deliver_;
      released_ = next_deliver_;
      if (readahead_) readahead_->Released(next_deliver_);
      holding_ = false;
      held_lease_.reset();
      work_cv_.notify_all();
      {
        std::lock_guard<std::mutex> rl(retry_mu_);  // no lost wake-up in WaitForMore
      }
      retry_cv_.notify_all();
    }
    if (next_deliver_ >= plan_.batches) {
      retry_cv_.notify_all();  // every task is taken: parked threads end the job
      return nullptr;
    }
    const uint64_t k = next_deliver_;
    Slot* s = slots_[k % slots_.size()].get();
    const uint32_t len = plan_.batch_length(k);
    const uint64_t t0 = NowNs();
    auto ready = [&] { return Complete(s, len); };
    if (!opt_.wait_poll) {
      done_cv_.wait(l, ready);
    } else if (!ready()) {
      // Polled once more after the batch completes: a Ctrl-C that came during the wait must abandon it
      // even when the batch was done before the next poll (else Python raises it just after the batch
      // was counted as handed out, and a state saved on it skips that batch).
      for (bool done = false; !done;) {
        done = done_cv_.wait_for(l, std::chrono::milliseconds(opt_.wait_poll_ms), ready);
        l.unlock();
        opt_.wait_poll();  // may throw: nothing is handed out, the batch stays next
        l.lock();
      }
    }
    const uint64_t t1 = NowNs();
    wait_ns_ += t1 - t0;
    if (opt_.tracer) opt_.tracer->Add(consumer_track_, "wait for batch", t0, t1, int64_t(k));
    if (tuner_) Autotune(k, len, t1 - t0, t1);
    if (!s->error.empty()) {
      std::string err = s->error;
      l.unlock();
      Cancel();
      throw Error(err);
    }
    BatchBuffer* buf = s->buf.load();
    Batch& b = buf->batch;
    b.epoch = epoch_;
    b.index = k;
    b.size = len;
    b.images = buf->images;
    b.params = buf->params.data();
    b.deferred = opt_.defer_augment;
    b.staged = staging_ && buf->staged_bytes ? buf->images + ImageBytes() : nullptr;
    b.staged_bytes = b.staged ? buf->staged_bytes : 0;
    b.fallback = staging_ ? buf->fallback.data() : nullptr;
    b.dtype = opt_.dtype;
    b.layout = opt_.layout;
    b.height = height_;
    b.width = width_;
    b.label_fields = ds_.meta().label_field_count();
    b.labels[0] = buf->labels[0].data();
    b.labels[1] = b.label_fields > 1 ? buf->labels[1].data() : nullptr;
    b.indices = buf->indices.data();
    b.padding = buf->padding.data();
    b.padding_count = 0;
    for (uint32_t i = 0; i < len; ++i) b.padding_count += buf->padding[i];
    holding_ = true;
    held_batch_ = &b;
    return &b;
  }

  // Leases the batch the consumer holds: its buffer leaves the ring (a worker puts a spare in its
  // place) and lives as long as the lease's last copy. `job` 0: any job (Loader::lease).
  BatchLease Lease(const Batch* batch, uint64_t job = 0) {
    std::lock_guard<std::mutex> l(mu_);
    if (!batch || !holding_ || batch != held_batch_ || (job && job != job_))
      throw Error("lease: only the batch the iterator holds can be leased, before the next one is requested");
    if (!held_lease_) {
      Slot* s = slots_[next_deliver_ % slots_.size()].get();
      auto block = std::make_shared<LeaseBlock>();
      block->pool = pool_;
      block->buf.reset(s->buf.exchange(nullptr));
      {
        std::lock_guard<std::mutex> pl(pool_->mu);
        ++pool_->leased;
      }
      // Kept until the consumer moves on, so that the batch it still reads through the iterator
      // cannot go back to the pool (and to a worker) if every lease copy is dropped at once.
      held_lease_ = std::move(block);
    }
    return BatchLease(std::shared_ptr<const Batch>(held_lease_, &held_lease_->buf->batch));
  }

  size_t BuffersAllocated() {
    std::lock_guard<std::mutex> l(pool_->mu);
    return pool_->allocated;
  }

  size_t Leased() {
    std::lock_guard<std::mutex> l(pool_->mu);
    return pool_->leased;
  }

  // Whether the batch the consumer waits for has no buffer to be decoded into (its slot waits for a
  // lease to come back).
  bool AwaitsBuffer() {
    uint64_t k;
    {
      std::lock_guard<std::mutex> l(mu_);
      k = next_deliver_;
    }
    return !slots_[k % slots_.size()]->buf.load();
  }

  // Stops the current job and waits until every worker is idle.
  void Cancel() {
    std::unique_lock<std::mutex> l(mu_);
    cancel_.store(true);
    work_cv_.notify_all();
    {
      std::lock_guard<std::mutex> pl(pool_->mu);  // no lost wake-up for a worker waiting for a spare
    }
    pool_->cv.notify_all();
    {
      std::lock_guard<std::mutex> rl(retry_mu_);
    }
    retry_cv_.notify_all();
    for (auto& r : remotes_) r->ex->CancelAll();
    idle_cv_.wait(l, [&] { return active_ == 0; });
    if (holding_) {  // the batch the consumer held was handed out
      ++next_deliver_;
      holding_ = false;
    }
    held_lease_.reset();
  }

  bool IsJob(uint64_t job) {
    std::lock_guard<std::mutex> l(mu_);
    return job == job_;
  }

  uint64_t JobBatches(uint64_t job) {
    std::lock_guard<std::mutex> l(mu_);
    return job == job_ ? plan_.batches : 0;
  }

  LoaderState State() {
    LoaderState s;
    {
      std::lock_guard<std::mutex> l(mu_);
      s.epoch = epoch_;
      s.next_batch = HandedOutLocked();
    }
    s.run = RunIdentity::Of(ds_, opt_);
    s.world_size = opt_.world_size;
    s.rank = opt_.rank;
    s.ranks = 1;
    if (opt_.order == Order::kQuasiRandom) {
      // What this rank consumed: the samples excluded from the epoch's plan, and the plan's
      // non-padding samples up to next_batch.
      const bool ex = s.epoch == excluded_epoch_ && !excluded_.empty();
      if (ex) s.excluded = excluded_;
      s.consumed = ex ? excluded_ : std::vector<uint8_t>((ds_.size() + 7) / 8, 0);
      const EpochPlan plan = Plan(s.epoch);
      const uint64_t end = std::min<uint64_t>(plan.samples.size(), s.next_batch * plan.batch_size);
      for (uint64_t i = 0; i < end; ++i)
        if (!plan.padding[i]) s.consumed[plan.samples[i] / 8] |= uint8_t(1u << (plan.samples[i] % 8));
    }
    return s;
  }

  void Restore(const LoaderState& s) {
    const std::string diff = s.run.Difference(RunIdentity::Of(ds_, opt_));
    if (!diff.empty())
      throw Error(ds_.path() + ": cannot restore a loader state of another run (state vs this loader: " + diff + ")");
    // As Deserialize checks (a state made in memory skips it): a rank's state or a Merge of all ranks.
    if (s.ranks == 0 || (s.world_size && s.ranks != 1 && s.ranks != s.world_size) || (!s.world_size && s.ranks < 2))
      throw Error(ds_.path() + ": loader state is inconsistent (world_size " + std::to_string(s.world_size) + ", ranks " +
                  std::to_string(s.ranks) + ")");
    std::vector<uint8_t> excluded;
    uint64_t next = s.next_batch;
    if (opt_.order == Order::kQuasiRandom) {
      const size_t bytes = (ds_.size() + 7) / 8;
      if (s.consumed.size() != bytes || (!s.excluded.empty() && s.excluded.size() != bytes))
        throw Error(ds_.path() + ": loader state's bitmaps have " + std::to_string(s.consumed.size()) + " bytes, the file's " +
                    std::to_string(ds_.size()) + " samples need " + std::to_string(bytes));
      if (s.world_size == opt_.world_size) {
        excluded = s.excluded;  // the same plan: continue it
      } else {
        // quasi_random batches depend on the rank count: finish the epoch with a new plan over exactly
        // the samples no rank has consumed, which needs every rank's consumption.
        if (s.world_size != 0 && s.ranks != s.world_size)
          throw Error(ds_.path() + ": a quasi_random state of rank " + std::to_string(s.rank) + " of " +
                      std::to_string(s.world_size) + " restores on " + std::to_string(opt_.world_size) +
                      " ranks only once all " + std::to_string(s.world_size) +
                      " ranks' states are merged (LoaderState::Merge; dsc.merge_state_dicts in Python)");
        excluded = s.consumed;
        next = 0;
      }
    }
    OrderOptions oo = order_;
    oo.exclude = excluded;
    const uint64_t batches = PlanEpoch(ds_.view(), oo, s.epoch).batches;
    if (next > batches)
      throw Error(ds_.path() + ": loader state's batch " + std::to_string(next) + " is past the end of epoch " +
                  std::to_string(s.epoch) + " (" + std::to_string(batches) + " batches)");
    Cancel();
    std::lock_guard<std::mutex> l(mu_);
    epoch_ = s.epoch;
    next_deliver_ = next;
    excluded_ = std::move(excluded);
    excluded_epoch_ = s.epoch;
    holding_ = false;
  }

  // Where resume() starts: the pending batch, or the next epoch's first once this one is done.
  std::pair<uint64_t, uint64_t> ResumePoint() {
    if (next_deliver_ < Plan(epoch_).batches) return {epoch_, next_deliver_};
    if (epoch_ == UINT64_MAX)  // the next epoch would wrap to 0
      throw Error(ds_.path() + ": epoch " + std::to_string(epoch_) + " is done and is the last: there is no next epoch");
    return {epoch_ + 1, 0};
  }

  // Batches of this epoch handed out; the one the consumer holds counts. Under mu_.
  uint64_t HandedOutLocked() const { return next_deliver_ + (holding_ ? 1 : 0); }

  StageStats Stats() {
    std::unique_lock<std::mutex> l(mu_);
    // Workers add their stage times as they go idle: once the last batch is handed out (held, or
    // past it), every task is done and they go idle within moments: wait, so the epoch's stats are
    // complete. (A consumer may stop at the last batch without asking past it: Python's zip does.)
    if (HandedOutLocked() >= plan_.batches) idle_cv_.wait(l, [&] { return active_ == 0; });
    StageStats sum;
    for (const auto& s : stats_) sum += s;
    sum.consumer_wait_ns = wait_ns_;
    if (readahead_) sum.advised_bytes = readahead_->advised_bytes() - advised_base_;
    return sum;
  }

  void ResetStats() {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& s : stats_) s = StageStats();
    wait_ns_ = 0;
    if (readahead_) advised_base_ = readahead_->advised_bytes();
  }

  uint64_t batches_per_epoch() const { return PlanEpoch(ds_.view(), order_, 0).batches; }

  // The plan of epoch e: a full epoch, or after a restore on another rank count (quasi_random) the
  // rest of the restored epoch.
  EpochPlan Plan(uint64_t e) const {
    if (e != excluded_epoch_ || excluded_.empty()) return PlanEpoch(ds_.view(), order_, e);
    OrderOptions oo = order_;
    oo.exclude = excluded_;
    return PlanEpoch(ds_.view(), oo, e);
  }

  const LoaderOptions& options() const { return opt_; }
  const Dataset& dataset() const { return ds_; }
  uint32_t width() const { return width_; }
  uint32_t height() const { return height_; }
  int threads() const { return threads_; }
  int active_threads() const { return active_local_.load(std::memory_order_relaxed); }
  uint64_t epoch() const { return epoch_; }
  uint64_t pending_batch() const { return next_deliver_; }

 private:
  // A size from set_output_size, applied while every worker is idle (after Cancel).
  void ApplyOutputSize() {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (pending_w_ == 0) return;
      width_ = pending_w_;
      height_ = pending_h_;
      pending_w_ = pending_h_ = 0;
      opt_.augment.out_w = int(width_);
      opt_.augment.out_h = int(height_);
      work_ = std::make_shared<SampleWork>(opt_, width_, height_);
      sample_bytes_ = work_->sample_bytes();
      ++geometry_;
    }
    std::lock_guard<std::mutex> pl(pool_->mu);
    pool_->bytes = BufferBytes();
    for (auto& s : slots_)
      if (BatchBuffer* b = s->buf.load()) b->Ensure(pool_->bytes, opt_.allocate);
    for (auto& b : pool_->free) b->Ensure(pool_->bytes, opt_.allocate);
  }

  // A buffer: the images, then (Decoder::kGpu) the staging area.
  size_t ImageBytes() const { return (sample_bytes_ * opt_.batch_size + 63) / 64 * 64; }
  size_t BufferBytes() const { return std::max<size_t>(ImageBytes() + staging_, 64); }

  void ResetSlot(Slot* s) {
    s->done.store(0);
    s->error.clear();
  }

  std::unique_ptr<BatchBuffer> NewBuffer() {
    const size_t bytes = BufferBytes();
    auto b = std::make_unique<BatchBuffer>();
    b->release = opt_.release ? opt_.release : [](void* p) { std::free(p); };
    b->images = static_cast<uint8_t*>(opt_.allocate ? opt_.allocate(bytes) : AllocateBatchImages(bytes));
    if (!b->images) throw Error("cannot allocate a batch buffer of " + std::to_string(bytes) + " bytes");
    b->bytes = bytes;
    b->params.resize(opt_.batch_size);
    if (staging_) b->fallback.resize(opt_.batch_size);
    for (auto& l : b->labels) l.resize(opt_.batch_size);
    b->indices.resize(opt_.batch_size);
    b->padding.resize(opt_.batch_size);
    return b;
  }

  // Gives a slot whose batch was leased a buffer, in batch order (the consumer calls it as it moves
  // on): a released one, a new one while under the bound, or else the first lease to come back.
  void Refill(Slot* s) {
    std::lock_guard<std::mutex> l(pool_->mu);
    if (std::find(pool_->needy.begin(), pool_->needy.end(), &s->buf) != pool_->needy.end()) return;
    if (!pool_->free.empty()) {
      pool_->free.back()->Ensure(pool_->bytes, opt_.allocate);  // it may predate set_output_size
      s->buf.store(pool_->free.back().release());
      pool_->free.pop_back();
    } else if (pool_->allocated < pool_->limit) {
      s->buf.store(NewBuffer().release());
      ++pool_->allocated;
    } else {
      pool_->needy.push_back(&s->buf);
    }
  }

  // Waits until a released lease's buffer fills the slot (backpressure). nullptr when cancelled.
  BatchBuffer* WaitForBuffer(Slot* s) {
    std::unique_lock<std::mutex> l(pool_->mu);
    pool_->cv.wait(l, [&] { return cancel_.load() || s->buf.load(); });
    return cancel_.load() ? nullptr : s->buf.load();
  }

  void WorkerLoop(int t) {
    std::shared_ptr<const SampleWork> work;  // what `proc` reads its tables from
    auto make = [&] {
      work = work_;
      return work->NewProcessor(ds_, opt_.collect_stats, opt_.tracer, opt_.tracer ? worker_tracks_[size_t(t)] : 0);
    };
    std::unique_ptr<SampleProcessor> proc;
    uint64_t geometry = 0;
    {
      std::lock_guard<std::mutex> l(mu_);
      proc = make();
      geometry = geometry_;
    }
    StageStats local;
    uint64_t seen = 0;
    while (true) {
      uint64_t epoch, seed;
      {
        std::unique_lock<std::mutex> l(mu_);
        work_cv_.wait(l, [&] { return stop_ || job_ != seen; });
        if (stop_) return;
        seen = job_;
        epoch = epoch_;
        seed = opt_.seed;
        if (geometry != geometry_) {  // set_output_size
          proc = make();
          geometry = geometry_;
        }
      }
      RunJob(t, proc.get(), epoch, seed, &local, opt_.tracer ? worker_tracks_[size_t(t)] : 0);
      std::lock_guard<std::mutex> l(mu_);
      if (opt_.collect_stats) {
        stats_[size_t(t)] += local;
        local = StageStats();
      }
      if (--active_ == 0) idle_cv_.notify_all();
    }
  }

  // Whether local thread t takes work now: the first active_local_ (all, or the autotuner's count), and
  // with remote workers thread 0 whenever none is up (remote only: it stands by).
  bool MayWork(int t) const {
    return t < active_local_.load(std::memory_order_relaxed) ||
           (t == 0 && !remotes_.empty() && remote_up_.load(std::memory_order_relaxed) == 0);
  }

  // Nothing left to claim and nothing in flight elsewhere that could come back (retry_mu_ held).
  bool DrainedLocked() const { return next_task_.load() >= total_tasks_ && retry_.empty() && remote_inflight_ == 0; }

  // Whether the counter's next task belongs to a batch that may be written now (k < released + slots).
  bool Claimable() const {
    const uint64_t cur = next_task_.load();
    return cur < total_tasks_ && cur / chunks_per_batch_ < released_.load() + slots_.size();
  }

  // Claims up to `max` tasks of one batch from the counter, only while that batch may be written: an
  // executor never holds a task it cannot run yet, so a chunk given back by a failed executor always
  // finds a free one (no executor sits on a later batch's task waiting for the ring).
  bool ClaimFromCounter(uint64_t max, uint64_t* t0, uint64_t* t1, uint64_t limit = UINT64_MAX) {
    if (affinity_) {  // reservations (ReserveBatch) make the counter skip whole batches: one lock
      std::lock_guard<std::mutex> l(claim_mu_);
      const uint64_t cur = next_task_.load();  // on a batch nobody holds (SkipReservedLocked)
      const uint64_t k = cur / chunks_per_batch_;
      if (cur < total_tasks_ && k < limit && k < released_.load(std::memory_order_acquire) + slots_.size()) {
        const uint64_t end = std::min({cur + max, (k + 1) * chunks_per_batch_, total_tasks_});
        next_task_.store(SkipReservedLocked(end));
        *t0 = cur;
        *t1 = end;
        return true;
      }
      return false;
    }
    uint64_t cur = next_task_.load();
    while (cur < total_tasks_) {
      const uint64_t k = cur / chunks_per_batch_;
      if (k >= released_.load(std::memory_order_acquire) + slots_.size()) return false;
      const uint64_t end = std::min({cur + max, (k + 1) * chunks_per_batch_, total_tasks_});
      if (next_task_.compare_exchange_weak(cur, end)) {
        *t0 = cur;
        *t1 = end;
        return true;
      }
    }
    return false;
  }

  // quasi_random with several workers: worker `w` (of the workers up now) reserves the next batch of
  // its own windows that the counter has not reached, inside the ring, so that each worker reads the
  // blocks of about 1/W of the windows (docs/remote.md). Windows are block-aligned and hold at least
  // quasi_window samples (EpochPlan::window_starts); a batch goes with the window of its first sample.
  // `*steal_limit` receives the first batch the worker may not take from the counter: only the batch
  // the consumer needs next while affinity holds (taking later ones would read the other workers'
  // windows), else the whole ring.
  bool ReserveBatch(size_t w, uint64_t* k_out, uint64_t* steal_limit) {
    size_t rank = 0, up = 0;
    for (size_t i = 0; i < remotes_.size(); ++i) {
      std::lock_guard<std::mutex> l(remotes_[i]->mu);
      if (remotes_[i]->up) rank += i < w, ++up;
    }
    if (up < 2) return false;
    // Only a ring with room for a window per worker (and one for a straddling batch) lets workers
    // wait for their own windows; with less, waiting would idle them, so they take any batch.
    const bool room = slots_.size() >= up * (window_batches_ + 1);
    *steal_limit = room ? released_.load(std::memory_order_acquire) + 1 : UINT64_MAX;
    std::lock_guard<std::mutex> l(claim_mu_);
    const uint64_t cpb = chunks_per_batch_, released = released_.load(std::memory_order_acquire);
    uint64_t cur = next_task_.load();
    const uint64_t end = std::min<uint64_t>(plan_.batches, released + slots_.size());
    // Batches the counter has entered are its own; those below `released` are delivered (and their
    // ring entries may already stand for later batches).
    for (uint64_t k = std::max((cur + cpb - 1) / cpb, released); k < end; ++k) {
      uint64_t& r = reserved_[k % reserved_.size()];
      if (r == k + 1 || batch_window_[k] % up != rank) continue;
      r = k + 1;
      *k_out = k;
      next_task_.store(SkipReservedLocked(cur));
      return true;
    }
    return false;
  }

  // The counter's next position from `cur`: past batches reserved whole, so that it always rests on a
  // batch nobody holds and never falls behind `released` (where ring entries stand for later batches).
  // claim_mu_ held.
  uint64_t SkipReservedLocked(uint64_t cur) const {
    const uint64_t cpb = chunks_per_batch_;
    while (cur < total_tasks_ && cur % cpb == 0 && reserved_[(cur / cpb) % reserved_.size()] == cur / cpb + 1) cur += cpb;
    return cur;
  }

  // A range a failed executor gave back, at most `max` tasks of it (retry_mu_ held).
  bool TakeRetryLocked(uint64_t max, uint64_t* t0, uint64_t* t1) {
    if (retry_.empty()) return false;
    auto& r = retry_.front();
    *t0 = r.first;
    *t1 = std::min(r.second, r.first + max);
    r.first = *t1;
    if (r.first == r.second) retry_.pop_front();
    retry_size_.store(retry_.size());
    return true;
  }

  // A local thread's next task: given-back chunks first, else the counter's next. false: none now.
  bool TakeLocal(uint64_t* task) {
    uint64_t t1;
    if (retry_size_.load(std::memory_order_acquire) > 0) {
      std::lock_guard<std::mutex> l(retry_mu_);
      if (TakeRetryLocked(1, task, &t1)) return true;
    }
    return ClaimFromCounter(1, task, &t1);
  }

  // Waits for work to claim: a given-back chunk, a batch slot freed, or (park: a thread that may not
  // work now) a little while. false: the job is done.
  bool WaitForMore(bool park) {
    std::unique_lock<std::mutex> l(retry_mu_);
    if (DrainedLocked() || cancel_.load()) return false;
    if (park)
      retry_cv_.wait_for(l, std::chrono::milliseconds(20));
    else
      retry_cv_.wait_for(l, std::chrono::milliseconds(20),
                         [&] { return cancel_.load() || !retry_.empty() || DrainedLocked() || Claimable(); });
    return true;
  }

  void RunJob(int t, SampleProcessor* proc, uint64_t epoch, uint64_t seed, StageStats* st, uint32_t track) {
    while (!cancel_.load(std::memory_order_relaxed)) {
      uint64_t task;
      if (!MayWork(t)) {
        if (!WaitForMore(true)) return;
      } else if (!TakeLocal(&task)) {
        if (!WaitForMore(false)) return;
      } else {
        RunTask(task, proc, epoch, seed, st, track);
      }
    }
  }

  // Waits until batch k may be written (k < released + slots). false when cancelled.
  bool WaitForSlot(uint64_t k) {
    if (k < released_.load(std::memory_order_acquire) + slots_.size()) return true;
    std::unique_lock<std::mutex> l(mu_);
    work_cv_.wait(l, [&] { return cancel_.load() || k < released_.load() + slots_.size(); });
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

  // Decoder::kGpu, on the thread completing batch k: stages the samples its workers left undecoded
  // and decodes here those that do not fit (reader/gpu_stage.h).
  void StageBatch(Slot* s, BatchBuffer* b, uint32_t len, SampleProcessor* proc, uint64_t epoch, uint64_t seed,
                  StageStats* st, uint32_t track) {
    b->staged_bytes = 0;
    {
      std::lock_guard<std::mutex> l(s->error_mu);
      if (!s->error.empty()) return;  // the batch is not delivered
    }
    const bool timed = opt_.collect_stats || opt_.tracer;
    const uint64_t t0 = timed ? NowNs() : 0;
    TwinStageWorker& w = *proc->twin();
    try {
      const bool ok = mmap_guard::RunGuarded([&] {
        b->staged_bytes = w.StageBatch(ds_, b->indices.data(), b->fallback.data(), len, sample_bytes_,
                                       b->images + ImageBytes(), staging_, opt_.batch_size, st,
                                       [&](uint32_t j, kernels::TwinCropInput* in) {
                                         return proc->TwinCropInputFor(b->indices[j], seed, epoch, in);
                                       });
      });
      if (!ok) throw Error(ds_.path() + ": its mapped bytes became unreadable while staging a batch for the GPU decoder");
      if (timed) {  // the staging counts as decoding: it is the loader's share of the GPU decode
        const uint64_t t1 = NowNs();
        st->decode_ns += t1 - t0;
        st->twin_stage_ns += t1 - t0;
        if (opt_.tracer) opt_.tracer->Add(track, "stage for GPU", t0, t1);
      }
      for (uint32_t j : w.left_for_cpu()) {
        // A worker counted this sample and its bytes when it checked it: the decode here adds time only.
        const uint64_t samples = st->samples, payload_bytes = st->payload_bytes;
        proc->Process(b->indices[j], seed, epoch, b->images + size_t(j) * sample_bytes_, st, &b->params[j]);
        st->samples = samples, st->payload_bytes = payload_bytes;
      }
    } catch (const std::exception& ex) {
      SetError(s, ex.what());
    }
  }

  void SetError(Slot* s, const std::string& e) {
    std::lock_guard<std::mutex> l(s->error_mu);
    if (s->error.empty()) s->error = e;
  }

  // The slot's buffer for writing batch k, or nullptr (cancelled, or the allocation failed: the
  // slot's error says so and the chunk counts as done).
  BatchBuffer* WritableBuffer(Slot* s, uint32_t n, uint32_t len) {
    BatchBuffer* b = s->buf.load(std::memory_order_acquire);
    if (!b && !(b = WaitForBuffer(s))) return nullptr;  // its last batch is leased and no spare is free
    if (!b->images || b->bytes < sample_bytes_ * opt_.batch_size) {  // a failed Ensure
      SetError(s, "cannot allocate a batch buffer of " + std::to_string(BufferBytes()) + " bytes");
      Done(s, n, len);
      return nullptr;
    }
    return b;
  }

  // Index entries are read at random in a shuffled epoch: each is fetched this many samples ahead.
  static constexpr uint32_t kPrefetchAhead = 4;
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

  void RunTask(uint64_t task, SampleProcessor* proc, uint64_t epoch, uint64_t seed, StageStats* st, uint32_t track) {
    const bool timed = opt_.collect_stats || opt_.tracer;
    const uint64_t k = task / chunks_per_batch_;
    if (!WaitForSlot(k)) return;
    if (readahead_) readahead_->Need(k);  // before any page of the batch is faulted
    Slot* s = slots_[k % slots_.size()].get();
    const uint32_t len = plan_.batch_length(k);
    const uint32_t from = uint32_t(task % chunks_per_batch_) * chunk_;
    const uint32_t to = std::min(len, from + chunk_);
    if (len == 0 && from == 0) return RunEmpty(s);
    if (from >= to) return;
    BatchBuffer* b = WritableBuffer(s, to - from, len);
    if (!b) return;
    const uint64_t b0 = opt_.tracer || tuner_ ? NowNs() : 0;
    proc->PrepareChunk(&plan_.samples[k * opt_.batch_size + from], to - from, st);  // small JPEGs decoded together
    for (uint32_t j = from; j < to; ++j) {
      if (j + kPrefetchAhead < to) PrefetchEntry(k, j + kPrefetchAhead);
      const uint64_t c0 = timed ? NowNs() : 0;
      Collate(b, k, j);
      const uint32_t sample = b->indices[j];
      if (timed) {
        const uint64_t c1 = NowNs();
        st->collate_ns += c1 - c0;
        if (opt_.tracer) opt_.tracer->Add(track, "collate", c0, c1, sample);
      }
      try {
        proc->Process(sample, seed, epoch, b->images + size_t(j) * sample_bytes_, st, &b->params[j],
                      staging_ ? &b->fallback[j] : nullptr);
      } catch (const std::exception& ex) {
        SetError(s, ex.what());
      }
    }
    if (opt_.tracer) opt_.tracer->Add(track, "batch", b0, NowNs(), int64_t(k));  // this worker's share of batch k
    if (tuner_) NoteBusy(b0, to - from);
    Done(s, to - from, len, [&] { StageBatch(s, b, len, proc, epoch, seed, st, track); });
  }

  // ---- Remote workers (LoaderOptions::remote) ----

  struct Remote {
    std::unique_ptr<RemoteExecutor> ex;
    std::mutex mu;  // guards the fields below
    bool up = false;
    bool connecting = false;
    bool warned = false;  // about its current outage
    std::string refusal;  // why it last refused a reconnection (said once)
    int busy_streak = 0;  // requests turned away (RunResult::kBusy) since the last that was served
    std::chrono::steady_clock::time_point next_try{};
    int backoff_ms = 100;
    uint64_t samples = 0, requests = 0, failures = 0;
    // Samples/s one request runs at (moving average), x in_flight: what the worker could deliver
    // (not what it did: local threads may have taken the rest). The autotuner's other_rate.
    double request_rate = 0;
  };

  // Samples/s the workers that are up could deliver, estimated from their recent requests.
  double RemoteCapacity() {
    double c = 0;
    for (auto& rm : remotes_) {
      std::lock_guard<std::mutex> l(rm->mu);
      if (rm->up) c += rm->request_rate * opt_.remote.in_flight;
    }
    return c;
  }

  RemoteContext MakeRemoteContext() const {
    RemoteContext c;
    c.path = ds_.path();
    c.file_size = ds_.view().header().file_size;
    c.header_checksum = ds_.view().header().header_checksum;
    c.options = opt_;
    if (wire_uint8_) {  // a uint8 loader's batch (or planes): the drivers finish the samples (RunRemote)
      c.options.dtype = DType::kUint8;
      c.options.augment.normalize = false;  // uint8 batches are unnormalised; the table applies here
      c.options.layout = Layout::kNHWC;
    }
    c.width = width_;
    c.height = height_;
    c.max_request_samples = uint32_t(std::min<uint64_t>(kMaxRemoteRequestSamples, remote_chunks_ * chunk_size()));
    c.planes = wire_uint8_ && opt_.remote.planes;
    c.run_fingerprint = RunIdentity::Of(ds_, opt_).Fingerprint();
    return c;
  }

  // Makes the executors and connects them: a worker that refuses this run is a user error (thrown);
  // one that is unreachable is retried with back-off while the loader runs.
  void StartRemote() {
    const RemoteOptions& r = opt_.remote;
    if (!r.connect)
      throw OptionError("remote: LoaderOptions::remote.connect is not set (link dsc::remote and set it to dsc::remote::Connector())");
    if (r.in_flight == 0 || r.in_flight > 64) throw OptionError("remote.in_flight must be 1 to 64, not " + std::to_string(r.in_flight));
    wire_uint8_ = r.ship_uint8 && !opt_.defer_augment && opt_.dtype != DType::kUint8;
    // About 4 MiB on the wire per request, sized by what travels (uint8 when the drivers finish the
    // samples): float32 CIFAR sized by its output took two requests per 512-batch, 11% more client CPU.
    const size_t wire_sample = wire_uint8_ ? size_t(3) * width_ * height_ : sample_bytes_;
    const uint64_t per_request = r.chunk ? r.chunk : std::max<uint64_t>(1, (4u << 20) / std::max<size_t>(1, wire_sample));
    remote_chunks_ = std::max<uint64_t>(1, (std::min<uint64_t>(per_request, opt_.batch_size) + chunk_size() - 1) / chunk_size());
    // Within what a worker takes (a larger request was refused, and the worker marked down, every time).
    if (remote_chunks_ * chunk_size() > kMaxRemoteRequestSamples)
      remote_chunks_ = std::max<uint64_t>(1, kMaxRemoteRequestSamples / chunk_size());
    affinity_ = opt_.order == Order::kQuasiRandom && r.addresses.size() >= 2;
    const uint64_t window = opt_.quasi_window ? opt_.quasi_window : 4ull * opt_.batch_size;
    window_batches_ = (window + opt_.batch_size - 1) / opt_.batch_size;
    const RemoteContext ctx = MakeRemoteContext();
    std::vector<std::unique_ptr<RemoteExecutor>> made;  // every address checked before any connects
    for (const auto& a : r.addresses) made.push_back(r.connect(a, r, ctx));
    for (auto& ex : made) {
      auto rm = std::make_unique<Remote>();
      rm->ex = std::move(ex);
      std::string why;
      const ConnectResult c = rm->ex->Connect(int(r.connect_timeout_ms), &why);
      if (c == ConnectResult::kRefused) throw Error(why);
      if (c == ConnectResult::kReady) {
        rm->up = true;
        remote_up_.fetch_add(1);
      } else {
        std::fprintf(stderr, "dsc: warning: %s; retrying in the background\n", why.c_str());
        rm->warned = true;
        rm->next_try = std::chrono::steady_clock::now() + std::chrono::milliseconds(rm->backoff_ms);
      }
      remotes_.push_back(std::move(rm));
    }
    if (remote_up_.load() == 0 && standby_)
      std::fprintf(stderr, "dsc: warning: no remote worker is reachable; decoding on 1 local thread until one is\n");
    for (size_t w = 0; w < remotes_.size(); ++w)
      for (uint32_t i = 0; i < r.in_flight; ++i) drivers_.emplace_back([this, w] { DriverLoop(w); });
  }

  void DriverLoop(size_t w) {
    uint64_t seen = 0;
    DriverState d;
    while (true) {
      {
        std::unique_lock<std::mutex> l(mu_);
        work_cv_.wait(l, [&] { return stop_ || job_ != seen; });
        if (stop_) return;
        seen = job_;
        d.epoch = epoch_;
        d.seed = opt_.seed;
        d.width = width_;
        d.height = height_;
        if (wire_uint8_ && d.work != work_) {  // first job, or set_output_size
          d.work = work_;
          d.finish = d.work->NewProcessor(ds_, false);
        }
      }
      d.pend0 = d.pend1 = 0;
      RunRemote(*remotes_[w], w, &d);
      std::lock_guard<std::mutex> l(mu_);
      if (--active_ == 0) idle_cv_.notify_all();
    }
  }

  void FinishRemote() {
    {
      std::lock_guard<std::mutex> l(retry_mu_);
      --remote_inflight_;
    }
    retry_cv_.notify_all();
  }

  void GiveBack(uint64_t t0, uint64_t t1) {
    {
      std::lock_guard<std::mutex> l(retry_mu_);
      retry_.emplace_back(t0, t1);
      retry_size_.store(retry_.size());
      --remote_inflight_;
    }
    retry_cv_.notify_all();
  }

  // The deadline of one request: max(1 s, 10 x the median of recent requests), generous until timed.
  int Deadline() {
    if (opt_.remote.deadline_ms) return int(opt_.remote.deadline_ms);
    std::lock_guard<std::mutex> l(times_mu_);
    if (request_ms_.size() < 3) return 30000;
    std::vector<double> v(request_ms_.begin(), request_ms_.end());
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return int(std::min(600000.0, std::max(1000.0, 10 * v[v.size() / 2])));
  }

  // A driver turned away waits kBusyPauseMs before its next request; a worker that served none of
  // kBusyStreak requests in a row (at least a quarter of a second) is down.
  static constexpr int kBusyPauseMs = 5, kBusyStreak = 50;

  void MarkDown(Remote& rm, const std::string& why) {
    std::lock_guard<std::mutex> l(rm.mu);
    ++rm.failures;
    if (!rm.up) return;
    rm.up = false;
    rm.next_try = std::chrono::steady_clock::now() + std::chrono::milliseconds(rm.backoff_ms);
    if (remote_up_.fetch_sub(1) == 1 && standby_)
      std::fprintf(stderr, "dsc: warning: no remote worker is reachable; decoding on 1 local thread until one is\n");
    if (!rm.warned) std::fprintf(stderr, "dsc: warning: %s; its work goes to other executors, reconnecting\n", why.c_str());
    rm.warned = true;
    rm.backoff_ms = std::min(rm.backoff_ms * 2, 2000);  // reset by a request that succeeds
  }

  // A down worker: one of its drivers reconnects when the back-off has passed, the others wait.
  void Reconnect(Remote& rm) {
    {
      std::lock_guard<std::mutex> l(rm.mu);
      if (rm.up || rm.connecting || std::chrono::steady_clock::now() < rm.next_try) return;
      rm.connecting = true;
    }
    std::string why;
    const ConnectResult c = rm.ex->Connect(int(opt_.remote.connect_timeout_ms), &why);
    std::lock_guard<std::mutex> l(rm.mu);
    rm.connecting = false;
    if (c == ConnectResult::kReady) {
      rm.up = true;
      rm.refusal.clear();
      rm.busy_streak = 0;
      remote_up_.fetch_add(1);
    } else {
      // A worker restarted with another file, version or token: say why once (it is still retried).
      if (c == ConnectResult::kRefused && why != rm.refusal)
        std::fprintf(stderr, "dsc: warning: reconnection refused: %s; retrying with back-off\n", why.c_str());  // `why` names it
      if (c == ConnectResult::kRefused) rm.refusal = why;
      rm.backoff_ms = std::min(rm.backoff_ms * 2, 2000);
      rm.next_try = std::chrono::steady_clock::now() + std::chrono::milliseconds(rm.backoff_ms);
    }
  }

  // One driver thread's job: what it sends, and with ship_uint8 what finishes the replies.
  struct DriverState {
    uint64_t epoch = 0, seed = 0;
    uint32_t width = 0, height = 0;
    std::vector<uint32_t> samples;
    std::shared_ptr<const SampleWork> work;  // `finish` reads its tables
    std::unique_ptr<SampleProcessor> finish;
    std::vector<uint8_t> wire;  // the executor's scratch for the reply's uint8 images (ChunkTask::sink)
    std::vector<uint8_t> bounce;  // a sample's planes split between two receive buffers
    std::vector<kernels::SampleParams> params;
    uint64_t pend0 = 0, pend1 = 0;  // tasks of a reserved batch not yet sent
  };

  // A worker's next claim, at most remote_chunks_ tasks of one batch: the rest of its reserved batch, a
  // range given back by a failed executor, a batch of its own windows (ReserveBatch), else the
  // counter's next. Counts the claim in flight, so that local threads wait for it instead of ending
  // the job; a reserved batch stays counted until all its requests are done or its rest is given back.
  bool TakeRemote(size_t w, DriverState* d, uint64_t* t0, uint64_t* t1) {
    if (d->pend0 < d->pend1) {  // the rest of a reserved batch (already counted)
      *t0 = d->pend0;
      *t1 = d->pend0 = std::min(d->pend1, d->pend0 + remote_chunks_);
      return true;
    }
    {
      std::lock_guard<std::mutex> l(retry_mu_);
      ++remote_inflight_;
      if (TakeRetryLocked(remote_chunks_, t0, t1)) return true;
    }
    uint64_t k, limit = UINT64_MAX;
    if (affinity_ && ReserveBatch(w, &k, &limit)) {
      d->pend0 = k * chunks_per_batch_;
      d->pend1 = (k + 1) * chunks_per_batch_;
      *t0 = d->pend0;
      *t1 = d->pend0 = std::min(d->pend1, d->pend0 + remote_chunks_);
      return true;
    }
    if (ClaimFromCounter(remote_chunks_, t0, t1, limit)) return true;
    FinishRemote();
    return false;
  }

  // The end of a claim: counted out of flight unless a reserved batch has requests left.
  void FinishClaim(DriverState* d) {
    if (d->pend0 >= d->pend1) FinishRemote();
  }
  // Gives back [t0, t1) and what is left of a reserved batch (it follows t1).
  void GiveBackClaim(DriverState* d, uint64_t t0, uint64_t t1) {
    if (d->pend0 < d->pend1) t1 = d->pend1;
    d->pend0 = d->pend1 = 0;
    GiveBack(t0, t1);
  }

  // Float batches over the wire as uint8 (ship_uint8): each received sample is finished into batch b as
  // it arrives, read where it lies in the executor's receive buffers. Finished RGB only needs the
  // output format; planes need the whole augmentation and the colour conversion. The parameters are
  // the reply's, copied into the batch once it is whole.
  struct RemoteFinisher : SampleSink {
    RemoteFinisher(Pipeline* p, DriverState* d, const ChunkTask* t, BatchBuffer* b, uint32_t from)
        : p(p), d(d), t(t), b(b), from(from) {}
    Pipeline* const p;
    DriverState* const d;
    const ChunkTask* const t;
    BatchBuffer* const b;
    const uint32_t from;
    std::string error;  // the first sample that could not be finished

    void Take(uint32_t j, SampleForm form, const BytePiece* pieces, size_t n) override {
      if (form != SampleForm::kRgb) return TakePlanes(j, form, pieces, n);
      try {
        d->finish->FinishRgb(pieces, n, b->images + size_t(from + j) * p->sample_bytes_);
      } catch (const std::exception& e) {
        if (error.empty()) error = e.what();
      }
    }

    // Planes are read in one piece: a sample split between receive buffers is gathered first.
    void TakePlanes(uint32_t j, SampleForm form, const BytePiece* pieces, size_t n) {
      const size_t size = SampleFormBytes(form, d->width, d->height);
      const uint8_t* bytes = n == 1 && pieces[0].size == size ? pieces[0].data : nullptr;
      if (!bytes) {
        d->bounce.resize(size);
        size_t at = 0;
        for (size_t i = 0; i < n && at < size; at += std::min(size - at, pieces[i].size), ++i)
          std::memcpy(d->bounce.data() + at, pieces[i].data, std::min(size - at, pieces[i].size));
        if (at != size) {
          if (error.empty()) error = "internal: a remote sample of fewer bytes than its planes";
          return;
        }
        bytes = d->bounce.data();
      }
      if (j + kPrefetchAhead < t->count) p->ds_.PrefetchEntry(t->samples[j + kPrefetchAhead]);
      try {
        d->finish->FinishDeferredPlanes(t->samples[j], d->seed, d->epoch, form, bytes,
                                        b->images + size_t(from + j) * p->sample_bytes_, nullptr);
      } catch (const std::exception& e) {
        if (error.empty()) error = e.what();
      }
    }
  };

  void RunRemote(Remote& rm, size_t w, DriverState* d) {
    std::vector<uint32_t>* samples = &d->samples;
    while (!cancel_.load(std::memory_order_relaxed)) {
      bool up;
      {
        std::lock_guard<std::mutex> l(rm.mu);
        up = rm.up;
      }
      if (!up) {
        // A sibling driver marked the worker down between two requests of this driver's reserved
        // batch: the rest goes to the others (kept, nobody else could take it, and the epoch hung
        // while the worker stayed away).
        if (d->pend0 < d->pend1) GiveBackClaim(d, d->pend0, d->pend1);
        Reconnect(rm);
        if (!WaitForMore(true)) return;
        continue;
      }
      uint64_t t0, t1;
      if (!TakeRemote(w, d, &t0, &t1)) {
        if (!WaitForMore(false)) return;
        continue;
      }
      const uint64_t k = t0 / chunks_per_batch_;
      const uint32_t len = plan_.batch_length(k);
      const uint32_t from = std::min(len, uint32_t(t0 % chunks_per_batch_) * chunk_);
      const uint32_t to = std::min<uint64_t>(len, (t1 - k * chunks_per_batch_) * chunk_);
      if (from >= to) {  // past the short last batch's end
        if (len == 0 && t0 % chunks_per_batch_ == 0) {  // an empty batch: its first chunk completes it
          if (!WaitForSlot(k)) {
            GiveBackClaim(d, t0, t1);
            return;
          }
          RunEmpty(slots_[k % slots_.size()].get());
        }
        FinishClaim(d);
        continue;
      }
      if (!WaitForSlot(k)) {
        GiveBackClaim(d, t0, t1);
        return;
      }
      Slot* s = slots_[k % slots_.size()].get();
      BatchBuffer* b = WritableBuffer(s, to - from, len);
      if (!b) {
        if (cancel_.load()) {
          GiveBackClaim(d, t0, t1);
        } else if (d->pend0 < d->pend1) {
          // The batch failed (no buffer; its error is set and this chunk counted done). Its other
          // chunks must be counted done too, or the batch never completes: whoever takes them next
          // finds the same error and counts them.
          GiveBackClaim(d, d->pend0, d->pend1);
        } else {
          FinishRemote();
        }
        continue;
      }
      samples->resize(to - from);
      for (uint32_t j = from; j < to; ++j) (*samples)[j - from] = plan_.samples[k * opt_.batch_size + j];
      ChunkTask task;
      task.epoch = d->epoch;
      task.seed = d->seed;
      task.samples = samples->data();
      task.count = to - from;
      task.width = d->width;
      task.height = d->height;
      task.images = b->images + size_t(from) * sample_bytes_;
      task.params = b->params.data() + from;
      task.cancel = &cancel_;
      const size_t wire_sample = size_t(3) * d->width * d->height;
      RemoteFinisher finisher(this, d, &task, b, from);
      if (wire_uint8_) {
        d->wire.resize(wire_sample * task.count);
        d->params.resize(task.count);
        task.images = d->wire.data();
        task.params = d->params.data();
        task.sink = &finisher;
      }
      std::string why;
      const auto c0 = std::chrono::steady_clock::now();
      const RunResult r = rm.ex->Run(task, Deadline(), &why);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count();
      if (r == RunResult::kBusy) {
        // Turned away by the worker's limits (e.g. its --max-in-flight below ours): the chunk goes to
        // another executor, and this driver asks again after a pause. Marked down only when it is busy
        // for every request of a long run (a limit it can never meet), so that local threads take over.
        GiveBackClaim(d, t0, t1);
        bool down = false;
        {
          std::lock_guard<std::mutex> l(rm.mu);
          down = ++rm.busy_streak > kBusyStreak;
        }
        if (down) {
          if (!cancel_.load()) MarkDown(rm, why + " (" + std::to_string(kBusyStreak) + " requests in a row)");
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(kBusyPauseMs));
        }
        continue;
      }
      if (r == RunResult::kRetry) {
        GiveBackClaim(d, t0, t1);
        if (!cancel_.load()) MarkDown(rm, why);
        continue;
      }
      if (r == RunResult::kSampleError) {
        SetError(s, why);
      } else if (!finisher.error.empty()) {
        SetError(s, finisher.error);
      } else if (wire_uint8_) {
        // The worker drew what a local run draws (batch k is a function of the file, the options and
        // the seed), so finishing does not draw them again.
        std::copy(d->params.begin(), d->params.begin() + task.count, b->params.begin() + from);
      }
      for (uint32_t j = from; j < to; ++j) {
        if (j + kPrefetchAhead < to) PrefetchEntry(k, j + kPrefetchAhead);
        Collate(b, k, j);
      }
      {
        std::lock_guard<std::mutex> l(rm.mu);
        rm.samples += to - from;
        if (ms > 0) {
          const double rate = (to - from) * 1000.0 / ms;
          rm.request_rate = rm.request_rate > 0 ? 0.8 * rm.request_rate + 0.2 * rate : rate;
        }
        ++rm.requests;
        rm.busy_streak = 0;
        // A request sent before a sibling driver marked the worker down may still succeed: the
        // worker is back only when it is up again.
        if (rm.up) {
          rm.backoff_ms = 100;
          if (rm.warned) std::fprintf(stderr, "dsc: remote worker %s is back\n", rm.ex->address().c_str());
          rm.warned = false;
        }
      }
      {
        std::lock_guard<std::mutex> l(times_mu_);
        request_ms_.push_back(ms);
        if (request_ms_.size() > 64) request_ms_.pop_front();
      }
      Done(s, to - from, len);
      FinishClaim(d);
    }
  }

 public:
  std::vector<RemoteWorkerStats> RemoteStats() {
    std::vector<RemoteWorkerStats> v;
    for (auto& rm : remotes_) {
      RemoteWorkerStats w;
      w.address = rm->ex->address();
      w.wire_bytes = rm->ex->wire_bytes();
      std::lock_guard<std::mutex> l(rm->mu);
      w.up = rm->up;
      w.samples = rm->samples;
      w.requests = rm->requests;
      w.failures = rm->failures;
      v.push_back(w);
    }
    return v;
  }

 private:
  // Autotune (reader/autotune.h): only threads 0 .. active_local_ - 1 take tasks; the others park.
  void StartAutotune() {
    AutotuneOptions a;
    a.max_threads = threads_;
    if (!opt_.remote.addresses.empty()) a.min_threads = 0;  // remote workers may cover the demand
    tuner_ = std::make_unique<Autotuner>(a);
    active_local_.store(tuner_->threads());
    if (opt_.tracer) {
      threads_counter_ = opt_.tracer->Counter("loader threads", "loader");
      opt_.tracer->Count(threads_counter_, tuner_->threads());
    }
  }

  // A worker processed `samples` since `start_ns`: the controller's capacity measure.
  void NoteBusy(uint64_t start_ns, uint32_t samples) {
    busy_ns_.fetch_add(NowNs() - start_ns, std::memory_order_relaxed);
    busy_samples_.fetch_add(samples, std::memory_order_relaxed);
  }

  // Batch k (len samples) is handed out at now_ns after a wait of wait_ns: one observation. mu_ held.
  void Autotune(uint64_t k, uint32_t len, uint64_t wait_ns, uint64_t now_ns) {
    AutotuneObservation ob;
    ob.wait_ns = wait_ns;
    ob.interval_ns = last_delivery_ns_ ? now_ns - last_delivery_ns_ : 0;
    last_delivery_ns_ = now_ns;
    ob.samples = len;
    for (uint64_t j = k + 1; j < std::min<uint64_t>(plan_.batches, k + slots_.size()); ++j)
      ob.ahead += Complete(slots_[j % slots_.size()].get(), plan_.batch_length(j));
    const uint64_t busy = busy_ns_.load(std::memory_order_relaxed), done = busy_samples_.load(std::memory_order_relaxed);
    ob.busy_ns = busy - seen_busy_ns_;
    ob.local_samples = done - seen_busy_samples_;
    seen_busy_ns_ = busy;
    seen_busy_samples_ = done;
    // What remote workers could deliver: the local threads need to cover only the rest.
    if (!remotes_.empty()) ob.other_rate = RemoteCapacity();
    const int before = active_local_.load(std::memory_order_relaxed);
    const int n = tuner_->Observe(ob);
    if (n == before) return;
    active_local_.store(n);
    if (n > before) retry_cv_.notify_all();  // parked threads wait there (WaitForMore)
    if (opt_.tracer) opt_.tracer->Count(threads_counter_, n);
  }

  LoaderOptions opt_;
  Dataset ds_;
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
  std::atomic<uint64_t> released_{0};
  std::atomic<uint64_t> next_task_{0};
  uint64_t total_tasks_ = 0;
  uint32_t chunk_ = 1, chunks_per_batch_ = 1;
  static constexpr uint32_t kChunk = 16;  // samples per local task
  uint32_t chunk_size() const { return std::max<uint32_t>(1, std::min<uint32_t>(kChunk, opt_.batch_size)); }

  // Remote workers. Threads: `in_flight` drivers per worker, each running one request at a time.
  std::vector<std::unique_ptr<Remote>> remotes_;
  std::vector<std::thread> drivers_;
  bool standby_ = false;              // remote only: local thread 0 works while no worker is up
  std::atomic<int> remote_up_{0};     // workers connected now
  uint64_t remote_chunks_ = 1;        // local tasks per request
  bool wire_uint8_ = false;           // RemoteOptions::ship_uint8 applies: replies are finished here
  // quasi_random with several workers: window affinity (ReserveBatch). reserved_[k % slots] = k + 1
  // while a remote driver holds batch k whole; claim_mu_ orders reservations with counter claims.
  bool affinity_ = false;
  std::vector<uint32_t> batch_window_;  // per batch of the job: the window of its first sample
  uint64_t window_batches_ = 4;         // batches a window holds at least
  std::mutex claim_mu_;
  std::vector<uint64_t> reserved_;
  // Task ranges a failed executor gave back, taken before the counter's; and claims not yet finished.
  std::mutex retry_mu_;
  std::condition_variable retry_cv_;
  std::deque<std::pair<uint64_t, uint64_t>> retry_;
  std::atomic<size_t> retry_size_{0};
  uint64_t remote_inflight_ = 0;
  std::mutex times_mu_;
  std::deque<double> request_ms_;     // recent successful requests, for the deadline
};

Loader::Loader(const std::string& path, const LoaderOptions& options) : p_(new Pipeline(path, WithRankBatch(options))) {}
Loader::~Loader() = default;

Loader::EpochRange Loader::epoch(uint64_t e, uint64_t first_batch) { return EpochRange(p_.get(), p_->Start(e, first_batch)); }
Loader::EpochRange Loader::resume() {
  const auto [e, k] = p_->ResumePoint();
  return epoch(e, k);
}
LoaderState Loader::state() const { return p_->State(); }
void Loader::restore(const LoaderState& s) { p_->Restore(s); }
uint64_t Loader::batches_per_epoch() const { return p_->batches_per_epoch(); }
uint32_t Loader::height() const { return p_->height(); }
uint32_t Loader::width() const { return p_->width(); }
void Loader::set_output_size(uint32_t w, uint32_t h) { p_->SetOutputSize(w, h); }
const Dataset& Loader::dataset() const { return p_->dataset(); }
const LoaderOptions& Loader::options() const { return p_->options(); }
int Loader::threads() const { return p_->threads(); }
int Loader::active_threads() const { return p_->active_threads(); }
StageStats Loader::stats() const { return p_->Stats(); }
BatchLease Loader::lease(const Batch& b) { return p_->Lease(&b); }
size_t Loader::buffers_allocated() const { return p_->BuffersAllocated(); }
size_t Loader::leased() const { return p_->Leased(); }
bool Loader::awaits_buffer() const { return p_->AwaitsBuffer(); }
std::vector<RemoteWorkerStats> Loader::remote_stats() const { return p_->RemoteStats(); }
void Loader::reset_stats() { p_->ResetStats(); }

Loader::EpochRange::EpochRange(EpochRange&& o) noexcept : p_(o.p_), job_(o.job_) { o.p_ = nullptr; }

Loader::EpochRange::~EpochRange() {
  if (p_ && p_->IsJob(job_)) p_->Cancel();
}

uint64_t Loader::EpochRange::size() const { return p_ ? p_->JobBatches(job_) : 0; }

Loader::Iterator Loader::EpochRange::begin() {
  Iterator it;
  it.p_ = p_;
  it.job_ = job_;
  it.batch_ = p_->Next(job_);
  return it;
}

BatchLease Loader::Iterator::lease() const {
  if (!p_) throw Error("lease: the range has ended");
  return p_->Lease(batch_, job_);
}

Loader::Iterator& Loader::Iterator::operator++() {
  batch_ = p_->Next(job_);
  return *this;
}

}  // namespace dsc
