// The thread controller (reader/autotune.h) on synthetic runs: a simulated loader whose threads each
// process `per_thread(n)` samples/s (falling when threads share cores) feeds a ring of `prefetch`
// batches to a consumer that spends `consumer_s` per batch. No threads, no clock: the simulation
// produces the observations the pipeline would, batch by batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "reader/autotune.h"

namespace dsc::test {
namespace {

struct Sim {
  uint32_t batch = 256;
  uint32_t prefetch = 3;
  std::function<double(int)> per_thread = [](int) { return 10000.0; };  // samples/s per thread at n threads
  std::function<double(uint64_t)> consumer_s = [](uint64_t) { return 0.01; };  // consumer time for batch k
  std::function<double(int)> consumer_slowdown = [](int) { return 1.0; };  // at n threads (they take its core)
  double other_rate = 0;     // samples/s other executors deliver (they fill batches too)
  double jitter = 0;         // +- share of noise on the consumer's time and the threads' speed
  uint32_t seed = 1;

  struct Run {
    uint32_t batch = 0;
    std::vector<int> threads;  // after each batch
    std::vector<double> interval_s;
    double seconds = 0;
    uint64_t samples = 0;
    uint64_t LastChange() const {
      for (size_t i = threads.size(); i-- > 1;)
        if (threads[i] != threads[i - 1]) return i;
      return 0;
    }
    int Changes(size_t from = 0) const {
      int c = 0;
      for (size_t i = std::max<size_t>(from, 1); i < threads.size(); ++i) c += threads[i] != threads[i - 1];
      return c;
    }
    double Rate(size_t from) const {  // samples/s over batches [from, end)
      double s = 0;
      for (size_t i = from; i < interval_s.size(); ++i) s += interval_s[i];
      return s > 0 ? double(interval_s.size() - from) * batch / s : 0;
    }
  };

  double Noise() {  // deterministic, in [-jitter, jitter]
    seed = seed * 1664525u + 1013904223u;
    return jitter * (double(seed >> 8) / double(1u << 24) * 2 - 1);
  }

  // Runs `batches` batches through `tuner`; the produced count is continuous (batches, fractions
  // included), the ring caps it at the held batch + prefetch.
  Run Go(Autotuner& tuner, uint64_t batches) {
    Run r;
    r.batch = batch;
    double produced = 0, last_work = 0;
    for (uint64_t k = 0; k < batches; ++k) {
      const int n = tuner.threads();
      const double local = n * per_thread(n) * (1 + Noise());
      const double rate = (local + other_rate) / batch;  // batches/s
      double wait = 0;
      if (produced < k + 1) {
        wait = rate > 0 ? (k + 1 - produced) / rate : 1.0;
        if (rate <= 0) produced = double(k + 1);  // nobody works: a long stall, then assume it came
      }
      const double before = produced;
      produced = std::max(produced, double(k + 1));
      AutotuneObservation ob;
      ob.wait_ns = uint64_t(wait * 1e9);
      ob.samples = batch;
      ob.ahead = uint32_t(std::min<double>(prefetch, std::floor(produced) - double(k + 1)));
      ob.other_rate = other_rate;
      // The consumer works; the loader fills the ring meanwhile, up to batch k + prefetch.
      const double work = consumer_s(k) * consumer_slowdown(n) * (1 + Noise());
      const double filled = std::min(work * rate, double(k + 1 + prefetch) - produced);
      const double local_batches = (produced - before + std::max(0.0, filled)) * (local / (local + other_rate + 1e-12));
      produced += std::max(0.0, filled);
      ob.local_samples = uint64_t(local_batches * batch);
      ob.busy_ns = n > 0 ? uint64_t(ob.local_samples / per_thread(n) * 1e9) : 0;
      ob.interval_ns = k == 0 ? 0 : uint64_t((last_work + wait) * 1e9);  // the previous batch's work, then this wait
      last_work = work;
      tuner.Observe(ob);
      r.threads.push_back(tuner.threads());
      r.interval_s.push_back(wait + work);
      r.seconds += wait + work;
      r.samples += batch;
    }
    return r;
  }
};

AutotuneOptions Range(int lo, int hi, int initial = -1) {
  AutotuneOptions o;
  o.min_threads = lo;
  o.max_threads = hi;
  o.initial_threads = initial;
  return o;
}

// The goal of issue 11 §3 in the simulation: settled (no change for 20 batches) within 50 batches.
void ExpectSettled(const Sim::Run& r, const char* what) {
  EXPECT_LE(r.LastChange(), 50u) << what;
  EXPECT_EQ(r.Changes(50), 0) << what;
}

// Runs `batches` batches of `s` through a new tuner; expects it settled on a count in [lo, hi].
Sim::Run ExpectSettlesOn(Sim& s, const AutotuneOptions& o, uint64_t batches, int lo, int hi, const char* what) {
  Autotuner t(o);
  const auto r = s.Go(t, batches);
  EXPECT_GE(t.threads(), lo) << what;
  EXPECT_LE(t.threads(), hi) << what;
  ExpectSettled(r, what);
  return r;
}

TEST(Autotune, GrowsWhileTheConsumerWaits) {
  Sim s;  // 10k samples/s per thread; the consumer takes 256 samples per 5 ms = 51.2k/s: 6 threads
  s.consumer_s = [](uint64_t) { return 0.005; };
  const auto r = ExpectSettlesOn(s, Range(1, 16), 200, 6, 7, "grow");  // 6 x 10k >= 51.2k; one more at most
  EXPECT_GE(r.Rate(100), 0.97 * 256 / 0.005) << "the consumer no longer waits";
}

TEST(Autotune, ShrinksWhileBatchesPileUp) {
  Sim s;  // 256 samples per 50 ms = 5.1k/s: one thread of 10k/s is plenty
  s.consumer_s = [](uint64_t) { return 0.05; };
  ExpectSettlesOn(s, Range(1, 16, 16), 200, 1, 1, "shrink");
  // Two threads needed (256 / 20 ms = 12.8k/s): shrinks to 2, not below.
  Sim s2;
  s2.consumer_s = [](uint64_t) { return 0.02; };
  const auto r2 = ExpectSettlesOn(s2, Range(1, 16, 16), 200, 2, 2, "shrink to 2");
  EXPECT_GE(r2.Rate(100), 0.97 * 256 / 0.02);
}

TEST(Autotune, NoOscillationAtABorderWithNoise) {
  // Demand right at the edge between counts (3 threads = 30k/s, demand 256 / 8.5 ms = 30.1k/s), with
  // +-10% noise on both sides: after settling, at most one excursion to n + 1 and back (then n + 1 is
  // known not to deliver more) or one late step up, never a flip-flop.
  for (double ms : {8.5, 9.0, 10.5, 12.0, -8.5, -10.5}) {  // negative: +-30% noise (a loaded machine)
    Sim s;
    s.jitter = ms < 0 ? 0.30 : 0.10;
    ms = std::abs(ms);
    s.consumer_s = [ms](uint64_t) { return ms / 1000; };
    Autotuner t(Range(1, 8));
    const auto r = s.Go(t, 1000);
    EXPECT_LE(r.Changes(50), 2) << ms << " ms";
    EXPECT_LE(r.Changes(), 4) << ms << " ms";
    EXPECT_GE(r.Rate(100), 0.95 * 256 / (ms / 1000)) << ms << " ms: enough threads to keep up";
  }
}

TEST(Autotune, StopsWhereMoreThreadsShareTheCores) {
  // Two cores: past 2 threads the total stays 2 x 10k/s. The consumer wants 100k/s, which no count
  // delivers: the tuner must not climb to the maximum (16) for nothing.
  Sim s;
  s.per_thread = [](int n) { return 10000.0 * std::min(n, 2) / n; };
  s.consumer_s = [](uint64_t) { return 0.00256; };
  ExpectSettlesOn(s, Range(1, 16), 300, 2, 3, "shared cores");
}

TEST(Autotune, UndoesAThreadThatSlowsTheConsumer) {
  // Two cores, a spinning consumer: one thread (100k/s) about matches its demand (256 per 2.5 ms =
  // 102k/s), so noise makes it look starved now and then; a second thread takes the consumer's core
  // and slows it by 30%. The tuner may try 2 once, must come back to 1 and stay there.
  for (uint32_t seed : {1u, 2u, 3u, 4u}) {
    Sim s;
    s.seed = seed;
    s.jitter = 0.15;
    s.per_thread = [](int n) { return 100000.0 * std::min(n, 1) / n; };
    s.consumer_slowdown = [](int n) { return n > 1 ? 1.3 : 1.0; };
    s.consumer_s = [](uint64_t) { return 0.0025; };
    Autotuner t(Range(1, 2));
    const auto r = s.Go(t, 1000);
    EXPECT_EQ(t.threads(), 1) << "seed " << seed;
    EXPECT_LE(r.Changes(), 2) << "seed " << seed;
  }
}

TEST(Autotune, RespectsMinimumAndMaximum) {
  {
    Sim s;  // demand far beyond 4 threads: pinned at the maximum
    s.consumer_s = [](uint64_t) { return 0.001; };
    Autotuner t(Range(1, 4));
    s.Go(t, 100);
    EXPECT_EQ(t.threads(), 4);
  }
  {
    Sim s;  // almost no demand: the minimum, 2
    s.consumer_s = [](uint64_t) { return 1.0; };
    Autotuner t(Range(2, 8, 8));
    s.Go(t, 100);
    EXPECT_EQ(t.threads(), 2);
  }
  {
    Sim s;  // other executors deliver 40k/s, the consumer takes 25.6k/s: no local thread needed (min 0)
    s.other_rate = 40000;
    s.consumer_s = [](uint64_t) { return 0.01; };
    ExpectSettlesOn(s, Range(0, 8, 4), 200, 0, 0, "remote covers it");
  }
}

TEST(Autotune, OtherExecutorsTakePartOfTheDemand) {
  // 51.2k/s wanted; remote workers deliver 25k/s: 3 local threads (25k + 30k >= 51.2k), not 6.
  Sim s;
  s.other_rate = 25000;
  s.consumer_s = [](uint64_t) { return 0.005; };
  ExpectSettlesOn(s, Range(1, 16), 200, 3, 4, "with remote");
}

TEST(Autotune, FollowsTheConsumerWhenItChanges) {
  // The consumer slows down (20 ms -> 100 ms per batch) at batch 300 and speeds up again at 600.
  Sim s;
  s.consumer_s = [](uint64_t k) { return k < 300 || k >= 600 ? 0.004 : 0.1; };
  Autotuner t(Range(1, 16));
  const auto r = s.Go(t, 900);
  EXPECT_GE(r.threads[299], 6) << "fast consumer: 64k/s wanted";
  EXPECT_EQ(r.threads[599], 1) << "slow consumer: 2.6k/s wanted";
  EXPECT_GE(r.threads[899], 6);
  EXPECT_EQ(r.Changes(400) - r.Changes(600), 0) << "steady while slow";
}

}  // namespace
}  // namespace dsc::test
