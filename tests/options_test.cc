// Loader option validation on a real CIFAR-10 file: each bad option is an OptionError at Loader
// construction naming the option (never a crash, an overflow or NaN pixels later), the edge values
// that are valid still load, and `dsc bench` exits 2 on a bad flag value.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "reader/loader.h"
#include "tests/test_util.h"
#include "writer/build.h"

namespace dsc::test {
namespace {

const std::string& File() {
  static std::string f = [] {
    writer::BuildOptions o;
    o.log = [](const std::string&) {};
    const std::string out = ScratchDir("-options") + "/cifar.beton";
    writer::Build(SubsetTree(2), out, o);  // 20 real 32x32 JPEGs
    return out;
  }();
  return f;
}

LoaderOptions Small(LoaderOptions o = LoaderOptions::CifarTrain()) {
  o.batch_size = 8;
  o.threads = 2;
  return o;
}

// Builds a loader and runs an epoch: before validation existed, some of these options were accepted
// and then failed (or wrote out of bounds) only while decoding.
void ExpectRejected(const LoaderOptions& o, const std::string& option, const std::string& value) {
  SCOPED_TRACE(option + " = " + value);
  try {
    Loader l(File(), o);
    for (const Batch& b : l.epoch(0)) (void)b;
    ADD_FAILURE() << option << " = " << value << " was accepted";
  } catch (const OptionError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(option), std::string::npos) << what;
    EXPECT_NE(what.find(value), std::string::npos) << what;
  }
}

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(Options, TranslateAtLeastTheImageSide) {
  for (int t : {32, 40, 100}) {
    LoaderOptions o = Small();
    o.augment.translate = t;
    ExpectRejected(o, "augment.translate", std::to_string(t));
  }
  LoaderOptions o = Small();
  o.augment.translate = -1;
  ExpectRejected(o, "augment.translate", "-1");
  // A crop's output size is the side that counts.
  o = Small(LoaderOptions::ImagenetTrain());
  o.augment.out_w = 16;
  o.augment.out_h = 24;
  o.augment.translate = 16;
  ExpectRejected(o, "augment.translate", "16");
}

TEST(Options, Cutout) {
  LoaderOptions o = Small();
  o.augment.cutout = 33;
  ExpectRejected(o, "augment.cutout", "33");
  o.augment.cutout = -4;
  ExpectRejected(o, "augment.cutout", "-4");
}

TEST(Options, RandomResizedCropRanges) {
  struct Case {
    float smin, smax, rmin, rmax;
    const char* option;
    const char* value;
  } cases[] = {
      {0.9f, 0.5f, 0.75f, 1.25f, "augment.scale_max", "0.5"},
      {0, 1, 0.75f, 1.25f, "augment.scale_min", "0"},
      {-0.1f, 1, 0.75f, 1.25f, "augment.scale_min", "-0.1"},
      {kNan, 1, 0.75f, 1.25f, "augment.scale_min", "nan"},
      {0.1f, kNan, 0.75f, 1.25f, "augment.scale_max", "nan"},
      {0.1f, kInf, 0.75f, 1.25f, "augment.scale_max", "inf"},
      {0.1f, 1, 2, 1, "augment.ratio_max", "1"},
      {0.1f, 1, 0, 1, "augment.ratio_min", "0"},
      {0.1f, 1, -1, 1, "augment.ratio_min", "-1"},
      {0.1f, 1, 0.75f, kInf, "augment.ratio_max", "inf"},
      {0.1f, 1, kNan, 1, "augment.ratio_min", "nan"},
  };
  for (const Case& c : cases) {
    LoaderOptions o = Small(LoaderOptions::ImagenetTrain());
    o.augment.out_w = o.augment.out_h = 24;
    o.augment.scale_min = c.smin;
    o.augment.scale_max = c.smax;
    o.augment.ratio_min = c.rmin;
    o.augment.ratio_max = c.rmax;
    ExpectRejected(o, c.option, c.value);
  }
}

TEST(Options, CenterRatio) {
  for (float r : {1.5f, 0.0f, -0.5f, kNan, kInf}) {
    LoaderOptions o = Small(LoaderOptions::CifarTest());
    o.augment.crop = kernels::CropMode::kCenter;
    o.augment.out_w = o.augment.out_h = 16;
    o.augment.center_ratio = r;
    std::ostringstream v;
    v << r;
    ExpectRejected(o, "augment.center_ratio", v.str());
  }
}

TEST(Options, OutputSize) {
  LoaderOptions o = Small(LoaderOptions::ImagenetTrain());
  o.augment.out_w = 0;
  o.augment.out_h = 24;
  ExpectRejected(o, "augment.out_w", "0");
  o.augment.out_w = 24;
  o.augment.out_h = -3;
  ExpectRejected(o, "augment.out_h", "-3");
  o.augment.out_w = o.augment.out_h = 100000;  // 10^10 pixels per image
  ExpectRejected(o, "augment.out_w x augment.out_h", "100000x100000");
}

TEST(Options, Normalization) {
  LoaderOptions o = Small();
  o.augment.std[1] = 0;
  ExpectRejected(o, "augment.std[1]", "0");
  o = Small();
  o.augment.std[2] = kNan;
  ExpectRejected(o, "augment.std[2]", "nan");
  o = Small();
  o.augment.std[0] = -50;
  ExpectRejected(o, "augment.std[0]", "-50");
  o = Small();
  o.augment.mean[0] = kInf;
  ExpectRejected(o, "augment.mean[0]", "inf");
  // Positive and finite, but 1/std is not: every pixel of the channel became NaN.
  o = Small();
  o.augment.std[0] = 1e-40f;
  ExpectRejected(o, "augment.std[0]", "turns pixel value 0 into a non-finite float");
  o = Small();
  o.augment.mean[2] = 3e38f;
  o.augment.std[2] = 0.5f;
  ExpectRejected(o, "augment.std[2]", "non-finite");
  // Finite as float32, past float16's 65504: float16 batches held +-inf, silently.
  o = Small();
  o.dtype = DType::kFloat16;
  o.augment.std[0] = 0.001f;
  ExpectRejected(o, "augment.std[0]", "beyond float16's 65504");
  o.dtype = DType::kFloat32;
  EXPECT_NO_THROW(ValidateOptions(o));
}

TEST(Options, RanksAndBufferMemory) {
  LoaderOptions o = Small();
  o.world_size = 3;
  o.rank = 3;
  ExpectRejected(o, "rank", "3");  // an OptionError (usage), as the other options
  o = Small();
  o.world_size = 1u << 31;  // planning is O(world_size): bad_alloc or minutes
  ExpectRejected(o, "world_size", std::to_string(1u << 31));
  // Each option within its limit, together more batch buffers than this machine has memory: refused
  // at once (it took 37 s and 4.7 GB of RSS to deliver one batch of a 20-sample file).
  o = Small();
  o.batch_size = 1u << 20;
  o.prefetch = 64;
  ExpectRejected(o, "batch_size", "MiB, more than this machine's");
  // The per-sample arrays count too: buffers whose images alone fit, with them not (1-pixel crops at
  // batch 2^20 took 4.4 GB while the check counted 390 MB).
  o = Small();
  o.batch_size = 1u << 20;
  const uint64_t ram = uint64_t(::sysconf(_SC_PHYS_PAGES)) * uint64_t(::sysconf(_SC_PAGESIZE));
  const uint64_t n = o.prefetch + 1 + o.max_leases;  // the ring and the spares (reader/batch_memory.h)
  const uint64_t images = ram / n - uint64_t(o.batch_size) * kBatchSampleOverhead / 2;
  EXPECT_THROW(CheckBufferMemory(o, images), OptionError);
  EXPECT_NO_THROW(CheckBufferMemory(o, images / 2));
}

TEST(Options, BatchPrefetchThreadsLeases) {
  LoaderOptions o = Small();
  o.batch_size = 0;
  ExpectRejected(o, "batch_size", "0");
  // A global batch too large per rank is named as given (the message named a batch_size of 2^31).
  o.global_batch_size = 1u << 31;
  ExpectRejected(o, "global_batch_size", std::to_string(1u << 31));
  o = Small();
  o.batch_size = 1u << 30;  // 12 TB of float32 batch buffers
  ExpectRejected(o, "batch_size", std::to_string(1u << 30));
  o = Small();
  o.prefetch = 100000;
  ExpectRejected(o, "prefetch", "100000");
  o = Small();
  o.threads = -2;
  ExpectRejected(o, "threads", "-2");
  o = Small();
  o.max_leases = 100000;
  ExpectRejected(o, "max_leases", "100000");
}

// A bad subset is an option error like the others (it was a plain dsc::Error: exit 1, a RuntimeError
// in Python instead of ValueError).
TEST(Options, Subset) {
  LoaderOptions o = Small();
  o.subset = {1, 1};
  ExpectRejected(o, "subset", "sample 1 is listed twice");
  o.subset = {3, 20};
  ExpectRejected(o, "subset", "sample 20 is out of range (the file has 20 samples)");
}

TEST(Options, AllocateNeedsRelease) {
  LoaderOptions o = Small();
  o.allocate = [](size_t n) { return std::aligned_alloc(64, n); };
  ExpectRejected(o, "allocate", "set");
  o = Small();
  o.release = [](void* p) { std::free(p); };
  ExpectRejected(o, "release", "set");
}

TEST(Options, OutputTypes) {
  LoaderOptions o = Small();
  o.dtype = DType::kUint8;
  o.augment.normalize = false;
  ExpectRejected(o, "layout", "NCHW");
  o.layout = Layout::kNHWC;
  o.augment.normalize = true;
  ExpectRejected(o, "augment.normalize", "true");
  o = Small();
  o.defer_augment = true;
  ExpectRejected(o, "defer_augment", "true");
}

// The edges of each valid range still load, and produce finite pixels.
TEST(Options, EdgeValuesLoad) {
  std::vector<LoaderOptions> ok;
  LoaderOptions o = Small();
  o.augment.translate = 31;
  o.augment.cutout = 32;
  o.prefetch = 0;
  ok.push_back(o);
  o = Small(LoaderOptions::CifarTest());
  o.augment.crop = kernels::CropMode::kCenter;
  o.augment.out_w = o.augment.out_h = 20;
  o.augment.center_ratio = 1;
  ok.push_back(o);
  o = Small(LoaderOptions::ImagenetTrain());
  o.augment.out_w = o.augment.out_h = 24;
  o.augment.scale_min = o.augment.scale_max = 0.5f;
  o.augment.ratio_min = o.augment.ratio_max = 1;
  o.allocate = [](size_t n) { return std::aligned_alloc(64, n); };
  o.release = [](void* p) { std::free(p); };
  ok.push_back(o);
  for (const LoaderOptions& opt : ok) {
    Loader l(File(), opt);
    uint64_t batches = 0;
    for (const Batch& b : l.epoch(0)) {
      const float* px = b.images_as<float>();
      for (size_t i = 0; i < b.image_bytes() / 4 * b.size; ++i) ASSERT_TRUE(std::isfinite(px[i]));
      ++batches;
    }
    EXPECT_EQ(batches, l.batches_per_epoch());
  }
}

TEST(Options, BenchExitsTwoOnBadValues) {
  std::string out;
  EXPECT_EQ(RunDsc("bench " + File() + " --batch-size 0 --epochs 1", &out), 2) << out;
  EXPECT_NE(out.find("batch_size"), std::string::npos) << out;
  EXPECT_EQ(RunDsc("bench " + File() + " --prefetch 5000 --epochs 1", &out), 2) << out;
  EXPECT_NE(out.find("prefetch"), std::string::npos) << out;
  EXPECT_EQ(RunDsc("bench " + File() + " --threads=-3 --epochs 1", &out), 2) << out;
  EXPECT_NE(out.find("threads"), std::string::npos) << out;
  for (const std::string t : {"abc", "3x", "auto:", "auto:3x", "auto3"}) {  // "3x" ran 3 threads; "abc" said only "stoi"
    EXPECT_EQ(RunDsc("bench " + File() + " --epochs 1 --threads " + t, &out), 2) << t << ": " << out;
    EXPECT_NE(out.find("--threads " + t + ": expected N, auto or auto:N"), std::string::npos) << out;
  }
  EXPECT_EQ(RunDsc("bench " + File() + " --epochs 0", &out), 2) << out;  // it ran one epoch
  EXPECT_NE(out.find("--epochs must be at least 1"), std::string::npos) << out;
  EXPECT_EQ(RunDsc("bench " + File() + " --epochs 1 --consumer-ms=-5", &out), 2) << out;
  EXPECT_NE(out.find("--consumer-ms"), std::string::npos) << out;
  // Bad input (not a bad option) is still exit 1.
  EXPECT_EQ(RunDsc("bench " + File() + ".missing --epochs 1", &out), 1) << out;
}

}  // namespace
}  // namespace dsc::test
