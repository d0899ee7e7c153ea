// quasi_random's block readahead and drop-behind (reader/readahead.h) on real CIFAR-10 bytes: batches
// identical to reading without it, each rank asks storage for about 1/W of the file, and dropping the
// file's pages between epochs changes nothing but where the bytes come from.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <stdexcept>
#include <filesystem>
#include <thread>

#include "reader/dataset.h"
#include "reader/loader.h"
#include "reader/order.h"
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

// Which of [off, off + len)'s pages of the file are in the page cache (mincore on a mapping of our own).
std::vector<bool> CachedPages(const std::string& path, uint64_t off, uint64_t len) {
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const uint64_t begin = off / page * page, end = (off + len + page - 1) / page * page;
  std::vector<bool> out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  void* m = ::mmap(nullptr, end - begin, PROT_READ, MAP_SHARED, fd, off_t(begin));
  ::close(fd);
  if (m == MAP_FAILED) return out;
  std::vector<unsigned char> in((end - begin) / page);
  if (::mincore(m, end - begin, in.data()) == 0)
    for (unsigned char c : in) out.push_back(c & 1);
  ::munmap(m, end - begin);
  return out;
}

// The file's pages in the page cache, in bytes.
uint64_t CachedBytes(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  const std::vector<bool> in = CachedPages(path, 0, uint64_t(st.st_size));
  return uint64_t(std::count(in.begin(), in.end(), true)) * uint64_t(::sysconf(_SC_PAGESIZE));
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

// The padding that ends a quasi_random epoch repeats the first window's samples. Their blocks must be
// read again at the end, not held from the first window on: held all epoch, they filled the read-ahead
// window and nothing more was asked for (found by an audit: with 4 MiB blocks and batch 512, the
// readahead asked for 17 of 66 MB per epoch, against all of it with batch 500).
TEST(Readahead, PaddingReadsTheFirstBlocksAgainInsteadOfHoldingThemAllEpoch) {
  Dataset ds(RawFile());
  OrderOptions o;
  o.order = Order::kQuasiRandom;
  o.batch_size = 32;  // 600 samples: 19 batches, the last with 8 padding samples
  const EpochPlan plan = PlanEpoch(ds.view(), o, 3);
  ASSERT_EQ(plan.batches, 19u);
  ASSERT_EQ(plan.padding.back(), 1);
  const auto uses = BlockReadahead::PlanUses(ds, plan, 0);
  const uint64_t real = uint64_t(std::find(plan.padding.begin(), plan.padding.end(), 1) - plan.padding.begin());
  uint64_t window = 0;  // the longest shuffle window, in batches
  for (size_t w = 0; w < plan.window_starts.size(); ++w) {
    const uint64_t end = w + 1 < plan.window_starts.size() ? plan.window_starts[w + 1] : real;
    window = std::max<uint64_t>(window, (end - plan.window_starts[w] + 31) / 32 + 1);
  }
  ASSERT_GT(window, 0u);
  ASSERT_LT(2 * window, plan.batches - 1) << "too few windows to tell a span from the whole epoch";
  // Every batch's blocks are inside a span of theirs, and no span outlasts a window by much.
  for (uint64_t pos = 0; pos < plan.samples.size(); ++pos) {
    const uint32_t block = ds.entry(plan.samples[pos]).block;
    const uint64_t k = pos / 32;
    bool covered = false;
    for (const auto& u : uses) covered |= u.block == block && u.first <= k && k <= u.last;
    EXPECT_TRUE(covered) << "block " << block << " of batch " << k;
  }
  std::vector<int> spans(ds.view().block_count(), 0);
  for (const auto& u : uses) {
    EXPECT_LE(u.last - u.first, 2 * window) << "block " << u.block << ": batches " << u.first << "-" << u.last;
    ++spans[u.block];
  }
  EXPECT_GT(std::count(spans.begin(), spans.end(), 2), 0);  // the padding's blocks: read again at the end
  EXPECT_EQ(std::count_if(spans.begin(), spans.end(), [](int n) { return n > 2; }), 0);
  for (size_t i = 1; i < uses.size(); ++i) EXPECT_LE(uses[i - 1].first, uses[i].first);
  // From a later batch on (a resumed epoch), nothing before it.
  for (const auto& u : BlockReadahead::PlanUses(ds, plan, 10)) EXPECT_GE(u.first, 10u);
}

struct ColdRun {
  uint64_t advised = 0, blocks = 0;
  uint32_t tail_only = 0;  // blocks whose only cached page after the epoch is their last one (not the last batches')
};

// A cold epoch, the consumer slow enough for the readahead thread to answer each release: the bytes
// asked for, and the blocks left with only their last page cached.
ColdRun RunCold(uint64_t budget, uint64_t ahead, uint32_t prefetch) {
  LoaderOptions o = LoaderOptions::CifarTrain();
  o.order = Order::kQuasiRandom;
  o.batch_size = 32;  // 19 batches, the last padded
  o.cache_budget = budget;
  o.readahead_bytes = ahead;
  o.prefetch = prefetch;
  o.threads = 1;
  o.collect_stats = true;
  Loader l(RawFile(), o);
  ColdRun r;
  for (uint32_t b = 0; b < l.dataset().view().block_count(); ++b) r.blocks += l.dataset().view().block(b).size;
  DropCachedPages(l.dataset());
  std::vector<std::vector<uint32_t>> batches;
  for (const Batch& b : l.epoch(1)) {
    batches.emplace_back(b.indices, b.indices + b.size);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  r.advised = l.stats().advised_bytes;
  // The workers read the last prefetch + 1 batches before their blocks' turn in the readahead may
  // come (the epoch ends first): pages they fault there are theirs, not left behind by a drop.
  std::vector<bool> late(l.dataset().view().block_count(), false);
  for (size_t k = batches.size() > prefetch + 1 ? batches.size() - prefetch - 1 : 0; k < batches.size(); ++k)
    for (uint32_t i : batches[k]) late[l.dataset().entry(i).block] = true;
  for (uint32_t b = 0; b < l.dataset().view().block_count(); ++b) {
    if (late[b]) continue;
    const auto& blk = l.dataset().view().block(b);
    const std::vector<bool> in = CachedPages(RawFile(), blk.offset, blk.size);
    r.tail_only += in.size() > 1 && in.back() && std::count(in.begin(), in.end(), true) == 1;
  }
  return r;
}

// The readahead keeps asking for blocks to the end of the epoch: the padding's blocks (the first
// window's) no longer fill its window from the first batch on.
TEST(Readahead, ColdEpochAsksForEveryBlock) {
#ifdef DSC_EXACT_HEAP_SOURCE
  GTEST_SKIP() << "sanitizer/fuzz builds read files into the heap: nothing is mapped";
#endif
  // A window of 8 blocks against shuffle windows of ~6 (4 batches of 32 x 3 KiB samples).
  const ColdRun r = RunCold(16 * 65536, 8 * 65536, 3);
  EXPECT_GE(r.advised, r.blocks * 9 / 10) << "of " << r.blocks << " bytes of blocks";
  EXPECT_LE(r.advised, r.blocks * 3 / 2);
}

// A block dropped behind leaves no page in the cache: its last, partial one goes too (it used to
// stay, a page per block of the file, whatever the budget).
TEST(Readahead, DroppedBlocksLeaveNoPageBehind) {
#ifdef DSC_EXACT_HEAP_SOURCE
  GTEST_SKIP() << "sanitizer/fuzz builds read files into the heap: nothing is mapped";
#endif
  const ColdRun r = RunCold(8 * 65536, 0, 1);
  EXPECT_EQ(r.tail_only, 0u);
}

// Workers run up to the ring's size ahead of the consumer, which paces the read-ahead window. A page
// they faulted before its block was asked for brought in the kernel's read-around (read_ahead_kb: 8
// MiB on this VM, the whole of this file), outside the budget: rank 3 of 8 read 2x its share from
// storage, and one rank on 786 KiB samples 1.3x the file per epoch. Now the ring's blocks are always
// asked for and a worker waits for its batch's (BlockReadahead::Need): storage reads what the
// readahead asked for, and each rank about 1/W of the file.
TEST(Readahead, ColdEpochReadsFromStorageOnlyWhatTheReadaheadAskedFor) {
#ifdef DSC_EXACT_HEAP_SOURCE
  GTEST_SKIP() << "sanitizer/fuzz builds read files into the heap: nothing is mapped";
#endif
  if (StorageReadBytes() == 0) {
    std::vector<uint8_t> probe(4096);
    const int fd = ::open(RawFile().c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    const ssize_t got = ::pread(fd, probe.data(), probe.size(), 0);
    ::close(fd);
    ASSERT_EQ(got, ssize_t(probe.size()));
    if (StorageReadBytes() == 0) GTEST_SKIP() << "/proc/self/io counts no reads here";
  }
  struct stat st {};
  ASSERT_EQ(::stat(RawFile().c_str(), &st), 0);
  const double file = double(st.st_size);
  for (uint32_t world : {1u, 4u}) {
    const uint32_t rank = world - 1;
    LoaderOptions o = LoaderOptions::CifarTrain();
    o.order = Order::kQuasiRandom;
    o.global_batch_size = 16 * world;
    o.rank = rank;
    o.world_size = world;
    o.cache_budget = 2 * 65536;  // two blocks: dropped behind and read ahead all through the epoch
    o.readahead_bytes = 65536;   // a window of one block, far shorter than the ring's 4 batches
    o.prefetch = 3;
    o.threads = 2;
    o.collect_stats = true;
    Loader l(RawFile(), o);
    for (uint64_t epoch = 0; epoch < 2; ++epoch) {
      DropCachedPages(l.dataset());
      const uint64_t advised0 = l.stats().advised_bytes, read0 = StorageReadBytes();
      uint64_t samples = 0;
      for (const Batch& b : l.epoch(epoch)) samples += b.size;
      const uint64_t read = StorageReadBytes() - read0, advised = l.stats().advised_bytes - advised0;
      EXPECT_GT(samples, 0u);
      EXPECT_GT(advised, 0u);
      // Slack: a block's pages the kernel dropped between its advice and its read (memory pressure).
      EXPECT_LE(read, advised + 2 * 65536) << "rank " << rank << " of " << world << ", epoch " << epoch;
      EXPECT_LE(double(read), 1.25 * file / world) << "rank " << rank << " of " << world << ", epoch " << epoch;
    }
  }
}

// Descriptors open in this process (unused where sanitizers skip the test below).
[[maybe_unused]] int OpenDescriptors() {
  const std::filesystem::directory_iterator fds("/proc/self/fd");
  return int(std::distance(begin(fds), end(fds)));
}

TEST(Readahead, ThreadsThatCannotStartAreAnErrorNotAnAbortOrHang) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizer runtimes reserve terabytes of address space: no address-space limit applies";
#else
  // A loader whose threads could not all start (an address-space or process limit) aborted the process
  // ("terminate called without an active exception") or hung destroying a condition variable its
  // started threads waited on; a readahead thread that could not start left its descriptor open.
  // 0: the error named the threads, with no descriptor left behind.
  const std::string file = RawFile();  // built here, not in the limited child
  auto attempt = [&](uint64_t headroom, int threads, const char* expect) {
    return RunForked(30, [&] {
      LoaderOptions o = LoaderOptions::CifarTrain();
      o.order = Order::kQuasiRandom;
      o.global_batch_size = 32;
      o.cache_budget = 2 * 65536;
      o.threads = threads;
      Dataset warm(file);  // the file's first open (and its allocations) before counting descriptors
      const int fds = OpenDescriptors();
      // Thread stacks glibc kept from earlier threads need no address space: parked threads hold them
      // (and a few new ones) so that the loader's threads need new stacks.
      std::promise<void> go;
      std::shared_future<void> gone = go.get_future().share();
      std::vector<std::thread> parked;
      for (int i = 0; i < 16; ++i) parked.emplace_back([gone] { gone.wait(); });
      int rc = 0;
      try {
        if (!LimitAddressSpace(headroom)) throw std::runtime_error("no limit");
        Loader l(file, o);
        rc = 3;  // every thread started: the limit was too loose to show anything
      } catch (const Error& e) {
        const bool named = std::string(e.what()).find(expect) != std::string::npos;
        if (!named) std::fprintf(stderr, "said: %s\n", e.what());
        rc = named ? 0 : 4;
      } catch (...) {
        rc = 5;
      }
      if (rc == 0 && OpenDescriptors() != fds) rc = 6;
      go.set_value();
      for (auto& t : parked) t.join();
      return rc;
    });
  };
  const char* codes = "-1: hung; 3: all threads started; 4: another error; 5: not a dsc::Error; 6: a descriptor left open; 128+: a signal";
  EXPECT_EQ(attempt(48 << 20, 64, "cannot start the loader's 64 threads"), 0) << codes;
  EXPECT_EQ(attempt(4 << 20, 1, "cannot start the readahead thread"), 0) << codes;  // room for the loader's mapping, not a stack
#endif
}

}  // namespace
}  // namespace dsc::test
