#include "reader/autotune.h"

#include <algorithm>
#include <limits>

namespace dsc {

Autotuner::Autotuner(const AutotuneOptions& o) : o_(o) {
  o_.min_threads = std::max(0, o_.min_threads);
  o_.max_threads = std::max(o_.min_threads, o_.max_threads);
  o_.window = std::max<uint32_t>(1, o_.window);
  const int init = o_.initial_threads >= 0 ? o_.initial_threads : std::max(o_.min_threads, 1);
  n_ = std::clamp(init, o_.min_threads, o_.max_threads);
  cap_.assign(size_t(o_.max_threads) + 1, 0);
  starved_rate_.assign(size_t(o_.max_threads) + 1, 0);
  floor_ = o_.min_threads;
  ceiling_ = o_.max_threads;
  skip_left_ = std::max(o_.skip, o_.warmup);
}

void Autotuner::Restart() {
  count_ = 0;
  skip_left_ = std::max(skip_left_, o_.skip);
}

int Autotuner::Observe(const AutotuneObservation& ob) {
  ++seen_;
  // A batch without an interval (the first of a run) or just after a change measures a transient.
  if (skip_left_ > 0 || ob.interval_ns == 0) {
    if (skip_left_ > 0) --skip_left_;
    return n_;
  }
  if (count_ == 0) {
    wait_ = interval_ = samples_ = busy_ = local_ = 0;
    other_ = 0;
    min_ahead_ = std::numeric_limits<uint32_t>::max();
  }
  ++count_;
  wait_ += std::min(ob.wait_ns, ob.interval_ns);
  interval_ += ob.interval_ns;
  samples_ += ob.samples;
  busy_ += ob.busy_ns;
  local_ += ob.local_samples;
  other_ += ob.other_rate;
  min_ahead_ = std::min(min_ahead_, ob.ahead);
  if (count_ >= o_.window) {
    Decide();
    count_ = 0;
  }
  return n_;
}

double Autotuner::CapacityAt(int n) const {
  if (n <= 0) return 0;
  double c = cap_[size_t(n)];
  // Fewer threads than now get at least today's per-thread capacity (an old figure may be a cold
  // start's); more threads than measured get the nearest measured count's (a ceiling catches the
  // case where they do not scale).
  if (n < n_ && n_ > 0) c = std::max(c, cap_[size_t(n_)]);
  if (c > 0) return c;
  for (int d = 1; d <= o_.max_threads; ++d) {
    if (n - d >= 1 && cap_[size_t(n - d)] > 0) return cap_[size_t(n - d)];
    if (n + d <= o_.max_threads && cap_[size_t(n + d)] > 0) return cap_[size_t(n + d)];
  }
  return 0;
}

void Autotuner::Decide() {
  ++windows_;
  const double sec = interval_ * 1e-9;
  const double consumer_sec = (interval_ - wait_) * 1e-9;
  if (sec <= 0 || samples_ == 0) return;
  const double delivered = samples_ / sec;
  const double demand = consumer_sec > 0 ? samples_ / consumer_sec : std::numeric_limits<double>::infinity();
  const double other = other_ / count_;
  if (busy_ > 0 && local_ > 0 && n_ > 0) {
    const double c = local_ / (busy_ * 1e-9);
    double& cap = cap_[size_t(n_)];
    cap = cap > 0 ? 0.5 * (cap + c) : c;
  }
  const bool starved = double(wait_) > o_.starve_share * double(interval_);
  // The smallest count in [lo, hi] whose modelled capacity covers demand x headroom; -1 if none.
  auto smallest = [&](int lo, int hi, double headroom) {
    for (int m = lo; m <= hi; ++m)
      if (m * CapacityAt(m) + other >= demand * headroom) return m;
    return -1;
  };
  double rate = delivered;
  if (starved) {
    double& r = starved_rate_[size_t(n_)];
    r = r > 0 ? 0.5 * (r + delivered) : delivered;
    rate = r;
    // n_ is too few for this demand. The floor remembers the least demand a count below it was
    // starved at: only a consumer slower than that by floor_release lifts it (not a noisy reading).
    const int f = std::min(n_ + 1, o_.max_threads);
    floor_demand_ = f > floor_ ? demand : std::min(floor_demand_, demand);
    floor_ = std::max(floor_, f);
    // A ceiling holds until the consumer wants ceiling_release x the most it wanted while capped
    // (a demand measured under a passing load spike must not release it).
    if (demand > ceiling_demand_ * o_.ceiling_release) ceiling_ = o_.max_threads;
    else if (n_ >= ceiling_) ceiling_demand_ = std::max(ceiling_demand_, demand);
  }
  // The first `verify_windows` after growing: does this count deliver more than the best smaller one
  // did while starved? If not, the extra threads only share cores (with each other or the consumer):
  // go back, and grow no further. (Not starved here, this count delivers what the consumer takes:
  // only a rate clearly below the smaller count's says the consumer itself got slower.) Once only,
  // as rates are noisy; no other decision meanwhile.
  if (verify_left_ > 0) {
    verify_samples_ += samples_;
    verify_sec_ += sec;
    if (--verify_left_ > 0) return;
    rate = verify_samples_ / verify_sec_;
    int best = -1;
    for (int m = 0; m < n_; ++m)
      if (starved_rate_[size_t(m)] > 0 && (best < 0 || starved_rate_[size_t(m)] > starved_rate_[size_t(best)])) best = m;
    if (best >= 0 && rate < starved_rate_[size_t(best)] * (starved ? o_.better : 1 / o_.better)) {
      ceiling_ = std::max(o_.min_threads, n_ - 1);
      ceiling_demand_ = demand;
      floor_ = std::min(floor_, ceiling_);
      Set(std::max(best, (best + n_) / 2), true);
      return;
    }
  }
  if (starved) {
    // Mildly starved (under 3 x starve_share) grows only on the second window in a row: noise.
    const bool again = was_starved_;
    was_starved_ = true;
    if (n_ >= ceiling_ || (!again && double(wait_) < 3 * o_.starve_share * double(interval_))) return;
    if (CapacityAt(n_) <= 0 && n_ == 0) {  // nothing measured yet: one thread to learn from
      Set(1);
      return;
    }
    // At most doubling per step: past the cores, measured capacity per thread falls, and the first
    // count that no longer delivers more marks the ceiling.
    const int m = smallest(n_ + 1, ceiling_, o_.grow_headroom);
    Set(std::min(m > 0 ? m : ceiling_, std::max(n_ + 1, 2 * n_)));
    return;
  }
  was_starved_ = false;
  // A floor is forgotten when the consumer slowed down, or when the model gives the count below it
  // plenty of room (the starvation was a transient: a cold start, a stall elsewhere).
  if (demand * o_.floor_release < floor_demand_ ||
      (floor_ > o_.min_threads && (floor_ - 1) * CapacityAt(floor_ - 1) + other >= demand * o_.floor_override))
    floor_ = o_.min_threads;
  if (n_ <= o_.min_threads || min_ahead_ == 0) return;
  const int m = smallest(std::max(o_.min_threads, floor_), n_ - 1, o_.shrink_headroom);
  if (m >= 0) Set(m);
}

void Autotuner::Set(int n, bool now) {
  n = std::clamp(n, o_.min_threads, o_.max_threads);
  if (n == n_) return;
  // A reversal (growing after shrinking, or the other way) waits `hold_` windows after the last
  // change, and doubles the wait for the next one: a count that flips settles.
  const int dir = n > n_ ? 1 : -1;
  if (dir == -last_dir_) {
    if (!now && windows_ < hold_) return;
    hold_ = std::min<uint32_t>(hold_ ? 2 * hold_ : o_.hold, o_.max_hold);
  }
  last_dir_ = dir;
  windows_ = 0;
  verify_left_ = n > n_ ? std::max<uint32_t>(1, o_.verify_windows) : 0;
  verify_samples_ = verify_sec_ = 0;
  was_starved_ = false;
  n_ = n;
  last_change_ = seen_;
  skip_left_ = o_.skip;
  count_ = 0;
}

}  // namespace dsc
