#include "reader/work_queue.h"

namespace dsc {

void WorkQueue::Start(const EpochPlan& plan, uint64_t first_batch, uint32_t chunks_per_batch) {
  released_ = first_batch;
  chunks_per_batch_ = chunks_per_batch;
  next_task_.store(first_batch * chunks_per_batch_);
  batches_ = plan.batches;
  total_tasks_ = plan.batches * chunks_per_batch_;
  reserved_.assign(slots_, 0);
  if (affinity_) {
    batch_window_.assign(plan.batches, 0);
    for (uint64_t k = 0, w = 0; k < plan.batches; ++k) {
      while (w + 1 < plan.window_starts.size() && plan.window_starts[w + 1] <= k * plan.batch_size) ++w;
      batch_window_[k] = uint32_t(w);
    }
  }
  std::lock_guard<std::mutex> rl(retry_mu_);
  retry_.clear();
  retry_size_.store(0);
  remote_inflight_ = 0;
}

bool WorkQueue::Reserve(size_t rank, size_t up, uint64_t* k_out, uint64_t* steal_limit) {
  if (up < 2) return false;
  // Only a ring with room for a window per worker (and one for a straddling batch) lets workers
  // wait for their own windows; with less, waiting would idle them, so they take any batch.
  const bool room = slots_ >= up * (window_batches_ + 1);
  *steal_limit = room ? released_.load(std::memory_order_acquire) + 1 : UINT64_MAX;
  std::lock_guard<std::mutex> l(claim_mu_);
  const uint64_t cpb = chunks_per_batch_, released = released_.load(std::memory_order_acquire);
  uint64_t cur = next_task_.load();
  const uint64_t end = std::min<uint64_t>(batches_, released + slots_);
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

}  // namespace dsc
