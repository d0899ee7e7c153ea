// LoaderOptions::Decoder::kGpu: the loader stages the JPEG payloads the GPU decoder takes and decodes
// the rest itself. Finished on the host twin of the GPU stages (DecodeStagedOnHost, then
// kernels::AugmentBatchCpu), its batches equal the CPU decoder's deferred batches (+ the same
// augment) bit for bit, on real CIFAR-10 JPEGs with progressive ones among them, which fall back and
// are counted. No GPU runs here.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "format/error.h"
#include "format/layout.h"
#include "kernels/batch_augment.h"
#include "kernels/jpeg_twin.h"
#include "kernels/jpeg_twin_batch.h"
#include "reader/gpu.h"
#include "reader/gpu_stage.h"
#include "reader/loader.h"
#include "tests/device_twin.h"
#include "tests/test_util.h"
#include "writer/build.h"
#include "writer/writer.h"

namespace dsc::test {
namespace {

namespace fs = std::filesystem;

constexpr int kPerClass = 24;
constexpr int kProgressiveEvery = 6;  // of each class's files, every 6th is made progressive

// The first kPerClass CIFAR-10 train images of each class, stored pass-through (restart interval
// "none", so the progressive ones stay progressive), every kProgressiveEvery-th one transcoded by
// jpegtran -progressive (the same coefficients, another coding).
const std::string& MixedFile() {
  static std::string f = [] {
    const std::string dir = ScratchDir("-gpudec");
    const fs::path tree = fs::path(dir) / "tree";
    for (const auto& cls : fs::directory_iterator(fs::path(CifarJpegRoot()) / "train")) {
      std::vector<fs::path> files;
      for (const auto& e : fs::directory_iterator(cls.path())) files.push_back(e.path());
      std::sort(files.begin(), files.end());
      fs::create_directories(tree / cls.path().filename());
      for (int i = 0; i < kPerClass && i < int(files.size()); ++i) {
        const fs::path to = tree / cls.path().filename() / files[size_t(i)].filename();
        if (i % kProgressiveEvery == 0) {
          const std::string cmd = "jpegtran -progressive -outfile '" + to.string() + "' '" + files[size_t(i)].string() + "'";
          if (std::system(cmd.c_str()) != 0) throw Error("jpegtran failed (package libjpeg-turbo-progs)");
        } else {
          fs::copy_file(files[size_t(i)], to);
        }
      }
    }
    writer::BuildOptions o;
    o.encode.restart_interval = "none";
    o.log = [](const std::string&) {};
    writer::Build(tree.string(), dir + "/mixed.beton", o);
    return dir + "/mixed.beton";
  }();
  return f;
}

// The same images stored raw: no payload is a JPEG, every sample falls back.
const std::string& RawFile() {
  static std::string f = [] {
    const std::string dir = ScratchDir("-gpudec-raw");
    writer::BuildOptions o;
    o.encode.encoding = "raw";
    o.log = [](const std::string&) {};
    writer::Build(SubsetTree(3), dir + "/raw.beton", o);
    return dir + "/raw.beton";
  }();
  return f;
}

// Whether dataset sample i's stored JPEG is progressive (its SOF2 marker), read independently of the
// twin's parser.
bool IsProgressive(const Dataset& ds, uint64_t i) {
  std::vector<uint8_t> scratch;
  const Payload p = ds.ReadPayload(i, &scratch);
  for (size_t k = 0; k + 1 < p.size; ++k)
    if (p.data[k] == 0xFF && p.data[k + 1] == 0xC2) return true;
  return false;
}

struct Counts {
  uint64_t staged = 0, fallback[32] = {};
};

// Runs an epoch of both loaders side by side and compares every batch; counts the gpu loader's
// staged samples and per-sample fallback reasons into *c.
void ExpectGpuEqualsCpu(const std::string& file, LoaderOptions cpu, int gpu_threads, Counts* out, uint64_t staging = 0,
                        bool pread = false) {
  cpu.defer_augment = true;
  cpu.dtype = DType::kUint8;
  cpu.layout = Layout::kNHWC;
  cpu.augment.normalize = true;
  cpu.batch_size = 50;
  cpu.seed = 77;
  cpu.threads = 1;
  LoaderOptions gpu = cpu;
  gpu.decoder = LoaderOptions::Decoder::kGpu;
  gpu.threads = gpu_threads;
  gpu.gpu_staging_bytes = staging;
  gpu.use_pread = pread;  // payloads read into scratch memory instead of mapped
  gpu.collect_stats = true;
  Loader a(file, cpu), b(file, gpu);
  const bool jpeg = format::Encoding(a.dataset().entry(0).encoding) == format::Encoding::kJpeg;
  const auto aug = kernels::MakeDeferredAugment(cpu.augment, int(a.width()), int(a.height()), kernels::kOutFloat32,
                                                kernels::kOutNCHW);
  Counts& c = *out;
  auto ra = a.epoch(3), rb = b.epoch(3);
  auto ia = ra.begin(), ib = rb.begin();
  size_t batches = 0;
  for (; ia != ra.end() && ib != rb.end(); ++ia, ++ib, ++batches) {
    const Batch& x = *ia;
    const Batch& y = *ib;
    EXPECT_EQ(x.fallback, nullptr);
    EXPECT_EQ(x.staged, nullptr);
    EXPECT_NE(y.fallback, nullptr);
    EXPECT_TRUE(y.deferred);
    ASSERT_EQ(x.size, y.size);
    ASSERT_EQ(std::memcmp(x.indices, y.indices, x.size * 4), 0);
    ASSERT_EQ(std::memcmp(x.labels[0], y.labels[0], x.size * 4), 0);
    for (uint32_t j = 0; j < x.size; ++j) {
      const kernels::SampleParams &p = x.params[j], &q = y.params[j];
      ASSERT_TRUE(p.dx == q.dx && p.dy == q.dy && p.cut_x == q.cut_x && p.cut_y == q.cut_y && p.flip == q.flip &&
                  p.src_w == q.src_w && p.src_h == q.src_h)
          << "sample " << j;
      ++(y.fallback[j] ? c.fallback[y.fallback[j]] : c.staged);
      // Exactly the progressive JPEGs fall back (unless the staging area is full).
      if (jpeg && y.fallback[j] != kernels::kReasonTooLarge) {
        EXPECT_EQ(y.fallback[j] == kernels::kReasonProgressive, IsProgressive(b.dataset(), y.indices[j])) << y.indices[j];
      }
    }
    std::vector<uint8_t> images(static_cast<const uint8_t*>(y.images),
                                static_cast<const uint8_t*>(y.images) + y.image_bytes() * y.size);
    DecodeStagedOnHost(y, images.data(), file);
    ASSERT_EQ(std::memcmp(images.data(), x.images, images.size()), 0) << "batch " << batches << " (uint8 images)";
    std::vector<float> want(size_t(x.size) * 3 * x.height * x.width), got(want.size());
    kernels::AugmentBatchCpu(aug, x.images_as<uint8_t>(), x.params, int(x.size), want.data());
    kernels::AugmentBatchCpu(aug, images.data(), y.params, int(y.size), got.data());
    ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0) << "batch " << batches;
  }
  EXPECT_EQ(batches, a.batches_per_epoch());
  EXPECT_EQ(ia != ra.end(), ib != rb.end());
  // The loader's counters say the same as its batches.
  const StageStats st = b.stats();
  EXPECT_EQ(st.twin_staged, c.staged);
  uint64_t delivered = c.staged;
  for (int r = 0; r < 32; ++r) {
    EXPECT_EQ(st.twin_fallback[r], c.fallback[r]) << FallbackName(r);
    delivered += c.fallback[r];
  }
  // Every sample counted once, also one the staging area had no room for (checked by a worker,
  // then decoded by the thread completing its batch).
  EXPECT_EQ(st.samples, delivered);
}

TEST(GpuDecode, MixedCifarFileEqualsCpuDecoderAndProgressiveFallsBack) {
  const std::string& file = MixedFile();
  Dataset ds(file);
  uint64_t progressive = 0;
  for (uint64_t i = 0; i < ds.size(); ++i) progressive += IsProgressive(ds, i);
  ASSERT_GT(progressive, 0u);
  ASSERT_LT(progressive, ds.size());
  // One epoch covers every sample once (random order, no padding with 240 = 48 x 5 samples).
  ASSERT_EQ(ds.size() % 50, 40u);
  for (int threads : {1, 3}) {
    Counts c;
    ExpectGpuEqualsCpu(file, LoaderOptions::CifarTrain(), threads, &c, 0, threads > 1);
    uint64_t fallbacks = 0;
    for (uint64_t f : c.fallback) fallbacks += f;
    // drop_last is off: the last batch is padded with repeats; count what the batches held.
    EXPECT_EQ(c.fallback[kernels::kReasonProgressive], fallbacks) << "only progressive payloads fall back";
    EXPECT_GE(c.fallback[kernels::kReasonProgressive], progressive);
    EXPECT_GE(c.staged, ds.size() - progressive);
    EXPECT_EQ(c.staged + fallbacks, 250u);  // 5 batches of 50
  }
  Counts test;
  ExpectGpuEqualsCpu(file, LoaderOptions::CifarTest(), 2, &test);
  EXPECT_GE(test.fallback[kernels::kReasonProgressive], progressive);
  // Fancy upsampling (Pillow's pixels): the twin's equals the CPU decoder's too.
  LoaderOptions fancy = LoaderOptions::CifarTrain();
  fancy.fancy_upsampling = true;
  Counts f;
  ExpectGpuEqualsCpu(file, fancy, 2, &f);
  EXPECT_GE(f.staged, ds.size() - progressive);
}

// A typed file (format 1.3: a text field and a further JPEG image): the GPU staging path, finished by
// the host twin, gives the CPU decoder's batches for its first image and for its further one.
TEST(GpuDecode, TypedFileAndItsFurtherImageEqualTheCpuDecoder) {
  const std::string path = ScratchDir("-gpudec-typed") + "/typed.beton";
  {
    const auto files = CifarTestJpegs(200);
    Writer w(path, {ImageField("image"), LabelField("label"), TextField("caption"), ImageField("side")});
    for (size_t i = 0; i < 100; ++i) {
      Sample s;
      s.SetImage("image", ReadFile(files[i]));
      s.SetLabel("label", int32_t(i % 10));
      s.SetText("caption", std::to_string(i));
      s.SetImage("side", ReadFile(files[100 + i]));
      w.Add(std::move(s));
    }
    w.Close();
  }
  for (const char* image : {"image", "side"}) {
    SCOPED_TRACE(image);
    LoaderOptions o = LoaderOptions::CifarTrain();
    o.image = image;
    Counts c;
    ExpectGpuEqualsCpu(path, o, 2, &c);
    EXPECT_EQ(c.staged, 100u);  // every payload a baseline JPEG the GPU decoder takes
  }
}

TEST(GpuDecode, StagingAreaFullFallsBackAsTooLarge) {
  // Room for a few images per batch only (the shared tables take about 10 KiB): the rest is decoded
  // by the thread completing the batch, and counted.
  Counts c;
  ExpectGpuEqualsCpu(MixedFile(), LoaderOptions::CifarTrain(), 2, &c, 24 << 10);
  EXPECT_GT(c.fallback[kernels::kReasonTooLarge], 0u);
  EXPECT_GT(c.staged, 0u);
}

TEST(GpuDecode, RawPayloadsAreNotJpegFallbacks) {
  Counts c;
  ExpectGpuEqualsCpu(RawFile(), LoaderOptions::CifarTrain(), 2, &c);
  EXPECT_EQ(c.staged, 0u);
  EXPECT_EQ(c.fallback[Batch::kNotJpeg], 50u);  // 30 samples, one padded batch of 50
}

// FFCV's own file (written by FFCV's writer: OpenCV's JPEGs, each with its header inline, and raw
// images among them): the JPEGs are staged for the GPU decoder, the raw images decoded on the CPU, and
// every batch equals the CPU decoder's.
TEST(GpuDecode, FfcvFileStagesItsJpegs) {
  const std::string d = ScratchDir("-gpu-ffcv");
  ASSERT_EQ(std::system(("zstd -dc " + std::string(DSC_FFCV_SAMPLES) + " | tar -x -C " + d).c_str()), 0);
  Counts c;
  ExpectGpuEqualsCpu(d + "/ffcv-samples/cifar-test-smart.beton", LoaderOptions::CifarTrain(), 2, &c);
  // 998 JPEGs and 1,002 raw images, in one epoch of 40 batches.
  EXPECT_EQ(c.staged, 998u);
  EXPECT_EQ(c.fallback[Batch::kNotJpeg], 1002u);
}

// A leased batch keeps its staged payloads: decoded after the loader has moved on (and refilled the
// ring), it equals the CPU decoder's batch.
TEST(GpuDecode, LeasedBatchKeepsItsStagedPayloads) {
  LoaderOptions o = LoaderOptions::CifarTrain();
  o.defer_augment = true;
  o.dtype = DType::kUint8;
  o.layout = Layout::kNHWC;
  o.batch_size = 20;
  o.prefetch = 1;
  o.seed = 9;
  o.threads = 2;
  LoaderOptions g = o;
  g.decoder = LoaderOptions::Decoder::kGpu;
  Loader cpu(MixedFile(), o), gpu(MixedFile(), g);
  std::vector<uint8_t> want;
  {
    auto r = cpu.epoch(0);
    const Batch& b = *r.begin();
    want.assign(b.images_as<uint8_t>(), b.images_as<uint8_t>() + b.image_bytes() * b.size);
  }
  BatchLease lease;
  {
    auto r = gpu.epoch(0);
    auto it = r.begin();
    lease = it.lease();
    for (int k = 0; k < 6 && it != r.end(); ++k) ++it;  // the ring is written over several times
  }
  ASSERT_NE(lease->staged, nullptr);
  std::vector<uint8_t> got(lease->images_as<uint8_t>(), lease->images_as<uint8_t>() + lease->image_bytes() * lease->size);
  DecodeStagedOnHost(*lease, got.data(), MixedFile());
  EXPECT_EQ(got, want);
}

// CIFAR-train options for the GPU decoder, batches of 16 in file order.
LoaderOptions SequentialGpuDecoderOptions() {
  LoaderOptions o = LoaderOptions::CifarTrain();
  o.defer_augment = true;
  o.dtype = DType::kUint8;
  o.layout = Layout::kNHWC;
  o.decoder = LoaderOptions::Decoder::kGpu;
  o.batch_size = 16;
  o.order = Order::kSequential;
  return o;
}

TEST(GpuDecode, CorruptStagedPayloadIsNamed) {
  Loader loader(MixedFile(), SequentialGpuDecoderOptions());
  auto range = loader.epoch(0);
  const Batch& b = *range.begin();
  test::ExpectCorruptStagedImageNamed(b, "f.beton");
}

TEST(GpuDecode, OptionsTheGpuDecoderCannotServeAreRefused) {
  LoaderOptions o = LoaderOptions::CifarTrain();
  o.decoder = LoaderOptions::Decoder::kGpu;
  EXPECT_THROW(ValidateOptions(o), OptionError);  // not deferred
  o.defer_augment = true;
  o.dtype = DType::kUint8;
  o.layout = Layout::kNHWC;
  EXPECT_NO_THROW(ValidateOptions(o));
  LoaderOptions crop = LoaderOptions::ImagenetTrain();
  crop.defer_augment = true;
  crop.dtype = DType::kUint8;
  crop.layout = Layout::kNHWC;
  crop.augment.normalize = false;
  crop.decoder = LoaderOptions::Decoder::kGpu;
  EXPECT_NO_THROW(ValidateOptions(crop));  // crops are the twin's too (tests/gpu_crop_test.cc)
  o.fancy_upsampling = true;  // the twin's fancy upsampling (tests/gpu_crop_test.cc, jpeg_twin_test.cc)
  EXPECT_NO_THROW(ValidateOptions(o));
  // A staged image per grid row: CUDA's 65535 rows bound the batch (a larger one failed to launch).
  o.batch_size = 65535;
  EXPECT_NO_THROW(ValidateOptions(o));
  o.batch_size = 65536;
  EXPECT_THROW(ValidateOptions(o), OptionError);
  o.batch_size = 512;
  o.remote.addresses = {"127.0.0.1:1"};
  EXPECT_THROW(ValidateOptions(o), OptionError);
}

// dsc bench --decoder gpu counts what it staged and what fell back, per reason, in text and JSON.
TEST(GpuDecode, BenchReportsStagedAndFallbackCounts) {
  const std::string& file = MixedFile();
  Dataset ds(file);
  uint64_t progressive = 0;
  for (uint64_t i = 0; i < ds.size(); ++i) progressive += IsProgressive(ds, i);
  // Batches of 48 tile the 240 samples: each epoch holds every sample once.
  ASSERT_EQ(ds.size() % 48, 0u);
  const std::string args = " --decoder gpu --batch-size 48 --epochs 2 --threads 2 '" + file + "'";
  std::string out;
  ASSERT_EQ(RunDsc("bench --json" + args, &out), 0) << out;
  EXPECT_EQ(out.find("notice: no usable GPU") == std::string::npos, gpu::Available()) << out;
  EXPECT_NE(out.find("\"twin_staged\": " + std::to_string(2 * (ds.size() - progressive))), std::string::npos) << out;
  EXPECT_NE(out.find("\"twin_fallback\": {\"progressive\": " + std::to_string(2 * progressive) + "}"), std::string::npos) << out;
  ASSERT_EQ(RunDsc("bench" + args, &out), 0) << out;
  EXPECT_NE(out.find(std::to_string(2 * (ds.size() - progressive)) + " payloads staged for the GPU, " +
                     std::to_string(2 * progressive) + " decoded on the CPU (progressive: " + std::to_string(2 * progressive) + ")"),
            std::string::npos)
      << out;
  // A crop preset: these payloads have no restart intervals (built with "none"), so every crop is
  // decoded on the CPU, counted.
  ASSERT_EQ(RunDsc("bench --preset imagenet-train" + args, &out), 0) << out;
  EXPECT_NE(out.find("0 payloads staged for the GPU, " + std::to_string(2 * ds.size()) + " decoded on the CPU"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("crop without restart intervals tiling MCU rows: " + std::to_string(2 * (ds.size() - progressive))),
            std::string::npos)
      << out;
  EXPECT_EQ(RunDsc("bench --digest" + args, &out), 2) << out;
  EXPECT_EQ(RunDsc("bench --decoder tpu '" + file + "'", &out), 2) << out;
}

// Without a GPU the Augmenter refuses clearly; with one (not here) its batches from the gpu decoder
// equal the host twin's.
TEST(GpuDecode, DeviceDecodeEqualsHostTwin) {
  std::string why;
  if (!gpu::Available(&why)) {
    EXPECT_FALSE(why.empty());
    GTEST_SKIP() << "compiled, CPU-verified, not run on a GPU here: " << why;
  }
  LoaderOptions o = LoaderOptions::CifarTrain();
  o.batch_size = 50;
  ExpectDeviceEqualsHostTwin(MixedFile(), o);
}

// With a GPU (not here): a corrupt image in a run's last batch is reported by Finish(). Process
// checks a batch's decode only when a later call reuses its slot, so the last batches went unchecked.
TEST(GpuDecode, FinishReportsACorruptImageInTheLastBatch) {
  std::string why;
  if (!gpu::Available(&why)) GTEST_SKIP() << "compiled, CPU-verified, not run on a GPU here: " << why;
  LoaderOptions o = SequentialGpuDecoderOptions();
  gpu::UsePinnedMemory(o);
  Loader loader(MixedFile(), o);
  gpu::AugmenterOptions ao;
  ao.staging_bytes = gpu::StagingBytesFor(loader);
  ao.path = "f.beton";
  gpu::Augmenter aug(o.augment, loader.width(), loader.height(), o.batch_size, DType::kFloat32, Layout::kNCHW, ao);
  auto range = loader.epoch(0);
  auto it = range.begin();
  BatchLease lease = it.lease();
  ASSERT_NE(lease->staged, nullptr);
  CorruptStagedImage(const_cast<uint8_t*>(lease->staged), 0);  // in the leased buffer
  if (::testing::Test::HasFatalFailure()) return;
  uint32_t sample = UINT32_MAX;
  for (uint32_t j = 0; j < lease->size && sample == UINT32_MAX; ++j)
    if (lease->fallback[j] == 0) sample = lease->indices[j];
  aug.ProcessFor(std::move(lease), gpu::LegacyDefaultStream());
  try {
    aug.Finish();
    ADD_FAILURE() << "Finish() passed a batch whose image " << sample << " is corrupt";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f.beton: sample " + std::to_string(sample) + ": corrupt JPEG (GPU decoder)"),
              std::string::npos)
        << e.what();
  }
  aug.Finish();  // reported once
}

}  // namespace
}  // namespace dsc::test
