// The ring and its workers: a fixed pool of threads decoding each sample straight into its slot of a
// batch buffer, the consumer's side (jobs, delivery, leases), and the autotuner's glue
// (reader/pipeline.h says where the pipeline's other parts live).
#include "reader/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <system_error>

#include "format/error.h"
#include "kernels/cpu.h"
#include "reader/batch_fields.h"
#include "reader/gpu_stage.h"
#include "reader/mmap_guard.h"

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

Pipeline::Pipeline(const std::string& path, const LoaderOptions& o)
    : opt_(Validated(o)), ds_(path, DatasetOptions{o.verify, o.use_pread, o.cache_dir, o.cache_budget}), queue_(size_t(o.prefetch) + 1, cancel_) {
  const uint32_t image = ds_.ImageField(o.image);
  if (o.augment.crop != kernels::CropMode::kNone) {
    width_ = uint32_t(o.augment.out_w);
    height_ = uint32_t(o.augment.out_h);
  } else if (ds_.size() > 0) {
    const auto e0 = ds_.entry(0, image);
    for (uint64_t i = 1; i < ds_.size(); ++i) {
      const auto e = ds_.entry(i, image);
      if (e.width != e0.width || e.height != e0.height)
        throw Error(path + ": sample " + std::to_string(i) + (image ? ": image '" + o.image + "'" : std::string()) + " is " +
                    std::to_string(e.width) + "x" +
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
  if (opt_.channels == 0) {  // auto: the images' own, 1 only when every one is grayscale
    opt_.channels = ds_.size() > 0 && !ds_.view().ffcv() ? 1 : 3;
    for (uint64_t i = 0; i < ds_.size() && opt_.channels == 1; ++i)
      if (ds_.entry(i, image).channels != 1) opt_.channels = 3;
  }
  ValidateOptions(opt_, width_, height_);  // translate and cutout against the image size
  field_ids_ = SelectFields(ds_.view(), o.fields, image);
  if (opt_.defer_augment) deferred_list_ = kernels::ParseTransforms(opt_.transforms);
  if (!deferred_list_.empty()) {  // a list that cannot apply to this output size fails here, not mid-epoch
    std::vector<kernels::TransformStep> probe(size_t(deferred_list_.MaxSteps()));
    try {
      deferred_list_.Plan(int(width_), int(height_), 0, 0, 0, probe.data(), &plan_scratch_);
    } catch (const Error& ex) {
      throw Error(path + ": option transforms: " + ex.what());
    }
  }
  if (image != 0 && (!o.boxes.empty() || !o.points.empty()))
    throw OptionError(std::string(o.boxes.empty() ? "points" : "boxes") + " follow the first image '" + ds_.meta().fields[0].name +
                      "' only; this loader decodes '" + o.image + "'");
  {
    kernels::AugmentSpec spec = o.augment;  // as SampleWork draws it (ApplyOutputSize follows set_output_size)
    if (spec.crop != kernels::CropMode::kNone) {
      spec.out_w = int(width_);
      spec.out_h = int(height_);
    }
    boxes_ = SelectBoxes(ds_.view(), field_ids_, o.boxes, spec, AugmentSeed(o));
    SelectPoints(ds_.view(), field_ids_, o.points, &boxes_);
    // The list's geometric ops move pixels the boxes and masks do not follow yet: refused rather than misplaced.
    if (boxes_.moves_fields())
      for (const char* op : {"random_crop", "flip", "random_horizontal_flip", "random_vertical_flip", "random_rotation",
                             "random_affine", "random_perspective", "rand_augment", "trivial_augment", "auto_augment"})
        if (o.transforms.find(op) != std::string::npos) {
          const std::string what = boxes_.active() ? "boxes" : !boxes_.points.empty() ? "points" : "masks";
          throw OptionError(what + ": the transform list's '" + op + "' moves pixels the " + what +
                            " do not follow yet; use the crop/flip/translate options, which they do");
        }
  }
  order_ = OrderOptionsOf(o);
  PlanEpoch(ds_.view(), order_, 0);  // validates the options early
  work_ = std::make_shared<SampleWork>(opt_, width_, height_);
  sample_bytes_ = work_->sample_bytes();
  staging_ = StagingBytes(opt_, sample_bytes_);
  CheckBufferMemory(o, BufferBytes());
  slots_.resize(size_t(o.prefetch) + 1);
  pool_ = std::make_shared<BufferPool>(o, slots_.size(), BufferBytes(), staging_ != 0);
  for (auto& s : slots_) {
    s = std::make_unique<Slot>();
    s->buf.store(pool_->NewBuffer().release());
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
  if (o.order == Order::kQuasiRandom && o.cache_budget > 0 && (ds_.mapped() || ds_.streamed()))
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

void Pipeline::Shutdown() {
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
  pool_->Close();
}

void Pipeline::SetOutputSize(uint32_t w, uint32_t h) {
  if (opt_.augment.crop == kernels::CropMode::kNone)
    throw OptionError("set_output_size: the output is the image size unless a crop transform is set");
  LoaderOptions o = opt_;
  o.augment.out_w = int(std::min<uint32_t>(w, INT32_MAX));
  o.augment.out_h = int(std::min<uint32_t>(h, INT32_MAX));
  ValidateOptions(o, w, h);
  CheckBufferMemory(o, uint64_t(o.batch_size) * w * h * opt_.channels * DTypeSize(o.dtype) + staging_);
  std::lock_guard<std::mutex> l(mu_);
  pending_w_ = w;
  pending_h_ = h;
}

uint64_t Pipeline::Start(uint64_t epoch, uint64_t first_batch) {
  // Refused before the running epoch is touched: a bad call must not end it.
  EpochPlan plan = Plan(epoch);
  if (first_batch > plan.batches) throw Error("batch " + std::to_string(first_batch) + " is past the end of the epoch");
  Cancel();
  ApplyOutputSize();
  for (auto& s : slots_)  // a batch leased when the last job ended left its slot empty
    if (!s->buf.load()) pool_->Refill(&s->buf);
  std::lock_guard<std::mutex> l(mu_);
  plan_ = std::move(plan);
  epoch_ = epoch;
  next_deliver_ = first_batch;
  chunk_ = chunk_size();
  queue_.Start(plan_, first_batch, (opt_.batch_size + chunk_ - 1) / chunk_);
  for (auto& s : slots_) ResetSlot(s.get());
  if (readahead_) readahead_->Start(plan_, first_batch);
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

const Batch* Pipeline::Next(uint64_t job) {
  std::unique_lock<std::mutex> l(mu_);
  if (job != job_ || cancel_.load()) return nullptr;
  if (holding_) {  // give the previous batch back
    Slot* s = slots_[next_deliver_ % slots_.size()].get();
    if (!s->buf.load(std::memory_order_relaxed)) pool_->Refill(&s->buf);  // it was leased
    ResetSlot(s);
    ++next_deliver_;
    queue_.Release(next_deliver_);
    if (readahead_) readahead_->Released(next_deliver_);
    holding_ = false;
    held_lease_.reset();
    work_cv_.notify_all();
    queue_.Wake();  // no lost wake-up in WaitForMore
  }
  if (next_deliver_ >= plan_.batches) {
    queue_.Notify();  // every task is taken: parked threads end the job
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
  b.channels = opt_.channels;
  b.width = width_;
  b.label_fields = ds_.meta().label_field_count();
  b.labels[0] = buf->labels[0].data();
  b.labels[1] = b.label_fields > 1 ? buf->labels[1].data() : nullptr;
  b.indices = buf->indices.data();
  b.padding = buf->padding.data();
  b.padding_count = 0;
  for (uint32_t i = 0; i < len; ++i) b.padding_count += buf->padding[i];
  if (!field_ids_.empty()) FillFieldColumns(ds_.view(), field_ids_, len, buf, boxes_, epoch_);  // after the workers: same for any thread count
  b.fields = buf->field_columns.data();
  b.field_count = buf->field_columns.size();
  b.steps = nullptr;
  b.steps_per_sample = 0;
  if (!deferred_list_.empty()) {  // drawn here, per sample from its own stream: the same for any producer
    // Without deferring, a crop's flip is part of its resize, before the list: so it leads the steps
    // here (and leaves params). Without a crop the flip comes after the list either way.
    const bool lead_flip = opt_.augment.crop != kernels::CropMode::kNone && opt_.augment.flip;
    const uint32_t k = uint32_t(deferred_list_.MaxSteps()) + (lead_flip ? 1 : 0);
    buf->steps.resize(size_t(len) * k);
    const uint64_t seed = AugmentSeed(opt_);
    for (uint32_t i = 0; i < len; ++i) {
      kernels::TransformStep* st = buf->steps.data() + size_t(i) * k;
      if (lead_flip) {
        *st++ = kernels::TransformStep{};
        if (buf->params[i].flip) st[-1].kind = kernels::kStepFlipH;
        buf->params[i].flip = 0;
      }
      try {
        deferred_list_.Plan(int(width_), int(height_), seed, epoch_, b.indices[i], st, &plan_scratch_);
      } catch (const Error& ex) {
        l.unlock();
        Cancel();
        throw Error(ds_.path() + ": sample " + std::to_string(b.indices[i]) + ": " + ex.what());
      }
    }
    b.steps = buf->steps.data();
    b.steps_per_sample = k;
  }
  holding_ = true;
  held_batch_ = &b;
  return &b;
}

BatchLease Pipeline::Lease(const Batch* batch, uint64_t job) {
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

size_t Pipeline::BuffersAllocated() {
  std::lock_guard<std::mutex> l(pool_->mu);
  return pool_->allocated;
}

size_t Pipeline::Leased() {
  std::lock_guard<std::mutex> l(pool_->mu);
  return pool_->leased;
}

bool Pipeline::AwaitsBuffer() {
  uint64_t k;
  {
    std::lock_guard<std::mutex> l(mu_);
    k = next_deliver_;
  }
  return !slots_[k % slots_.size()]->buf.load();
}

void Pipeline::Cancel() {
  std::unique_lock<std::mutex> l(mu_);
  cancel_.store(true);
  work_cv_.notify_all();
  pool_->Wake();
  queue_.Wake();
  remotes_.CancelAll();
  if (readahead_) readahead_->Wake();
  idle_cv_.wait(l, [&] { return active_ == 0; });
  if (holding_) {  // the batch the consumer held was handed out
    ++next_deliver_;
    holding_ = false;
  }
  held_lease_.reset();
}

StageStats Pipeline::Stats() {
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

void Pipeline::ResetStats() {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& s : stats_) s = StageStats();
  wait_ns_ = 0;
  if (readahead_) advised_base_ = readahead_->advised_bytes();
}

void Pipeline::ApplyOutputSize() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (pending_w_ == 0) return;
    width_ = pending_w_;
    height_ = pending_h_;
    pending_w_ = pending_h_ = 0;
    opt_.augment.out_w = int(width_);
    opt_.augment.out_h = int(height_);
    boxes_.spec.out_w = int(width_);  // the boxes follow the new output size too
    boxes_.spec.out_h = int(height_);
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

void Pipeline::WorkerLoop(int t) {
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
      seed = AugmentSeed(opt_);
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

void Pipeline::RunJob(int t, SampleProcessor* proc, uint64_t epoch, uint64_t seed, StageStats* st, uint32_t track) {
  while (!cancel_.load(std::memory_order_relaxed)) {
    uint64_t task;
    if (!MayWork(t)) {
      if (!queue_.WaitForMore(true)) return;
    } else if (!queue_.TakeLocal(&task)) {
      if (!queue_.WaitForMore(false)) return;
    } else {
      RunTask(task, proc, epoch, seed, st, track);
    }
  }
}

void Pipeline::StageBatch(Slot* s, BatchBuffer* b, uint32_t len, SampleProcessor* proc, uint64_t epoch,
                          uint64_t seed, StageStats* st, uint32_t track) {
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

void Pipeline::RunTask(uint64_t task, SampleProcessor* proc, uint64_t epoch, uint64_t seed, StageStats* st,
                       uint32_t track) {
  const bool timed = opt_.collect_stats || opt_.tracer;
  const uint32_t cpb = queue_.chunks_per_batch();
  const uint64_t k = task / cpb;
  if (!WaitForSlot(k)) return;
  if (readahead_) readahead_->Need(k);  // before any page of the batch is faulted
  if (cancel_.load()) return;            // woken by Cancel, or cancelled while it waited
  Slot* s = slots_[k % slots_.size()].get();
  const uint32_t len = plan_.batch_length(k);
  const uint32_t from = uint32_t(task % cpb) * chunk_;
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

void Pipeline::StartAutotune() {
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

void Pipeline::NoteBusy(uint64_t start_ns, uint32_t samples) {
  busy_ns_.fetch_add(NowNs() - start_ns, std::memory_order_relaxed);
  busy_samples_.fetch_add(samples, std::memory_order_relaxed);
}

void Pipeline::Autotune(uint64_t k, uint32_t len, uint64_t wait_ns, uint64_t now_ns) {
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
  if (!remotes_.empty()) ob.other_rate = remotes_.Capacity(opt_.remote.transport.in_flight);
  const int before = active_local_.load(std::memory_order_relaxed);
  const int n = tuner_->Observe(ob);
  if (n == before) return;
  active_local_.store(n);
  if (n > before) queue_.Notify();  // parked threads wait there (WaitForMore)
  if (opt_.tracer) opt_.tracer->Count(threads_counter_, n);
}

}  // namespace dsc
