// The loader's thread controller (LoaderOptions::autotune): how many local decode threads to keep
// working so that the consumer does not wait, using as few cores as that takes.
//
//   dsc::Autotuner tuner({.min_threads = 1, .max_threads = 8});
//   for each batch handed to the consumer:
//     threads = tuner.Observe({.wait_ns = ..., .interval_ns = ..., .samples = 512, ...});
//
// A pure policy: no threads, no clock. The pipeline feeds it one observation per delivered batch (on
// the consumer's thread) and parks or wakes workers to match what it returns; tests feed it synthetic
// observations.
//
// The model. Per-thread capacity c(n) = samples the local threads processed per second of their busy
// time, measured at each thread count n (it falls as threads share cores). Demand D = samples the
// consumer takes per second of its own (non-waiting) time: the rate at which it would never wait.
// Other executors (remote workers) deliver R samples/s. n threads suffice when n c(n) + R >= D.
// - Starved (the consumer waited more than `starve_share` of a window): grow to the smallest count
//   the model says suffices with `grow_headroom` (at most doubling per step); mildly starved (under
//   3 x starve_share), only on the second such window in a row.
// - A count grown to that then delivers (over `verify_windows`) no more than a smaller one did while
//   starved (the threads share cores, with each other or with the consumer) becomes a ceiling, held
//   until the demand rises by `ceiling_release`; a smaller count is used.
// - Not starved, no batch handed out unready: shrink to the smallest count the model says suffices
//   with `shrink_headroom` (> grow_headroom, so a count between the two thresholds stays put).
// - No oscillation: a count found starved is a floor (never shrunk below again) until the demand
//   falls by `floor_release` or the model gives the count below it `floor_override` x the demand;
//   decisions use whole windows of `window` batches, and the `skip` batches after each change (the
//   ring refills or drains) and the first `warmup` ones are not measured. A change against the
//   previous one's direction waits `hold` windows, twice as long each time (machine noise that
//   makes a count look starved one window and idle the next costs a few changes, then none).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dsc {

struct AutotuneOptions {
  int min_threads = 1;  // 0 is allowed when other executors deliver (the count then grows from 0 on a wait)
  int max_threads = 1;
  int initial_threads = -1;        // -1: max(min_threads, 1), at most max_threads
  uint32_t window = 4;             // batches per decision
  uint32_t skip = 2;               // batches not measured after a change or Restart()
  uint32_t warmup = 8;             // batches not measured at the very start (cold caches, first touch)
  double starve_share = 0.03;      // a window whose waits exceed this share of its time is starved
  double grow_headroom = 1.0;      // grow to capacity >= demand x this
  double shrink_headroom = 1.30;   // shrink only while the smaller count keeps capacity >= demand x this
  double better = 1.03;            // more threads must deliver this much more to count as better
  double floor_release = 1.5;      // a floor is forgotten once the demand falls by this factor,
  double floor_override = 2.0;     // ... or once the count below it has modelled capacity >= demand x this
  double ceiling_release = 1.5;    // a ceiling is forgotten once the demand rises by this factor
  uint32_t verify_windows = 2;     // windows after a growth whose rate decides whether it helped
  uint32_t hold = 4;               // windows a first reversal of direction waits; doubles with each one
  uint32_t max_hold = 64;
};

// One delivered batch, as the consumer saw it.
struct AutotuneObservation {
  uint64_t wait_ns = 0;       // the consumer waited this long for the batch
  uint64_t interval_ns = 0;   // since the previous batch was handed out, wait included; 0: unknown
  uint32_t samples = 0;       // samples in the batch
  uint32_t ahead = 0;         // batches already complete behind it when it was handed out
  uint64_t busy_ns = 0;       // local threads' processing time since the previous observation, summed
  uint64_t local_samples = 0; // samples the local threads processed in that time
  double other_rate = 0;      // samples/s delivered by other executors (remote workers)
};

class Autotuner {
 public:
  explicit Autotuner(const AutotuneOptions& o);

  // Takes one batch's observation; returns the local thread count wanted from now on. No allocation.
  int Observe(const AutotuneObservation& ob);
  // A new epoch or restart: the next batch has no meaningful interval and the ring refills.
  void Restart();

  int threads() const { return n_; }
  uint64_t observations() const { return seen_; }
  // Observation count at the last change of threads() (0: never changed).
  uint64_t last_change() const { return last_change_; }
  // Per-thread capacity measured at count n (samples per busy second); 0 when not measured.
  double capacity(int n) const { return n >= 0 && n < int(cap_.size()) ? cap_[size_t(n)] : 0; }

 private:
  void Decide();
  void Set(int n, bool now = false);
  double CapacityAt(int n) const;  // measured, or the nearest measured count's (per thread)

  AutotuneOptions o_;
  int n_ = 1;
  uint64_t seen_ = 0, last_change_ = 0;
  uint32_t skip_left_ = 0;
  // The current window's sums.
  uint32_t count_ = 0, min_ahead_ = 0;
  uint64_t wait_ = 0, interval_ = 0, samples_ = 0, busy_ = 0, local_ = 0;
  double other_ = 0;
  // Per thread count (index n): capacity per thread, and the rate delivered while starved.
  std::vector<double> cap_, starved_rate_;
  int floor_ = 0, ceiling_ = 0;
  double floor_demand_ = 0, ceiling_demand_ = 0;
  bool was_starved_ = false;  // the previous window (at this count) was starved
  uint32_t verify_left_ = 0;  // the count just grew: windows left before its rate is compared, once
  double verify_samples_ = 0, verify_sec_ = 0;
  int last_dir_ = 0;                 // of the last change: +1 grew, -1 shrank
  uint32_t windows_ = 0, hold_ = 0;  // windows since the last change; a reversal's wait
};

}  // namespace dsc
