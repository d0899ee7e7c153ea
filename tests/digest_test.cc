// BatchDigest (reader/digest.h) and `dsc bench --digest`: the digest sees every delivered byte (one
// changed image byte, label, index or padding flag changes it), an epoch's digest does not depend on
// threads or prefetch, and the scalar code paths (--scalar, DSC_FORCE_SCALAR=1: our AVX2 kernels and
// libjpeg-turbo's SIMD off) deliver the same bits as the SIMD ones, on real CIFAR-10 JPEGs and photos.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "reader/digest.h"
#include "reader/loader.h"
#include "tests/test_util.h"
#include "writer/build.h"

namespace dsc::test {
namespace {

namespace fs = std::filesystem;

// A hand-built batch of 3 uint8 2x2 RGB samples with two label fields.
struct HandBatch {
  std::vector<uint8_t> images = std::vector<uint8_t>(3 * 2 * 2 * 3);
  std::vector<int32_t> labels0{3, 1, 4}, labels1{15, 9, 2};
  std::vector<uint32_t> indices{7, 0, 7};
  std::vector<uint8_t> padding{0, 0, 1};
  std::vector<kernels::SampleParams> params = std::vector<kernels::SampleParams>(3);
  HandBatch() {
    for (size_t i = 0; i < images.size(); ++i) images[i] = uint8_t(i * 37 + 5);
  }
  Batch Get(bool deferred = false) const {
    Batch b;
    b.index = 2;
    b.size = 3;
    b.padding_count = 1;
    b.images = images.data();
    b.dtype = DType::kUint8;
    b.layout = Layout::kNHWC;
    b.channels = 3;
    b.height = b.width = 2;
    b.labels[0] = labels0.data();
    b.labels[1] = labels1.data();
    b.label_fields = 2;
    b.indices = indices.data();
    b.padding = padding.data();
    b.params = params.data();
    b.deferred = deferred;
    return b;
  }
};

std::string DigestOf(const Batch& b) {
  BatchDigest d;
  d.Add(b);
  return d.Hex();
}

TEST(BatchDigest, HexIsXxh128OfTheStreamHighHalfFirst) {
  // No batch: the digest of no bytes, formatted here independently of Hex()'s canonical-bytes path.
  BatchDigest d;
  const XXH128_hash_t h = XXH3_128bits(nullptr, 0);
  char want[33];
  std::snprintf(want, sizeof want, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
  EXPECT_EQ(d.Hex(), want);
  EXPECT_EQ(d.batches(), 0u);
  const HandBatch hb;
  d.Add(hb.Get());
  EXPECT_EQ(d.batches(), 1u);
  EXPECT_TRUE(RegexMatch(d.Hex(), "[0-9a-f]{32}")) << d.Hex();
  EXPECT_NE(d.Hex(), want);
}

TEST(BatchDigest, EveryDeliveredByteCounts) {
  const HandBatch base;
  const std::string ref = DigestOf(base.Get());
  EXPECT_EQ(DigestOf(base.Get()), ref);  // deterministic: a fresh digest of the same bytes

  std::vector<std::string> seen{ref};
  auto differs = [&](const HandBatch& hb, const char* what, bool deferred = false) {
    const std::string h = DigestOf(hb.Get(deferred));
    EXPECT_EQ(std::count(seen.begin(), seen.end(), h), 0) << what << " did not change the digest";
    seen.push_back(h);
  };
  { HandBatch m; m.images.back() ^= 1; differs(m, "the last image byte"); }
  { HandBatch m; m.images[17] += 1; differs(m, "a middle image byte"); }
  { HandBatch m; m.labels0[1] = 2; differs(m, "a label of field 0"); }
  { HandBatch m; m.labels1[2] = 3; differs(m, "a label of field 1"); }
  { HandBatch m; m.indices[0] = 8; differs(m, "an index"); }
  { HandBatch m; m.padding[2] = 0; differs(m, "a padding flag"); }
  {
    Batch b = base.Get();
    b.index = 3;
    const std::string h = DigestOf(b);
    EXPECT_EQ(std::count(seen.begin(), seen.end(), h), 0) << "the batch index did not change the digest";
    seen.push_back(h);
    b = base.Get();
    b.size = 2;  // the same bytes, one sample fewer
    EXPECT_NE(DigestOf(b), ref) << "the batch size did not change the digest";
  }
  // Params describe work the images already show unless the batch is deferred.
  { HandBatch m; m.params[1].flip = 1; EXPECT_EQ(DigestOf(m.Get()), ref) << "params of a finished batch were hashed"; }
  const std::string deferred = DigestOf(base.Get(true));
  EXPECT_NE(deferred, ref);
  { HandBatch m; m.params[1].flip = 1; EXPECT_NE(DigestOf(m.Get(true)), deferred); }
  { HandBatch m; m.params[2].src_w += 1; EXPECT_NE(DigestOf(m.Get(true)), deferred); }
  // A deferred batch's transform-list steps are delivered bytes too.
  std::vector<kernels::TransformStep> steps(6);
  steps[4].kind = kernels::kStepContrast;
  steps[4].a = 1.25;
  auto with_steps = [&](const std::vector<kernels::TransformStep>& st) {
    Batch b = base.Get(true);
    b.steps = st.data();
    b.steps_per_sample = 2;
    return DigestOf(b);
  };
  const std::string stepped = with_steps(steps);
  EXPECT_NE(stepped, deferred);
  { auto m = steps; m[4].a = 1.5; EXPECT_NE(with_steps(m), stepped); }
  { auto m = steps; m[1].kind = kernels::kStepInvert; EXPECT_NE(with_steps(m), stepped); }
  { auto m = steps; m[5].g[7] = 0.5f; EXPECT_NE(with_steps(m), stepped); }

  // Order matters: batches a, b differ from b, a.
  HandBatch other;
  other.indices[1] = 5;
  BatchDigest ab, ba;
  ab.Add(base.Get());
  ab.Add(other.Get());
  ba.Add(other.Get());
  ba.Add(base.Get());
  EXPECT_NE(ab.Hex(), ba.Hex());
  EXPECT_EQ(ab.batches(), 2u);
}

TEST(BatchDigest, MissingArraysAreAnErrorNotACrash) {
  const HandBatch hb;
  Batch b = hb.Get();
  b.labels[1] = nullptr;
  BatchDigest d;
  EXPECT_THROW(d.Add(b), Error);
  b = hb.Get(true);
  b.params = nullptr;
  EXPECT_THROW(d.Add(b), Error);
}

// Real files: 300 CIFAR-10 train JPEGs (30 per class) and 40 photos (the first 40 classes).
struct Files {
  std::string cifar, photos;
};

const Files& Built() {
  static Files f = [] {
    Files f;
    const std::string dir = ScratchDir("-digest");
    writer::BuildOptions o;
    o.log = [](const std::string&) {};
    f.cifar = dir + "/cifar.beton";
    writer::Build(SubsetTree(30), f.cifar, o);
    const std::string photos = PhotosTree(DSC_PHOTOS);
    if (photos.empty()) return f;
    std::vector<fs::path> classes;
    for (const auto& e : fs::directory_iterator(photos)) classes.push_back(e.path());
    std::sort(classes.begin(), classes.end());
    classes.resize(std::min<size_t>(classes.size(), 40));
    const std::string tree = dir + "/photos";
    fs::create_directories(tree);
    for (const auto& c : classes) fs::create_directory_symlink(c, tree + "/" + c.filename().string());
    f.photos = dir + "/photos.beton";
    writer::Build(tree, f.photos, o);
    return f;
  }();
  return f;
}

std::string EpochDigest(const std::string& file, LoaderOptions o, int threads, uint32_t prefetch, uint64_t epoch) {
  o.threads = threads;
  o.prefetch = prefetch;
  o.seed = 11;
  Loader loader(file, o);
  BatchDigest d;
  for (const Batch& b : loader.epoch(epoch)) {
    EXPECT_EQ(b.deferred, o.defer_augment);  // what tells the digest to hash params
    d.Add(b);
  }
  EXPECT_EQ(d.batches(), loader.batches_per_epoch());
  return d.Hex();
}

void ExpectSameForThreadsAndPrefetch(const std::string& file, LoaderOptions o) {
  const std::string ref = EpochDigest(file, o, 1, 1, 1);
  EXPECT_EQ(EpochDigest(file, o, 2, 1, 1), ref) << "threads 2";
  EXPECT_EQ(EpochDigest(file, o, 1, 3, 1), ref) << "prefetch 3";
  EXPECT_EQ(EpochDigest(file, o, 2, 3, 1), ref) << "threads 2, prefetch 3";
  // And it sees the data: another epoch is another order and other augmentations.
  EXPECT_NE(EpochDigest(file, o, 2, 3, 2), ref);
}

TEST(EpochDigest, SameForAnyThreadsAndPrefetchCifarTrain) {
  LoaderOptions o = LoaderOptions::CifarTrain();
  o.batch_size = 64;  // 300 images: 5 batches, the last one short
  ExpectSameForThreadsAndPrefetch(Built().cifar, o);
}

// CIFAR-10's training pipeline deferred (uint8 NHWC, augmentation left to the GPU).
LoaderOptions CifarTrainDeferred() {
  LoaderOptions o = LoaderOptions::CifarTrain();
  o.batch_size = 64;
  o.dtype = DType::kUint8;
  o.layout = Layout::kNHWC;
  o.defer_augment = true;
  return o;
}

// Deferred batches: the params are part of what is delivered.
TEST(EpochDigest, SameForAnyThreadsAndPrefetchCifarTrainDeferred) {
  ExpectSameForThreadsAndPrefetch(Built().cifar, CifarTrainDeferred());
}

// With a transform list deferred too: the steps are drawn per sample whatever the thread count.
TEST(EpochDigest, SameForAnyThreadsAndPrefetchCifarTrainDeferredList) {
  LoaderOptions o = CifarTrainDeferred();
  o.transforms = "random_crop(32,padding=4,padding_mode=reflect),rand_augment(2,9),color_jitter(0.4,0.4,0.4,0.1)";
  ExpectSameForThreadsAndPrefetch(Built().cifar, o);
}

TEST(EpochDigest, SameForAnyThreadsAndPrefetchPhotosImagenetTrain) {
  if (Built().photos.empty()) GTEST_SKIP() << "the photos could not be unpacked";
  LoaderOptions o = LoaderOptions::ImagenetTrain();
  o.batch_size = 16;  // 40 photos: 3 batches
  ExpectSameForThreadsAndPrefetch(Built().photos, o);
}

std::vector<std::string> BenchDigests(const std::string& args) {
  std::string out;
  EXPECT_EQ(RunDsc("bench " + args + " --digest --json", &out), 0) << out;
  std::vector<std::string> d;
  const auto m = RegexSearch(out, "\"digests\": \\[([^\\]]*)\\]");
  if (m.empty()) {
    ADD_FAILURE() << "no digests in: " << out;
    return d;
  }
  for (const auto& hex : RegexFindAll(m[1], "\"([0-9a-f]{32})\"")) d.push_back(hex[1]);
  return d;
}

// Scalar and SIMD runs of one configuration must deliver the same bytes; --scalar and the environment
// variable are the two ways in. Train presets reshuffle and re-augment each epoch, test presets repeat it.
void ExpectScalarEqualsSimd(const std::string& args, bool train) {
  const std::vector<std::string> simd = BenchDigests(args);
  ASSERT_EQ(simd.size(), 2u) << args;
  EXPECT_EQ(simd[0] != simd[1], train) << args;
  EXPECT_EQ(BenchDigests(args + " --scalar"), simd) << args << ": the scalar paths deliver other bytes";
  ::setenv("DSC_FORCE_SCALAR", "1", 1);  // inherited by the child only; no other thread runs here
  const std::vector<std::string> env = BenchDigests(args);
  ::unsetenv("DSC_FORCE_SCALAR");
  EXPECT_EQ(env, simd) << args << ": DSC_FORCE_SCALAR=1 delivers other bytes";
}

TEST(EpochDigest, ScalarEqualsSimdCifar) {
  for (const char* preset : {"cifar-train", "cifar-test"})
    ExpectScalarEqualsSimd(Built().cifar + " --epochs 2 --batch-size 64 --threads 2 --preset " + preset,
                           std::string(preset).ends_with("train"));
}

TEST(EpochDigest, ScalarEqualsSimdPhotos) {
  if (Built().photos.empty()) GTEST_SKIP() << "the photos could not be unpacked";
  for (const char* preset : {"imagenet-train", "imagenet-test"})
    ExpectScalarEqualsSimd(Built().photos + " --epochs 2 --batch-size 16 --threads 2 --preset " + preset,
                           std::string(preset).ends_with("train"));
}

TEST(EpochDigest, BenchPrintsOneDigestPerEpoch) {
  std::string out;
  ASSERT_EQ(RunDsc("bench " + Built().cifar + " --epochs 2 --batch-size 64 --threads 1 --digest", &out), 0) << out;
  std::vector<std::string> lines;
  for (const auto& m : RegexFindAll(out, "epoch ([0-9]+) digest ([0-9a-f]{32})\n")) lines.push_back(m[1] + " " + m[2]);
  const std::vector<std::string> json = BenchDigests(Built().cifar + " --epochs 2 --batch-size 64 --threads 1");
  ASSERT_EQ(json.size(), 2u);
  EXPECT_EQ(lines, (std::vector<std::string>{"0 " + json[0], "1 " + json[1]})) << out;
}

}  // namespace
}  // namespace dsc::test
