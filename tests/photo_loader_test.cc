// The loader's crop transforms on real ImageNet photos, end to end through dsc::Loader, against PIL
// (/usr/bin/python3: Image.open(f).convert("RGB"), then what torchvision does on PIL images):
// RandomResizedCrop = crop(rect).resize(out, BILINEAR), flipped; Resize(256) + CenterCrop(224) =
// resize(resized, BILINEAR).crop(window). With full-size decodes and libjpeg's fancy upsampling (what
// PIL decodes with) the loader must be within 1 of PIL everywhere; DCT-scaled decodes within a PSNR
// bound. Also: the float outputs against the uint8 ones normalised, and set_output_size.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/augment.h"
#include "reader/loader.h"
#include "tests/test_util.h"
#include "writer/build.h"

namespace dsc::test {
namespace {

namespace fs = std::filesystem;

constexpr int kPhotos = 24;

struct Photos {
  std::string tree, file, raw;  // raw: the same photos stored as RGB (decoded by the writer like PIL)
  std::map<uint32_t, std::string> path;  // sample index -> source JPEG
};

// The first kPhotos classes' photos (one each), built as they are (pass-through JPEGs).
const Photos& Built() {
  static Photos p = [] {
    Photos p;
    const std::string dir = PhotosTree(DSC_PHOTOS);
    if (dir.empty()) return p;
    std::vector<fs::path> classes;
    for (const auto& e : fs::directory_iterator(dir)) classes.push_back(e.path());
    std::sort(classes.begin(), classes.end());
    classes.resize(std::min<size_t>(classes.size(), kPhotos));
    const std::string scratch = ScratchDir("-photos");
    p.tree = scratch + "/tree";
    for (const auto& c : classes) {
      fs::create_directories(p.tree + "/" + c.filename().string());
      for (const auto& f : fs::directory_iterator(c))
        fs::create_symlink(f.path(), p.tree + "/" + c.filename().string() + "/" + f.path().filename().string());
    }
    writer::BuildOptions o;
    o.log = [](const std::string&) {};
    p.file = scratch + "/photos.beton";
    writer::Build(p.tree, p.file, o);
    o.encode.encoding = "raw";
    p.raw = scratch + "/photos-raw.beton";
    writer::Build(p.tree, p.raw, o);
    // Sample i is the i-th file in the writer's order (sorted classes, sorted files): one per class here.
    for (size_t i = 0; i < classes.size(); ++i)
      for (const auto& f : fs::directory_iterator(classes[i])) p.path[uint32_t(i)] = f.path().string();
    return p;
  }();
  return p;
}

struct Request {
  std::string file;
  std::string op;  // "crop": x y w h ow oh flip; "window": resize ow oh
  std::vector<long> args;
};

// PIL's outputs, one python run for all requests.
std::vector<std::vector<uint8_t>> Pil(const std::vector<Request>& rs) {
  const std::string dir = ScratchDir("-pil");
  std::ostringstream m;
  for (const auto& r : rs) {
    m << r.file << '\t' << r.op;
    for (long a : r.args) m << '\t' << a;
    m << '\n';
  }
  std::ofstream(dir + "/manifest") << m.str();
  std::ofstream(dir + "/ref.py") << R"(import sys
from PIL import Image
d = sys.argv[1]
for i, line in enumerate(open(d + '/manifest')):
    f = line.rstrip('\n').split('\t')
    im = Image.open(f[0]).convert('RGB')
    a = [int(v) for v in f[2:]]
    if f[1] == 'crop':
        x, y, w, h, ow, oh, flip = a
        out = im.crop((x, y, x + w, y + h)).resize((ow, oh), Image.BILINEAR)
        if flip:
            out = out.transpose(Image.FLIP_LEFT_RIGHT)
    else:  # torchvision's Resize(size) + CenterCrop((oh, ow)) geometry, computed here independently
        size, ow, oh = a
        w, h = im.size
        short, long = min(w, h), max(w, h)
        new_long = int(size * long / short)
        rw, rh = (size, new_long) if w <= h else (new_long, size)
        left, top = int(round((rw - ow) / 2.0)), int(round((rh - oh) / 2.0))
        out = im.resize((rw, rh), Image.BILINEAR).crop((left, top, left + ow, top + oh))
    open('%s/out%d' % (d, i), 'wb').write(out.tobytes())
)";
  if (std::system(("/usr/bin/python3 '" + dir + "/ref.py' '" + dir + "'").c_str()) != 0) return {};
  std::vector<std::vector<uint8_t>> out;
  for (size_t i = 0; i < rs.size(); ++i) out.push_back(ReadFile(dir + "/out" + std::to_string(i)));
  return out;
}

LoaderOptions Uint8(LoaderOptions o) {
  o.dtype = DType::kUint8;
  o.layout = Layout::kNHWC;
  o.augment.normalize = false;
  o.batch_size = 8;
  o.seed = 5;
  return o;
}

struct Sample {
  uint32_t index;
  std::vector<uint8_t> rgb;
};

std::vector<Sample> Epoch(Loader& l, uint64_t e) {
  std::vector<Sample> out;
  for (const Batch& b : l.epoch(e))
    for (uint32_t j = 0; j < b.size; ++j) {
      const uint8_t* p = b.images_as<uint8_t>() + j * b.image_bytes();
      out.push_back({b.indices[j], std::vector<uint8_t>(p, p + b.image_bytes())});
    }
  return out;
}

// PIL's request for what the loader made of sample `s` in epoch `e`.
Request RequestFor(const LoaderOptions& o, const Dataset& ds, uint32_t s, uint64_t e) {
  const auto entry = ds.entry(s);
  kernels::CropRect r;
  kernels::SampleParams p;
  kernels::MakeParams(o.augment, entry.width, entry.height, o.seed, e, s, &r, &p);
  const int ow = o.augment.out_w, oh = o.augment.out_h;
  if (o.augment.resize > 0) return {Built().path.at(s), "window", {o.augment.resize, ow, oh}};
  return {Built().path.at(s), "crop", {r.x, r.y, r.w, r.h, ow, oh, p.flip}};
}

struct Diff {
  int worst = 0;
  double psnr = 1e9;
};

Diff Compare(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  Diff d;
  if (a.size() != b.size()) return {256, 0};
  for (size_t i = 0; i < a.size(); ++i) d.worst = std::max(d.worst, std::abs(int(a[i]) - int(b[i])));
  d.psnr = Psnr(a, b);
  return d;
}

// Runs two epochs of `o` and compares every sample with PIL; returns the worst difference and PSNR.
Diff AgainstPil(const LoaderOptions& o, bool raw = false) {
  Loader l(raw ? Built().raw : Built().file, o);
  Dataset ds(raw ? Built().raw : Built().file);
  std::vector<Sample> got;
  std::vector<Request> reqs;
  for (uint64_t e = 0; e < 2; ++e)
    for (auto& s : Epoch(l, e)) {
      reqs.push_back(RequestFor(o, ds, s.index, e));
      got.push_back(std::move(s));
    }
  const auto want = Pil(reqs);
  EXPECT_EQ(want.size(), got.size()) << "the PIL script failed (/usr/bin/python3 with PIL)";
  Diff all;
  for (size_t i = 0; i < std::min(want.size(), got.size()); ++i) {
    const Diff d = Compare(got[i].rgb, want[i]);
    all.worst = std::max(all.worst, d.worst);
    all.psnr = std::min(all.psnr, d.psnr);
  }
  return all;
}

TEST(PhotoLoader, RandomResizedCropIsPilsCropThenResize) {
  ASSERT_FALSE(Built().file.empty()) << "could not unpack the photos";
  LoaderOptions o = Uint8(LoaderOptions::ImagenetTrain());
  // Stored as RGB: the crop, the resize and the flip alone, against PIL.
  Diff d = AgainstPil(o, /*raw=*/true);
  std::printf("imagenet-train, RGB payloads, vs PIL: max |diff| %d, lowest PSNR %.1f dB\n", d.worst, d.psnr);
  EXPECT_LE(d.worst, 1);
  o.augment.out_w = 97;  // odd, non-square outputs, upscaling some crops
  o.augment.out_h = 61;
  EXPECT_LE(AgainstPil(o, true).worst, 1);
  o.augment.out_w = 1;  // degenerate: one column (the scalar horizontal pass), 300 rows
  o.augment.out_h = 300;
  EXPECT_LE(AgainstPil(o, true).worst, 1);
  // JPEG payloads decoded at full size with PIL's fancy upsampling: the region decoder's edge rows and
  // columns (libjpeg's cropped / skipped-scanline upsampling) differ from a full decode by a few levels
  // (measured: max 4, PSNR >= 67 dB); everything else is the same arithmetic.
  o = Uint8(LoaderOptions::ImagenetTrain());
  o.fancy_upsampling = true;
  o.dct_scaling = false;
  d = AgainstPil(o);
  std::printf("imagenet-train, JPEG payloads, full-size decode, vs PIL: max |diff| %d, lowest PSNR %.1f dB\n", d.worst,
              d.psnr);
  EXPECT_LE(d.worst, 6);
  EXPECT_GE(d.psnr, 55.0);
}

TEST(PhotoLoader, ResizeThenCenterCropIsPilsTwoSteps) {
  ASSERT_FALSE(Built().file.empty());
  LoaderOptions o = Uint8(LoaderOptions::ImagenetTest());
  o.fancy_upsampling = true;
  o.dct_scaling = false;
  const Diff d = AgainstPil(o);
  std::printf("imagenet-test, full-size decode, vs PIL: max |diff| %d, lowest PSNR %.1f dB\n", d.worst, d.psnr);
  EXPECT_LE(d.worst, 1);
  // Odd windows: CenterCrop's offsets round half to even ((256 - 221) / 2 = 17.5 -> 18).
  o.augment.out_w = 223;
  o.augment.out_h = 221;
  EXPECT_LE(AgainstPil(o).worst, 1);
}

TEST(PhotoLoader, DctScaledDecodesStayCloseToPil) {
  ASSERT_FALSE(Built().file.empty());
  for (auto preset : {LoaderOptions::ImagenetTrain(), LoaderOptions::ImagenetTest()}) {
    LoaderOptions o = Uint8(preset);  // the defaults: box upsampling, DCT scaling
    const Diff d = AgainstPil(o);
    std::printf("%s, default decode (box upsampling, DCT scaling) vs PIL: max |diff| %d, lowest PSNR %.1f dB\n",
                o.augment.resize ? "imagenet-test" : "imagenet-train", d.worst, d.psnr);
    EXPECT_GE(d.psnr, 28.0);
  }
}

// The float outputs (the fused AVX2 normalise, mirrored rows) equal kernels::Normalize of the uint8 output.
TEST(PhotoLoader, FloatOutputsAreTheUint8OnesNormalised) {
  ASSERT_FALSE(Built().file.empty());
  for (auto preset : {LoaderOptions::ImagenetTrain(), LoaderOptions::ImagenetTest()}) {
    LoaderOptions u = Uint8(preset);
    Loader lu(Built().file, u);
    const auto ref = Epoch(lu, 3);
    float scale[3], bias[3];
    kernels::NormalizeCoefficients(preset.augment, scale, bias);
    for (auto [dtype, layout] : {std::pair{DType::kFloat32, Layout::kNCHW}, {DType::kFloat32, Layout::kNHWC},
                                 {DType::kFloat16, Layout::kNCHW}, {DType::kFloat16, Layout::kNHWC}}) {
      LoaderOptions o = preset;
      o.batch_size = u.batch_size;
      o.seed = u.seed;
      o.dtype = dtype;
      o.layout = layout;
      Loader l(Built().file, o);
      size_t n = 0;
      for (const Batch& b : l.epoch(3))
        for (uint32_t j = 0; j < b.size; ++j, ++n) {
          ASSERT_EQ(b.indices[j], ref[n].index);
          const size_t px = size_t(b.width) * b.height;
          for (size_t c = 0; c < 3; ++c)
            for (size_t i = 0; i < px; ++i) {
              const float want = kernels::Normalize(ref[n].rgb[i * 3 + c], scale[c], bias[c]);
              const size_t pos = j * px * 3 + (layout == Layout::kNCHW ? c * px + i : i * 3 + c);
              if (dtype == DType::kFloat32) ASSERT_EQ(b.images_as<float>()[pos], want) << "sample " << b.indices[j];
              else ASSERT_EQ(b.images_as<uint16_t>()[pos], kernels::FloatToHalf(want)) << "sample " << b.indices[j];
            }
        }
      EXPECT_EQ(n, ref.size());
    }
  }
}

// Progressive resizing: the output size changes between epochs without rebuilding the loader; each
// epoch equals a loader built for that size, and a batch leased before the change keeps its size and bytes.
TEST(PhotoLoader, SetOutputSizeTakesEffectAtTheNextEpoch) {
  ASSERT_FALSE(Built().file.empty());
  LoaderOptions o = LoaderOptions::ImagenetTrain();
  o.augment.out_w = o.augment.out_h = 160;
  o.batch_size = 8;
  o.seed = 2;
  o.threads = 2;
  Loader l(Built().file, o);
  auto fresh = [&](uint32_t side, uint64_t e) {
    LoaderOptions f = o;
    f.augment.out_w = f.augment.out_h = int(side);
    Loader g(Built().file, f);
    std::vector<std::vector<uint8_t>> out;
    for (const Batch& b : g.epoch(e)) out.emplace_back(b.images_as<uint8_t>(), b.images_as<uint8_t>() + b.image_bytes() * b.size);
    return out;
  };
  BatchLease kept;
  std::vector<uint8_t> kept_bytes;
  for (auto [side, e] : {std::pair<uint32_t, uint64_t>{160, 0}, {192, 1}, {224, 2}, {128, 3}}) {
    if (side != 160) l.set_output_size(side, side);
    const auto want = fresh(side, e);
    size_t k = 0;
    auto range = l.epoch(e);
    for (auto it = range.begin(); it != range.end(); ++it, ++k) {
      const Batch& b = *it;
      ASSERT_EQ(b.width, side);
      ASSERT_EQ(b.height, side);
      ASSERT_LT(k, want.size());
      ASSERT_EQ(std::memcmp(b.images, want[k].data(), want[k].size()), 0) << side << " px, batch " << k;
      if (side == 160 && k == 0) {
        kept = it.lease();
        kept_bytes.assign(b.images_as<uint8_t>(), b.images_as<uint8_t>() + b.image_bytes() * b.size);
      }
    }
    EXPECT_EQ(k, want.size());
    EXPECT_EQ(l.width(), side);
  }
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->width, 160u);
  EXPECT_EQ(std::memcmp(kept->images, kept_bytes.data(), kept_bytes.size()), 0) << "the leased batch changed";
  EXPECT_LE(l.buffers_allocated(), size_t(o.prefetch + 1 + o.max_leases));
  EXPECT_THROW(l.set_output_size(0, 10), OptionError);
  LoaderOptions c = LoaderOptions::ImagenetTest();
  c.batch_size = 8;
  Loader fixed(Built().file, c);
  EXPECT_THROW(fixed.set_output_size(300, 300), OptionError) << "Resize(256) cannot yield a 300 px window";
}

// The photos in an FFCV file (written by NumPy from docs/ffcv-format.md: no restart markers): a
// RandomResizedCrop loader decodes an image's crops from the second on from entry points
// (kernels/jpeg_seek.h). Over three epochs it delivers the same batches as without entry points and as
// the dsc file of the same JPEGs (restart markers, decoded by restart interval): box and fancy
// upsampling, the fast IDCT (FFCV's decode), DCT-scaled and full size, with 1 and 2 threads.
TEST(PhotoLoader, FfcvFileCropsFromEntryPointsEqualTheDscFile) {
  ASSERT_FALSE(Built().file.empty()) << "could not unpack the photos";
  const std::string ffcv = ScratchDir("-ffcv") + "/photos-ffcv.beton";
  const std::string cmd = "/usr/bin/python3 " + std::string(DSC_SOURCE_DIR) + "/tests/ffcv/ffcv_ref.py tree " + Built().tree +
                          " " + ffcv;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto epochs = [](const std::string& file, const LoaderOptions& o) {
    Loader l(file, o);
    std::vector<uint8_t> all;
    for (uint64_t e = 0; e < 3; ++e)
      for (const Batch& b : l.epoch(e)) {
        const auto* p = static_cast<const uint8_t*>(b.images);
        all.insert(all.end(), p, p + b.image_bytes() * b.size);
      }
    return all;
  };
  for (int variant = 0; variant < 4; ++variant) {
    LoaderOptions o = Uint8(LoaderOptions::ImagenetTrain());
    o.batch_size = 8;
    o.seed = 11 + uint64_t(variant);
    o.threads = 1 + variant % 2;
    o.fancy_upsampling = variant == 1;
    o.fast_idct = variant == 2;
    o.dct_scaling = variant != 3;
    const std::string what = "variant " + std::to_string(variant);
    const std::vector<uint8_t> dsc = epochs(Built().file, o);
    ASSERT_EQ(dsc.size(), size_t(3) * kPhotos * 224 * 224 * 3) << what;
    EXPECT_TRUE(epochs(ffcv, o) == dsc) << what << ": FFCV file, entry points";
    o.jpeg_index_budget = 0;
    EXPECT_TRUE(epochs(ffcv, o) == dsc) << what << ": FFCV file, from the top";
  }
}

}  // namespace
}  // namespace dsc::test
