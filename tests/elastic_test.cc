// Global batches, the run fingerprint and elastic resumption on real CIFAR-10 bytes: global batch k
// is the same (indices and pixels) on 1, 2 or 4 ranks; a state taken on W ranks continues on W'
// ranks with what an uninterrupted run would have produced (random, sequential), or, for
// quasi_random, with exactly the samples not yet consumed; other runs' states are refused.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <tuple>

#include "format/checksum.h"
#include "format/error.h"
#include "reader/loader.h"
#include "tests/test_util.h"
#include "writer/build.h"

namespace dsc::test {
namespace {

struct Files {
  std::string jpg, raw, dir;
};

const Files& Built() {
  static Files f = [] {
    Files f;
    f.dir = ScratchDir("-elastic");
    const std::string tree = SubsetTree(50);  // 500 real images
    writer::BuildOptions o;
    o.block_size = 16384;  // ~6 JPEGs per block: many blocks for quasi_random
    o.log = [](const std::string&) {};
    f.jpg = f.dir + "/jpg.beton";
    writer::Build(tree, f.jpg, o);
    o.encode.encoding = "raw";
    f.raw = f.dir + "/raw.beton";
    writer::Build(tree, f.raw, o);
    return f;
  }();
  return f;
}

constexpr uint32_t kN = 500;

// One sample as delivered: index, padding flag, label and pixels.
struct Sample {
  uint32_t index = 0;
  uint8_t padding = 0;
  int32_t label = 0;
  std::vector<uint8_t> pixels;
  bool operator==(const Sample& o) const {
    return index == o.index && padding == o.padding && label == o.label && pixels == o.pixels;
  }
};
using Batches = std::vector<std::vector<Sample>>;  // batch k -> its samples

LoaderOptions Opts(Order order, uint32_t global_batch, uint32_t rank, uint32_t world, bool drop_last = false) {
  LoaderOptions o = LoaderOptions::CifarTrain();  // flip, translate, cutout: augmentation shows in the pixels
  o.order = order;
  o.seed = 21;
  o.global_batch_size = global_batch;
  o.batch_size = 7;  // ignored: the global batch size wins
  o.rank = rank;
  o.world_size = world;
  o.drop_last = drop_last;
  o.threads = 2;
  o.prefetch = 2;
  return o;
}

// Appends the batches of a range to `out` (batch k of the range at out[k]), stopping after `max`.
template <typename Range>
void Take(Range&& range, Batches* out, uint64_t max = ~0ull, uint64_t* last_index = nullptr) {
  uint64_t n = 0;
  for (const Batch& b : range) {
    if (last_index) *last_index = b.index;
    std::vector<Sample> batch;
    for (uint32_t i = 0; i < b.size; ++i) {
      Sample s;
      s.index = b.indices[i];
      s.padding = b.padding[i];
      s.label = b.labels[0][i];
      const uint8_t* im = b.images_as<uint8_t>() + b.image_bytes() * i;
      s.pixels.assign(im, im + b.image_bytes());
      batch.push_back(std::move(s));
    }
    out->push_back(std::move(batch));
    if (++n == max) break;
  }
}

// Global batches: rank slices concatenated in rank order.
Batches Concat(const std::vector<Batches>& ranks) {
  Batches g(ranks[0].size());
  for (const Batches& r : ranks) {
    EXPECT_EQ(r.size(), g.size()) << "every rank delivers the same number of batches";
    for (size_t k = 0; k < std::min(r.size(), g.size()); ++k) g[k].insert(g[k].end(), r[k].begin(), r[k].end());
  }
  return g;
}

Batches RunWorld(const std::string& file, Order order, uint32_t g, uint32_t world, uint64_t epoch, bool drop_last = false) {
  std::vector<Batches> ranks(world);
  for (uint32_t r = 0; r < world; ++r) {
    Loader l(file, Opts(order, g, r, world, drop_last));
    Take(l.epoch(epoch), &ranks[r]);
  }
  return Concat(ranks);
}

std::vector<int> Counts(const Batches& b) {
  std::vector<int> c(kN, 0);
  for (const auto& batch : b)
    for (const Sample& s : batch)
      if (!s.padding) ++c[s.index];
  return c;
}

TEST(Elastic, GlobalBatchesAreTheSameOnOneTwoOrFourRanks) {
  for (Order order : {Order::kRandom, Order::kSequential}) {
    for (bool drop_last : {false, true}) {
      SCOPED_TRACE("order " + std::to_string(int(order)) + " drop_last " + std::to_string(drop_last));
      const Batches one = RunWorld(Built().jpg, order, 40, 1, 3, drop_last);
      ASSERT_EQ(one.size(), drop_last ? 12u : 13u);
      for (uint32_t w : {2u, 4u}) {
        const Batches many = RunWorld(Built().jpg, order, 40, w, 3, drop_last);
        ASSERT_EQ(many.size(), one.size()) << w << " ranks";
        for (size_t k = 0; k < one.size(); ++k) ASSERT_TRUE(many[k] == one[k]) << w << " ranks, global batch " << k;
      }
      // Every sample once per epoch (drop_last: all but the 20 of the tail).
      int total = 0;
      for (int c : Counts(one)) {
        ASSERT_LE(c, 1);
        total += c;
      }
      EXPECT_EQ(total, drop_last ? 480 : 500);
    }
  }
}

// The same over a whole epoch of the real CIFAR-10 train split (50,000 JPEGs; the 10,000 test images
// in sanitizer builds, where it is ~10x slower): each sample as (index, padding, hash of its pixels),
// so three full epochs fit in a few MB.
TEST(Elastic, WholeCifarEpochIsTheSameOnOneTwoAndFourRanks) {
#ifdef DSC_EXACT_HEAP_SOURCE
  const std::string split = "test";
#else
  const std::string split = "train";
#endif
  const std::string file = ScratchDir() + "/cifar-" + split + ".beton";
  writer::BuildOptions bo;
  bo.log = [](const std::string&) {};
  writer::Build(CifarJpegRoot() + "/" + split, file, bo);
  using Key = std::tuple<uint32_t, uint8_t, uint64_t>;
  auto run = [&](uint32_t world) {
    std::vector<std::vector<Key>> global;
    for (uint32_t r = 0; r < world; ++r) {
      LoaderOptions o = Opts(Order::kRandom, 512, r, world);
      Loader l(file, o);
      uint64_t k = 0;
      for (const Batch& b : l.epoch(1)) {
        if (global.size() <= k) global.resize(k + 1);
        for (uint32_t i = 0; i < b.size; ++i)
          global[k].emplace_back(b.indices[i], b.padding[i],
                                 Checksum(b.images_as<uint8_t>() + b.image_bytes() * i, b.image_bytes()));
        ++k;
      }
      EXPECT_EQ(k, global.size()) << "rank " << r << " of " << world << " delivers every global batch";
    }
    return global;
  };
  const auto one = run(1);
  std::vector<int> seen;
  for (const auto& batch : one)
    for (const auto& [index, padding, hash] : batch) {
      if (seen.size() <= index) seen.resize(index + 1);
      seen[index] += padding ? 0 : 1;
    }
  const uint32_t n = split == "train" ? 50000 : 10000;
  ASSERT_EQ(seen.size(), n);
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(seen[i], 1) << "sample " << i << " once per epoch";
  ASSERT_EQ(one.size(), (n + 511) / 512);
  for (uint32_t w : {2u, 4u}) {
    const auto many = run(w);
    ASSERT_EQ(many.size(), one.size()) << w << " ranks";
    for (size_t k = 0; k < one.size(); ++k) ASSERT_EQ(many[k], one[k]) << w << " ranks, global batch " << k;
  }
}

TEST(Elastic, SequentialShortLastBatchIsClippedPerRank) {
  // 500 samples, global batch 40: the last global batch holds 20; on 4 ranks of 10 that is 10, 10, 0, 0.
  const uint32_t want[4] = {10, 10, 0, 0};
  for (uint32_t r = 0; r < 4; ++r) {
    Loader l(Built().jpg, Opts(Order::kSequential, 40, r, 4));
    Batches b;
    Take(l.epoch(0), &b);
    ASSERT_EQ(b.size(), 13u);
    EXPECT_EQ(b[12].size(), want[r]) << "rank " << r;
    for (size_t j = 0; j < b[12].size(); ++j) EXPECT_EQ(b[12][j].index, 480 + r * 10 + j);
  }
}

// Runs `first` batches on `w` ranks and returns their states.
std::vector<LoaderState> Interrupt(Order order, uint32_t g, uint32_t w, uint64_t epoch, uint64_t first, Batches* got) {
  std::vector<LoaderState> states;
  std::vector<Batches> ranks(w);
  for (uint32_t r = 0; r < w; ++r) {
    Loader l(Built().jpg, Opts(order, g, r, w));
    Take(l.epoch(epoch), &ranks[r], first);
    states.push_back(l.state());
  }
  if (got) *got = Concat(ranks);
  return states;
}

// Restores `state` on `w` ranks and runs the rest of the epoch.
Batches Continue(Order order, uint32_t g, uint32_t w, const LoaderState& state) {
  std::vector<Batches> ranks(w);
  for (uint32_t r = 0; r < w; ++r) {
    Loader l(Built().jpg, Opts(order, g, r, w));
    l.restore(state);
    auto range = l.resume();
    const uint64_t planned = range.size();  // a quasi_random rest on another rank count: its own plan
    uint64_t last = 0;
    Take(std::move(range), &ranks[r], ~0ull, &last);
    if (!ranks[r].empty()) {
      EXPECT_EQ(last + 1, planned) << "rank " << r;  // the range's last batch
    }
    EXPECT_EQ(l.epoch(state.epoch + 1).size(), l.batches_per_epoch());  // a full epoch
  }
  return Concat(ranks);
}

TEST(Elastic, ResumeOnAnotherRankCountContinuesTheSameGlobalBatches) {
  struct Case { Order order; uint32_t from, to; };
  for (const Case c : {Case{Order::kRandom, 2, 1}, Case{Order::kRandom, 1, 2}, Case{Order::kRandom, 2, 4},
                       Case{Order::kSequential, 2, 4}, Case{Order::kSequential, 4, 1}}) {
    SCOPED_TRACE("order " + std::to_string(int(c.order)) + ": " + std::to_string(c.from) + " -> " + std::to_string(c.to) + " ranks");
    const Batches want = RunWorld(Built().jpg, c.order, 40, 1, 5);
    auto states = Interrupt(c.order, 40, c.from, 5, 4, nullptr);
    ASSERT_EQ(states[0].next_batch, 4u);
    // Any rank's state will do (they count global batches); the merged one too.
    for (const LoaderState& s : {states.back(), LoaderState::Merge(states)}) {
      const Batches rest = Continue(c.order, 40, c.to, LoaderState::Deserialize(s.Serialize()));
      ASSERT_EQ(rest.size(), want.size() - 4);
      for (size_t k = 0; k < rest.size(); ++k) ASSERT_TRUE(rest[k] == want[k + 4]) << "global batch " << k + 4;
    }
  }
}

TEST(Elastic, QuasiRandomIsExactlyOnceAcrossARankCountChange) {
  const uint32_t g = 48;
  for (auto [from, to] : {std::pair{2u, 3u}, std::pair{2u, 1u}, std::pair{3u, 2u}, std::pair{1u, 4u}}) {
    SCOPED_TRACE(std::to_string(from) + " -> " + std::to_string(to) + " ranks");
    Batches before;
    auto states = Interrupt(Order::kQuasiRandom, g, from, 2, 3, &before);
    const LoaderState merged = LoaderState::Deserialize(LoaderState::Merge(states).Serialize());
    const Batches after = Continue(Order::kQuasiRandom, g, to, merged);
    std::vector<int> seen = Counts(before), rest = Counts(after);
    for (uint32_t i = 0; i < kN; ++i) {
      ASSERT_EQ(seen[i] + rest[i], 1) << "sample " << i << " before " << seen[i] << " after " << rest[i];
      const bool consumed = merged.consumed[i / 8] >> (i % 8) & 1;
      ASSERT_EQ(consumed, seen[i] == 1) << "the merged state names exactly what was consumed";
    }
  }
}

TEST(Elastic, QuasiRandomChainedResumesStayExactlyOnce) {
  // 2 ranks, then 3 (interrupted again), then 1: still every sample once over the epoch.
  const uint32_t g = 48;
  Batches a, b, c;
  const LoaderState s2 = LoaderState::Merge(Interrupt(Order::kQuasiRandom, g, 2, 0, 2, &a));
  std::vector<LoaderState> s3;
  std::vector<Batches> ranks(3);
  for (uint32_t r = 0; r < 3; ++r) {
    Loader l(Built().jpg, Opts(Order::kQuasiRandom, g, r, 3));
    l.restore(s2);
    Take(l.resume(), &ranks[r], 2);
    s3.push_back(l.state());
  }
  b = Concat(ranks);
  c = Continue(Order::kQuasiRandom, g, 1, LoaderState::Merge(s3));
  std::vector<int> ca = Counts(a), cb = Counts(b), cc = Counts(c);
  for (uint32_t i = 0; i < kN; ++i) ASSERT_EQ(ca[i] + cb[i] + cc[i], 1) << "sample " << i;
}

TEST(Elastic, QuasiRandomSameRankCountResumesTheSameBatches) {
  const uint32_t g = 48;
  for (uint32_t r = 0; r < 2; ++r) {
    Batches want, rest;
    {
      Loader l(Built().jpg, Opts(Order::kQuasiRandom, g, r, 2));
      Take(l.epoch(1), &want);
    }
    auto states = Interrupt(Order::kQuasiRandom, g, 2, 1, 3, nullptr);
    Loader l(Built().jpg, Opts(Order::kQuasiRandom, g, r, 2));
    l.restore(states[1 - r]);  // another rank's state: they agree on the batch count
    Take(l.resume(), &rest);
    ASSERT_EQ(rest.size() + 3, want.size());
    for (size_t k = 0; k < rest.size(); ++k) ASSERT_TRUE(rest[k] == want[k + 3]) << "rank " << r << " batch " << k + 3;
  }
}

TEST(Elastic, QuasiRandomRefusesOneRanksStateOnAnotherRankCount) {
  auto states = Interrupt(Order::kQuasiRandom, 48, 2, 0, 1, nullptr);
  Loader l(Built().jpg, Opts(Order::kQuasiRandom, 48, 0, 3));
  try {
    l.restore(states[0]);
    FAIL() << "restored one rank's quasi_random state on another rank count";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Merge"), std::string::npos) << e.what();
  }
  EXPECT_THROW(LoaderState::Merge({states[0], states[0]}), Error) << "the same rank twice";
  EXPECT_THROW(LoaderState::Merge({states[0]}), Error) << "a rank missing";
  // One rank's state relabelled world_size 0 (what Merge writes when ranks were at different batches)
  // passed both checks: restored on 3 ranks, rank 1's consumed samples came again.
  LoaderState forged = states[0];
  forged.world_size = 0;
  EXPECT_THROW(LoaderState::Deserialize(forged.Serialize()), Error);
  EXPECT_THROW(l.restore(forged), Error);
  EXPECT_NO_THROW(l.restore(LoaderState::Deserialize(LoaderState::Merge(states).Serialize())));
}

// The last epoch there is: its states restore (mid-epoch too), and after its end resume() says there
// is no next epoch (it wrapped to epoch 0).
TEST(Elastic, TheLastEpochHasNoNextOne) {
  Loader a(Built().jpg, Opts(Order::kRandom, 40, 0, 1));
  Batches first, want;
  Take(a.epoch(UINT64_MAX), &want);
  LoaderState mid, end;
  {
    auto range = a.epoch(UINT64_MAX);
    auto it = range.begin();
    ++it;
    mid = a.state();
  }
  Take(a.epoch(UINT64_MAX), &first);
  end = a.state();
  Loader b(Built().jpg, Opts(Order::kRandom, 40, 0, 1));
  b.restore(LoaderState::Deserialize(mid.Serialize()));
  Batches rest;
  Take(b.resume(), &rest);
  ASSERT_EQ(rest.size() + 2, want.size());
  for (size_t k = 0; k < rest.size(); ++k) EXPECT_TRUE(rest[k] == want[k + 2]) << k;
  b.restore(LoaderState::Deserialize(end.Serialize()));
  try {
    b.resume();
    FAIL() << "resumed past epoch 2^64-1";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no next epoch"), std::string::npos) << e.what();
  }
}

TEST(Elastic, ResumeAtAnEpochsEndStartsTheNextEpoch) {
  for (Order order : {Order::kRandom, Order::kQuasiRandom}) {
    LoaderState s;
    Batches want;
    {
      Loader l(Built().jpg, Opts(order, 40, 0, 1));
      Batches all;
      Take(l.epoch(3), &all);
      s = l.state();
      EXPECT_EQ(s.next_batch, all.size());
      Take(l.epoch(4), &want);
    }
    Loader l(Built().jpg, Opts(order, 40, 0, 1));
    l.restore(s);
    Batches got;
    Take(l.resume(), &got);
    ASSERT_EQ(got.size(), want.size()) << "order " << int(order);
    for (size_t k = 0; k < got.size(); ++k) ASSERT_TRUE(got[k] == want[k]) << "batch " << k;
    EXPECT_EQ(l.state().epoch, 4u);
  }
}

// restore() names the differing component.
void ExpectRefused(const LoaderState& s, const std::string& file, const LoaderOptions& o, const std::string& component) {
  Loader l(file, o);
  try {
    l.restore(s);
    ADD_FAILURE() << "restored across a different " << component;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(component), std::string::npos) << e.what();
  }
}

TEST(Elastic, FingerprintMismatchesAreRefusedNamingTheComponent) {
  LoaderOptions base = Opts(Order::kQuasiRandom, 40, 0, 1);
  base.quasi_window = 64;
  LoaderState s;
  {
    Loader l(Built().jpg, base);
    s = l.state();
    EXPECT_EQ(s.run.Fingerprint(), RunFingerprint(l.dataset(), l.options()));
  }
  LoaderOptions o = base;
  o.seed = 22;
  ExpectRefused(s, Built().jpg, o, "seed");
  o = base;
  o.order = Order::kRandom;
  ExpectRefused(s, Built().jpg, o, "order");
  o = base;
  o.global_batch_size = 80;
  ExpectRefused(s, Built().jpg, o, "global batch size");
  o = base;
  o.global_batch_size = 0;
  o.batch_size = 20;  // per rank, one rank: a global batch of 20
  ExpectRefused(s, Built().jpg, o, "global batch size");
  o = base;
  o.drop_last = true;
  ExpectRefused(s, Built().jpg, o, "drop_last");
  o = base;
  o.quasi_window = 128;
  ExpectRefused(s, Built().jpg, o, "quasi_window");
  o = base;
  for (uint32_t i = 0; i < kN; i += 2) o.subset.push_back(i);
  ExpectRefused(s, Built().jpg, o, "subset size");
  LoaderState with_subset;
  {
    Loader l(Built().jpg, o);
    with_subset = l.state();
  }
  std::swap(o.subset[0], o.subset[1]);  // same samples, another order: another run
  ExpectRefused(with_subset, Built().jpg, o, "subset (hash)");
  ExpectRefused(s, Built().raw, base, "file size");
  LoaderState tampered = s;
  tampered.run.plan_version = 1;
  ExpectRefused(tampered, Built().jpg, base, "order plan version");
  // Not part of the identity: threads, prefetch, rank and world size, output format.
  o = base;
  o.threads = 1;
  o.prefetch = 1;
  o.world_size = 2;
  o.rank = 1;
  o.dtype = DType::kFloat16;
  Loader l(Built().jpg, o);
  EXPECT_NO_THROW(l.restore(s));
}

TEST(Elastic, GlobalBatchSizeMustBeDivisibleByTheWorldSize) {
  try {
    Loader l(Built().jpg, Opts(Order::kRandom, 40, 0, 3));
    FAIL() << "40 samples over 3 ranks accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("40"), std::string::npos) << m;
    EXPECT_NE(m.find("3"), std::string::npos) << m;
  }
}

TEST(Elastic, StateBytesRoundTripAndDamageIsRefused) {
  Batches got;
  auto states = Interrupt(Order::kQuasiRandom, 48, 2, 1, 2, &got);
  const LoaderState m = LoaderState::Merge(states);
  const std::string bytes = m.Serialize();
  const LoaderState back = LoaderState::Deserialize(bytes);
  EXPECT_TRUE(back.run == m.run);
  EXPECT_EQ(back.epoch, m.epoch);
  EXPECT_EQ(back.next_batch, m.next_batch);
  EXPECT_EQ(back.world_size, m.world_size);
  EXPECT_EQ(back.rank, m.rank);
  EXPECT_EQ(back.ranks, m.ranks);
  EXPECT_EQ(back.excluded, m.excluded);
  EXPECT_EQ(back.consumed, m.consumed);
  EXPECT_EQ(back.consumed.size(), (kN + 7) / 8);
  EXPECT_LT(bytes.size(), 200u + kN / 8) << "compact: a bitmap of N/8 bytes";
  EXPECT_EQ(back.Serialize(), bytes);
  // Every truncation and every single-byte change is refused with a dsc::Error.
  for (size_t len = 0; len < bytes.size(); ++len) EXPECT_THROW(LoaderState::Deserialize(bytes.substr(0, len)), Error) << len;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] = char(bad[i] ^ 0x5A);
    EXPECT_THROW(LoaderState::Deserialize(bad), Error) << "byte " << i;
  }
  EXPECT_THROW(LoaderState::Deserialize(bytes + "x"), Error);
  try {
    LoaderState::Deserialize("not a state at all");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("byte offset 0"), std::string::npos) << e.what();
  }
  // A plain state (random order) carries no bitmaps.
  Loader l(Built().jpg, Opts(Order::kRandom, 40, 0, 1));
  EXPECT_TRUE(l.state().consumed.empty());
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

TEST(Elastic, BenchWritesEachRanksBatchIndices) {
  const std::string dir = ScratchDir();
  const std::string common = Built().jpg + " --epochs 1 --threads 2 --global-batch-size 40 --seed 4 --order random";
  std::string out;
  ASSERT_EQ(RunDsc("bench " + common + " --indices-out " + dir + "/w1.txt", &out), 0) << out;
  const auto one = Lines(dir + "/w1.txt");
  ASSERT_EQ(one.size(), 13u);
  // The loader's own indices, independently of the CLI.
  LoaderOptions o = Opts(Order::kRandom, 40, 0, 1);
  o.seed = 4;
  Loader l(Built().jpg, o);
  Batches api;
  Take(l.epoch(0), &api);
  for (size_t k = 0; k < one.size(); ++k) {
    std::ostringstream line;
    for (size_t j = 0; j < api[k].size(); ++j) line << (j ? " " : "") << api[k][j].index;
    ASSERT_EQ(one[k], line.str()) << "batch " << k;
  }
  std::vector<std::vector<std::string>> ranks;
  for (int r = 0; r < 2; ++r) {
    const std::string f = dir + "/w2r" + std::to_string(r) + ".txt";
    ASSERT_EQ(RunDsc("bench " + common + " --world-size 2 --rank " + std::to_string(r) + " --indices-out " + f, &out), 0) << out;
    ranks.push_back(Lines(f));
    ASSERT_EQ(ranks.back().size(), one.size());
  }
  for (size_t k = 0; k < one.size(); ++k) EXPECT_EQ(ranks[0][k] + " " + ranks[1][k], one[k]) << "global batch " << k;
  EXPECT_EQ(RunDsc("bench " + common + " --world-size 3", &out), 2) << out;  // 40 not divisible by 3
  EXPECT_NE(out.find("40"), std::string::npos) << out;
  EXPECT_EQ(RunDsc("bench " + common + " --world-size 2 --rank 2", &out), 2) << out;
  RemoveScratch(dir);
}

}  // namespace
}  // namespace dsc::test
