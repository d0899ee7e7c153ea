// Batch leases on real CIFAR-10 bytes: a leased batch keeps its bytes while many later batches are
// produced (checked against a copy taken at lease time and against an unleased run), released
// buffers are reused, memory stays bounded by prefetch + 1 + max_leases with backpressure past it,
// and leases survive epoch restarts and the loader's destruction.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "format/error.h"
#include "reader/loader.h"
#include "tests/test_util.h"
#include "writer/build.h"

namespace dsc::test {
namespace {

using Clock = std::chrono::steady_clock;

const std::string& File() {
  static std::string f = [] {
    writer::BuildOptions o;
    o.log = [](const std::string&) {};
    const std::string out = ScratchDir("-lease") + "/cifar.beton";
    writer::Build(SubsetTree(10), out, o);  // 100 real JPEGs
    return out;
  }();
  return f;
}

LoaderOptions Opts(uint32_t prefetch, uint32_t max_leases) {
  LoaderOptions o = LoaderOptions::CifarTrain();
  o.dtype = DType::kUint8;
  o.layout = Layout::kNHWC;
  o.augment.normalize = false;
  o.batch_size = 4;  // 25 batches per epoch
  o.threads = 2;
  o.prefetch = prefetch;
  o.max_leases = max_leases;
  o.seed = 7;
  return o;
}

// Everything a batch holds, copied out.
struct Copy {
  uint64_t epoch = 0, index = 0;
  std::vector<uint8_t> images;
  std::vector<int32_t> labels;
  std::vector<uint32_t> indices;
  std::vector<uint8_t> padding;
  std::vector<int32_t> flips;
  bool operator==(const Copy& o) const {
    return epoch == o.epoch && index == o.index && images == o.images && labels == o.labels && indices == o.indices &&
           padding == o.padding && flips == o.flips;
  }
};

Copy Take(const Batch& b) {
  Copy c;
  c.epoch = b.epoch;
  c.index = b.index;
  const uint8_t* im = static_cast<const uint8_t*>(b.images);
  c.images.assign(im, im + b.image_bytes() * b.size);
  c.labels.assign(b.labels[0], b.labels[0] + b.size);
  c.indices.assign(b.indices, b.indices + b.size);
  c.padding.assign(b.padding, b.padding + b.size);
  for (uint32_t i = 0; i < b.size; ++i) c.flips.push_back(b.params[i].flip);
  return c;
}

// The batches of an epoch from a fresh loader that never leases: the reference.
std::vector<Copy> Reference(const LoaderOptions& o, uint64_t epoch) {
  Loader l(File(), o);
  std::vector<Copy> out;
  for (const Batch& b : l.epoch(epoch)) out.push_back(Take(b));
  return out;
}

TEST(Lease, LeasedBatchesKeepTheirBytes) {
  const LoaderOptions o = Opts(2, 2);
  const auto ref = Reference(o, 0);
  ASSERT_EQ(ref.size(), 25u);
  Loader l(File(), o);
  EXPECT_EQ(l.buffers_allocated(), 3u);
  std::vector<BatchLease> leases;
  std::vector<Copy> at_lease;
  size_t n = 0;
  auto range = l.epoch(0);
  for (auto it = range.begin(); it != range.end(); ++it, ++n) {
    EXPECT_TRUE(Take(*it) == ref[n]) << "batch " << n;
    if (n == 1 || n == 4) {  // two leases held across the rest of the epoch
      leases.push_back(it.lease());
      at_lease.push_back(Take(*leases.back()));
      EXPECT_EQ(leases.back().get(), &*it);  // the same batch, not a copy
    }
    EXPECT_LE(l.buffers_allocated(), 3u + 2u);
  }
  EXPECT_EQ(n, 25u);
  EXPECT_EQ(l.leased(), 2u);
  ASSERT_EQ(leases.size(), 2u);
  // 20 and more batches later, after the range ended, the leased batches are untouched.
  EXPECT_TRUE(Take(*leases[0]) == at_lease[0]);
  EXPECT_TRUE(Take(*leases[1]) == at_lease[1]);
  EXPECT_TRUE(at_lease[0] == ref[1]);
  EXPECT_TRUE(at_lease[1] == ref[4]);
  leases.clear();
  EXPECT_EQ(l.leased(), 0u);
  EXPECT_EQ(l.buffers_allocated(), 5u);  // the spares stay for reuse, bounded
}

TEST(Lease, NoLeasesNoExtraBuffers) {
  Loader l(File(), Opts(3, 2));
  for (uint64_t e = 0; e < 3; ++e)
    for (const Batch& b : l.epoch(e)) {
      (void)b;
      ASSERT_EQ(l.buffers_allocated(), 4u);
    }
  EXPECT_EQ(l.leased(), 0u);
}

TEST(Lease, ReleasedBufferIsReused) {
  const LoaderOptions o = Opts(1, 2);
  const auto ref = Reference(o, 0);
  Loader l(File(), o);
  const void* leased_images = nullptr;
  bool reused = false;
  size_t n = 0;
  BatchLease last;
  auto range = l.epoch(0);
  for (auto it = range.begin(); it != range.end(); ++it, ++n) {
    EXPECT_TRUE(Take(*it) == ref[n]) << "batch " << n;
    if (leased_images && it->images == leased_images) reused = true;
    // Lease every batch and drop the previous lease: one spare is enough, and it keeps coming back.
    last = it.lease();
    if (!leased_images) leased_images = last->images;
    EXPECT_LE(l.leased(), 2u);
    EXPECT_LE(l.buffers_allocated(), 3u) << "batch " << n;
  }
  EXPECT_TRUE(reused) << "a released lease's buffer was never handed out again";
  EXPECT_EQ(l.buffers_allocated(), 3u);  // 2 ring slots + 1 spare, over 25 leases
  last.release();
  EXPECT_FALSE(last);
  EXPECT_EQ(l.leased(), 0u);
}

TEST(Lease, SharedCopiesAndTwoLeasesOfOneBatch) {
  Loader l(File(), Opts(1, 1));
  auto range = l.epoch(0);
  auto it = range.begin();
  BatchLease a = it.lease();
  BatchLease b = l.lease(*it);  // the same lease again
  EXPECT_EQ(a.get(), b.get());
  BatchLease c = a;  // a copy shares it
  const Copy at = Take(*a);
  EXPECT_EQ(l.leased(), 1u);
  ++it;
  ++it;
  a.release();
  b.release();
  EXPECT_EQ(l.leased(), 1u);  // c still holds it
  EXPECT_TRUE(Take(*c) == at);
  BatchLease moved = std::move(c);
  EXPECT_FALSE(c);
  EXPECT_TRUE(Take(*moved) == at);
  moved = BatchLease();
  EXPECT_EQ(l.leased(), 0u);
}

TEST(Lease, OnlyTheHeldBatch) {
  Loader l(File(), Opts(1, 1));
  auto range = l.epoch(0);
  auto it = range.begin();
  const Batch copy = *it;
  EXPECT_THROW(l.lease(copy), Error);  // not the loader's batch
  const Batch* first = &*it;
  ++it;
  EXPECT_THROW(l.lease(*first), Error);  // given back already
  EXPECT_NO_THROW(it.lease());
  Loader::Iterator end;
  EXPECT_THROW(end.lease(), Error);
  // An iterator of an ended range cannot lease the new range's batch, even in the same buffer.
  auto stale = it;
  auto next = l.epoch(1);
  auto fresh = next.begin();
  EXPECT_THROW(stale.lease(), Error);
  EXPECT_NO_THROW(fresh.lease());
}

// max_leases = 1 with two leases open: one spare replaces the first leased buffer, then the workers
// wait; the consumer gets the batch that needs the second buffer only once a lease is released by
// another thread.
TEST(Lease, BoundHoldsAndBackpressureWaitsForRelease) {
  const LoaderOptions o = Opts(1, 1);  // ring of 2, at most 3 buffers
  const auto ref = Reference(o, 0);
  Loader l(File(), o);
  auto range = l.epoch(0);
  auto it = range.begin();
  BatchLease first = it.lease();
  ++it;
  BatchLease second = it.lease();
  ++it;  // batch 2, in the spare
  ASSERT_EQ(it->index, 2u);
  EXPECT_TRUE(Take(*it) == ref[2]);
  EXPECT_EQ(l.leased(), 2u);
  EXPECT_EQ(l.buffers_allocated(), 3u);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // give the workers time to overrun
  EXPECT_EQ(l.buffers_allocated(), 3u);

  std::atomic<int64_t> released_at{0};
  std::thread releaser([&released_at, lease = std::move(first)]() mutable {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    released_at.store(Clock::now().time_since_epoch().count());
    lease.release();
  });
  const auto t0 = Clock::now();
  ++it;  // batch 3 needs a buffer: only the released one can be it
  const auto got = Clock::now();
  releaser.join();
  ASSERT_TRUE(it != range.end());
  EXPECT_EQ(it->index, 3u);
  EXPECT_GE(got.time_since_epoch().count(), released_at.load()) << "batch 3 arrived before any lease was released";
  EXPECT_GE(got - t0, std::chrono::milliseconds(250));
  EXPECT_TRUE(Take(*it) == ref[3]);
  size_t n = 3;
  for (++it, ++n; it != range.end(); ++it, ++n) {
    EXPECT_TRUE(Take(*it) == ref[n]) << "batch " << n;
    EXPECT_LE(l.buffers_allocated(), 3u);
  }
  EXPECT_EQ(n, 25u);
  EXPECT_TRUE(Take(*second) == ref[1]);
}

// lease_memory: leases past max_leases get new buffers up to the budget (here exactly 3 more), each
// batch still the unleased run's; past it backpressure as before; the extra buffers are freed as their
// leases come back, leaving the ring and max_leases spares.
TEST(Lease, LeaseMemoryGrowsThePoolAndGivesItBack) {
  LoaderOptions o = Opts(0, 1);  // ring of 1, one spare
  const uint64_t buffer = uint64_t(o.batch_size) * 32 * 32 * 3 + uint64_t(o.batch_size) * kBatchSampleOverhead;
  o.lease_memory = 3 * buffer + buffer / 2;  // 3.5 buffers pay for 3
  const auto ref = Reference(o, 0);
  Loader l(File(), o);
  auto range = l.epoch(0);
  auto it = range.begin();
  std::vector<BatchLease> held;
  for (size_t k = 0; k < 4; ++k, ++it) {  // batches 0..3 held: 1 + 1 spare + 3 grown buffers
    ASSERT_TRUE(it != range.end());
    EXPECT_TRUE(Take(*it) == ref[k]) << "batch " << k;
    held.push_back(it.lease());
  }
  ASSERT_TRUE(it != range.end());
  EXPECT_TRUE(Take(*it) == ref[4]);
  EXPECT_EQ(l.leased(), 4u);
  EXPECT_EQ(l.buffers_allocated(), 5u);
  held.push_back(it.lease());  // a fifth: batch 5 needs a buffer past the budget, so it waits for a release
  std::thread releaser([lease = std::move(held[0])]() mutable {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    lease.release();
  });
  const auto t0 = Clock::now();
  ++it;
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(250));
  releaser.join();
  ASSERT_TRUE(it != range.end());
  EXPECT_TRUE(Take(*it) == ref[5]);
  EXPECT_EQ(l.buffers_allocated(), 5u);
  for (size_t k = 1; k < held.size(); ++k) EXPECT_TRUE(Take(*held[k]) == ref[k]) << "held batch " << k;
  held.clear();
  EXPECT_EQ(l.leased(), 0u);
  EXPECT_EQ(l.buffers_allocated(), 2u);  // the grown buffers are freed, not kept as spares
  size_t n = 6;
  for (++it; it != range.end(); ++it, ++n) EXPECT_TRUE(Take(*it) == ref[n]) << "batch " << n;
  EXPECT_EQ(n, 25u);
}

// A loader destroyed while its workers wait for a lease's release does not hang.
TEST(Lease, DestroyWhileWorkersWaitForASpare) {
  BatchLease a, b;
  {
    Loader l(File(), Opts(1, 0));
    auto range = l.epoch(0);
    auto it = range.begin();
    a = it.lease();
    ++it;
    b = it.lease();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(a->index, 0u);
  EXPECT_EQ(b->index, 1u);
}

// Buffers from counting allocate/release hooks: leases taken in two epochs, kept across an epoch
// restart and the loader's destruction, keep their bytes, and every buffer is freed exactly once,
// the leased ones when their lease goes.
TEST(Lease, OutliveEpochRestartAndLoader) {
  struct Counts {
    std::atomic<int> allocs{0}, frees{0};
  };
  auto counts = std::make_shared<Counts>();
  LoaderOptions o = Opts(2, 2);
  o.allocate = [counts](size_t n) {
    ++counts->allocs;
    return std::aligned_alloc(64, n);
  };
  o.release = [counts](void* p) {
    ++counts->frees;
    std::free(p);
  };
  const auto ref0 = Reference(Opts(2, 2), 0), ref1 = Reference(Opts(2, 2), 1);
  std::vector<BatchLease> leases;
  std::vector<Copy> at_lease;
  {
    Loader l(File(), o);
    {
      auto range = l.epoch(0);
      for (auto it = range.begin(); it != range.end(); ++it) {
        if (it->index == 5) {
          leases.push_back(it.lease());
          at_lease.push_back(Take(*it));
          break;  // leaves the epoch early: the range ends with the lease still out
        }
      }
    }
    size_t n = 0;
    auto range = l.epoch(1);  // restart
    for (auto it = range.begin(); it != range.end(); ++it, ++n) {
      EXPECT_TRUE(Take(*it) == ref1[n]) << "batch " << n;
      if (n == 20) {
        leases.push_back(it.lease());
        at_lease.push_back(Take(*it));
      }
    }
    EXPECT_EQ(l.leased(), 2u);
    EXPECT_LE(counts->allocs.load(), 3 + 2);
  }
  // The loader is gone; its ring and spare buffers are freed, the leased ones are not.
  EXPECT_EQ(counts->frees.load(), counts->allocs.load() - 2);
  ASSERT_EQ(leases.size(), 2u);
  EXPECT_TRUE(Take(*leases[0]) == at_lease[0]);
  EXPECT_TRUE(Take(*leases[1]) == at_lease[1]);
  EXPECT_TRUE(at_lease[0] == ref0[5]);
  EXPECT_TRUE(at_lease[1] == ref1[20]);
  // Released on another thread, after the loader's destruction.
  std::thread([l = std::move(leases)]() mutable { l.clear(); }).join();
  EXPECT_EQ(counts->frees.load(), counts->allocs.load());
}

// LoaderOptions::wait_poll runs while the consumer waits and may abandon the wait by throwing (the
// Python module's Ctrl-C): here the wait can never end (the one buffer is leased, no spare allowed),
// the hook's exception comes out of ++it, and the loader starts the next epoch normally afterwards.
TEST(Lease, WaitPollAbandonsAWait) {
  struct Stop {};
  std::atomic<int> polls{0};
  LoaderOptions o = Opts(/*prefetch=*/0, /*max_leases=*/0);
  o.wait_poll_ms = 10;
  o.wait_poll = [&] {
    if (++polls == 5) throw Stop{};
  };
  Loader loader(File(), o);
  Copy first;
  {
    auto range = loader.epoch(0);
    auto it = range.begin();
    first = Take(*it);
    BatchLease held = it.lease();
    EXPECT_THROW(++it, Stop);
    EXPECT_EQ(polls.load(), 5);
    EXPECT_TRUE(Take(*held) == first);  // the leased batch is untouched
  }
  EXPECT_EQ(loader.leased(), 0u);
  auto range = loader.epoch(0);
  auto it = range.begin();
  EXPECT_TRUE(Take(*it) == first);
  int n = 1;
  for (++it; it != range.end(); ++it) ++n;
  EXPECT_EQ(n, 25);
}

// A wait that ends before its next poll is still polled once: a Ctrl-C that came during it abandons
// the batch instead of being raised just after the batch was counted as handed out (a state saved on
// it then skipped that batch). Here the wait always ends long before the first 60 s poll: the only
// buffer is leased until a thread drops it 100 ms in; the hook then throws on its first call.
TEST(Lease, AWaitIsPolledOnceMoreWhenItsBatchArrives) {
  struct Stop {};
  std::atomic<bool> armed{false};
  std::atomic<int> polls{0};
  LoaderOptions o = Opts(/*prefetch=*/0, /*max_leases=*/0);
  const auto ref = Reference(o, 0);
  o.wait_poll_ms = 60000;
  o.wait_poll = [&] {
    if (armed && ++polls == 1) throw Stop{};
  };
  Loader loader(File(), o);
  std::optional<LoaderState> at_stop;
  {
    auto range = loader.epoch(0);
    auto it = range.begin();
    ASSERT_TRUE(Take(*it) == ref[0]);
    std::thread dropper([held = it.lease()]() mutable {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      held.release();
    });
    armed = true;
    const auto t0 = Clock::now();
    EXPECT_THROW(++it, Stop);
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(30));  // not the 60 s poll
    dropper.join();
    at_stop = loader.state();
  }
  EXPECT_EQ(polls.load(), 1);
  EXPECT_EQ(at_stop->next_batch, 1u);  // batch 1 was not handed out
  Loader resumed(File(), o);
  resumed.restore(*at_stop);
  size_t n = 1;
  for (const Batch& b : resumed.resume()) {
    ASSERT_LT(n, ref.size());
    EXPECT_TRUE(Take(b) == ref[n]) << "batch " << n;
    ++n;
  }
  EXPECT_EQ(n, ref.size());
}

// Sequential order on several ranks may end a rank's epoch in an empty batch (the last global batch
// is shorter than one rank's slice). With every batch leased, that batch's slot had no buffer left
// (no worker writes an empty batch, so none fetched a spare); with the GPU decoder it was never
// marked complete and the consumer waited forever.
TEST(Lease, AnEmptyLastBatchAfterLeasedBatches) {
  for (const bool gpu_decoder : {false, true}) {
    for (const uint32_t rank : {0u, 2u}) {
      LoaderOptions o = Opts(/*prefetch=*/0, /*max_leases=*/2);
      o.order = Order::kSequential;
      o.world_size = 3;  // global batches of 12: 8 full, then 4 samples, all in rank 0's slice
      o.rank = rank;
      if (gpu_decoder) {
        o.decoder = LoaderOptions::Decoder::kGpu;
        o.defer_augment = true;
      }
      Loader loader(File(), o);
      std::vector<BatchLease> held;
      std::vector<uint32_t> sizes, seen;
      auto range = loader.epoch(0);
      for (auto it = range.begin(); it != range.end(); ++it) {
        sizes.push_back(it->size);
        for (uint32_t j = 0; j < it->size; ++j) seen.push_back(it->indices[j]);
        held.push_back(it.lease());
        if (held.size() == 2) held.erase(held.begin());
      }
      const std::vector<uint32_t> want_sizes{4, 4, 4, 4, 4, 4, 4, 4, rank == 0 ? 4u : 0u};
      EXPECT_EQ(sizes, want_sizes) << "rank " << rank << ", gpu decoder " << gpu_decoder;
      std::vector<uint32_t> want;
      for (uint32_t k = 0; k < 9; ++k)
        for (uint32_t j = 0; j < want_sizes[k]; ++j) want.push_back(k * 12 + rank * 4 + j);
      EXPECT_EQ(seen, want) << "rank " << rank << ", gpu decoder " << gpu_decoder;
      EXPECT_EQ(loader.batches_per_epoch(), 9u);
    }
  }
}

}  // namespace
}  // namespace dsc::test
