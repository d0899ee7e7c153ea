// The pipeline's checkpoints: where a run is (state()), continuing one (restore(), resume()), and the
// epoch plans they count in (reader/order.h, docs/determinism.md).
#include <algorithm>
#include <string>

#include "format/error.h"
#include "reader/pipeline.h"

namespace dsc {

OrderOptions OrderOptionsOf(const LoaderOptions& o) {
  OrderOptions r;
  r.order = o.order;
  r.seed = o.seed;
  r.rank = o.rank;
  r.world_size = o.world_size;
  r.batch_size = o.batch_size;
  r.drop_last = o.drop_last;
  r.quasi_window = o.quasi_window;
  r.subset = o.subset;
  return r;
}

LoaderState Pipeline::State() {
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

void Pipeline::Restore(const LoaderState& s) {
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

std::pair<uint64_t, uint64_t> Pipeline::ResumePoint() {
  if (next_deliver_ < Plan(epoch_).batches) return {epoch_, next_deliver_};
  if (epoch_ == UINT64_MAX)  // the next epoch would wrap to 0
    throw Error(ds_.path() + ": epoch " + std::to_string(epoch_) + " is done and is the last: there is no next epoch");
  return {epoch_ + 1, 0};
}

uint64_t Pipeline::batches_per_epoch() const { return PlanEpoch(ds_.view(), order_, 0).batches; }

EpochPlan Pipeline::Plan(uint64_t e) const {
  if (e != excluded_epoch_ || excluded_.empty()) return PlanEpoch(ds_.view(), order_, e);
  OrderOptions oo = order_;
  oo.exclude = excluded_;
  return PlanEpoch(ds_.view(), oo, e);
}

}  // namespace dsc
