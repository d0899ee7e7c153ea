// quasi_random's block readahead and drop-behind (reader/readahead.h) on real CIFAR-10 bytes: batches
// identical to reading without it, each rank asks storage for about 1/W of the file, and dropping the
// file's pages between epochs changes nothing but where the bytes come from.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "reader/loader.h"
#include "reader/readahead.h"
#include "tests/test_util.h"
#include "writer/build.h"

namespace dsc::test {
namespace {

const std::string& RawFile() {
  static const std::string path = [] {
    writer::BuildOptions o;
    o.block_size = 65536;  // ~3 KiB samples: 21 per block, ~28 blocks
    o.encode.encoding = "raw";
    o.log = [](const std::string&) {};
    const std::string p = ScratchDir("-readahead") + "/raw.beton";
    writer::Build(SubsetTree(60), p, o);  // 600 real images
    return p;
  }();
  return path;
}

struct Epoch {
  std::vector<uint32_t> indices;
  std::vector<uint8_t> images;
  uint64_t advised = 0;
};

Epoch TwoEpochs(uint64_t budget, uint32_t rank, uint32_t world, bool cold) {
  LoaderOptions o = LoaderOptions::CifarTrain();
  o.order = Order::kQuasiRandom;
  o.global_batch_size = 32;
  o.rank = rank;
  o.world_size = world;
  o.cache_budget = budget;
  o.threads = 2;
  o.collect_stats = true;
  Loader l(RawFile(), o);
  Epoch e;
  for (uint64_t epoch = 0; epoch < 2; ++epoch) {
    if (cold) DropCachedPages(l.dataset());
    for (const Batch& b : l.epoch(epoch)) {
      e.indices.insert(e.indices.end(), b.indices, b.indices + b.size);
      const uint8_t* im = static_cast<const uint8_t*>(b.images);
      e.images.insert(e.images.end(), im, im + b.image_bytes() * b.size);
    }
  }
  e.advised = l.stats().advised_bytes;
  return e;
}

TEST(Readahead, SameBatchesAndAboutOneWthOfTheFilePerRank) {
  struct stat st {};
  ASSERT_EQ(::stat(RawFile().c_str(), &st), 0);
  const double file = double(st.st_size);
  for (uint32_t world : {1u, 2u}) {
    for (uint32_t rank = 0; rank < world; ++rank) {
      const Epoch plain = TwoEpochs(0, rank, world, false);
      EXPECT_EQ(plain.advised, 0u);
      // A budget of two blocks: blocks are dropped behind and read ahead all through the epoch.
      const Epoch ahead = TwoEpochs(2 * 65536, rank, world, true);
      ASSERT_EQ(plain.indices, ahead.indices) << "rank " << rank << " of " << world;
      EXPECT_TRUE(plain.images == ahead.images) << "rank " << rank << " of " << world;
      EXPECT_GT(ahead.advised, 0u);
      // Two epochs, each ≤ 1.25 x file / W requested by this rank (the payload is most of the file). No
      // lower bound: the readahead thread runs behind a fast (cached) epoch, and workers fault the rest.
      EXPECT_LE(double(ahead.advised), 2 * 1.25 * file / world) << "rank " << rank << " of " << world;
    }
  }
}

}  // namespace
}  // namespace dsc::test
