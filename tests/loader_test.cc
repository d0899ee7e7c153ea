// The loader end to end on real CIFAR-10 bytes: pixels against libjpeg-turbo's own decode and naive
// augmentation references, determinism across thread counts, resume, sharding, errors, early exit,
// and bounded memory.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include <turbojpeg.h>

#include "format/error.h"
#include "kernels/augment.h"
#include "kernels/resample.h"
#include "reader/huge_pages.h"
#include "reader/loader.h"
#include "reader/trace.h"
#include "tests/test_util.h"
#include "writer/build.h"

namespace dsc::test {
namespace {

// A real time-out for tests whose failure mode is a hang: a watcher thread aborts the whole process,
// with a message, if the guarded scope has not ended by the deadline. (Waiting on a std::async future
// cannot do this: the future's destructor blocks until the hung body returns.)
class Watchdog {
 public:
  Watchdog(std::chrono::seconds limit, std::string what)
      : what_(std::move(what)), thread_([this, limit] {
          std::unique_lock<std::mutex> lock(mu_);
          if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
            std::fprintf(stderr, "watchdog: %s did not finish within %lld s: aborting the test process\n",
                         what_.c_str(), (long long)limit.count());
            std::fflush(stderr);
            std::abort();
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string what_;
  std::thread thread_;  // last: starts once the members it uses exist
};

TEST(WatchdogDeathTest, AbortsAHungScope) {
  // The time-out itself can fire: a scope that outlives its deadline takes the process down.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Watchdog w(std::chrono::seconds(1), "a sleeping body");
        std::this_thread::sleep_for(std::chrono::seconds(30));
      },
      "watchdog: a sleeping body did not finish within 1 s");
}

struct Files {
  std::string jpg, raw, zstd, tree;
};

const Files& Built() {
  static Files f = [] {
    Files f;
    auto dir = ScratchDir("-loader");
    f.tree = SubsetTree(60);  // 600 real images
    writer::BuildOptions o;
    o.block_size = 16384;
    o.log = [](const std::string&) {};
    f.jpg = dir + "/jpg.beton";
    writer::Build(f.tree, f.jpg, o);
    o.encode.encoding = "raw";
    f.raw = dir + "/raw.beton";
    writer::Build(f.tree, f.raw, o);
    o.encode.encoding = "raw-zstd";
    f.zstd = dir + "/zstd.beton";
    writer::Build(f.tree, f.zstd, o);
    return f;
  }();
  return f;
}

// Everything a batch holds, copied out.
struct Copy {
  std::vector<uint8_t> images;
  std::vector<int32_t> labels;
  std::vector<uint32_t> indices;
  std::vector<uint8_t> padding;
  bool operator==(const Copy& o) const {
    return images == o.images && labels == o.labels && indices == o.indices && padding == o.padding;
  }
};

std::vector<Copy> RunEpoch(Loader& l, uint64_t epoch, uint64_t first = 0) {
  std::vector<Copy> out;
  for (const Batch& b : l.epoch(epoch, first)) {
    Copy c;
    const uint8_t* im = static_cast<const uint8_t*>(b.images);
    c.images.assign(im, im + b.image_bytes() * b.size);
    c.labels.assign(b.labels[0], b.labels[0] + b.size);
    c.indices.assign(b.indices, b.indices + b.size);
    c.padding.assign(b.padding, b.padding + b.size);
    out.push_back(std::move(c));
  }
  return out;
}

LoaderOptions Uint8(LoaderOptions o) {
  o.dtype = DType::kUint8;
  o.layout = Layout::kNHWC;
  o.augment.normalize = false;
  return o;
}

// libjpeg-turbo's own decode of sample i: box chroma upsampling (dsc's default) or fancy.
std::vector<uint8_t> Decoded(const Dataset& ds, uint32_t i, bool fancy = false) {
  std::vector<uint8_t> scratch;
  Payload p = ds.ReadPayload(i, &scratch);
  return ReferenceDecode(std::vector<uint8_t>(p.data, p.data + p.size), nullptr, nullptr, fancy ? 0 : TJFLAG_FASTUPSAMPLE);
}

TEST(Loader, PlainDecodeEqualsLibjpegTurbo) {
  // raw and raw-zstd hold libjpeg-turbo's default (fancy) decode, made at build time.
  for (const auto& [file, fancy] : {std::pair{Built().jpg, false}, {Built().jpg, true}, {Built().raw, true}, {Built().zstd, true}}) {
    SCOPED_TRACE(file + (fancy ? " fancy" : " box"));
    LoaderOptions o = Uint8(LoaderOptions::CifarTest());
    o.batch_size = 50;
    o.threads = 2;
    o.fancy_upsampling = fancy;
    Loader l(file, o);
    Dataset ref(Built().jpg);
    uint64_t n = 0;
    for (const Batch& b : l.epoch(0)) {
      for (uint32_t j = 0; j < b.size; ++j) {
        const uint8_t* got = b.images_as<uint8_t>() + j * b.image_bytes();
        auto want = Decoded(ref, b.indices[j], fancy);
        ASSERT_EQ(std::memcmp(got, want.data(), want.size()), 0) << file << " sample " << b.indices[j];
        ASSERT_EQ(b.labels[0][j], ref.label(b.indices[j]));
        ++n;
      }
    }
    EXPECT_EQ(n, 600u);
  }
}

TEST(Loader, FusedPathMatchesTheRgbPathForEveryOutputFormat) {
  // The fused path (planes) and the RGB path with box upsampling are two implementations of the same
  // pixels; crop-free augmentations through both must agree exactly, in every dtype and layout.
  for (auto [dtype, layout] : {std::pair{DType::kFloat32, Layout::kNCHW}, {DType::kFloat32, Layout::kNHWC},
                               {DType::kFloat16, Layout::kNCHW}, {DType::kUint8, Layout::kNHWC}}) {
    LoaderOptions o = LoaderOptions::CifarTrain();
    o.dtype = dtype;
    o.layout = layout;
    if (dtype == DType::kUint8) o.augment.normalize = false;
    o.batch_size = 100;
    o.seed = 21;
    Loader fused(Built().jpg, o);
    auto a = RunEpoch(fused, 0);
    // Same pixels through the generic row path: a 1x1 "crop" of the whole image is not identity
    // geometry, so force the RGB path with a CenterCrop of ratio 1 and the full output size.
    o.augment.crop = kernels::CropMode::kCenter;
    o.augment.center_ratio = 1.0f;
    o.augment.out_w = o.augment.out_h = 32;
    Loader rgb(Built().jpg, o);
    auto b = RunEpoch(rgb, 0);
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) EXPECT_TRUE(a[k] == b[k]) << "batch " << k;
  }
}

TEST(Loader, CifarAugmentationsMatchANaiveReference) {
  // JPEG payloads take the fused path (planes to rows), raw ones the row path: both against the same
  // naive flip / translate / cutout of the stored pixels.
  for (const std::string& file : {Built().jpg, Built().raw}) {
    SCOPED_TRACE(file);
    const bool raw = file == Built().raw;
    LoaderOptions o = Uint8(LoaderOptions::CifarTrain());
    o.batch_size = 64;
    o.seed = 17;
    Loader l(file, o);
    Dataset ds(file);
    for (const Batch& b : l.epoch(2)) {
      for (uint32_t j = 0; j < b.size; ++j) {
        const uint32_t idx = b.indices[j];
        std::vector<uint8_t> scratch, src;
        if (raw) {  // the stored pixels themselves
          Payload pl = ds.ReadPayload(idx, &scratch);
          src.assign(pl.data, pl.data + pl.size);
        } else {
          src = Decoded(ds, idx);  // box upsampling, the loader's default
        }
        kernels::CropRect rect;
        kernels::SampleParams p;
        kernels::MakeParams(o.augment, 32, 32, 17, 2, idx, &rect, &p);
        const uint8_t* got = b.images_as<uint8_t>() + j * b.image_bytes();
        for (int y = 0; y < 32; ++y)
          for (int x = 0; x < 32; ++x) {
            // flip -> translate(fill) -> cutout(fill), written out naively
            int sx = x - p.dx, sy = y - p.dy;
            bool inside = sx >= 0 && sy >= 0 && sx < 32 && sy < 32;
            if (p.flip) sx = 31 - sx;
            bool cut = x >= p.cut_x && x < p.cut_x + 4 && y >= p.cut_y && y < p.cut_y + 4;
            for (int c = 0; c < 3; ++c) {
              uint8_t want = (inside && !cut) ? src[(size_t(sy) * 32 + sx) * 3 + c] : o.augment.fill[c];
              ASSERT_EQ(got[(y * 32 + x) * 3 + c], want) << "sample " << idx << " " << x << "," << y;
            }
          }
      }
    }
  }
}

TEST(Loader, OutputFormatsAgreeWithNormalize) {
  // CIFAR's pad-and-crop (rows written after the augment) and ImageNet's RandomResizedCrop (each row
  // normalised as soon as the resampler makes it), against the uint8 output through kernels::Normalize.
  LoaderOptions train = LoaderOptions::ImagenetTrain();
  train.augment.out_w = train.augment.out_h = 24;
  for (LoaderOptions base : {LoaderOptions::CifarTrain(), train}) {
    base.batch_size = 100;
    base.seed = 3;
    Loader u8(Built().jpg, Uint8(base));
    auto ref = RunEpoch(u8, 1);
    const size_t pixels = size_t(base.augment.out_w) * base.augment.out_h;
    float scale[3], bias[3];
    kernels::NormalizeCoefficients(base.augment, scale, bias);
    for (auto [dtype, layout] : {std::pair{DType::kFloat32, Layout::kNCHW}, {DType::kFloat32, Layout::kNHWC},
                                 {DType::kFloat16, Layout::kNCHW}, {DType::kFloat16, Layout::kNHWC}}) {
      LoaderOptions o = base;
      o.dtype = dtype;
      o.layout = layout;
      Loader l(Built().jpg, o);
      auto got = RunEpoch(l, 1);
      ASSERT_EQ(got.size(), ref.size());
      for (size_t k = 0; k < got.size(); ++k) {
        ASSERT_EQ(got[k].indices, ref[k].indices);
        const size_t n = ref[k].indices.size();
        for (size_t j = 0; j < n; ++j)
          for (size_t c = 0; c < 3; ++c)
            for (size_t i = 0; i < pixels; ++i) {
              const uint8_t v = ref[k].images[j * 3 * pixels + i * 3 + c];
              const size_t pos = j * 3 * pixels + (layout == Layout::kNCHW ? c * pixels + i : i * 3 + c);
              const float want = kernels::Normalize(v, scale[c], bias[c]);
              if (dtype == DType::kFloat32) {
                float f;
                std::memcpy(&f, got[k].images.data() + pos * 4, 4);
                ASSERT_EQ(f, want);
              } else {
                uint16_t h;
                std::memcpy(&h, got[k].images.data() + pos * 2, 2);
                ASSERT_EQ(h, kernels::FloatToHalf(want));
              }
            }
      }
    }
  }
}

TEST(Loader, RandomResizedCropIsTheReferenceResizeOfTheCrop) {
  // The crop path decodes only the crop's region, at the smallest DCT scale k/8 that keeps it at least
  // the output size, then resizes it with Pillow's resampler. Reference: a full decode (TurboJPEG, box
  // upsampling), the crop cut out, kernels::ResampleRgbScalar (the resampler's definition) to the
  // output, mirrored when flipped. Unscaled (k = 8) that is the same arithmetic: exact. Scaled, the
  // IDCT's own downscale replaces part of the resize: a PSNR bound.
  LoaderOptions o = Uint8(LoaderOptions::ImagenetTrain());
  o.augment.out_w = o.augment.out_h = 24;  // smaller than the 32x32 source: DCT scaling kicks in sometimes
  o.batch_size = 40;
  o.seed = 9;
  Loader l(Built().jpg, o);
  Dataset ds(Built().jpg);
  size_t scaled_samples = 0, unscaled_samples = 0;
  double worst_psnr = 1e9;
  for (const Batch& b : l.epoch(0)) {
    for (uint32_t j = 0; j < b.size; ++j) {
      auto full = Decoded(ds, b.indices[j]);
      kernels::CropRect r;
      kernels::SampleParams p;
      kernels::MakeParams(o.augment, 32, 32, 9, 0, b.indices[j], &r, &p);
      int k = 1;  // the decoder's DCT scale (k / 8) for this crop
      while (k < 8 && (r.w * k < 24 * 8 || r.h * k < 24 * 8)) ++k;
      std::vector<uint8_t> crop(size_t(r.w) * r.h * 3), want(24 * 24 * 3);
      for (int y = 0; y < r.h; ++y)
        std::memcpy(&crop[size_t(y) * r.w * 3], &full[(size_t(r.y + y) * 32 + r.x) * 3], size_t(r.w) * 3);
      kernels::ResampleRgbScalar(crop.data(), r.w, r.h, want.data(), 24, 24, kernels::ResampleFilter::kBilinear);
      if (p.flip)
        for (int y = 0; y < 24; ++y)
          for (int x = 0; x < 12; ++x)
            for (int c = 0; c < 3; ++c) std::swap(want[(y * 24 + x) * 3 + c], want[(y * 24 + 23 - x) * 3 + c]);
      const uint8_t* g = b.images_as<uint8_t>() + j * b.image_bytes();
      std::vector<uint8_t> got(g, g + b.image_bytes());
      if (k == 8) {
        ++unscaled_samples;
        ASSERT_EQ(got, want) << "sample " << b.indices[j] << ": without DCT scaling the crop path is the reference";
      } else {
        ++scaled_samples;
        worst_psnr = std::min(worst_psnr, Psnr(got, want));
      }
    }
  }
  std::printf("crop path vs full decode + reference resize: %zu unscaled samples exact, %zu DCT-scaled with PSNR >= %.1f dB\n",
              unscaled_samples, scaled_samples, worst_psnr);
  ASSERT_GT(unscaled_samples, 50u);
  ASSERT_GT(scaled_samples, 50u);
  EXPECT_GE(worst_psnr, 30.0);  // measured 33.2 dB on these 600 images
}

TEST(Loader, IdenticalBatchesForAnyThreadCount) {
  // Enough batches that every thread count wraps the prefetch ring many times, and (quasi-random)
  // enough samples for several shuffle windows, so a scheduling dependence anywhere in the epoch shows.
  for (const auto& file : {Built().jpg, Built().zstd}) {
    for (Order order : {Order::kRandom, Order::kQuasiRandom}) {
      LoaderOptions o = LoaderOptions::CifarTrain();
      o.batch_size = 16;
      o.order = order;
      o.quasi_window = 96;
      o.seed = 5;
      o.threads = 1;
      o.prefetch = 1;
      Loader one(file, o);
      ASSERT_GE(one.batches_per_epoch(), 4u * 7u) << "fewer batches than 4 prefetch rings";
      ASSERT_GE(Dataset(file).size(), 5u * o.quasi_window) << "fewer than 5 quasi-random windows";
      auto a = RunEpoch(one, 4);
      for (int t : {2, 3, 7}) {
        o.threads = t;
        o.prefetch = uint32_t(t);
        Loader many(file, o);
        EXPECT_TRUE(RunEpoch(many, 4) == a) << t << " threads, order " << int(order) << ", " << file;
      }
    }
  }
}

TEST(Loader, StatsAreCompleteWhileTheLastBatchIsHeld) {
  // A consumer may stop at an epoch's last batch without asking past it (Python's zip of two loaders
  // does): stats() then still counts every sample, though the workers add their counts as they go idle.
  LoaderOptions o = LoaderOptions::CifarTrain();
  o.batch_size = 64;
  o.threads = 3;
  o.collect_stats = true;
  Loader l(Built().jpg, o);
  const uint64_t n = l.batches_per_epoch();
  ASSERT_GE(n, 2u);
  for (uint64_t e = 0; e < 8; ++e) {
    l.reset_stats();
    auto range = l.epoch(e);
    uint64_t samples = 0, k = 0;
    for (auto it = range.begin(); it != range.end(); ++it) {
      samples += (*it).size;
      if (++k == n) break;  // hold the last batch
    }
    ASSERT_EQ(k, n);
    EXPECT_EQ(l.stats().samples, samples) << "epoch " << e;
  }
}

TEST(Loader, ResumeEqualsUninterruptedRun) {
  LoaderOptions o = LoaderOptions::CifarTrain();
  o.batch_size = 32;
  o.seed = 77;
  Loader full(Built().jpg, o);
  auto want = RunEpoch(full, 3);
  LoaderState saved;
  {
    Loader first(Built().jpg, o);
    int n = 0;
    for (const Batch& b : first.epoch(3)) {
      (void)b;
      if (++n == 7) break;
    }
    saved = first.state();
  }
  EXPECT_EQ(saved.epoch, 3u);
  EXPECT_EQ(saved.next_batch, 7u);
  LoaderOptions other = o;  // the same run (a different seed is refused: elastic_test.cc)
  other.threads = 1;
  Loader second(Built().jpg, other);
  second.restore(saved);
  std::vector<Copy> rest;
  for (const Batch& b : second.resume()) {
    Copy c;
    c.images.assign(b.images_as<uint8_t>(), b.images_as<uint8_t>() + b.image_bytes() * b.size);
    c.labels.assign(b.labels[0], b.labels[0] + b.size);
    c.indices.assign(b.indices, b.indices + b.size);
    c.padding.assign(b.padding, b.padding + b.size);
    rest.push_back(c);
  }
  ASSERT_EQ(rest.size(), want.size() - 7);
  for (size_t k = 0; k < rest.size(); ++k) EXPECT_TRUE(rest[k] == want[k + 7]) << "batch " << k + 7;
}

TEST(Loader, ShardsCoverTheDatasetOnceAndPaddingIsFlagged) {
  std::vector<int> seen(600, 0);
  uint64_t batches = 0;
  for (uint32_t rank = 0; rank < 3; ++rank) {
    LoaderOptions o = LoaderOptions::CifarTrain();
    o.batch_size = 64;
    o.rank = rank;
    o.world_size = 3;
    o.order = Order::kQuasiRandom;
    Loader l(Built().jpg, o);
    if (rank == 0) batches = l.batches_per_epoch();
    EXPECT_EQ(l.batches_per_epoch(), batches);
    for (const Batch& b : l.epoch(0))
      for (uint32_t j = 0; j < b.size; ++j)
        if (!b.padding[j]) ++seen[b.indices[j]];
  }
  for (int s : seen) ASSERT_EQ(s, 1);
}

// The kernel's flags for the mapping that holds p (the VmFlags line of /proc/self/smaps).
std::string VmFlagsOf(const void* p) {
  std::ifstream f("/proc/self/smaps");
  const unsigned long a = static_cast<unsigned long>(reinterpret_cast<uintptr_t>(p));
  std::string line;
  bool inside = false;
  while (std::getline(f, line)) {
    unsigned long lo = 0, hi = 0;
    char space = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx%c", &lo, &hi, &space) == 3 && space == ' ') inside = lo <= a && a < hi;
    else if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

TEST(Loader, LargeBatchBuffersAreInAdvisedHugePages) {
  LoaderOptions o = LoaderOptions::CifarTest();
  o.batch_size = 512;  // 6 MiB of float32: above the 4 MiB threshold
  Loader l(Built().jpg, o);
  for (const Batch& b : l.epoch(0)) {
    const std::string flags = VmFlagsOf(b.images);
    ASSERT_FALSE(flags.empty()) << "no mapping holds the batch in /proc/self/smaps";
    if (HugePagesWanted()) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(b.images) % kHugePageBytes, 0u);
      EXPECT_NE((flags + " ").find(" hg "), std::string::npos) << flags;
    } else {  // DSC_NO_HUGEPAGES set
      EXPECT_EQ((flags + " ").find(" hg "), std::string::npos) << flags;
    }
    break;
  }
  size_t cap = 0;
  void* p = AllocateHugePages((size_t(3) << 20) + 1, &cap);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(cap, size_t(4) << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugePageBytes, 0u);
  std::memset(p, 1, cap);  // all of it is ours
  std::free(p);
  EXPECT_EQ(AllocateHugePages(SIZE_MAX - 5, &cap), nullptr);  // the rounding would wrap
}

TEST(Loader, PreadBackendMatchesMmap) {
  LoaderOptions o = LoaderOptions::CifarTrain();
  o.batch_size = 128;
  Loader a(Built().jpg, o);
  o.use_pread = true;
  o.verify = true;
  Loader b(Built().jpg, o);
  EXPECT_TRUE(RunEpoch(a, 0) == RunEpoch(b, 0));
}

std::string CorruptCopy(const std::string& file, const std::string& name) {
  auto bytes = ReadFile(file);
  Dataset ds(file);
  const auto e = ds.entry(123);
  for (uint32_t k = 0; k < e.size; k += 3) bytes[e.offset + k] ^= 0x5A;  // garble sample 123
  std::string out = ScratchDir("-" + name) + "/bad.beton";
  WriteFile(out, bytes);
  return out;
}

TEST(Loader, CorruptSampleSurfacesAsAnErrorNamingFileAndSample) {
  const std::string bad = CorruptCopy(Built().jpg, "corrupt");
  Watchdog guard(std::chrono::seconds(120), "Loader.CorruptSampleSurfacesAsAnErrorNamingFileAndSample");
  for (bool verify : {true, false}) {
    LoaderOptions o = LoaderOptions::CifarTest();
    o.batch_size = 50;
    o.verify = verify;
    Loader l(bad, o);
    try {
      for (const Batch& b : l.epoch(0)) (void)b;
      ADD_FAILURE() << "no error with verify=" << verify;
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(bad), std::string::npos) << m;
      EXPECT_NE(m.find(verify ? "checksum mismatch" : "sample 123"), std::string::npos) << m;
      if (verify) {
        EXPECT_NE(m.find("reading sample"), std::string::npos) << m;
      }
    }
    // The loader is still usable afterwards: a later epoch fails the same way, never hangs.
    EXPECT_THROW(for (const Batch& b : l.epoch(1)) (void)b, Error);
  }
}

TEST(Loader, EarlyExitDestructionAndConsumerExceptionsNeverHang) {
  auto run = [] {
    LoaderOptions o = LoaderOptions::CifarTrain();
    o.batch_size = 16;
    o.prefetch = 2;
    o.threads = 3;
    for (int i = 0; i < 20; ++i) {
      Loader l(Built().jpg, o);
      int n = 0;
      for (const Batch& b : l.epoch(uint64_t(i))) {
        (void)b;
        if (++n == i % 5 + 1) break;  // leave at different points
      }
      auto r = l.epoch(uint64_t(i) + 1);  // start and abandon a range, then destroy mid-epoch
      auto it = r.begin();
      (void)it;
      try {
        for (const Batch& b : l.epoch(7)) {
          (void)b;
          throw std::runtime_error("consumer failed");
        }
      } catch (const std::runtime_error&) {
      }
      // Workers are blocked on a full ring now (slow consumer); destruction must still return.
      auto r2 = l.epoch(9);
      auto it2 = r2.begin();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      (void)it2;
    }
    return true;
  };
  Watchdog guard(std::chrono::seconds(120), "Loader.EarlyExitDestructionAndConsumerExceptionsNeverHang");
  EXPECT_TRUE(run());
}

uint64_t AnonRss() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("RssAnon:", 0) == 0) return std::stoull(line.substr(8)) * 1024;
  return 0;
}

TEST(Loader, HundredEpochsExactlyOnceWithFlatMemory) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizer runtimes hold freed memory (quarantine), so RSS is not the loader's";
#endif
  LoaderOptions o = LoaderOptions::CifarTrain();
  o.batch_size = 64;
  Loader l(Built().jpg, o);
  uint64_t first = 0;
  for (uint64_t e = 0; e < 100; ++e) {
    std::vector<int> seen(600, 0);
    for (const Batch& b : l.epoch(e))
      for (uint32_t j = 0; j < b.size; ++j)
        if (!b.padding[j]) ++seen[b.indices[j]];
    for (int s : seen) ASSERT_EQ(s, 1) << "epoch " << e;
    if (e == 0) first = AnonRss();
  }
  const uint64_t last = AnonRss();
  std::printf("anonymous RSS after epoch 1: %.2f MiB, after epoch 100: %.2f MiB\n", first / 1048576.0, last / 1048576.0);
  EXPECT_LT(last, first + (1u << 20)) << "grew by more than 1 MiB";
}

TEST(Loader, AutotuneGrowsForAFastConsumerShrinksForASlowOneAndKeepsTheBatches) {
  // Every decode sleeps 2 ms (the test hook), so threads scale whatever the machine's cores and load
  // (a sanitizer build beside another test on 2 cores included): one thread makes 32 ms batches of 16.
  ::setenv("DSC_TEST_DECODE_DELAY_US", "2000", 1);
  LoaderOptions o = LoaderOptions::CifarTrain();
  o.batch_size = 16;
  o.seed = 3;
  o.threads = 6;
  o.autotune = true;
  std::vector<Copy> tuned;
  int most = 0, fewest = 0, late = 0;
  const std::string trace = ScratchDir("-autotune") + "/t.json";
  Tracer tracer;
  o.tracer = &tracer;
  {
    Loader l(Built().jpg, o);
    EXPECT_EQ(l.threads(), 6);
    EXPECT_EQ(l.active_threads(), 1) << "starts small";
    // A consumer that never makes the loader wait. One epoch is 38 batches, the tuner decides on
    // windows of 4 after 8 of warm-up; a stall of the whole machine may eat a few windows, so up to
    // three epochs are allowed for the growth.
    for (uint64_t e = 0; e < 3 && l.active_threads() == 1; ++e)
      for (const Batch& b : l.epoch(e)) (void)b;
    most = l.active_threads();
    EXPECT_GT(most, 1) << "the consumer waited: threads must grow";
    // 80 ms per batch: one thread (32 ms) keeps up, with room to spare. From batch 20 on, the trace
    // shows which workers take work: only the first `late`, the others are parked.
    ASSERT_TRUE(tracer.Write(trace + ".0"));
    tracer.set_enabled(false);
    for (const Batch& b : l.epoch(1)) {
      if (b.index == 20) {
        late = l.active_threads();
        tracer.set_enabled(true);
      }
      const uint8_t* im = static_cast<const uint8_t*>(b.images);
      tuned.push_back({std::vector<uint8_t>(im, im + b.image_bytes() * b.size), std::vector<int32_t>(b.labels[0], b.labels[0] + b.size),
                       std::vector<uint32_t>(b.indices, b.indices + b.size), std::vector<uint8_t>(b.padding, b.padding + b.size)});
      std::this_thread::sleep_for(std::chrono::milliseconds(80));
    }
    fewest = l.active_threads();
    EXPECT_LT(fewest, most) << "batches piled up: threads must shrink";
  }
  ::unsetenv("DSC_TEST_DECODE_DELAY_US");
  std::printf("autotune: %d threads for a fast consumer, %d for a slow one (at most 6)\n", most, fewest);
  ASSERT_TRUE(tracer.Write(trace));
  auto t0 = TraceSummary(trace + ".0"), t = TraceSummary(trace);
  EXPECT_GE(t0["counter/loader/loader threads/value"], 2) << "the count's changes are in the trace";
  EXPECT_EQ(t0["counter/loader/loader threads/value#last"], most);
  auto late_spans = [&](int w) {
    const std::string key = "span/loader/loader worker " + std::to_string(w) + "/batch";
    return t[key] - t0[key];
  };
  EXPECT_GT(late_spans(0), 0);
  for (int w = late; w < 6; ++w) EXPECT_EQ(late_spans(w), 0) << "worker " << w << " is parked";
  o.autotune = false;
  o.threads = 2;
  o.tracer = nullptr;
  Loader fixed(Built().jpg, o);
  EXPECT_TRUE(RunEpoch(fixed, 1) == tuned) << "parking and waking threads changed the batches";
}

TEST(Loader, RejectsImpossibleOptions) {
  LoaderOptions o = LoaderOptions::CifarTrain();
  o.dtype = DType::kUint8;  // normalised uint8 is not a thing
  EXPECT_THROW(Loader(Built().jpg, o), Error);
  o = LoaderOptions::CifarTrain();
  o.rank = 2;
  o.world_size = 2;
  EXPECT_THROW(Loader(Built().jpg, o), Error);
  EXPECT_THROW(Loader("/nonexistent.beton", LoaderOptions()), Error);
}

}  // namespace
}  // namespace dsc::test
