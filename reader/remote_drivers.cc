// The remote workers' driver threads (reader/remote_drivers.h): claiming, requests, deadlines,
// health and back-off, and finishing replies into the batch.
#include "reader/remote_drivers.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>

#include "format/error.h"
#include "reader/pipeline.h"

namespace dsc {

void RemoteWorkers::Connect(const RemoteOptions& r, const RemoteContext& ctx, bool standby) {
  standby_ = standby;
  std::vector<std::unique_ptr<RemoteExecutor>> made;  // every address checked before any connects
  for (const auto& a : r.addresses) made.push_back(r.connect(a, r, ctx));
  for (auto& ex : made) {
    auto rm = std::make_unique<Remote>();
    rm->ex = std::move(ex);
    std::string why;
    const ConnectResult c = rm->ex->Connect(int(r.transport.connect_timeout_ms), &why);
    if (c == ConnectResult::kRefused) throw Error(why);
    if (c == ConnectResult::kReady) {
      rm->up = true;
      up_.fetch_add(1);
    } else {
      std::fprintf(stderr, "dsc: warning: %s; retrying in the background\n", why.c_str());
      rm->warned = true;
      rm->next_try = std::chrono::steady_clock::now() + std::chrono::milliseconds(rm->backoff_ms);
    }
    all_.push_back(std::move(rm));
  }
  if (up_.load() == 0 && standby_)
    std::fprintf(stderr, "dsc: warning: no remote worker is reachable; decoding on 1 local thread until one is\n");
}

void RemoteWorkers::UpRank(size_t w, size_t* rank, size_t* up) {
  for (size_t i = 0; i < all_.size(); ++i) {
    std::lock_guard<std::mutex> l(all_[i]->mu);
    if (all_[i]->up) *rank += i < w, ++*up;
  }
}

void RemoteWorkers::CancelAll() {
  for (auto& r : all_) r->ex->CancelAll();
}

RemoteContext Pipeline::MakeRemoteContext() const {
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
  c.planes = wire_uint8_ && opt_.remote.transport.planes;
  c.run_fingerprint = RunIdentity::Of(ds_, opt_).Fingerprint();
  return c;
}

void Pipeline::StartRemote() {
  const RemoteOptions& r = opt_.remote;
  if (!r.connect)
    throw OptionError("remote: LoaderOptions::remote.connect is not set (link dsc::remote and set it to dsc::remote::Connector())");
  if (r.transport.in_flight == 0 || r.transport.in_flight > 64) throw OptionError("remote.transport.in_flight must be 1 to 64, not " + std::to_string(r.transport.in_flight));
  // One channel travels finished (fewer bytes than uint8 RGB already).
  wire_uint8_ = r.transport.ship_uint8 && !opt_.defer_augment && opt_.dtype != DType::kUint8 && opt_.channels != 1;
  // About 4 MiB on the wire per request, sized by what travels (uint8 when the drivers finish the
  // samples): float32 CIFAR sized by its output took two requests per 512-batch, 11% more client CPU.
  const size_t wire_sample = wire_uint8_ ? size_t(3) * width_ * height_ : sample_bytes_;
  const uint64_t per_request = r.transport.chunk ? r.transport.chunk : std::max<uint64_t>(1, (4u << 20) / std::max<size_t>(1, wire_sample));
  remote_chunks_ = std::max<uint64_t>(1, (std::min<uint64_t>(per_request, opt_.batch_size) + chunk_size() - 1) / chunk_size());
  // Within what a worker takes (a larger request was refused, and the worker marked down, every time).
  if (remote_chunks_ * chunk_size() > kMaxRemoteRequestSamples)
    remote_chunks_ = std::max<uint64_t>(1, kMaxRemoteRequestSamples / chunk_size());
  if (opt_.order == Order::kQuasiRandom && r.addresses.size() >= 2) {
    const uint64_t window = opt_.quasi_window ? opt_.quasi_window : 4ull * opt_.batch_size;
    queue_.EnableAffinity((window + opt_.batch_size - 1) / opt_.batch_size);
  }
  remotes_.Connect(r, MakeRemoteContext(), standby_);
  for (size_t w = 0; w < remotes_.size(); ++w)
    for (uint32_t i = 0; i < r.transport.in_flight; ++i) drivers_.emplace_back([this, w] { DriverLoop(w); });
}

void Pipeline::DriverLoop(size_t w) {
  uint64_t seen = 0;
  DriverState d;
  while (true) {
    {
      std::unique_lock<std::mutex> l(mu_);
      work_cv_.wait(l, [&] { return stop_ || job_ != seen; });
      if (stop_) return;
      seen = job_;
      d.epoch = epoch_;
      d.seed = AugmentSeed(opt_);
      d.width = width_;
      d.height = height_;
      if (wire_uint8_ && d.work != work_) {  // first job, or set_output_size
        d.work = work_;
        d.finish = d.work->NewProcessor(ds_, false);
      }
    }
    d.claim = RemoteClaim();
    RunRemote(remotes_[w], w, &d);
    std::lock_guard<std::mutex> l(mu_);
    if (--active_ == 0) idle_cv_.notify_all();
  }
}

double RemoteWorkers::Capacity(uint32_t in_flight) {
  double c = 0;
  for (auto& rm : all_) {
    std::lock_guard<std::mutex> l(rm->mu);
    if (rm->up) c += rm->request_rate * in_flight;
  }
  return c;
}

void RemoteWorkers::MarkDown(Remote& rm, const std::string& why) {
  std::lock_guard<std::mutex> l(rm.mu);
  ++rm.failures;
  if (!rm.up) return;
  rm.up = false;
  rm.next_try = std::chrono::steady_clock::now() + std::chrono::milliseconds(rm.backoff_ms);
  if (up_.fetch_sub(1) == 1 && standby_)
    std::fprintf(stderr, "dsc: warning: no remote worker is reachable; decoding on 1 local thread until one is\n");
  if (!rm.warned) std::fprintf(stderr, "dsc: warning: %s; its work goes to other executors, reconnecting\n", why.c_str());
  rm.warned = true;
  rm.backoff_ms = std::min(rm.backoff_ms * 2, 2000);  // reset by a request that succeeds
}

void RemoteWorkers::Reconnect(Remote& rm, int connect_timeout_ms) {
  {
    std::lock_guard<std::mutex> l(rm.mu);
    if (rm.up || rm.connecting || std::chrono::steady_clock::now() < rm.next_try) return;
    rm.connecting = true;
  }
  std::string why;
  const ConnectResult c = rm.ex->Connect(connect_timeout_ms, &why);
  std::lock_guard<std::mutex> l(rm.mu);
  rm.connecting = false;
  if (c == ConnectResult::kReady) {
    rm.up = true;
    rm.refusal.clear();
    rm.busy_streak = 0;
    up_.fetch_add(1);
  } else {
    // A worker restarted with another file, version or token: say why once (it is still retried).
    if (c == ConnectResult::kRefused && why != rm.refusal)
      std::fprintf(stderr, "dsc: warning: reconnection refused: %s; retrying with back-off\n", why.c_str());  // `why` names it
    if (c == ConnectResult::kRefused) rm.refusal = why;
    rm.backoff_ms = std::min(rm.backoff_ms * 2, 2000);
    rm.next_try = std::chrono::steady_clock::now() + std::chrono::milliseconds(rm.backoff_ms);
  }
}

void RemoteWorkers::Served(Remote& rm, uint32_t samples, double ms) {
  std::lock_guard<std::mutex> l(rm.mu);
  rm.samples += samples;
  if (ms > 0) {
    const double rate = samples * 1000.0 / ms;
    rm.request_rate = rm.request_rate > 0 ? 0.8 * rm.request_rate + 0.2 * rate : rate;
  }
  ++rm.requests;
  rm.busy_streak = 0;
  // A request sent before a sibling driver marked the worker down may still succeed: the worker is
  // back only when it is up again.
  if (rm.up) {
    rm.backoff_ms = 100;
    if (rm.warned) std::fprintf(stderr, "dsc: remote worker %s is back\n", rm.ex->address().c_str());
    rm.warned = false;
  }
}

int RequestTimes::Deadline(uint32_t fixed_ms) {
  if (fixed_ms) return int(fixed_ms);
  std::lock_guard<std::mutex> l(mu_);
  if (ms_.size() < 3) return 30000;
  std::vector<double> v(ms_.begin(), ms_.end());
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return int(std::min(600000.0, std::max(1000.0, 10 * v[v.size() / 2])));
}

void RequestTimes::Add(double ms) {
  std::lock_guard<std::mutex> l(mu_);
  ms_.push_back(ms);
  if (ms_.size() > 64) ms_.pop_front();
}

namespace {

// Float batches over the wire as uint8 (ship_uint8): each received sample is finished into batch b as
// it arrives, read where it lies in the executor's receive buffers. Finished RGB only needs the
// output format; planes need the whole augmentation and the colour conversion. The parameters are
// the reply's, copied into the batch once it is whole.
struct RemoteFinisher : SampleSink {
  RemoteFinisher(const Dataset& ds, size_t sample_bytes, DriverState* d, const ChunkTask* t, BatchBuffer* b, uint32_t from)
      : ds(ds), sample_bytes(sample_bytes), d(d), t(t), b(b), from(from) {}
  const Dataset& ds;
  const size_t sample_bytes;
  DriverState* const d;
  const ChunkTask* const t;
  BatchBuffer* const b;
  const uint32_t from;
  std::string error;  // the first sample that could not be finished

  void Take(uint32_t j, SampleForm form, const BytePiece* pieces, size_t n) override {
    if (form != SampleForm::kRgb) return TakePlanes(j, form, pieces, n);
    try {
      d->finish->FinishRgb(pieces, n, b->images + size_t(from + j) * sample_bytes);
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
    if (j + Pipeline::kPrefetchAhead < t->count) ds.PrefetchEntry(t->samples[j + Pipeline::kPrefetchAhead]);
    try {
      d->finish->FinishDeferredPlanes(t->samples[j], d->seed, d->epoch, form, bytes,
                                      b->images + size_t(from + j) * sample_bytes, nullptr);
    } catch (const std::exception& e) {
      if (error.empty()) error = e.what();
    }
  }
};

}  // namespace

void Pipeline::RunRemote(Remote& rm, size_t w, DriverState* d) {
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
      if (d->claim.pending()) queue_.GiveBackClaim(&d->claim, d->claim.pend0, d->claim.pend1);
      remotes_.Reconnect(rm, int(opt_.remote.transport.connect_timeout_ms));
      if (!queue_.WaitForMore(true)) return;
      continue;
    }
    uint64_t t0, t1;
    const auto up_rank = [&](size_t* rank, size_t* up) { remotes_.UpRank(w, rank, up); };
    if (!queue_.TakeRemote(&d->claim, remote_chunks_, up_rank, &t0, &t1)) {
      if (!queue_.WaitForMore(false)) return;
      continue;
    }
    const uint32_t cpb = queue_.chunks_per_batch();
    const uint64_t k = t0 / cpb;
    const uint32_t len = plan_.batch_length(k);
    const uint32_t from = std::min(len, uint32_t(t0 % cpb) * chunk_);
    const uint32_t to = std::min<uint64_t>(len, (t1 - k * cpb) * chunk_);
    if (from >= to) {  // past the short last batch's end
      if (len == 0 && t0 % cpb == 0) {  // an empty batch: its first chunk completes it
        if (!WaitForSlot(k)) {
          queue_.GiveBackClaim(&d->claim, t0, t1);
          return;
        }
        RunEmpty(slots_[k % slots_.size()].get());
      }
      queue_.FinishClaim(&d->claim);
      continue;
    }
    if (!WaitForSlot(k)) {
      queue_.GiveBackClaim(&d->claim, t0, t1);
      return;
    }
    Slot* s = slots_[k % slots_.size()].get();
    BatchBuffer* b = WritableBuffer(s, to - from, len);
    if (!b) {
      if (cancel_.load()) {
        queue_.GiveBackClaim(&d->claim, t0, t1);
      } else if (d->claim.pending()) {
        // The batch failed (no buffer; its error is set and this chunk counted done). Its other
        // chunks must be counted done too, or the batch never completes: whoever takes them next
        // finds the same error and counts them.
        queue_.GiveBackClaim(&d->claim, d->claim.pend0, d->claim.pend1);
      } else {
        queue_.FinishRemote();
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
    RemoteFinisher finisher(ds_, sample_bytes_, d, &task, b, from);
    if (wire_uint8_) {
      d->wire.resize(wire_sample * task.count);
      d->params.resize(task.count);
      task.images = d->wire.data();
      task.params = d->params.data();
      task.sink = &finisher;
    }
    std::string why;
    const auto c0 = std::chrono::steady_clock::now();
    const RunResult r = rm.ex->Run(task, request_times_.Deadline(opt_.remote.transport.deadline_ms), &why);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count();
    if (r == RunResult::kBusy) {
      // Turned away by the worker's limits (e.g. its --max-in-flight below ours): the chunk goes to
      // another executor, and this driver asks again after a pause. Marked down only when it is busy
      // for every request of a long run (a limit it can never meet), so that local threads take over.
      queue_.GiveBackClaim(&d->claim, t0, t1);
      bool down = false;
      {
        std::lock_guard<std::mutex> l(rm.mu);
        down = ++rm.busy_streak > RemoteWorkers::kBusyStreak;
      }
      if (down) {
        if (!cancel_.load()) remotes_.MarkDown(rm, why + " (" + std::to_string(RemoteWorkers::kBusyStreak) + " requests in a row)");
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(RemoteWorkers::kBusyPauseMs));
      }
      continue;
    }
    if (r == RunResult::kRetry) {
      queue_.GiveBackClaim(&d->claim, t0, t1);
      if (!cancel_.load()) remotes_.MarkDown(rm, why);
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
    remotes_.Served(rm, to - from, ms);
    request_times_.Add(ms);
    Done(s, to - from, len);
    queue_.FinishClaim(&d->claim);
  }
}

std::vector<RemoteWorkerStats> RemoteWorkers::Stats() {
  std::vector<RemoteWorkerStats> v;
  for (auto& rm : all_) {
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

}  // namespace dsc
