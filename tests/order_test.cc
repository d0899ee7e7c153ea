// Sample orders: exactly-once coverage for every order, alone and sharded over 1-8 ranks, with and
// without drop_last; determinism in (seed, epoch); quasi-random locality.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "format/error.h"
#include "kernels/random.h"
#include "reader/dataset.h"
#include "reader/order.h"
#include "tests/test_util.h"
#include "writer/build.h"

namespace dsc::test {
namespace {

OrderOptions Oo(Order order, uint64_t seed, uint32_t rank, uint32_t world, uint32_t batch, bool drop_last, uint64_t window) {
  OrderOptions o;
  o.order = order;
  o.seed = seed;
  o.rank = rank;
  o.world_size = world;
  o.batch_size = batch;
  o.drop_last = drop_last;
  o.quasi_window = window;
  return o;
}

class Orders : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = ScratchDir("-orders");
    writer::BuildOptions o;
    o.block_size = 8192;  // ~27 JPEGs per block: many blocks
    o.log = [](const std::string&) {};
    tree_ = SubsetTree(101);
    writer::Build(tree_, dir_ + "/f.beton", o);  // 1010 samples: divisible by nothing useful
    ds_ = new Dataset(dir_ + "/f.beton");
  }
  static void TearDownTestSuite() {
    delete ds_;
    RemoveScratch(dir_);
    RemoveScratch(std::filesystem::path(tree_).parent_path().string());
  }
  static std::string dir_, tree_;
  static Dataset* ds_;
};
Dataset* Orders::ds_ = nullptr;
std::string Orders::dir_, Orders::tree_;

TEST_F(Orders, ExactlyOncePerEpochForEveryOrderAndShardCount) {
  const uint64_t n = ds_->size();
  for (Order order : {Order::kSequential, Order::kRandom, Order::kQuasiRandom}) {
    for (uint32_t world = 1; world <= 8; ++world) {
      for (bool drop_last : {false, true}) {
        for (uint32_t batch : {1u, 7u, 64u}) {
          SCOPED_TRACE("order " + std::to_string(int(order)) + " world " + std::to_string(world) + " drop_last " +
                       std::to_string(drop_last) + " batch " + std::to_string(batch));
          std::vector<int> seen(n, 0);
          uint64_t batches = ~0ull;
          for (uint32_t rank = 0; rank < world; ++rank) {
            OrderOptions o = Oo(order, 7, rank, world, batch, drop_last, 0);
            EpochPlan p = PlanEpoch(ds_->view(), o, 3);
            if (batches == ~0ull) batches = p.batches;
            ASSERT_EQ(p.batches, batches) << "every rank gets the same number of batches";
            for (size_t i = 0; i < p.samples.size(); ++i)
              if (!p.padding[i]) ++seen[p.samples[i]];
            const bool keeps_short = order == Order::kSequential && !drop_last;  // clipped last slice
            if (!keeps_short) {
              ASSERT_EQ(p.samples.size(), p.batches * batch) << "batches are full";
            }
          }
          uint64_t once = 0;
          for (int s : seen) {
            ASSERT_LE(s, 1);
            once += uint64_t(s);
          }
          if (drop_last) {
            EXPECT_EQ(once, batches * batch * world);
            EXPECT_LT(n - once, uint64_t(batch) * world);
          } else {
            EXPECT_EQ(once, n) << "the union over ranks is the whole dataset";
          }
        }
      }
    }
  }
}

TEST_F(Orders, PureFunctionOfSeedAndEpoch) {
  OrderOptions o = Oo(Order::kRandom, 11, 1, 3, 32, true, 0);
  auto a = PlanEpoch(ds_->view(), o, 5), b = PlanEpoch(ds_->view(), o, 5), c = PlanEpoch(ds_->view(), o, 6);
  EXPECT_EQ(a.samples, b.samples);
  EXPECT_NE(a.samples, c.samples);
  o.seed = 12;
  EXPECT_NE(PlanEpoch(ds_->view(), o, 5).samples, a.samples);
  // The samples dropped by drop_last depend on (seed, epoch), not only on the file.
  auto dropped = [&](uint64_t epoch) {
    std::set<uint32_t> all;
    for (uint32_t i = 0; i < ds_->size(); ++i) all.insert(i);
    for (uint32_t r = 0; r < 3; ++r) {
      OrderOptions q = Oo(Order::kRandom, 11, r, 3, 32, true, 0);
      for (uint32_t s : PlanEpoch(ds_->view(), q, epoch).samples) all.erase(s);
    }
    return all;
  };
  EXPECT_EQ(dropped(5), dropped(5));
  EXPECT_NE(dropped(5), dropped(6));
  EXPECT_EQ(dropped(5).size(), ds_->size() % 96);
}

TEST_F(Orders, SequentialSingleRankKeepsTheShortLastBatch) {
  OrderOptions o = Oo(Order::kSequential, 0, 0, 1, 100, false, 0);
  auto p = PlanEpoch(ds_->view(), o, 0);
  EXPECT_EQ(p.batches, 11u);
  EXPECT_EQ(p.batch_length(10), 10u);
  for (uint32_t i = 0; i < p.samples.size(); ++i) ASSERT_EQ(p.samples[i], i);
}

TEST_F(Orders, PaddingRepeatsAreFlagged) {
  OrderOptions o = Oo(Order::kRandom, 3, 0, 1, 64, false, 0);
  auto p = PlanEpoch(ds_->view(), o, 0);
  size_t pads = 0;
  for (auto f : p.padding) pads += f;
  EXPECT_EQ(pads, p.batches * 64 - ds_->size());
  for (size_t i = 0; i < p.samples.size(); ++i) ASSERT_EQ(bool(p.padding[i]), i >= ds_->size());
}

TEST_F(Orders, QuasiRandomBatchesTouchFewBlocks) {
  const uint32_t batch = 32;
  OrderOptions q = Oo(Order::kQuasiRandom, 5, 0, 1, batch, true, 64);
  OrderOptions r = Oo(Order::kRandom, 5, 0, 1, batch, true, 0);
  auto blocks_per_batch = [&](const EpochPlan& p) {
    double total = 0;
    for (uint64_t k = 0; k < p.batches; ++k) {
      std::set<uint32_t> blocks;
      for (uint32_t j = 0; j < batch; ++j) blocks.insert(ds_->entry(p.samples[k * batch + j]).block);
      total += double(blocks.size());
    }
    return total / double(p.batches);
  };
  const double quasi = blocks_per_batch(PlanEpoch(ds_->view(), q, 1));
  const double random = blocks_per_batch(PlanEpoch(ds_->view(), r, 1));
  EXPECT_LE(quasi, 5.0) << "a 64-sample window spans at most 4 blocks of ~27 samples";
  EXPECT_GT(random, 2 * quasi);
  // And it still is a permutation.
  auto order = GlobalOrder(ds_->view(), q, 1);
  std::set<uint32_t> uniq(order.begin(), order.end());
  EXPECT_EQ(uniq.size(), ds_->size());
}

TEST_F(Orders, SubsetsAreCoveredExactlyOnce) {
  for (Order order : {Order::kSequential, Order::kRandom, Order::kQuasiRandom}) {
    std::vector<int> seen(ds_->size(), 0);
    for (uint32_t rank = 0; rank < 2; ++rank) {
      OrderOptions o = Oo(order, 1, rank, 2, 16, false, 0);
      for (uint32_t i = 0; i < ds_->size(); i += 3) o.subset.push_back(i);
      auto p = PlanEpoch(ds_->view(), o, 0);
      for (size_t i = 0; i < p.samples.size(); ++i)
        if (!p.padding[i]) ++seen[p.samples[i]];
    }
    for (uint32_t i = 0; i < ds_->size(); ++i) ASSERT_EQ(seen[i], i % 3 == 0 ? 1 : 0) << i;
  }
  OrderOptions bad = Oo(Order::kRandom, 0, 0, 1, 8, false, 0);
  bad.subset = {1, 1};
  EXPECT_THROW(PlanEpoch(ds_->view(), bad, 0), Error);
}

TEST_F(Orders, RejectsBadShardOptions) {
  OrderOptions o = Oo(Order::kRandom, 0, 4, 4, 8, false, 0);
  EXPECT_THROW(PlanEpoch(ds_->view(), o, 0), Error);
  o.rank = 0;
  o.batch_size = 0;
  EXPECT_THROW(PlanEpoch(ds_->view(), o, 0), Error);
}

// Global batch k (rank slices in rank order) for world size w, global batch g.
std::vector<std::vector<uint32_t>> GlobalBatches(const format::FileView& f, Order order, uint32_t g, uint32_t w, bool drop_last,
                                                 uint64_t epoch, std::vector<std::vector<uint8_t>>* pads = nullptr) {
  std::vector<std::vector<uint32_t>> out;
  if (pads) pads->clear();
  for (uint32_t r = 0; r < w; ++r) {
    EpochPlan p = PlanEpoch(f, Oo(order, 9, r, w, g / w, drop_last, 0), epoch);
    out.resize(p.batches);
    if (pads) pads->resize(p.batches);
    for (uint64_t k = 0; k < p.batches; ++k)
      for (uint32_t j = 0; j < p.batch_length(k); ++j) {
        out[k].push_back(p.samples[k * p.batch_size + j]);
        if (pads) (*pads)[k].push_back(p.padding[k * p.batch_size + j]);
      }
  }
  return out;
}

TEST_F(Orders, GlobalBatchIsTheSameForEveryWorldSize) {
  for (Order order : {Order::kRandom, Order::kSequential}) {
    for (bool drop_last : {false, true}) {
      std::vector<std::vector<uint8_t>> want_pads, pads;
      const auto want = GlobalBatches(ds_->view(), order, 48, 1, drop_last, 2, &want_pads);
      ASSERT_EQ(want.size(), drop_last ? ds_->size() / 48 : (ds_->size() + 47) / 48);
      for (uint32_t w : {2u, 3u, 4u, 6u, 8u, 16u}) {
        SCOPED_TRACE("order " + std::to_string(int(order)) + " drop_last " + std::to_string(drop_last) + " world " +
                     std::to_string(w));
        EXPECT_EQ(GlobalBatches(ds_->view(), order, 48, w, drop_last, 2, &pads), want);
        EXPECT_EQ(pads, want_pads);
      }
    }
  }
}

TEST_F(Orders, RankTakesAFixedContiguousSliceOfTheGlobalOrder) {
  const uint64_t n = ds_->size();
  const auto order = GlobalOrder(ds_->view(), Oo(Order::kRandom, 9, 0, 1, 8, false, 0), 4);
  const auto order4 = GlobalOrder(ds_->view(), Oo(Order::kRandom, 9, 2, 4, 8, false, 0), 4);
  EXPECT_EQ(order, order4) << "the epoch order does not depend on rank or world size";
  for (uint32_t r = 0; r < 4; ++r) {
    EpochPlan p = PlanEpoch(ds_->view(), Oo(Order::kRandom, 9, r, 4, 8, false, 0), 4);
    ASSERT_EQ(p.batches, (n + 31) / 32);
    for (uint64_t k = 0; k < p.batches; ++k)
      for (uint32_t j = 0; j < 8; ++j) {
        const uint64_t pos = k * 32 + r * 8 + j;  // naive: the spec's position in the epoch order
        ASSERT_EQ(p.samples[k * 8 + j], order[pos % n]);
        ASSERT_EQ(p.padding[k * 8 + j], pos >= n ? 1 : 0) << "padding repeats the epoch order from its start";
      }
  }
}

TEST_F(Orders, SequentialClipsTheShortLastGlobalBatch) {
  // 1010 samples, global batch 64: 15 full batches and 50 samples; 8 ranks of 8 get 8,8,8,8,8,8,2,0.
  const uint32_t want[8] = {8, 8, 8, 8, 8, 8, 2, 0};
  for (uint32_t r = 0; r < 8; ++r) {
    EpochPlan p = PlanEpoch(ds_->view(), Oo(Order::kSequential, 0, r, 8, 8, false, 0), 0);
    ASSERT_EQ(p.batches, 16u);
    EXPECT_EQ(p.batch_length(15), want[r]) << "rank " << r;
    for (uint32_t j = 0; j < p.batch_length(15); ++j) EXPECT_EQ(p.samples[15 * 8 + j], 960 + r * 8 + j);
    for (auto f : p.padding) ASSERT_EQ(f, 0);
  }
}

TEST_F(Orders, QuasiRandomDealsBlocksToRanks) {
  // Each rank reads about 1/W of the blocks: rank parts share at most their boundary blocks.
  const uint32_t w = 4;
  std::vector<std::set<uint32_t>> blocks(w);
  std::vector<int> seen(ds_->size(), 0);
  for (uint32_t r = 0; r < w; ++r) {
    EpochPlan p = PlanEpoch(ds_->view(), Oo(Order::kQuasiRandom, 3, r, w, 16, false, 0), 1);
    for (size_t i = 0; i < p.samples.size(); ++i) {
      if (p.padding[i]) continue;
      ++seen[p.samples[i]];
      blocks[r].insert(ds_->entry(p.samples[i]).block);
    }
  }
  const size_t total = ds_->view().block_count();
  for (uint32_t r = 0; r < w; ++r) {
    EXPECT_LE(blocks[r].size(), total / w + 2) << "rank " << r << " reads " << blocks[r].size() << " of " << total << " blocks";
    for (uint32_t q = r + 1; q < w; ++q) {
      size_t shared = 0;
      for (uint32_t b : blocks[r]) shared += blocks[q].count(b);
      EXPECT_LE(shared, 1u) << "ranks " << r << " and " << q;
    }
  }
  for (int s : seen) ASSERT_EQ(s, 1);
}

TEST_F(Orders, ExcludeLeavesOutExactlyTheMarkedSamples) {
  const uint64_t n = ds_->size();
  std::vector<uint8_t> bits((n + 7) / 8, 0);
  for (uint32_t i = 0; i < n; i += 3) bits[i / 8] |= uint8_t(1u << (i % 8));
  for (Order order : {Order::kSequential, Order::kRandom, Order::kQuasiRandom}) {
    std::vector<int> seen(n, 0);
    for (uint32_t r = 0; r < 3; ++r) {
      OrderOptions o = Oo(order, 2, r, 3, 10, false, 0);
      o.exclude = bits;
      EpochPlan p = PlanEpoch(ds_->view(), o, 0);
      for (size_t i = 0; i < p.samples.size(); ++i)
        if (!p.padding[i]) ++seen[p.samples[i]];
    }
    for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(seen[i], i % 3 == 0 ? 0 : 1) << "order " << int(order) << " sample " << i;
  }
  OrderOptions bad = Oo(Order::kRandom, 0, 0, 1, 8, false, 0);
  bad.exclude.assign(3, 0);
  EXPECT_THROW(PlanEpoch(ds_->view(), bad, 0), Error);
}

// RandomSubset of a few of very many samples keeps memory to the subset (it allocated `total`
// entries first: random_subset(2**40, 2, 3) from Python was a bad_alloc, and past 2^32 its 32-bit
// loop never ended) and picks what the plain Fisher-Yates picks: checked against one written here.
TEST(RandomSubset, FewOfManyIsTheDenseShuffleInLittleMemory) {
  const uint64_t total = uint64_t(1) << 23;  // past the dense path's limit, small enough to shuffle here
  for (const uint64_t n : {uint64_t(1), uint64_t(1000), total / 8}) {
    std::vector<uint32_t> all(total);
    for (uint64_t i = 0; i < total; ++i) all[i] = uint32_t(i);
    kernels::Rng rng(11, 0, 0, kernels::kStreamSubset);
    for (uint64_t i = 0; i < n; ++i) std::swap(all[i], all[i + rng.Below(total - i)]);
    all.resize(n);
    EXPECT_TRUE(RandomSubset(total, n, 11) == all) << n << " of " << total;
  }
  const std::vector<uint32_t> big = RandomSubset(uint64_t(1) << 32, 5, 3);
  ASSERT_EQ(big.size(), 5u);
  EXPECT_EQ(std::set<uint32_t>(big.begin(), big.end()).size(), 5u) << "distinct";
  EXPECT_GT(*std::max_element(big.begin(), big.end()), uint32_t(1) << 24) << "drawn from the whole range";
  EXPECT_THROW(RandomSubset((uint64_t(1) << 32) + 1, 5, 3), OptionError);
}

}  // namespace
}  // namespace dsc::test
