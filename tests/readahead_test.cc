// quasi_random's block readahead and drop-behind (reader/readahead.h) on real CIFAR-10 bytes: batches
// identical to reading without it, each rank asks storage for about 1/W of the file, and dropping the
// file's pages between epochs changes nothing but where the bytes come from.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

Epoch TwoEpochs(uint64_t budget, uint32_t rank, uint32_t world, bool cold, int epochs = 2) {
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
  for (uint64_t epoch = 0; epoch < uint64_t(epochs); ++epoch) {
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

// The file's pages in the page cache, by mincore on a mapping of our own.
uint64_t CachedBytes(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  struct stat st {};
  ::fstat(fd, &st);
  const size_t size = size_t(st.st_size), page = size_t(::sysconf(_SC_PAGESIZE));
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) return 0;
  std::vector<unsigned char> in((size + page - 1) / page);
  uint64_t cached = 0;
  if (::mincore(m, size, in.data()) == 0)
    for (unsigned char c : in) cached += (c & 1) ? page : 0;
  ::munmap(m, size);
  return cached;
}

// A file that fits in the budget is read from storage once: the readahead drops nothing behind, so the
// next epochs ask the kernel for nothing and find every page still cached; a cold drop between epochs
// (dsc bench --cold) is noticed, and the blocks are asked for again.
TEST(Readahead, AFileWithinTheBudgetStaysCachedAcrossEpochs) {
  struct stat st {};
  ASSERT_EQ(::stat(RawFile().c_str(), &st), 0);
  const uint64_t file = uint64_t(st.st_size);
  const Epoch plain = TwoEpochs(0, 0, 1, false, 3);
  const Epoch warm = TwoEpochs(4 * file, 0, 1, false, 3);
  ASSERT_EQ(plain.indices, warm.indices);
  EXPECT_TRUE(plain.images == warm.images);
  // Each block is asked for once in three epochs (the payload is most of the file); dropping behind
  // and asking again each epoch would give about 3x the file. The slack: a block not wholly resident
  // when an epoch starts is rightly asked for again (seen once, under TSan in CI: 1.05x; which pages
  // were missing was not caught).
  EXPECT_GT(warm.advised, file / 2);
  EXPECT_LE(warm.advised, file + file / 4);
  EXPECT_GE(CachedBytes(RawFile()), file * 9 / 10);
  // Dropped before every epoch: the blocks are asked for again.
  const Epoch cold = TwoEpochs(4 * file, 0, 1, true, 3);
  EXPECT_TRUE(plain.images == cold.images);
  EXPECT_GT(cold.advised, file);
}

}  // namespace
}  // namespace dsc::test
