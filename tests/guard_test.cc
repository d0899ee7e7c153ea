// SIGBUS under mmap: a file truncated while mapped must give a dsc::Error naming the file and sample,
// not kill the process, and SIGBUS handlers of others must keep working in either install order.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csetjmp>
#include <csignal>
#include <filesystem>
#include <thread>

#include "format/checksum.h"
#include "format/error.h"
#include "format/layout.h"
#include "kernels/jpeg_codec.h"
#include "reader/dataset.h"
#include "reader/decode_rgb.h"
#include "reader/file_source.h"
#include "reader/loader.h"
#include "reader/mmap_guard.h"
#include "tests/test_util.h"
#include "writer/build.h"

namespace dsc::test {
namespace {

// A 3-page file mapped whole, then truncated to one page: pages 1 and 2 are lost.
struct LostPages {
  std::string path;
  uint8_t* map = nullptr;
  size_t size = 3 * 4096;
  explicit LostPages(bool register_it = true) {
    path = ScratchDir("-guard") + "/m.bin";
    std::vector<uint8_t> bytes(size, 1);
    WriteFile(path, bytes);
    int fd = ::open(path.c_str(), O_RDWR);
    map = static_cast<uint8_t*>(::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0));
    EXPECT_NE(map, MAP_FAILED);
    EXPECT_EQ(::ftruncate(fd, 4096), 0);
    ::close(fd);
    if (register_it) {
      EXPECT_TRUE(mmap_guard::Register(map, size));
    }
  }
  ~LostPages() {
    mmap_guard::Unregister(map);
    ::munmap(map, size);
  }
  uint8_t Touch(size_t off) const { return *static_cast<volatile const uint8_t*>(map + off); }
};

TEST(MmapGuard, FaultInARegisteredMappingReturnsFalse) {
  LostPages m;
  int sum = 0;
  EXPECT_TRUE(mmap_guard::RunGuarded([&] { sum += m.Touch(0); }));
  EXPECT_EQ(sum, 1);
  EXPECT_FALSE(mmap_guard::RunGuarded([&] { sum += m.Touch(2 * 4096 + 5); }));
  // Nested: the inner region catches, the outer goes on; and SIGBUS is unblocked again afterwards.
  bool inner = true;
  EXPECT_TRUE(mmap_guard::RunGuarded([&] { inner = mmap_guard::RunGuarded([&] { sum += m.Touch(4096); }); }));
  EXPECT_FALSE(inner);
  EXPECT_FALSE(mmap_guard::RunGuarded([&] { sum += m.Touch(4096); }));
  EXPECT_THROW((void)mmap_guard::RunGuarded([&] { throw Error("passes through"); }), Error);
  EXPECT_FALSE(mmap_guard::RunGuarded([&] { sum += m.Touch(4096); }));
}

TEST(MmapGuard, ManyThreadsFaultAtOnce) {
  LostPages m;
  std::atomic<int> caught{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 200; ++i)
        if (!mmap_guard::RunGuarded([&] { (void)m.Touch(4096 + size_t(i)); })) ++caught;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(caught.load(), 800);
}

// Another library's handler, e.g. Python's faulthandler: records the fault and jumps to `g_other_env`.
sigjmp_buf g_other_env;
volatile sig_atomic_t g_other_calls = 0;
void OtherHandler(int) {
  g_other_calls = g_other_calls + 1;
  siglongjmp(g_other_env, 1);
}
void InstallOther() {
  struct sigaction sa = {};
  sa.sa_handler = OtherHandler;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, nullptr);
}
void Unblock() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGBUS);
  pthread_sigmask(SIG_UNBLOCK, &s, nullptr);
}

// Each order runs in a fresh process (threadsafe death-test style re-executes the binary), so no
// earlier test has installed our handler yet.
TEST(MmapGuardDeathTest, OursThenAnotherTheLaterOneTakesPrecedence) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        LostPages m;  // installs ours
        InstallOther();
        static bool returned = false;  // static: survives the other handler's longjmp
        if (sigsetjmp(g_other_env, 0) == 0) returned = !mmap_guard::RunGuarded([&] { (void)m.Touch(4096); });
        std::_Exit(g_other_calls == 1 && !returned ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(MmapGuardDeathTest, AnotherThenOursChainsForeignFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        InstallOther();
        LostPages m;          // installs ours, chaining to the other
        LostPages foreign(false);  // not registered: faults there are not ours even inside a region
        static int ok = 0;  // static: survives the other handler's longjmp
        if (!mmap_guard::RunGuarded([&] { (void)m.Touch(4096); }) && g_other_calls == 0) ++ok;
        if (sigsetjmp(g_other_env, 0) == 0) (void)m.Touch(4096);  // unguarded
        Unblock();
        if (g_other_calls == 1) ++ok;
        if (sigsetjmp(g_other_env, 0) == 0) (void)mmap_guard::RunGuarded([&] { (void)foreign.Touch(4096); });
        Unblock();
        if (g_other_calls == 2) ++ok;
        std::_Exit(ok == 3 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(MmapGuardDeathTest, UnguardedFaultStillKillsByDefault) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        LostPages m;
        (void)m.Touch(4096);
        std::_Exit(0);
      },
      [](int status) {
#ifdef DSC_EXACT_HEAP_SOURCE  // sanitizer builds: the sanitizer's SIGBUS handler (the previous one) reports and exits
        return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
#else
        return WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS;
#endif
      },
      "");
}

// A real dsc file truncated to its header page while open.
class Truncated : public ::testing::Test {
 protected:
  void SetUp() override {
#ifdef DSC_EXACT_HEAP_SOURCE
    GTEST_SKIP() << "sanitizer/fuzz builds read files into the heap: nothing is mapped";
#endif
    dir_ = ScratchDir();
    writer::BuildOptions o;
    o.log = [](const std::string&) {};
    o.block_size = 16384;
    writer::Build(SubsetTree(4), dir_ + "/f.beton", o);
  }
  std::string Copy(const std::string& name) {
    std::filesystem::copy_file(dir_ + "/f.beton", dir_ + "/" + name);
    return dir_ + "/" + name;
  }
  static void Cut(const std::string& path) { std::filesystem::resize_file(path, 4096); }
  static void ExpectLost(const std::string& what, const std::string& path) {
    EXPECT_NE(what.find(path + ": sample "), std::string::npos) << what;
    EXPECT_NE(what.find("no longer readable (file truncated or I/O error)"), std::string::npos) << what;
  }
  std::string dir_;
};

TEST_F(Truncated, DecodeAndVerifiedReadsThrow) {
  for (bool verify : {false, true}) {
    const std::string path = Copy(verify ? "v.beton" : "p.beton");
    Dataset ds(path, {.verify = verify});
    Cut(path);
    kernels::JpegCodec codec;
    std::vector<uint8_t> scratch, rgb;
    for (uint64_t i : {uint64_t(0), ds.size() - 1}) {
      try {
        DecodeSampleRGB(ds, i, &codec, &scratch, &rgb);
        ADD_FAILURE() << "sample " << i << " decoded from a truncated file";
      } catch (const Error& e) {
        ExpectLost(e.what(), path);
      }
    }
  }
}

// Opening reads the footer, metadata and index through the mapping: a file cut between mmap and those
// reads is an error naming it, not a dead process.
TEST_F(Truncated, OpeningAMappingThatShrankThrows) {
  const std::string path = Copy("o.beton");
  std::unique_ptr<format::ByteSource> src = OpenMmapSource(path);
  Cut(path);
  try {
    Dataset ds(std::move(src), {});
    FAIL() << "opened a file truncated to its header page";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(path + ": ", 0), 0u) << what;
    EXPECT_NE(what.find("no longer readable while opening it"), std::string::npos) << what;
  }
}

TEST_F(Truncated, LoaderWorkersThrow) {
  const std::string path = Copy("l.beton");
  LoaderOptions o = LoaderOptions::CifarTest();
  o.batch_size = 8;
  o.threads = 2;
  Loader l(path, o);
  Cut(path);
  try {
    for (const Batch& b : l.epoch(0)) (void)b;
    FAIL() << "an epoch over a truncated file completed";
  } catch (const Error& e) {
    ExpectLost(e.what(), path);
  }
}

// The loader's SampleProcessor: an index entry claiming 65535x65535 (checksums recomputed) must be
// refused by the pixel limit, and with the limit raised by the zstd frame's own size, before the
// 12.9 GB decode buffer is allocated.
TEST(HostileIndex, LoaderRefusesBeforeAllocating) {
  using namespace dsc::format;
  auto dir = ScratchDir();
  writer::BuildOptions o;
  o.log = [](const std::string&) {};
  o.encode.encoding = "raw-zstd";
  writer::Build(SubsetTree(1), dir + "/z.beton", o);
  ForgeDimensions(dir + "/z.beton", dir + "/bad.beton", 3, 65535, 65535);
  struct rusage before = {};
  getrusage(RUSAGE_SELF, &before);
  for (uint64_t limit : {uint64_t(0), uint64_t(1) << 40}) {
    LoaderOptions lo = LoaderOptions::CifarTest();
    lo.augment.crop = kernels::CropMode::kCenter;  // mixed sizes need a crop
    lo.augment.out_w = lo.augment.out_h = 32;
    lo.batch_size = 10;
    lo.threads = 2;
    lo.order = Order::kSequential;
    if (limit) lo.max_pixels = limit;
    Loader l(dir + "/bad.beton", lo);
    try {
      for (const Batch& batch : l.epoch(0)) (void)batch;
      FAIL() << "loaded a 65535x65535 claim";
    } catch (const Error& err) {
      const std::string what = err.what();
      EXPECT_NE(what.find(dir + "/bad.beton: sample 3: "), std::string::npos) << what;
      EXPECT_NE(what.find(limit ? "zstd frame size disagrees" : "over the limit"), std::string::npos) << what;
    }
  }
  struct rusage after = {};
  getrusage(RUSAGE_SELF, &after);
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 512 * 1024) << "KiB of peak RSS growth";
}

// An index entry saying 1 channel over a colour JPEG (checksums recomputed) decoded as RGB unreported,
// in the loader and in every GPU-decoder path's CPU fallback alike.
TEST(HostileIndex, ChannelsThatDisagreeWithTheJpegAreNamed) {
  auto dir = ScratchDir();
  writer::BuildOptions o;
  o.log = [](const std::string&) {};
  writer::Build(SubsetTree(1), dir + "/j.beton", o);
  ForgeChannels(dir + "/j.beton", dir + "/bad.beton", 4, 1);
  for (bool gpu : {false, true}) {
    SCOPED_TRACE(gpu ? "decoder gpu" : "decoder cpu");
    LoaderOptions lo = LoaderOptions::CifarTest();
    lo.batch_size = 5;
    lo.order = Order::kSequential;
    if (gpu) {
      lo.defer_augment = true;
      lo.dtype = DType::kUint8;
      lo.layout = Layout::kNHWC;
      lo.decoder = LoaderOptions::Decoder::kGpu;
    }
    Loader l(dir + "/bad.beton", lo);
    try {
      for (const Batch& batch : l.epoch(0)) (void)batch;
      FAIL() << "loaded a 1-channel entry over a colour JPEG";
    } catch (const Error& err) {
      const std::string what = err.what();
      EXPECT_NE(what.find(dir + "/bad.beton: sample 4: "), std::string::npos) << what;
      EXPECT_NE(what.find("JPEG has 3 component(s), index says 1 channel(s)"), std::string::npos) << what;
    }
  }
  std::string out;
  EXPECT_EQ(RunDsc("verify --decode " + dir + "/bad.beton", &out), 1) << out;
  EXPECT_NE(out.find("sample 4: JPEG has 3 component(s), index says 1 channel(s)"), std::string::npos) << out;
  EXPECT_EQ(RunDsc("verify --decode " + dir + "/j.beton", &out), 0) << out;
}

// Without a crop the batch's image size is sample 0's: a forged 65535x65535 there was reported as a
// batch_size OptionError ("would take 1376214 MiB") naming neither the file nor the sample.
TEST(HostileIndex, AHugeFirstSampleIsNamedNotTheBatchSize) {
  auto dir = ScratchDir();
  writer::BuildOptions o;
  o.log = [](const std::string&) {};
  writer::Build(SubsetTree(1), dir + "/j.beton", o);
  ForgeDimensions(dir + "/j.beton", dir + "/bad.beton", 0, 65535, 65535);
  for (uint64_t i = 1; i < 10; ++i) ForgeDimensions(dir + "/bad.beton", dir + "/bad.beton", i, 65535, 65535);  // one size
  LoaderOptions lo = LoaderOptions::CifarTest();
  lo.batch_size = 4;
  try {
    Loader l(dir + "/bad.beton", lo);
    FAIL() << "opened a file whose sample 0 claims 65535x65535";
  } catch (const OptionError& e) {
    FAIL() << "blamed an option: " << e.what();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/bad.beton: sample 0 is 65535x65535, more than max_pixels"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dsc::test
