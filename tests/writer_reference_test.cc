// The writer's resizes and colour conversions against independent references (PIL, a naive area
// average), on real photos.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <png.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <chrono>

// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>

#include "format/error.h"
#include "format/layout.h"
#include "kernels/jpeg_codec.h"
#include "kernels/jpeg_decoder.h"
#include "reader/dataset.h"
#include "reader/decode_rgb.h"
#include "tests/cifar_fixtures.h"
#include "tests/test_util.h"
#include "tests/writer_helpers.h"
#include "writer/build.h"
#include "writer/source.h"

namespace dsc::test {
namespace {

namespace fs = std::filesystem;
using format::Encoding;

// Runs tests/pil_ref.py (PIL, an independent reference) and returns its stdout.
std::vector<uint8_t> PilRef(const std::string& args) {
  const std::string cmd = "/usr/bin/python3 " + std::string(DSC_TEST_SCRIPTS) + "/pil_ref.py " + args;
  std::string out;
  EXPECT_EQ(RunShell(cmd, &out), 0) << cmd;
  return std::vector<uint8_t>(out.begin(), out.end());
}

// Naive area average, written independently of kernels/resize.cc: every output pixel integrates the
// source over its footprint in two dimensions at once, then rounds to nearest.
std::vector<uint8_t> NaiveArea(const std::vector<uint8_t>& src, int sw, int sh, int ch, int dw, int dh) {
  std::vector<uint8_t> out(size_t(dw) * dh * ch);
  const double fx = double(sw) / dw, fy = double(sh) / dh;
  for (int y = 0; y < dh; ++y)
    for (int x = 0; x < dw; ++x)
      for (int c = 0; c < ch; ++c) {
        double acc = 0;
        for (int sy = int(y * fy); sy < sh && sy < (y + 1) * fy; ++sy)
          for (int sx = int(x * fx); sx < sw && sx < (x + 1) * fx; ++sx) {
            const double wy = std::min((y + 1) * fy, sy + 1.0) - std::max(y * fy, double(sy));
            const double wx = std::min((x + 1) * fx, sx + 1.0) - std::max(x * fx, double(sx));
            acc += wx * wy * src[(size_t(sy) * sw + sx) * ch + c];
          }
        out[(size_t(y) * dw + x) * ch + c] = uint8_t(std::floor(acc / (fx * fy) + 0.5));
      }
  return out;
}

std::vector<uint8_t> Crop(const std::vector<uint8_t>& src, int sw, int ch, int x, int y, int cw, int chh) {
  std::vector<uint8_t> out;
  for (int r = 0; r < chh; ++r)
    out.insert(out.end(), src.begin() + (size_t(y + r) * sw + x) * ch, src.begin() + (size_t(y + r) * sw + x + cw) * ch);
  return out;
}

TEST(ImageTree, GrayscaleJpegResizeAndCropMatchReference) {
  auto dir = ScratchDir();
  fs::create_directories(dir + "/src/a");
  // An 800x600 grayscale photo stand-in: smooth structure plus noise, so rounding errors would show.
  const int W = 800, H = 600;
  std::vector<uint8_t> gray(size_t(W) * H);
  std::mt19937 rng(5);
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x)
      gray[size_t(y) * W + x] = uint8_t(std::clamp(128 + 90 * std::sin(x / 37.0) * std::cos(y / 23.0) + int(rng() % 41) - 20, 0.0, 255.0));
  tjhandle th = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long len = 0;
  ASSERT_EQ(tjCompress2(th, gray.data(), W, 0, H, TJPF_GRAY, &buf, &len, TJSAMP_GRAY, 92, 0), 0);
  const std::vector<uint8_t> jpg(buf, buf + len);
  tjFree(buf);
  tjDestroy(th);
  WriteFile(dir + "/src/a/gray.jpg", jpg);
  // Reference decode straight to one gray channel (TurboJPEG), then crop / area-average naively.
  std::vector<uint8_t> ref(size_t(W) * H);
  tjhandle dh = tjInitDecompress();
  ASSERT_EQ(tjDecompress2(dh, jpg.data(), jpg.size(), ref.data(), W, 0, H, TJPF_GRAY, 0), 0);
  tjDestroy(dh);

  struct Case {
    std::string args;
    int x, y, side_w, side_h, ow, oh;  // crop rectangle, then output size
  };
  // --center-crop 0.875: side = round(0.875 x 600) = 525 at ((800-525)/2, (600-525)/2).
  const Case cases[] = {{"--max-resolution 256", 0, 0, W, H, 256, 192},
                        {"--center-crop 0.875", 137, 37, 525, 525, 525, 525},
                        {"--center-crop 0.875 --max-resolution 256", 137, 37, 525, 525, 256, 256}};
  for (const auto& c : cases) {
    auto want = NaiveArea(Crop(ref, W, 1, c.x, c.y, c.side_w, c.side_h), c.side_w, c.side_h, 1, c.ow, c.oh);
    for (const char* enc : {"raw", "default"}) {
      SCOPED_TRACE(c.args + " --encoding " + enc);
      const std::string out = dir + "/out.beton";
      fs::remove(out);
      std::string log;
      ASSERT_EQ(RunDsc("build " + dir + "/src " + out + " --quiet --encoding " + enc + " " + c.args, &log), 0) << log;
      Dataset ds(out, {.verify = true});
      const auto e = ds.entry(0);
      ASSERT_EQ(e.width, c.ow);
      ASSERT_EQ(e.height, c.oh);
      const auto got = Pixels(ds, 0);
      ASSERT_EQ(got.size(), want.size() * 3);
      int worst = 0;
      double sum = 0;
      std::vector<uint8_t> got_gray(want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_TRUE(got[i * 3] == got[i * 3 + 1] && got[i * 3] == got[i * 3 + 2]) << "pixel " << i << " is not gray";
        got_gray[i] = got[i * 3];
        worst = std::max(worst, std::abs(int(got[i * 3]) - int(want[i])));
        sum += std::abs(int(got[i * 3]) - int(want[i]));
      }
      const double mean = sum / double(want.size());
      std::printf("  gray 800x600, %s --encoding %s: max |diff| %d, mean |diff| %.4f, PSNR %.1f dB\n", c.args.c_str(), enc,
                  worst, mean, Psnr(got_gray, want));
      if (std::string(enc) == "raw") {
        EXPECT_EQ(e.encoding, uint8_t(Encoding::kRaw));
        // Only floating-point ties may round differently from the naive reference.
        EXPECT_LE(worst, 1);
        EXPECT_LE(mean, 0.001);
      } else {
        EXPECT_EQ(e.encoding, uint8_t(Encoding::kJpeg));
        EXPECT_EQ(e.channels, 1) << "a gray source stays a one-channel JPEG";
        // A q90 gray re-encode of a noisy image: measured PSNR 36.3-39.9 dB, max error 12-18.
        EXPECT_GT(Psnr(got_gray, want), 34.0);
        EXPECT_LE(worst, 24);
      }
    }
  }
}

// A handful of real ImageNet photos, unpacked once from ../shared/data into the build tree.
std::string PhotoTree() {
  const fs::path root = fs::path(DSC_TESTDATA) / "photos10";
  if (fs::exists(root / ".unpacked")) return (root / "imagenet-photos-500").string();
  const std::string tmp = ScratchDir("photos");
  const std::string archive = std::string(DSC_TEST_SCRIPTS) + "/../../shared/data/imagenet-photos-500.tar.zst";
  const std::string cmd = "tar --zstd -xf '" + archive + "' -C '" + tmp +
                          "' --wildcards 'imagenet-photos-500/n014*' 'imagenet-photos-500/n015*'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  WriteFile(tmp + "/.unpacked", "", 0);
  std::error_code ec;
  fs::rename(tmp, root, ec);  // a parallel test may have won the race: either copy is complete
  return (root / "imagenet-photos-500").string();
}

// Area averaging preserves an image's mean exactly, so the mean of the output must equal the mean of
// the decoded source up to rounding noise (a biased rounding would shift it by up to 0.5 levels).
// PIL's Image.BOX is not that reference: at this non-integer factor (about 1.95) it is itself about
// +0.45 levels brighter than its source (rounding its 8-bit intermediate pass, and whole pixels in or
// out of a footprint rather than fractional coverage), which the printout shows; dsc is compared to it
// for geometry (PSNR) only.
TEST(ImageTree, AreaDownscaleOfRealPhotosIsUnbiased) {
  const auto root = PhotoTree();
  const auto files = TreeFiles(root);
  ASSERT_EQ(files.size(), 10u);
  auto dir = ScratchDir();
  auto o = Opts("raw");
  o.encode.max_resolution = 256;
  writer::Build(root, dir + "/p.beton", o);
  Dataset ds(dir + "/p.beton");
  ASSERT_EQ(ds.size(), files.size());
  std::string args = "rgb";
  for (uint64_t i = 0; i < ds.size(); ++i)
    args += " '" + files[i].first + ":" + std::to_string(ds.entry(i).width) + ":" + std::to_string(ds.entry(i).height) + "'";
  const auto pil = PilRef(args);
  std::vector<uint8_t> got, naive;
  double src_mean = 0, pil_mean = 0;
  for (uint64_t i = 0; i < ds.size(); ++i) {
    const int ow = ds.entry(i).width, oh = ds.entry(i).height;
    ASSERT_EQ(std::max(ow, oh), 256);
    int sw, sh;
    const auto src = ReferenceDecode(ReadFile(files[i].first), &sw, &sh);
    const auto want = NaiveArea(src, sw, sh, 3, ow, oh);
    const auto px = Pixels(ds, i);
    ASSERT_EQ(px.size(), want.size());
    double s = 0, d = 0, p = 0;
    for (uint8_t v : src) s += v;
    for (uint8_t v : px) d += v;
    for (size_t k = 0; k < px.size(); ++k) p += pil[got.size() + k];
    s /= double(src.size()), d /= double(px.size()), p /= double(px.size());
    std::printf("  %-36s %4dx%-4d -> %dx%d: mean(dsc) - mean(source) %+.4f, mean(PIL BOX) - mean(source) %+.4f\n",
                fs::path(files[i].first).filename().c_str(), sw, sh, ow, oh, d - s, p - s);
    EXPECT_LE(std::abs(d - s), 0.1) << files[i].first;
    src_mean += s / double(ds.size());
    pil_mean += p / double(ds.size());
    got.insert(got.end(), px.begin(), px.end());
    naive.insert(naive.end(), want.begin(), want.end());
  }
  ASSERT_EQ(got.size(), pil.size());
  double bias = 0, pil_bias = 0;
  int worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    bias += int(got[i]) - int(naive[i]);
    pil_bias += int(got[i]) - int(pil[i]);
    worst = std::max(worst, std::abs(int(got[i]) - int(naive[i])));
  }
  bias /= double(got.size());
  pil_bias /= double(got.size());
  std::printf("10 photos -> 256: mean(dsc - naive area) %+.4f (max |diff| %d); mean(dsc - PIL BOX) %+.4f, "
              "PSNR vs PIL %.1f dB\n", bias, worst, pil_bias, Psnr(got, pil));
  EXPECT_LE(std::abs(bias), 0.1);
  EXPECT_LE(worst, 1);  // floating-point ties only
  EXPECT_GT(Psnr(got, naive), 60.0);
  // Measured 34.7 dB: same photo, different footprints at the edges of each output pixel.
  EXPECT_GT(Psnr(got, pil), 33.0);
}

TEST(ImageTree, PngColourTypesMatchPilAndNeverDependOnThePreviousImage) {
  auto dir = ScratchDir();
  fs::create_directories(dir + "/ref");
  PilRef("pngs '" + dir + "/ref'");
  fs::create_directories(dir + "/src/a");
  std::vector<std::string> names;
  for (const auto& f : fs::directory_iterator(dir + "/ref"))
    if (f.path().extension() == ".png") names.push_back(f.path().stem().string());
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) { return a + ".png" < b + ".png"; });
  ASSERT_EQ(names.size(), 11u);
  for (const auto& n : names) fs::copy_file(dir + "/ref/" + n + ".png", dir + "/src/a/" + n + ".png");
  std::vector<std::vector<uint8_t>> outs;
  for (int threads : {1, 2}) {
    const std::string out = dir + "/t" + std::to_string(threads) + ".beton";
    writer::Build(dir + "/src", out, Opts("default", threads));
    outs.push_back(ReadFile(out));
    Dataset ds(out, {.verify = true});
    ASSERT_EQ(ds.size(), names.size());
    for (uint64_t i = 0; i < ds.size(); ++i) {
      EXPECT_EQ(ds.entry(i).width, 37);
      EXPECT_EQ(ds.entry(i).height, 23);
      const auto got = Pixels(ds, i), want = ReadFile(dir + "/ref/" + names[i] + ".rgb");
      ASSERT_EQ(got.size(), want.size()) << names[i];
      size_t wrong = 0;
      for (size_t k = 0; k < got.size(); ++k) wrong += got[k] != want[k];
      EXPECT_EQ(wrong, 0u) << names[i] << ", threads " << threads << ": bytes differing from PIL's convert(\"RGB\")";
    }
  }
  EXPECT_EQ(outs[0], outs[1]) << "--threads 1 and --threads 2 must write the same bytes";
}

}  // namespace
}  // namespace dsc::test
