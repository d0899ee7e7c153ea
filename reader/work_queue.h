// Internal to the loader (not for users; see reader/loader.h): who decodes which samples next.
//
// An epoch's work is a sequence of tasks: chunks of consecutive samples of one batch, in batch order,
// chunks_per_batch tasks per batch. Executors (local threads, remote drivers) claim them from an
// atomic counter, but only tasks of a batch the ring may hold now: batch k while k < released + slots,
// released being the batches the consumer has given back. That bounds memory and gives backpressure.
//
// Beside the counter:
// - the retry queue: ranges a failed remote executor gave back, claimed before the counter's next;
// - claims in flight: a remote claim is counted until it is done or given back, so that an executor
//   with nothing to claim waits for it (it may come back) instead of ending the job;
// - reservations (quasi_random with several remote workers): a worker takes whole batches of its own
//   windows ahead of the counter, which skips them (Reserve).
//
// No threads of its own and no decoding: the pipeline's workers and drivers call it, and
// tests/work_queue_test.cc drives it by hand. Thread-safe except Start and EnableAffinity, which run
// while no executor works.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <utility>
#include <vector>

#include "reader/order.h"

namespace dsc {

// A remote driver's claim on a reserved batch: tasks [pend0, pend1) not yet sent.
struct RemoteClaim {
  uint64_t pend0 = 0, pend1 = 0;
  bool pending() const { return pend0 < pend1; }
};

class WorkQueue {
 public:
  // For a ring of `slots` batches; `cancel` ends every wait (the pipeline's job cancellation).
  WorkQueue(size_t slots, const std::atomic<bool>& cancel) : slots_(slots), cancel_(cancel) {}

  // quasi_random with several remote workers: window affinity (Reserve), with windows of at least
  // `window_batches` batches. Before the first Start.
  void EnableAffinity(uint64_t window_batches) {
    affinity_ = true;
    window_batches_ = window_batches;
  }
  bool affinity() const { return affinity_; }

  // A job: the tasks of `plan`'s batches from `first_batch`, `chunks_per_batch` per batch; nothing
  // given back, nothing in flight. While no executor works.
  void Start(const EpochPlan& plan, uint64_t first_batch, uint32_t chunks_per_batch);

  uint32_t chunks_per_batch() const { return chunks_per_batch_; }

  // The consumer gave back the batches before `released`: those up to released + slots - 1 may be
  // written. Wake() (or Notify()) then lets waiting executors see it.
  void Release(uint64_t released) { released_ = released; }
  // Whether batch k may be written now (k < released + slots).
  bool InRing(uint64_t k, std::memory_order mo = std::memory_order_seq_cst) const {
    return k < released_.load(mo) + slots_;
  }

  // Claims up to `max` tasks of one batch from the counter, only while that batch may be written: an
  // executor never holds a task it cannot run yet, so a chunk given back by a failed executor always
  // finds a free one (no executor sits on a later batch's task waiting for the ring). `limit`: the
  // first batch it may not take.
  bool ClaimFromCounter(uint64_t max, uint64_t* t0, uint64_t* t1, uint64_t limit = UINT64_MAX) {
    if (affinity_) {  // reservations (Reserve) make the counter skip whole batches: one lock
      std::lock_guard<std::mutex> l(claim_mu_);
      const uint64_t cur = next_task_.load();  // on a batch nobody holds (SkipReservedLocked)
      const uint64_t k = cur / chunks_per_batch_;
      if (cur < total_tasks_ && k < limit && k < released_.load(std::memory_order_acquire) + slots_) {
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
      if (k >= released_.load(std::memory_order_acquire) + slots_) return false;
      const uint64_t end = std::min({cur + max, (k + 1) * chunks_per_batch_, total_tasks_});
      if (next_task_.compare_exchange_weak(cur, end)) {
        *t0 = cur;
        *t1 = end;
        return true;
      }
    }
    return false;
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

  // A remote worker's next claim, at most `max` tasks of one batch: the rest of its reserved batch, a
  // range given back by a failed executor, a batch of its own windows (Reserve; up_rank(&rank, &up)
  // tells the worker's rank among the `up` workers connected now), else the counter's next. Counts
  // the claim in flight, so that local threads wait for it instead of ending the job; a reserved
  // batch stays counted until all its requests are done or its rest is given back.
  template <typename UpRank>
  bool TakeRemote(RemoteClaim* c, uint64_t max, UpRank up_rank, uint64_t* t0, uint64_t* t1) {
    if (c->pending()) {  // the rest of a reserved batch (already counted)
      *t0 = c->pend0;
      *t1 = c->pend0 = std::min(c->pend1, c->pend0 + max);
      return true;
    }
    {
      std::lock_guard<std::mutex> l(retry_mu_);
      ++remote_inflight_;
      if (TakeRetryLocked(max, t0, t1)) return true;
    }
    uint64_t k, limit = UINT64_MAX;
    if (affinity_) {
      size_t rank = 0, up = 0;
      up_rank(&rank, &up);
      if (Reserve(rank, up, &k, &limit)) {
        c->pend0 = k * chunks_per_batch_;
        c->pend1 = (k + 1) * chunks_per_batch_;
        *t0 = c->pend0;
        *t1 = c->pend0 = std::min(c->pend1, c->pend0 + max);
        return true;
      }
    }
    if (ClaimFromCounter(max, t0, t1, limit)) return true;
    FinishRemote();
    return false;
  }

  // quasi_random with several workers: the worker of rank `rank` among the `up` workers connected now
  // reserves the next batch of its own windows that the counter has not reached, inside the ring, so
  // that each worker reads the blocks of about 1/W of the windows (docs/remote.md). Windows are
  // block-aligned and hold at least quasi_window samples (EpochPlan::window_starts); a batch goes with
  // the window of its first sample. `*steal_limit` receives the first batch the worker may not take
  // from the counter: only the batch the consumer needs next while affinity holds (taking later ones
  // would read the other workers' windows), else the whole ring.
  bool Reserve(size_t rank, size_t up, uint64_t* k_out, uint64_t* steal_limit);

  // The end of a remote claim: counted out of flight unless a reserved batch has requests left.
  void FinishClaim(RemoteClaim* c) {
    if (!c->pending()) FinishRemote();
  }
  // Gives back [t0, t1) and what is left of a reserved batch (it follows t1).
  void GiveBackClaim(RemoteClaim* c, uint64_t t0, uint64_t t1) {
    if (c->pending()) t1 = c->pend1;
    c->pend0 = c->pend1 = 0;
    GiveBack(t0, t1);
  }
  // A remote claim is done (counted out of flight).
  void FinishRemote() {
    {
      std::lock_guard<std::mutex> l(retry_mu_);
      --remote_inflight_;
    }
    retry_cv_.notify_all();
  }
  // A remote claim failed: [t0, t1) goes to the retry queue for another executor.
  void GiveBack(uint64_t t0, uint64_t t1) {
    {
      std::lock_guard<std::mutex> l(retry_mu_);
      retry_.emplace_back(t0, t1);
      retry_size_.store(retry_.size());
      --remote_inflight_;
    }
    retry_cv_.notify_all();
  }

  // Waits for work to claim: a given-back chunk, a batch slot freed, or (park: a thread that may not
  // work now) a little while. false: the job is done (or cancelled).
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
  // Wakes the executors in WaitForMore, with no lost wake-up (after Release or a cancellation).
  void Wake() {
    {
      std::lock_guard<std::mutex> l(retry_mu_);
    }
    retry_cv_.notify_all();
  }
  // Wakes them without the lock: they re-check within WaitForMore's 20 ms anyway.
  void Notify() { retry_cv_.notify_all(); }

 private:
  // Nothing left to claim and nothing in flight elsewhere that could come back (retry_mu_ held).
  bool DrainedLocked() const { return next_task_.load() >= total_tasks_ && retry_.empty() && remote_inflight_ == 0; }

  // Whether the counter's next task belongs to a batch that may be written now (k < released + slots).
  bool Claimable() const {
    const uint64_t cur = next_task_.load();
    return cur < total_tasks_ && cur / chunks_per_batch_ < released_.load() + slots_;
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

  const size_t slots_;
  const std::atomic<bool>& cancel_;
  std::atomic<uint64_t> released_{0};
  std::atomic<uint64_t> next_task_{0};
  uint64_t total_tasks_ = 0;
  uint64_t batches_ = 0;  // of the job's plan
  uint32_t chunks_per_batch_ = 1;
  // Window affinity (Reserve). reserved_[k % slots] = k + 1 while a remote driver holds batch k
  // whole; claim_mu_ orders reservations with counter claims.
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
};

}  // namespace dsc
