// The GPU path's host-side contracts, run on the CPU (no GPU here): the kernel's launch geometry
// covers every output element exactly once for any shape and batch size, and the ring of device
// buffers, driven by a fake stream and real loader leases, never hands out a buffer whose consumer
// may still read it and keeps every leased host batch until its copy has completed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <random>
#include <vector>

#include "format/checksum.h"
#include "format/error.h"
#include "kernels/batch_augment.h"
#include "reader/gpu.h"
#include "reader/gpu_ring.h"
#include "reader/loader.h"
#include "tests/test_util.h"
#include "writer/build.h"

namespace dsc::test {
namespace {

using kernels::AugmentGeometry;

// Runs the kernel's loop (every block, every thread, every tile of the block) on the CPU and counts
// the writes per output element.
void ExpectExactCover(int w, int h, int n, unsigned max_grid) {
  SCOPED_TRACE(testing::Message() << w << "x" << h << " n=" << n << " max_grid=" << max_grid);
  const AugmentGeometry g = kernels::MakeAugmentGeometry(w, h, n, max_grid);
  ASSERT_GE(g.grid, 1u);
  ASSERT_LE(g.grid, max_grid);
  std::vector<uint8_t> hits(size_t(n) * h * w, 0);
  for (unsigned block = 0; block < g.grid; ++block)
    for (uint64_t tile = block; tile < g.tiles; tile += g.grid)
      for (unsigned ty = 0; ty < AugmentGeometry::kTileH; ++ty)
        for (unsigned tx = 0; tx < AugmentGeometry::kTileW; ++tx) {
          int s, y, x;
          if (!kernels::TileElement(g, tile, tx, ty, &s, &y, &x)) continue;
          ASSERT_TRUE(s >= 0 && s < n && y >= 0 && y < h && x >= 0 && x < w) << s << " " << y << " " << x;
          ASSERT_LT(hits[(size_t(s) * h + y) * w + x]++, 1) << "element written twice: " << s << " " << y << " " << x;
        }
  for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i], 1) << "element " << i << " never written";
}

TEST(GpuGeometry, EveryOutputElementExactlyOnce) {
  const int shapes[][2] = {{1, 1}, {32, 32}, {31, 7}, {33, 9}, {64, 8}, {224, 224}, {5, 300}, {100, 1}, {17, 65}};
  for (auto [w, h] : shapes)
    for (int n : {1, 3, 64})
      for (unsigned max_grid : {0x7fffffffu, 7u, 1u}) ExpectExactCover(w, h, n, max_grid);
}

TEST(GpuGeometry, BatchesPastGridDimZsLimit) {
  // 65535 was the old cap (the batch on gridDim.z); now the batch is folded into gridDim.x tiles.
  ExpectExactCover(3, 2, 70001, 0x7fffffffu);
  ExpectExactCover(40, 9, 66000, 1000u);  // and with the tile loop doing most of the work
  EXPECT_EQ(kernels::MakeAugmentGeometry(32, 32, 70001).grid, 70001u * 4);
}

TEST(GpuGeometry, NoIdleThreadsOnCifarRowsAndNothingToLaunchForEmptyBatches) {
  const AugmentGeometry g = kernels::MakeAugmentGeometry(32, 32, 512);
  EXPECT_EQ(g.tiles * AugmentGeometry::kTileW * AugmentGeometry::kTileH, uint64_t(512) * 32 * 32);
  EXPECT_EQ(kernels::MakeAugmentGeometry(32, 32, 0).grid, 0u);
}

// A stream is a sequence of operations, executed up to `executed` (the test decides how far the
// "device" has got); an event completes when its stream has executed what was enqueued before it.
struct FakeStream {
  uint64_t enqueued = 0, executed = 0;
  uint64_t Enqueue() { return ++enqueued; }
};
struct FakeEvent {
  FakeStream* stream = nullptr;
  uint64_t at = 0;
};
struct FakeOps final : gpu::StreamOps {
  size_t waits = 0;
  void Record(void* e, void* s) override {
    auto* ev = static_cast<FakeEvent*>(e);
    ev->stream = static_cast<FakeStream*>(s);
    ev->at = ev->stream->enqueued;
  }
  bool Done(void* e) override {
    auto* ev = static_cast<FakeEvent*>(e);
    return !ev->stream || ev->stream->executed >= ev->at;
  }
  void Wait(void* e) override {  // the host blocks until the device gets there
    auto* ev = static_cast<FakeEvent*>(e);
    ++waits;
    if (ev->stream) ev->stream->executed = std::max(ev->stream->executed, ev->at);
  }
};

const std::string& File() {
  static std::string f = [] {
    writer::BuildOptions o;
    o.log = [](const std::string&) {};
    const std::string out = ScratchDir("-gpuhost") + "/cifar.beton";
    writer::Build(SubsetTree(10), out, o);  // 100 real JPEGs
    return out;
  }();
  return f;
}

struct PendingCopy {
  uint64_t at;  // position on dsc's stream
  size_t slot;
  const void* bytes;
  size_t size;
  uint64_t checksum;  // of the leased bytes when the copy was enqueued
};

// Drives a ring the way gpu::Augmenter does, with a consumer that is `lag` batches behind on its
// stream and devices that progress at random speeds. `manual`: Release after a random delay.
void DriveRing(bool manual, size_t slots, uint32_t max_leases, uint64_t seed) {
  SCOPED_TRACE(testing::Message() << (manual ? "manual" : "auto") << " slots=" << slots << " leases=" << max_leases
                                  << " seed=" << seed);
  LoaderOptions o = LoaderOptions::CifarTrain();
  o.defer_augment = true;
  o.dtype = DType::kUint8;
  o.layout = Layout::kNHWC;
  o.batch_size = 4;
  o.threads = 2;
  o.max_leases = max_leases;
  o.seed = seed;
  Loader loader(File(), o);
  FakeOps ops;
  FakeStream dsc, consumer;
  std::vector<FakeEvent> copied(slots), consumed(slots);
  std::vector<gpu::BufferRing::SlotEvents> events;
  for (size_t i = 0; i < slots; ++i) events.push_back({&copied[i], &consumed[i]});
  gpu::BufferRing ring(&ops, events, max_leases);
  std::vector<uint64_t> last_read(slots, 0);  // consumer-stream position of the last read of each slot
  std::deque<PendingCopy> copies;
  std::deque<std::pair<size_t, uint64_t>> unreturned;  // manual mode: (slot, ticket)
  std::mt19937_64 rng(seed);
  size_t handed = 0;
  auto check_invariants = [&] {
    for (size_t i = 0; i < slots; ++i)
      if (!ops.Done(&copied[i])) {
        ASSERT_TRUE(ring.holds_lease(i)) << "lease dropped before its copy completed, slot " << i;
      }
    ASSERT_LE(ring.leases_held(), max_leases);
  };
  auto advance = [&](FakeStream& s, uint64_t by) { s.executed = std::min(s.enqueued, s.executed + by); };
  auto run_copies = [&] {  // the device's copies read the host bytes when dsc's stream gets there
    while (!copies.empty() && copies.front().at <= dsc.executed) {
      const PendingCopy& c = copies.front();
      ASSERT_EQ(Checksum(c.bytes, c.size), c.checksum) << "the host batch changed under its copy (slot " << c.slot << ")";
      copies.pop_front();
    }
  };
  for (uint64_t epoch = 0; epoch < 3; ++epoch) {
    auto range = loader.epoch(epoch);
    for (auto it = range.begin(); it != range.end(); ++it) {
      BatchLease lease = it.lease();
      const size_t slot = ring.Acquire();
      run_copies();  // Acquire may have waited on dsc's stream
      // The property: nothing the consumer enqueued on this slot's output is still to execute.
      ASSERT_GE(consumer.executed, last_read[slot]) << "slot " << slot << " handed out while its consumer may read it";
      ASSERT_FALSE(ring.held_by_consumer(slot));
      const Batch& b = *lease;
      const size_t bytes = b.image_bytes() * b.size;
      copies.push_back({dsc.Enqueue(), slot, b.images, bytes, Checksum(b.images, bytes)});
      ops.Record(&copied[slot], &dsc);
      dsc.Enqueue();  // the kernel
      const uint64_t ticket = ring.Hand(slot, std::move(lease), !manual, &consumer);
      ++handed;
      consumer.Enqueue();  // wait for `ready`, then the step that reads the slot
      last_read[slot] = consumer.Enqueue();
      check_invariants();
      ASSERT_LE(loader.leased(), max_leases);
      if (manual) {
        unreturned.push_back({slot, ticket});
        // Give back some (never all: then Acquire must throw, tested separately).
        while (unreturned.size() >= slots || (!unreturned.empty() && rng() % 2)) {
          ring.Return(unreturned.front().first, unreturned.front().second, &consumer);
          unreturned.pop_front();
        }
      }
      advance(dsc, rng() % 3);
      advance(consumer, rng() % 4);
      run_copies();
      check_invariants();
    }
  }
  for (auto [slot, ticket] : unreturned) ring.Return(slot, ticket, &consumer);
  ring.Drain();
  EXPECT_EQ(ring.leases_held(), 0u);
  EXPECT_EQ(loader.leased(), 0u);
  EXPECT_EQ(handed, 3 * loader.batches_per_epoch());
  dsc.executed = dsc.enqueued;
  run_copies();
}

// dsc train's device per rank (reader/gpu.h): one GPU per local rank as torchrun users pick it, shared
// round robin when there are fewer, and "shared" only when processes really share one.
TEST(GpuDevices, EachLocalRankGetsItsOwnGpuAndSharingIsNamed) {
  bool shared = true;
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(gpu::DeviceForLocalRank(r, 8, 8, false, &shared), r);
    EXPECT_FALSE(shared);
    EXPECT_EQ(gpu::DeviceForLocalRank(r, 8, 2, false, &shared), r % 2);  // 4 ranks per GPU
    EXPECT_TRUE(shared);
  }
  EXPECT_EQ(gpu::DeviceForLocalRank(3, 4, 8, false, &shared), 3);  // more GPUs than ranks
  EXPECT_FALSE(shared);
  EXPECT_EQ(gpu::DeviceForLocalRank(0, 1, 4, false, &shared), 0);  // one rank: the first visible GPU
  EXPECT_FALSE(shared);
  // One visible device per process (CUDA_VISIBLE_DEVICES set per rank): each its own device 0.
  EXPECT_EQ(gpu::DeviceForLocalRank(5, 8, 1, true, &shared), 0);
  EXPECT_FALSE(shared);
  // One GPU and no CUDA_VISIBLE_DEVICES: every rank on it, and said so.
  EXPECT_EQ(gpu::DeviceForLocalRank(5, 8, 1, false, &shared), 0);
  EXPECT_TRUE(shared);
  // CUDA_VISIBLE_DEVICES naming 3 GPUs for 8 ranks still shares them.
  EXPECT_EQ(gpu::DeviceForLocalRank(7, 8, 3, true, &shared), 1);
  EXPECT_TRUE(shared);
  EXPECT_EQ(gpu::DeviceForLocalRank(2, 4, 0, false, &shared), 0);  // no GPU: nothing to share
  EXPECT_FALSE(shared);
}

TEST(GpuRing, NeverHandsOutABufferWhileItsConsumerEventIsPending) {
  for (uint64_t seed : {1, 2, 3}) {
    DriveRing(false, 3, 2, seed);
    DriveRing(true, 3, 2, seed);
  }
  DriveRing(false, 1, 1, 4);
  DriveRing(true, 2, 1, 5);
  DriveRing(false, 4, 3, 6);
}

TEST(GpuRing, WaitsForTheOldestConsumerWhenAllAreReturnedButPending) {
  FakeOps ops;
  FakeStream consumer;
  std::vector<FakeEvent> copied(2), consumed(2);
  gpu::BufferRing ring(&ops, {{&copied[0], &consumed[0]}, {&copied[1], &consumed[1]}}, 1);
  size_t a = ring.Acquire();
  const uint64_t ta = ring.Hand(a, BatchLease(), false, nullptr);
  size_t b = ring.Acquire();
  ASSERT_NE(a, b);
  const uint64_t tb = ring.Hand(b, BatchLease(), false, nullptr);
  consumer.Enqueue();
  ring.Return(a, ta, &consumer);
  consumer.Enqueue();
  ring.Return(b, tb, &consumer);
  EXPECT_THROW(ring.Return(b, tb, &consumer), Error);  // twice
  ASSERT_EQ(consumer.executed, 0u);
  EXPECT_EQ(ring.Acquire(), a);  // the oldest, after waiting for its consumer event
  EXPECT_EQ(ops.waits, 1u);
  EXPECT_EQ(consumer.executed, 1u);  // waited exactly up to the event, not for the whole stream
}

TEST(GpuRing, ThrowsInsteadOfWaitingForeverWhenTheConsumerHoldsEveryBuffer) {
  FakeOps ops;
  std::vector<FakeEvent> copied(2), consumed(2);
  gpu::BufferRing ring(&ops, {{&copied[0], &consumed[0]}, {&copied[1], &consumed[1]}}, 2);
  ring.Hand(ring.Acquire(), BatchLease(), false, nullptr);
  ring.Hand(ring.Acquire(), BatchLease(), false, nullptr);
  try {
    ring.Acquire();
    FAIL() << "acquired a buffer the consumer holds";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("still held by the consumer"), std::string::npos) << e.what();
  }
  EXPECT_THROW(gpu::BufferRing(&ops, {}, 1), Error);
}

}  // namespace
}  // namespace dsc::test
