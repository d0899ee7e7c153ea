// The loader's work queue (reader/work_queue.h) driven by hand, without decoding: tasks come in batch
// order and only inside the ring, given-back ranges come first, remote claims in flight keep the job
// open, and quasi_random reservations give each remote worker its own windows while the counter
// skips them.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <utility>
#include <vector>

#include "reader/work_queue.h"

namespace dsc::test {
namespace {

// A plan of `batches` batches of `batch_size` samples; quasi_random windows start every
// `window_batches` batches when that is non-zero.
EpochPlan Plan(uint64_t batches, uint32_t batch_size, uint64_t window_batches = 0) {
  EpochPlan p;
  p.batches = batches;
  p.batch_size = batch_size;
  p.samples.resize(batches * batch_size);
  p.padding.assign(p.samples.size(), 0);
  for (size_t i = 0; i < p.samples.size(); ++i) p.samples[i] = uint32_t(i);
  if (window_batches)
    for (uint64_t k = 0; k < batches; k += window_batches) p.window_starts.push_back(k * batch_size);
  return p;
}

std::vector<uint64_t> TakeAllLocal(WorkQueue& q) {
  std::vector<uint64_t> v;
  for (uint64_t t; q.TakeLocal(&t);) v.push_back(t);
  return v;
}

std::vector<uint64_t> Range(uint64_t from, uint64_t to) {
  std::vector<uint64_t> v;
  for (uint64_t t = from; t < to; ++t) v.push_back(t);
  return v;
}

TEST(WorkQueue, TasksComeInOrderAndOnlyInsideTheRing) {
  std::atomic<bool> cancel{false};
  WorkQueue q(2, cancel);  // a ring of 2 batches
  q.Start(Plan(5, 48), 0, 3);
  EXPECT_EQ(q.chunks_per_batch(), 3u);
  EXPECT_TRUE(q.InRing(1));
  EXPECT_FALSE(q.InRing(2));
  EXPECT_EQ(TakeAllLocal(q), Range(0, 6));  // batches 0 and 1
  q.Release(1);                             // the consumer gave batch 0 back
  EXPECT_TRUE(q.InRing(2));
  EXPECT_EQ(TakeAllLocal(q), Range(6, 9));
  q.Release(4);
  EXPECT_EQ(TakeAllLocal(q), Range(9, 15));
  EXPECT_FALSE(q.WaitForMore(false));  // every task taken, nothing in flight: the job is done
}

TEST(WorkQueue, StartsAtTheFirstBatch) {
  std::atomic<bool> cancel{false};
  WorkQueue q(2, cancel);
  q.Start(Plan(4, 32), 3, 2);
  EXPECT_TRUE(q.InRing(4));
  EXPECT_EQ(TakeAllLocal(q), Range(6, 8));
}

TEST(WorkQueue, ACounterClaimStaysInOneBatch) {
  std::atomic<bool> cancel{false};
  WorkQueue q(4, cancel);
  q.Start(Plan(3, 64), 0, 4);
  uint64_t t0 = 0, t1 = 0;
  ASSERT_TRUE(q.ClaimFromCounter(3, &t0, &t1));
  EXPECT_EQ(std::make_pair(t0, t1), std::make_pair(uint64_t(0), uint64_t(3)));
  ASSERT_TRUE(q.ClaimFromCounter(100, &t0, &t1));  // the rest of batch 0, not into batch 1
  EXPECT_EQ(std::make_pair(t0, t1), std::make_pair(uint64_t(3), uint64_t(4)));
  ASSERT_TRUE(q.ClaimFromCounter(100, &t0, &t1));
  EXPECT_EQ(std::make_pair(t0, t1), std::make_pair(uint64_t(4), uint64_t(8)));
}

TEST(WorkQueue, GivenBackRangesComeBeforeTheCounter) {
  std::atomic<bool> cancel{false};
  WorkQueue q(4, cancel);
  q.Start(Plan(4, 64), 0, 4);
  RemoteClaim c;
  auto no_rank = [](size_t*, size_t*) { FAIL() << "no reservations without affinity"; };
  uint64_t t0 = 0, t1 = 0;
  ASSERT_TRUE(q.TakeRemote(&c, 3, no_rank, &t0, &t1));
  EXPECT_EQ(std::make_pair(t0, t1), std::make_pair(uint64_t(0), uint64_t(3)));
  EXPECT_FALSE(c.pending());
  uint64_t t = 0;
  ASSERT_TRUE(q.TakeLocal(&t));
  EXPECT_EQ(t, 3u);
  q.GiveBackClaim(&c, t0, t1);  // the request failed
  EXPECT_EQ(TakeAllLocal(q), (std::vector<uint64_t>{0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_FALSE(q.TakeRemote(&c, 2, no_rank, &t0, &t1));  // all taken
}

TEST(WorkQueue, RemoteClaimsTakeGivenBackRangesInPieces) {
  std::atomic<bool> cancel{false};
  WorkQueue q(4, cancel);
  q.Start(Plan(2, 64), 0, 4);
  RemoteClaim c;
  auto no_rank = [](size_t*, size_t*) {};
  uint64_t t0 = 0, t1 = 0;
  ASSERT_TRUE(q.TakeRemote(&c, 4, no_rank, &t0, &t1));
  q.GiveBackClaim(&c, t0, t1);
  ASSERT_TRUE(q.TakeRemote(&c, 3, no_rank, &t0, &t1));
  EXPECT_EQ(std::make_pair(t0, t1), std::make_pair(uint64_t(0), uint64_t(3)));
  q.FinishClaim(&c);
  ASSERT_TRUE(q.TakeRemote(&c, 3, no_rank, &t0, &t1));
  EXPECT_EQ(std::make_pair(t0, t1), std::make_pair(uint64_t(3), uint64_t(4)));
  q.FinishClaim(&c);
  ASSERT_TRUE(q.TakeRemote(&c, 3, no_rank, &t0, &t1));  // then the counter's next
  EXPECT_EQ(std::make_pair(t0, t1), std::make_pair(uint64_t(4), uint64_t(7)));
  q.FinishClaim(&c);
}

TEST(WorkQueue, AClaimInFlightKeepsTheJobOpen) {
  std::atomic<bool> cancel{false};
  WorkQueue q(4, cancel);
  q.Start(Plan(1, 16), 0, 1);
  RemoteClaim c;
  auto no_rank = [](size_t*, size_t*) {};
  uint64_t t0 = 0, t1 = 0;
  ASSERT_TRUE(q.TakeRemote(&c, 1, no_rank, &t0, &t1));
  uint64_t t = 0;
  EXPECT_FALSE(q.TakeLocal(&t));
  EXPECT_TRUE(q.WaitForMore(false));  // the claim may come back: wait, do not end the job
  q.GiveBackClaim(&c, t0, t1);
  ASSERT_TRUE(q.TakeLocal(&t));
  EXPECT_EQ(t, 0u);
  EXPECT_FALSE(q.WaitForMore(false));
  // A failed TakeRemote counts nothing in flight.
  EXPECT_FALSE(q.TakeRemote(&c, 1, no_rank, &t0, &t1));
  EXPECT_FALSE(q.WaitForMore(false));
}

TEST(WorkQueue, CancellationEndsTheWait) {
  std::atomic<bool> cancel{false};
  WorkQueue q(1, cancel);
  q.Start(Plan(4, 16), 0, 1);
  uint64_t t = 0;
  ASSERT_TRUE(q.TakeLocal(&t));
  EXPECT_TRUE(q.WaitForMore(true));  // tasks are left: a parked thread waits
  cancel = true;
  EXPECT_FALSE(q.WaitForMore(false));
  EXPECT_FALSE(q.WaitForMore(true));
}

TEST(WorkQueue, AReleaseWakesAWaitingExecutor) {
  std::atomic<bool> cancel{false};
  WorkQueue q(1, cancel);
  q.Start(Plan(2, 16), 0, 1);
  uint64_t t = 0;
  ASSERT_TRUE(q.TakeLocal(&t));
  ASSERT_FALSE(q.TakeLocal(&t));  // batch 1 is outside the ring
  std::atomic<bool> woke{false};
  std::thread waiter([&] {
    while (!q.TakeLocal(&t))
      if (!q.WaitForMore(false)) return;
    woke = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_FALSE(woke.load());
  q.Release(1);
  q.Wake();
  waiter.join();
  EXPECT_TRUE(woke.load());
  EXPECT_EQ(t, 1u);
}

TEST(WorkQueue, StartForgetsTheLastJobsRetriesAndClaims) {
  std::atomic<bool> cancel{false};
  WorkQueue q(2, cancel);
  q.Start(Plan(2, 16), 0, 1);
  RemoteClaim c;
  auto no_rank = [](size_t*, size_t*) {};
  uint64_t t0 = 0, t1 = 0;
  ASSERT_TRUE(q.TakeRemote(&c, 1, no_rank, &t0, &t1));
  ASSERT_TRUE(q.TakeRemote(&c, 1, no_rank, &t0, &t1));
  q.GiveBackClaim(&c, t0, t1);  // one given back, one still in flight
  q.Start(Plan(3, 16), 0, 1);
  EXPECT_EQ(TakeAllLocal(q), Range(0, 2));
  q.Release(2);
  EXPECT_EQ(TakeAllLocal(q), Range(2, 3));
  EXPECT_FALSE(q.WaitForMore(false));
}

// Two remote workers, windows of 2 batches: batches 0-1 are window 0, 2-3 window 1, ...
TEST(WorkQueue, ReservationsFollowWindowsAndTheCounterSkipsThem) {
  std::atomic<bool> cancel{false};
  WorkQueue q(8, cancel);
  q.EnableAffinity(2);
  ASSERT_TRUE(q.affinity());
  q.Start(Plan(8, 16, 2), 0, 2);
  uint64_t k = 0, limit = 0;
  EXPECT_FALSE(q.Reserve(0, 1, &k, &limit));  // one worker up: no affinity
  ASSERT_TRUE(q.Reserve(1, 2, &k, &limit));    // worker 1 of 2: its first window is window 1
  EXPECT_EQ(k, 2u);
  EXPECT_EQ(limit, 1u);  // a ring with room for both: it may steal only the batch needed next
  ASSERT_TRUE(q.Reserve(1, 2, &k, &limit));
  EXPECT_EQ(k, 3u);
  ASSERT_TRUE(q.Reserve(0, 2, &k, &limit));  // worker 0: window 0, not yet reached by the counter
  EXPECT_EQ(k, 0u);
  uint64_t t0 = 0, t1 = 0;
  EXPECT_FALSE(q.ClaimFromCounter(1, &t0, &t1, 1));  // the counter is on batch 1, past a steal limit of 1
  // The counter steps over the reserved batches 0, 2 and 3.
  EXPECT_EQ(TakeAllLocal(q), (std::vector<uint64_t>{2, 3, 8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_FALSE(q.Reserve(1, 2, &k, &limit));  // window 3 (batches 6-7) went to the counter
}

TEST(WorkQueue, ARingTooSmallForAWindowEachLetsWorkersStealAnyBatch) {
  std::atomic<bool> cancel{false};
  WorkQueue q(3, cancel);
  q.EnableAffinity(2);
  q.Start(Plan(6, 16, 2), 0, 1);
  uint64_t k = 0, limit = 0;
  ASSERT_TRUE(q.Reserve(1, 2, &k, &limit));
  EXPECT_EQ(k, 2u);
  EXPECT_EQ(limit, UINT64_MAX);
}

TEST(WorkQueue, ARemoteClaimSendsItsReservedBatchInPieces) {
  std::atomic<bool> cancel{false};
  WorkQueue q(8, cancel);
  q.EnableAffinity(2);
  q.Start(Plan(8, 16, 2), 0, 4);
  RemoteClaim c;
  int asked = 0;
  auto second_of_two = [&](size_t* rank, size_t* up) {
    ++asked;
    *rank = 1;
    *up = 2;
  };
  uint64_t t0 = 0, t1 = 0;
  ASSERT_TRUE(q.TakeRemote(&c, 3, second_of_two, &t0, &t1));  // batch 2 reserved: tasks 8-11
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(std::make_pair(t0, t1), std::make_pair(uint64_t(8), uint64_t(11)));
  EXPECT_TRUE(c.pending());
  q.FinishClaim(&c);  // its rest is still to send: it stays in flight
  ASSERT_TRUE(q.TakeRemote(&c, 3, second_of_two, &t0, &t1));
  EXPECT_EQ(std::make_pair(t0, t1), std::make_pair(uint64_t(11), uint64_t(12)));
  EXPECT_EQ(asked, 1);  // the rest of a reserved batch needs no new reservation
  EXPECT_FALSE(c.pending());
  // A request of the next reserved batch fails: the rest of that batch is given back with it.
  ASSERT_TRUE(q.TakeRemote(&c, 1, second_of_two, &t0, &t1));  // batch 3: task 12
  EXPECT_EQ(asked, 2);
  EXPECT_EQ(std::make_pair(t0, t1), std::make_pair(uint64_t(12), uint64_t(13)));
  q.GiveBackClaim(&c, t0, t1);
  EXPECT_FALSE(c.pending());
  uint64_t t = 0;
  std::vector<uint64_t> retried;
  for (int i = 0; i < 4 && q.TakeLocal(&t); ++i) retried.push_back(t);
  EXPECT_EQ(retried, Range(12, 16));
  q.FinishClaim(&c);  // the first claim, batch 2, is done
}

}  // namespace
}  // namespace dsc::test
