// Crop presets with LoaderOptions::Decoder::kGpu (kernels/jpeg_twin_crop.h), on the 500 ImageNet
// photos built with --max-resolution 512 (restart intervals, shared tables):
// - the twin's interval-only decode of a crop equals libjpeg-turbo's full decode cut to the same
//   pixels, and its resize equals the scalar reference resampler run on that full decode;
// - the loader's batches finished on the host twin (DecodeStagedOnHost) equal the CPU decoder's for
//   the imagenet-train and imagenet-test presets, bit for bit;
// - payloads the twin cannot crop (no restart intervals, DCT-scaled crops) fall back, counted.
// No GPU runs here.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "kernels/augment.h"
#include "kernels/batch_augment.h"
#include "kernels/crop_resize.h"
#include "kernels/jpeg_twin.h"
#include "kernels/jpeg_twin_batch.h"
#include "kernels/jpeg_twin_crop.h"
#include "kernels/resample.h"
#include "reader/dataset.h"
#include "reader/gpu.h"
#include "reader/gpu_stage.h"
#include "reader/loader.h"
#include "tests/device_twin.h"
#include "tests/test_util.h"
#include "writer/build.h"

namespace dsc::test {
namespace {

// The photos at 512 pixels, with the writer's restart intervals ("auto") or none.
std::string PhotoFile(const std::string& restart) {
  const std::string tree = PhotosTree(DSC_PHOTOS);
  if (tree.empty()) return "";
  const std::string out = ScratchDir("-gpucrop") + "/photos512-" + restart + ".beton";
  writer::BuildOptions o;
  o.log = [](const std::string&) {};
  o.encode.max_resolution = 512;
  o.encode.restart_interval = restart;
  writer::Build(tree, out, o);
  return out;
}
const std::string& Photos() {
  static const std::string f = PhotoFile("auto");
  return f;
}

// libjpeg-turbo's whole-image decode, as the GPU decoder decodes (box or fancy upsampling, islow IDCT).
std::vector<uint8_t> TurboDecode(const std::vector<uint8_t>& jpeg, int* w, int* h, bool fancy = false) {
  tjhandle t = tjInitDecompress();
  int sub = 0, cs = 0;
  EXPECT_EQ(tjDecompressHeader3(t, jpeg.data(), jpeg.size(), w, h, &sub, &cs), 0);
  std::vector<uint8_t> rgb(size_t(*w) * *h * 3);
  EXPECT_EQ(tjDecompress2(t, jpeg.data(), jpeg.size(), rgb.data(), *w, 0, *h, TJPF_RGB,
                          (fancy ? 0 : TJFLAG_FASTUPSAMPLE) | TJFLAG_ACCURATEDCT),
            0)
      << tjGetErrorStr2(t);
  tjDestroy(t);
  return rgb;
}

// Stages each photo with a crop drawn as the loader draws it (full-size decodes: no DCT scaling),
// decodes the batch on the host twin, and checks the decoded intervals and the resized output.
// With fancy upsampling the decoded frame's inner edges repeat their samples (the margin is there for
// that), so the pixels checked are the crop rectangle's and the resize's.
void ExpectCropsEqualFullDecode(const kernels::AugmentSpec& spec, uint64_t seed, bool fancy = false) {
  Dataset ds(Photos());
  std::vector<uint8_t> scratch, buf(64 << 20);
  kernels::TwinBatchStager stager(buf.data(), buf.size(), 64, 1 << 20);
  stager.set_fancy(fancy);
  const uint64_t step = 7, first = seed % step;
  size_t checked = 0, partial = 0;
  for (uint64_t base = first; base < ds.size(); base += 64 * step) {
    stager.Reset();
    std::vector<uint64_t> samples;
    std::vector<kernels::TwinCropInput> inputs;
    inputs.reserve(64);
    const uint64_t out_bytes = uint64_t(spec.out_w) * spec.out_h * 3;
    for (uint64_t i = base; i < ds.size() && samples.size() < 64; i += step) {
      const format::IndexEntry e = ds.entry(i);
      kernels::TwinCropInput in;
      in.spec = &spec;
      in.img_w = e.width;
      in.img_h = e.height;
      kernels::MakeParams(spec, e.width, e.height, seed, 0, i, &in.rect, &in.params);
      kernels::CropDecodeMinSize(spec, e.width, e.height, in.rect, spec.out_w, spec.out_h, false, &in.min_w, &in.min_h);
      in.fancy = fancy;
      inputs.push_back(in);
      const auto p = ds.ReadPayloadParts(i, &scratch);
      const auto r = stager.Add(p.head.data, p.head.size, p.body.data, p.body.size, samples.size() * out_bytes,
                                &inputs.back());
      ASSERT_EQ(r.status, kernels::kTwinOk) << "sample " << i << ": " << kernels::TwinReasonName(r.reason);
      samples.push_back(i);
    }
    ASSERT_TRUE(stager.Finish());
    const auto& h = stager.header();
    ASSERT_EQ(h.crops, samples.size());
    std::vector<int16_t> coef(h.total_blocks * 64);
    std::vector<uint8_t> planes(h.total_blocks * 64), decoded(h.decoded_bytes), rgb(h.rgb_bytes);
    std::vector<int32_t> taps(h.tap_ints);
    std::vector<int> status(h.images);
    kernels::DecodeTwinBatchCpu(buf.data(), coef.data(), planes.data(), rgb.data(), status.data(), decoded.data(),
                                taps.data());
    for (size_t s = 0; s < samples.size(); ++s) {
      ASSERT_EQ(status[s], 0) << kernels::TwinReasonName(status[s]);
      const auto p = ds.ReadPayloadParts(samples[s], &scratch);
      std::vector<uint8_t> jpeg(p.head.data, p.head.data + p.head.size);
      jpeg.insert(jpeg.end(), p.body.data, p.body.data + p.body.size);
      int w = 0, hh = 0;
      const std::vector<uint8_t> full = TurboDecode(jpeg, &w, &hh, fancy);
      kernels::TwinFrame frame;
      kernels::TwinTables tables;
      kernels::TwinScan scan;
      std::vector<uint32_t> b(jpeg.size()), e(jpeg.size());
      scan.unit_begin = b.data();
      scan.unit_end = e.data();
      ASSERT_EQ(kernels::ParseTwin(jpeg.data(), jpeg.size(), nullptr, 0, &frame, &tables, &scan, uint32_t(b.size())).status,
                kernels::kTwinOk);
      kernels::TwinCropPlan plan;
      ASSERT_EQ(kernels::PlanTwinCrop(inputs[s], frame, &plan), 0);
      // The decoded intervals: the full decode's pixels from (x0, y0) on.
      const kernels::TwinImage& im = kernels::TwinImages(buf.data())[s];
      const int fw = im.frame.width, fh = im.frame.height;
      ASSERT_LE(plan.x0 + fw, w);
      ASSERT_LE(plan.y0 + fh, hh);
      partial += fw < w || fh < hh;
      const kernels::CropRect& r = inputs[s].rect;
      const int cx0 = fancy ? r.x - plan.x0 : 0, cx1 = fancy ? r.x + r.w - plan.x0 : fw;
      const int cy0 = fancy ? r.y - plan.y0 : 0, cy1 = fancy ? r.y + r.h - plan.y0 : fh;
      ASSERT_TRUE(cx0 >= 0 && cx1 <= fw && cy0 >= 0 && cy1 <= fh) << "sample " << samples[s];
      for (int y = cy0; y < cy1; ++y)
        ASSERT_EQ(std::memcmp(decoded.data() + im.rgb + (size_t(y) * fw + cx0) * 3,
                              full.data() + (size_t(plan.y0 + y) * w + plan.x0 + cx0) * 3, size_t(cx1 - cx0) * 3),
                  0)
            << "sample " << samples[s] << " row " << y;
      // The resize: the reference resampler on the full decode's region.
      kernels::ResampleAxis ah, av;
      kernels::MakeResampleAxis(plan.h, &ah);
      kernels::MakeResampleAxis(plan.v, &av);
      std::vector<uint8_t> want(out_bytes);
      kernels::ResampleRgbAxesScalar(full.data() + (size_t(plan.region.y) * w + plan.region.x) * 3, plan.region.width,
                                     plan.region.height, size_t(w) * 3, ah, av, want.data());
      ASSERT_EQ(std::memcmp(want.data(), rgb.data() + s * out_bytes, out_bytes), 0) << "sample " << samples[s];
      ++checked;
    }
  }
  EXPECT_GE(checked, ds.size() / step);  // every photo tried was staged (all 500, or a subset's)
  EXPECT_GT(partial, checked / 2) << "crops should mostly decode part of the image";
}

TEST(GpuCrop, RandomResizedCropDecodingEqualsFullDecodeThenCrop) {
  ASSERT_FALSE(Photos().empty()) << "could not unpack " << DSC_PHOTOS;
  ExpectCropsEqualFullDecode(LoaderOptions::ImagenetTrain().augment, 5);
}

TEST(GpuCrop, ResizeCenterCropDecodingEqualsFullDecodeThenCrop) {
  ASSERT_FALSE(Photos().empty()) << "could not unpack " << DSC_PHOTOS;
  ExpectCropsEqualFullDecode(LoaderOptions::ImagenetTest().augment, 6);
}

// Fancy upsampling: the crop's intervals with a margin, against TurboJPEG's fancy full decode.
TEST(GpuCrop, FancyUpsamplingCropsEqualFullDecodeThenCrop) {
  ASSERT_FALSE(Photos().empty()) << "could not unpack " << DSC_PHOTOS;
  ExpectCropsEqualFullDecode(LoaderOptions::ImagenetTrain().augment, 12, true);  // the samples seeds 5 and 6 check
  ExpectCropsEqualFullDecode(LoaderOptions::ImagenetTest().augment, 13, true);
}

struct Counts {
  uint64_t staged = 0, fallback[32] = {};
  uint64_t total() const {
    uint64_t n = staged;
    for (uint64_t f : fallback) n += f;
    return n;
  }
  std::string Text() const {
    std::string t = "staged " + std::to_string(staged);
    for (int r = 1; r < 32; ++r)
      if (fallback[r]) t += std::string(", ") + FallbackName(r) + " " + std::to_string(fallback[r]);
    return t;
  }
};

// Every sample staged, but the few photos too small for the writer to give restart intervals.
void ExpectAllStagedButSmall(const Counts& c) {
  EXPECT_EQ(c.staged + c.fallback[kernels::kReasonCropIntervals], c.total()) << c.Text();
  EXPECT_LE(c.fallback[kernels::kReasonCropIntervals], c.total() / 100) << c.Text();
}

// An epoch of the CPU and GPU decoders side by side: the GPU decoder's batches finished on the host
// twin equal the CPU decoder's (deferred uint8, the crop and resize done) bit for bit.
void ExpectGpuEqualsCpu(const std::string& file, LoaderOptions o, Counts* c) {
  o.defer_augment = true;
  o.dtype = DType::kUint8;
  o.layout = Layout::kNHWC;
  o.batch_size = 32;
  o.seed = 11;
  o.threads = 2;
  LoaderOptions g = o;
  g.decoder = LoaderOptions::Decoder::kGpu;
  g.collect_stats = true;
  Loader a(file, o), b(file, g);
  auto ra = a.epoch(2), rb = b.epoch(2);
  auto ia = ra.begin(), ib = rb.begin();
  size_t batches = 0;
  for (; ia != ra.end() && ib != rb.end(); ++ia, ++ib, ++batches) {
    const Batch& x = *ia;
    const Batch& y = *ib;
    ASSERT_EQ(x.size, y.size);
    ASSERT_EQ(std::memcmp(x.indices, y.indices, x.size * 4), 0);
    ASSERT_NE(y.fallback, nullptr);
    for (uint32_t j = 0; j < y.size; ++j) ++(y.fallback[j] ? c->fallback[y.fallback[j]] : c->staged);
    std::vector<uint8_t> images(static_cast<const uint8_t*>(y.images),
                                static_cast<const uint8_t*>(y.images) + y.image_bytes() * y.size);
    DecodeStagedOnHost(y, images.data(), file);
    for (uint32_t j = 0; j < y.size; ++j)
      ASSERT_EQ(std::memcmp(images.data() + j * y.image_bytes(), static_cast<const uint8_t*>(x.images) + j * x.image_bytes(),
                            x.image_bytes()),
                0)
          << "batch " << batches << " sample " << y.indices[j] << " ("
          << (y.fallback[j] ? FallbackName(y.fallback[j]) : "staged") << ")";
  }
  EXPECT_EQ(batches, a.batches_per_epoch());
  const StageStats st = b.stats();
  EXPECT_EQ(st.twin_staged, c->staged);
  for (int r = 0; r < 32; ++r) EXPECT_EQ(st.twin_fallback[r], c->fallback[r]) << FallbackName(r);
}

TEST(GpuCrop, ImagenetTrainBatchesEqualCpuDecoder) {
  ASSERT_FALSE(Photos().empty());
  Counts c;
  ExpectGpuEqualsCpu(Photos(), LoaderOptions::ImagenetTrain(), &c);
  // At 512 pixels no crop is large enough for the CPU to DCT-scale it to 224: all staged but the
  // few photos too small for restart intervals.
  ExpectAllStagedButSmall(c);
}

// A smaller output: crops of over twice its size the CPU decodes DCT-scaled, which the twin leaves
// to it (counted); the rest is staged, and the mixed batches are still the CPU decoder's.
TEST(GpuCrop, DctScaledCropsFallBackCounted) {
  ASSERT_FALSE(Photos().empty());
  LoaderOptions o = LoaderOptions::ImagenetTrain();
  o.augment.out_w = o.augment.out_h = 112;
  Counts c;
  ExpectGpuEqualsCpu(Photos(), o, &c);
  EXPECT_GT(c.staged, c.total() / 4) << c.Text();
  EXPECT_GT(c.fallback[kernels::kReasonCropScaled], c.total() / 10) << c.Text();
  EXPECT_EQ(c.staged + c.fallback[kernels::kReasonCropScaled] + c.fallback[kernels::kReasonCropIntervals], c.total())
      << c.Text();
}

TEST(GpuCrop, ImagenetTestBatchesEqualCpuDecoder) {
  ASSERT_FALSE(Photos().empty());
  Counts c;
  ExpectGpuEqualsCpu(Photos(), LoaderOptions::ImagenetTest(), &c);
  ExpectAllStagedButSmall(c);
}

// Fancy upsampling (LoaderOptions::fancy_upsampling, Pillow's pixels): the same on both decoders.
TEST(GpuCrop, FancyUpsamplingBatchesEqualCpuDecoder) {
  ASSERT_FALSE(Photos().empty());
  LoaderOptions o = LoaderOptions::ImagenetTrain();
  o.fancy_upsampling = true;
  Counts c;
  ExpectGpuEqualsCpu(Photos(), o, &c);
  ExpectAllStagedButSmall(c);
}

// Without DCT scaling the CPU decodes every crop at full size: every one is staged.
TEST(GpuCrop, ImagenetTrainWithoutDctScalingStagesEveryCrop) {
  ASSERT_FALSE(Photos().empty());
  LoaderOptions o = LoaderOptions::ImagenetTrain();
  o.dct_scaling = false;
  Counts c;
  ExpectGpuEqualsCpu(Photos(), o, &c);
  ExpectAllStagedButSmall(c);
}

// The worker's check remembers each photo's table set (a frame per set, across epochs): a warm
// worker judges every payload as a fresh one does, in a second pass too, and a set's remembered frame
// is never used for another (the photos' ~470 sets collide in its 1,024 slots), nor for a payload the
// index gives another size.
TEST(GpuCrop, CheckRemembersTableSetsAndJudgesEachPayloadAsAFreshWorker) {
  ASSERT_FALSE(Photos().empty());
  Dataset ds(Photos());
  TwinStageWorker warm;
  std::vector<uint8_t> scratch;
  size_t staged = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (uint64_t i = 0; i < ds.size(); ++i) {
      const Dataset::Parts parts = ds.ReadPayloadParts(i, &scratch);
      const uint32_t w = parts.entry.width, h = parts.entry.height;
      TwinStageWorker fresh;
      const uint8_t want = fresh.Check(parts, w, h);
      ASSERT_EQ(warm.Check(parts, w, h), want) << "pass " << pass << " sample " << i;
      ASSERT_EQ(warm.Check(parts, w + 1, h), kernels::kReasonBadMarker) << "pass " << pass << " sample " << i;
      staged += want == 0;
    }
  EXPECT_GT(staged, 2 * ds.size() * 9 / 10);  // all but the few photos without restart intervals
}

// The same, for payloads holding their own header (no shared set; the photos file's bodies copied with
// their heads): the check remembers each by its sample, also when the bytes of every payload are
// read into one buffer (as reads into scratch are), and a crop's check too. Each photo stands for
// three samples: 1,500 of them collide in the 1,024 slots.
TEST(GpuCrop, CheckRemembersOwnHeadersBySample) {
  ASSERT_FALSE(Photos().empty());
  Dataset ds(Photos());
  std::vector<uint8_t> scratch;
  std::vector<std::vector<uint8_t>> whole(ds.size());
  for (uint64_t i = 0; i < ds.size(); ++i) {
    const Dataset::Parts p = ds.ReadPayloadParts(i, &scratch);
    whole[i].assign(p.head.data, p.head.data + p.head.size);
    whole[i].insert(whole[i].end(), p.body.data, p.body.data + p.body.size);
  }
  const kernels::AugmentSpec spec = LoaderOptions::ImagenetTest().augment;
  TwinStageWorker warm, warm_shared;
  std::vector<uint8_t> shared;  // one buffer for every payload, at one address
  size_t largest = 0;
  for (const auto& w : whole) largest = std::max(largest, w.size());
  shared.reserve(largest);
  size_t staged = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (uint64_t id = 0; id < 3 * ds.size(); ++id) {
      const uint64_t i = id % ds.size();
      Dataset::Parts parts = ds.ReadPayloadParts(i, &scratch);
      parts.head = Payload{nullptr, 0};
      parts.body = Payload{whole[i].data(), whole[i].size()};
      const uint32_t w = parts.entry.width, h = parts.entry.height;
      kernels::TwinCropInput in;
      in.spec = &spec;
      in.img_w = w;
      in.img_h = h;
      kernels::MakeParams(spec, w, h, 3, 0, i, &in.rect, &in.params);
      kernels::CropDecodeMinSize(spec, w, h, in.rect, spec.out_w, spec.out_h, false, &in.min_w, &in.min_h);
      TwinStageWorker fresh;
      const uint8_t want = fresh.Check(parts, w, h, nullptr, id), want_crop = fresh.Check(parts, w, h, &in, id);
      const std::string at = "pass " + std::to_string(pass) + " sample " + std::to_string(id);
      ASSERT_EQ(warm.Check(parts, w, h, nullptr, id), want) << at;
      ASSERT_EQ(warm.Check(parts, w, h, &in, id), want_crop) << at;
      ASSERT_EQ(warm.Check(parts, w + 1, h, nullptr, id), kernels::kReasonBadMarker) << at;
      shared.assign(whole[i].begin(), whole[i].end());  // within its capacity: not moved
      parts.body = Payload{shared.data(), whole[i].size()};
      ASSERT_EQ(warm_shared.Check(parts, w, h, &in, id), want_crop) << at << " (one buffer)";
      staged += want == 0 && want_crop == 0;
    }
  EXPECT_GT(staged, 2 * 3 * ds.size() * 9 / 10);  // all but the few photos without restart intervals
}

// A crop staged from a payload's interval index (its walk prefetching every line, its bytes copied by
// kernels::TwinCopy) equals the same payload staged without the index (a marker scan), byte for byte;
// also when the index lies about the crop's first interval or about intervals before the crop (found
// out by the walk's marker checks: scanned instead).
// A copy of `bytes` that ends where an inaccessible page begins, as a payload can end where a mapping
// does: a read past its end faults instead of seeing whatever follows in the heap.
class GuardedCopy {
 public:
  explicit GuardedCopy(const std::vector<uint8_t>& bytes) {
    const size_t page = size_t(::sysconf(_SC_PAGESIZE));
    span_ = (bytes.size() + page - 1) / page * page + page;
    void* m = ::mmap(nullptr, span_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(m, MAP_FAILED);
    base_ = static_cast<uint8_t*>(m);
    EXPECT_EQ(::mprotect(base_ + span_ - page, page, PROT_NONE), 0);
    data_ = base_ + span_ - page - bytes.size();
    std::memcpy(data_, bytes.data(), bytes.size());
  }
  ~GuardedCopy() { ::munmap(base_, span_); }
  GuardedCopy(const GuardedCopy&) = delete;
  GuardedCopy& operator=(const GuardedCopy&) = delete;
  const uint8_t* data() const { return data_; }

 private:
  uint8_t *base_ = nullptr, *data_ = nullptr;
  size_t span_ = 0;
};

TEST(GpuCrop, CropStagedFromTheIndexEqualsAMarkerScan) {
  ASSERT_FALSE(Photos().empty());
  Dataset ds(Photos());
  std::vector<uint8_t> scratch, a(8 << 20), b(8 << 20);
  size_t compared = 0, used_lies = 0, unused_lies = 0;
  for (const kernels::AugmentSpec& spec : {LoaderOptions::ImagenetTrain().augment, LoaderOptions::ImagenetTest().augment})
    for (uint64_t i = 0; i < ds.size(); i += 3) {
      const std::string at = "sample " + std::to_string(i);
      const Payload p = ds.ReadPayload(i, &scratch);
      const std::vector<uint8_t> whole(p.data, p.data + p.size);
      kernels::TwinFrame f;
      kernels::TwinScan scan;
      std::vector<uint32_t> ub(whole.size()), ue(whole.size());
      scan.unit_begin = ub.data();
      scan.unit_end = ue.data();
      ASSERT_EQ(kernels::ParseTwin(nullptr, 0, whole.data(), whole.size(), &f, nullptr, &scan, uint32_t(ub.size())).status,
                kernels::kTwinOk) << at;
      const uint8_t* lens = kernels::FindTwinIntervalIndex(whole.data(), whole.size(), size_t(scan.data - whole.data()), f.intervals);
      if (!lens) continue;  // no restart intervals
      const size_t lens_at = size_t(lens - whole.data());
      std::vector<uint8_t> plain(whole);
      plain.erase(plain.end() - 2 - long(kernels::TwinIndexSegmentSize(f.intervals)), plain.end() - 2);
      const format::IndexEntry e = ds.entry(i);
      kernels::TwinCropInput in;
      in.spec = &spec;
      in.img_w = e.width;
      in.img_h = e.height;
      kernels::MakeParams(spec, e.width, e.height, 7, 0, i, &in.rect, &in.params);
      kernels::CropDecodeMinSize(spec, e.width, e.height, in.rect, spec.out_w, spec.out_h, false, &in.min_w, &in.min_h);
      kernels::TwinCropPlan plan;
      if (kernels::PlanTwinCrop(in, f, &plan)) continue;  // a crop the CPU decodes
      // Stages one payload into a zeroed buffer: the bytes the batch would copy to the device.
      auto stage = [&](const std::vector<uint8_t>& jpeg, std::vector<uint8_t>* buf) {
        std::fill(buf->begin(), buf->end(), 0);
        kernels::TwinBatchStager stager(buf->data(), buf->size(), 4, 1 << 16);
        const GuardedCopy guarded(jpeg);
        EXPECT_EQ(stager.Add(nullptr, 0, guarded.data(), jpeg.size(), 0, &in).status, kernels::kTwinOk) << at;
        EXPECT_TRUE(stager.Finish());
        return size_t(stager.bytes_used());
      };
      // The same payload twice, split as a shared table set and a body: the second takes the stager's
      // path for a head it parsed before (a rescan there must find the scan in the body).
      const size_t cut = size_t(scan.data - whole.data());
      auto stage_shared = [&](const std::vector<uint8_t>& jpeg, std::vector<uint8_t>* buf) {
        std::fill(buf->begin(), buf->end(), 0);
        kernels::TwinBatchStager stager(buf->data(), buf->size(), 4, 1 << 16);
        const GuardedCopy head(std::vector<uint8_t>(jpeg.begin(), jpeg.begin() + long(cut)));
        const GuardedCopy body(std::vector<uint8_t>(jpeg.begin() + long(cut), jpeg.end()));
        for (int k = 0; k < 2; ++k)
          EXPECT_EQ(stager.Add(head.data(), cut, body.data(), jpeg.size() - cut, kernels::TwinBatchStager::kAppend, &in).status,
                    kernels::kTwinOk) << at << " (shared head, image " << k << ")";
        EXPECT_TRUE(stager.Finish());
        EXPECT_EQ(kernels::TwinHeader(buf->data()).table_sets, 1u) << at;
        return size_t(stager.bytes_used());
      };
      auto expect_same = [&](const std::vector<uint8_t>& jpeg, const char* what) {
        {
          const size_t n = stage_shared(jpeg, &a), want = stage_shared(plain, &b);
          ASSERT_EQ(n, want) << at << ": " << what << " (shared head)";
          EXPECT_EQ(std::memcmp(a.data(), b.data(), n), 0) << at << ": " << what << " (shared head): staged bytes differ";
        }
        const size_t n = stage(jpeg, &a), want = stage(plain, &b);
        ASSERT_EQ(n, want) << at << ": " << what;
        if (std::memcmp(a.data(), b.data(), n) != 0) {
          size_t k = 0;
          while (a[k] == b[k]) ++k;
          std::string bytes;
          char h[8];
          for (size_t j = k < 8 ? 0 : k - 8; j < std::min(n, k + 8); ++j)
            std::snprintf(h, sizeof h, " %02x/%02x", a[j], b[j]), bytes += h;
          FAIL() << at << ": " << what << ": staged bytes differ first at " << k << " of " << n << " (payload " << whole.size()
                 << " bytes, index at " << lens_at << ", crop rows " << plan.row0 << "+, intervals " << f.intervals
                 << "; indexed/plain:" << bytes << "; images at " << kernels::TwinHeader(a.data()).images_at << ", units at "
                 << kernels::TwinHeader(a.data()).units_at << ", crops at " << kernels::TwinHeader(a.data()).crops_at << ")";
        }
      };
      expect_same(whole, "indexed");
      ++compared;
      // Interval k one byte longer and k + 1 one shorter: k's end and k + 1's start move off their marker.
      const uint32_t per_row = f.mcus_x / f.restart_interval;
      const uint32_t t0 = uint32_t(plan.row0) * per_row + uint32_t(plan.col0);
      auto lie = [&](uint32_t k) {
        std::vector<uint8_t> w(whole);
        const size_t l0 = lens_at + 2 * size_t(k), l1 = l0 + 2;
        const uint32_t len0 = w[l0] | w[l0 + 1] << 8, len1 = w[l1] | w[l1 + 1] << 8;
        if (len1 == 0 || len0 == 0xFFFF) return std::vector<uint8_t>();
        w[l0] = uint8_t(len0 + 1), w[l0 + 1] = uint8_t((len0 + 1) >> 8);
        w[l1] = uint8_t(len1 - 1), w[l1 + 1] = uint8_t((len1 - 1) >> 8);
        return w;
      };
      if (t0 + 1 < f.intervals) {  // about the first used interval
        const std::vector<uint8_t> w = lie(t0);
        if (!w.empty()) expect_same(w, "a used interval's length off"), ++used_lies;
      }
      if (t0 >= 3) {  // about intervals 0 and 1, before the crop's first row's run and its marker
        const std::vector<uint8_t> w = lie(0);
        if (!w.empty()) expect_same(w, "an unused interval's length off"), ++unused_lies;
      }
    }
  // Shares of the samples tried (every third, two presets), so a subset of the photos (the GPU
  // bundle carries 150) is held to the same proportions as the 500.
  const size_t tried = 2 * size_t((ds.size() + 2) / 3);
  EXPECT_GT(compared, tried * 3 / 4);
  EXPECT_GT(used_lies, tried * 3 / 4);
  EXPECT_GT(unused_lies, tried * 3 / 10);
}

// Payloads without restart intervals cannot be cropped by intervals: decoded on the CPU, counted
// (in the batches and the loader's stats), and the batches are still the CPU decoder's.
TEST(GpuCrop, PayloadsWithoutIntervalsFallBackCounted) {
  const std::string file = PhotoFile("none");
  ASSERT_FALSE(file.empty());
  Counts c;
  ExpectGpuEqualsCpu(file, LoaderOptions::ImagenetTest(), &c);
  EXPECT_EQ(c.staged, 0u) << c.Text();
  EXPECT_GT(c.fallback[kernels::kReasonCropIntervals], c.total() * 4 / 5) << c.Text();
}

// A crop-staged payload whose entropy bytes are damaged after staging: the host twin names the
// sample (as the device's status does), and the undamaged batch decodes.
TEST(GpuCrop, CorruptCropStagedPayloadIsNamed) {
  ASSERT_FALSE(Photos().empty());
  LoaderOptions o = LoaderOptions::ImagenetTrain();
  o.defer_augment = true;
  o.dtype = DType::kUint8;
  o.layout = Layout::kNHWC;
  o.augment.normalize = false;
  o.decoder = LoaderOptions::Decoder::kGpu;
  o.batch_size = 8;
  o.order = Order::kSequential;
  Loader loader(Photos(), o);
  auto range = loader.epoch(0);
  const Batch& b = *range.begin();
  ASSERT_NE(b.staged, nullptr);
  ASSERT_GT(kernels::TwinHeader(b.staged).crops, 0u);
  ASSERT_NE(kernels::TwinImages(b.staged)[0].crop, kernels::kTwinNoCrop);
  test::ExpectCorruptStagedImageNamed(b, "p.beton");
}

// Without a GPU this skips; with one, the device's crops (decode, taps, resize, then the augment
// kernel) equal the host twin's, which the tests above hold equal to the CPU decoder.
void ExpectDeviceCropsEqualHostTwin(LoaderOptions o) {
  std::string why;
  if (!gpu::Available(&why)) GTEST_SKIP() << "compiled, CPU-verified, not run on a GPU here: " << why;
  o.batch_size = 32;
  EXPECT_GT(ExpectDeviceEqualsHostTwin(Photos(), o), 0u);
}

TEST(GpuCrop, DeviceImagenetTrainEqualsHostTwin) {
  ASSERT_FALSE(Photos().empty());
  ExpectDeviceCropsEqualHostTwin(LoaderOptions::ImagenetTrain());
}

TEST(GpuCrop, DeviceImagenetTestEqualsHostTwin) {
  ASSERT_FALSE(Photos().empty());
  ExpectDeviceCropsEqualHostTwin(LoaderOptions::ImagenetTest());
}

TEST(GpuCrop, DeviceFancyUpsamplingEqualsHostTwin) {
  ASSERT_FALSE(Photos().empty());
  LoaderOptions o = LoaderOptions::ImagenetTrain();
  o.fancy_upsampling = true;
  ExpectDeviceCropsEqualHostTwin(o);
}

}  // namespace
}  // namespace dsc::test
