// kernels/resample: the scalar reference against PIL's Image.resize (run by /usr/bin/python3 on the same
// RGB bytes), and the AVX2 path against the scalar reference, on real photos.
#include "kernels/resample.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "format/error.h"
#include "kernels/cpu.h"
#include "tests/test_util.h"

namespace {

using dsc::kernels::ResampleBox;
using dsc::kernels::ResampleFilter;

struct Image {
  std::string name;
  int w = 0, h = 0;
  std::vector<uint8_t> rgb;
};

// A few real photos, unpacked once into the build tree and decoded with TurboJPEG.
const std::vector<Image>& Photos() {
  static const std::vector<Image> photos = [] {
    const std::string dir = dsc::test::PhotosTree(DSC_PHOTOS);
    if (dir.empty()) return std::vector<Image>{};
    const char* names[] = {"n01440764/n01440764_tench.JPEG", "n01484850/n01484850_great_white_shark.JPEG",
                           "n01514859/n01514859_hen.JPEG"};
    std::vector<Image> out;
    for (const char* n : names) {
      Image im;
      im.name = n;
      im.rgb = dsc::test::ReferenceDecode(dsc::test::ReadFile(dir + "/" + n), &im.w, &im.h);
      if (im.rgb.empty()) return std::vector<Image>{};
      out.push_back(std::move(im));
    }
    return out;
  }();
  return photos;
}

struct Case {
  int img = 0;  // index into Photos()
  int ow = 0, oh = 0;
  ResampleFilter f = ResampleFilter::kBilinear;
  ResampleBox box;  // all zero: the whole image (and PIL gets box=None)
};

std::string Describe(const Case& c) {
  std::ostringstream s;
  s.precision(9);
  s << Photos()[c.img].name << " -> " << c.ow << "x" << c.oh << " filter " << int(c.f) << " box (" << c.box.x0 << ", "
    << c.box.y0 << ", " << c.box.x1 << ", " << c.box.y1 << ")";
  return s.str();
}

// PIL's output for every case, from one python run: the photos and a manifest go to a scratch folder.
std::vector<std::vector<uint8_t>> PilResize(const std::vector<Case>& cases) {
  const std::string dir = dsc::test::ScratchDir("pil");
  for (size_t i = 0; i < Photos().size(); ++i) dsc::test::WriteFile(dir + "/img" + std::to_string(i), Photos()[i].rgb);
  std::ostringstream m;
  m.precision(9);  // 9 significant digits: the float box edges survive the round trip exactly
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const Image& im = Photos()[c.img];
    const bool whole = c.box.x0 == 0 && c.box.y0 == 0 && c.box.x1 == 0 && c.box.y1 == 0;
    m << c.img << ' ' << im.w << ' ' << im.h << ' ' << c.ow << ' ' << c.oh << ' ' << int(c.f) << ' ' << whole << ' '
      << c.box.x0 << ' ' << c.box.y0 << ' ' << c.box.x1 << ' ' << c.box.y1 << '\n';
  }
  std::ofstream(dir + "/manifest") << m.str();
  std::ofstream(dir + "/resize.py") << R"(import sys
from PIL import Image
d = sys.argv[1]
filters = [Image.BOX, Image.BILINEAR, Image.BICUBIC]
for i, line in enumerate(open(d + '/manifest')):
    f = line.split()
    img, w, h, ow, oh, flt, whole = map(int, f[:7])
    box = None if whole else tuple(float(v) for v in f[7:11])
    im = Image.frombytes('RGB', (w, h), open('%s/img%d' % (d, img), 'rb').read())
    open('%s/out%d' % (d, i), 'wb').write(im.resize((ow, oh), filters[flt], box=box).tobytes())
)";
  const std::string cmd = "/usr/bin/python3 '" + dir + "/resize.py' '" + dir + "'";
  if (std::system(cmd.c_str()) != 0) return {};
  std::vector<std::vector<uint8_t>> out;
  for (size_t i = 0; i < cases.size(); ++i) out.push_back(dsc::test::ReadFile(dir + "/out" + std::to_string(i)));
  return out;
}

// A small deterministic generator for the random boxes.
struct Lcg {
  uint64_t s;
  double Next() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return double(s >> 11) / double(1ULL << 53);
  }
};

std::vector<Case> PilCases() {
  std::vector<Case> cs;
  const ResampleFilter kFilters[] = {ResampleFilter::kBox, ResampleFilter::kBilinear, ResampleFilter::kBicubic};
  for (int i = 0; i < int(Photos().size()); ++i) {
    const float w = float(Photos()[i].w), h = float(Photos()[i].h);
    for (ResampleFilter f : kFilters) {
      cs.push_back({i, 224, 224, f, {}});                                       // whole image, downscale
      cs.push_back({i, 223, 161, f, {13.37f, 7.25f, w - 19.6f, h - 3.3f}});     // fractional edges, odd sizes
      cs.push_back({i, 301, 257, f, {10.5f, 20.25f, 60.75f, 61.5f}});          // upscale ~6x
      cs.push_back({i, 1, 1, f, {}});                                           // 1-pixel outputs
      cs.push_back({i, 1, 57, f, {3.5f, 0, 200.25f, h}});
      cs.push_back({i, 63, 1, f, {0, 100.75f, w, 101.5f}});
      cs.push_back({i, Photos()[i].w - 37, Photos()[i].h, f, {}});              // horizontal pass only
      cs.push_back({i, Photos()[i].w, Photos()[i].h + 41, f, {}});              // vertical pass only
      cs.push_back({i, 97, 89, f, {0, 0, 96.5f, 88.75f}});                      // ~1:1 with a fractional end
      cs.push_back({i, 5, 3, f, {w - 1.5f, h - 2.25f, w, h}});                  // corner, upscale
    }
    // RandomResizedCrop-like boxes: random area and aspect, fractional corners, 224x224 and odd outputs.
    Lcg g{uint64_t(i) * 977 + 1};
    for (int r = 0; r < 12; ++r) {
      const double area = w * h * (0.08 + 0.92 * g.Next());
      const double ratio = std::exp(std::log(3.0 / 4) + (std::log(4.0 / 3) - std::log(3.0 / 4)) * g.Next());
      double cw = std::sqrt(area * ratio), ch = std::sqrt(area / ratio);
      if (cw > w) cw = w;
      if (ch > h) ch = h;
      const float x0 = float((w - cw) * g.Next()), y0 = float((h - ch) * g.Next());
      const ResampleBox b{x0, y0, std::min(w, float(x0 + cw)), std::min(h, float(y0 + ch))};
      const int ow = r % 3 == 0 ? 224 : 31 + int(400 * g.Next()), oh = r % 3 == 0 ? 224 : 17 + int(400 * g.Next());
      cs.push_back({i, ow, oh, r % 2 ? ResampleFilter::kBox : ResampleFilter::kBilinear, b});
    }
  }
  return cs;
}

TEST(Resample, ScalarMatchesPil) {
  ASSERT_EQ(Photos().size(), 3u) << "could not unpack/decode the photos from " << DSC_PHOTOS;
  const std::vector<Case> cases = PilCases();
  const auto pil = PilResize(cases);
  ASSERT_EQ(pil.size(), cases.size()) << "the PIL script failed (/usr/bin/python3 with PIL)";
  int exact = 0, worst = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const Image& im = Photos()[c.img];
    std::vector<uint8_t> out(size_t(c.ow) * c.oh * 3);
    dsc::kernels::ResampleRgbScalar(im.rgb.data(), im.w, im.h, out.data(), c.ow, c.oh, c.f, c.box);
    ASSERT_EQ(pil[i].size(), out.size()) << Describe(c);
    int err = 0;
    size_t diffs = 0, first = 0;
    for (size_t j = 0; j < out.size(); ++j) {
      const int d = std::abs(int(out[j]) - int(pil[i][j]));
      if (d && !diffs++) first = j;
      err = std::max(err, d);
    }
    worst = std::max(worst, err);
    exact += err == 0;
    EXPECT_EQ(err, 0) << Describe(c) << ": " << diffs << " bytes differ, first at byte " << first << " (ours "
                      << int(out[first]) << ", PIL " << int(pil[i][first]) << ")";
  }
  std::printf("resample vs PIL: %d of %zu cases bit-exact, max error %d\n", exact, cases.size(), worst);
}

// Turns the AVX-512 twins off while alive, so that an AVX-512 machine checks the AVX2 code as well.
struct Avx2Only {
  Avx2Only() { dsc::kernels::LimitToAvx2(true); }
  ~Avx2Only() { dsc::kernels::LimitToAvx2(false); }
};

// Many geometries, including the awkward ones for the SIMD path (taps past the row end, sources
// narrower than the tap count, big downscale factors, bicubic lobes), against the scalar reference.
TEST(Resample, Avx2MatchesScalar) {
  if (!dsc::kernels::UseAvx2()) GTEST_SKIP() << "no AVX2 here (or DSC_FORCE_SCALAR=1): only the scalar path runs here";
  ASSERT_FALSE(Photos().empty());
  const Image& im = Photos()[0];
  Lcg g{42};
  std::vector<uint8_t> scratch;
  int n = 0;
  for (int r = 0; r < 400; ++r) {
    const ResampleFilter f = ResampleFilter(r % 3);
    // Source: a crop of the photo, from 1 pixel to the whole width.
    const int sw = r < 40 ? 1 + r % 9 : 1 + int((im.w - 1) * g.Next() * g.Next());
    const int sh = r < 40 ? 1 + r / 9 : 1 + int((im.h - 1) * g.Next() * g.Next());
    std::vector<uint8_t> src(size_t(sw) * sh * 3);
    for (int y = 0; y < sh; ++y) std::memcpy(&src[size_t(y) * sw * 3], &im.rgb[size_t(y) * im.w * 3], size_t(sw) * 3);
    const int dw = 1 + int(300 * g.Next()), dh = 1 + int(300 * g.Next());
    ResampleBox b;
    if (r % 4) {
      const float x0 = float(sw * g.Next() * 0.5), y0 = float(sh * g.Next() * 0.5);
      b = {x0, y0, x0 + float((sw - x0) * g.Next()), y0 + float((sh - y0) * g.Next())};
    }
    std::vector<uint8_t> want(size_t(dw) * dh * 3), got(want.size(), 0xAB);
    dsc::kernels::ResampleRgbScalar(src.data(), sw, sh, want.data(), dw, dh, f, b);
    for (int avx2_only = 0; avx2_only < 2; ++avx2_only) {
      std::optional<Avx2Only> limit;
      if (avx2_only) limit.emplace();
      std::fill(got.begin(), got.end(), 0xAB);
      dsc::kernels::ResampleRgb(src.data(), sw, sh, got.data(), dw, dh, f, b, &scratch);
      ASSERT_EQ(got, want) << sw << "x" << sh << " -> " << dw << "x" << dh << " filter " << int(f) << " box (" << b.x0
                           << ", " << b.y0 << ", " << b.x1 << ", " << b.y1 << ")" << (avx2_only ? " AVX2 only" : "");
    }
    ++n;
  }
  // The benchmark's geometry, exactly.
  std::vector<uint8_t> want(224 * 224 * 3), got(want.size());
  const ResampleBox b{17.25f, 9.5f, 337.25f, 329.5f};
  dsc::kernels::ResampleRgbScalar(im.rgb.data(), im.w, im.h, want.data(), 224, 224, ResampleFilter::kBilinear, b);
  dsc::kernels::ResampleRgb(im.rgb.data(), im.w, im.h, got.data(), 224, 224, ResampleFilter::kBilinear, b);
  EXPECT_EQ(got, want);
  EXPECT_EQ(n, 400);
}

// MakeResampleAxis (all indices at once, tuned) against ResampleTaps + ResampleFixed one index at a time,
// Pillow's precompute_coeffs as written, over up- and downscales with fractional float boxes.
TEST(Resample, AxisMatchesPerIndexTaps) {
  Lcg g{7};
  std::vector<double> w;
  for (int r = 0; r < 600; ++r) {
    const ResampleFilter f = ResampleFilter(r % 3);
    const int in_size = 1 + int(900 * g.Next() * g.Next());
    const float in0 = r % 5 == 0 ? 0.f : float(in_size * 0.5 * g.Next());
    const float in1 = r % 5 == 0 ? float(in_size) : in0 + float((in_size - in0) * g.Next());
    const int out_size = 1 + int(400 * g.Next());
    const auto a = dsc::kernels::MakeResampleAxis(f, in_size, in0, in1, out_size);
    ASSERT_EQ(a.ksize, dsc::kernels::ResampleMaxTaps(f, in0, in1, out_size));
    w.assign(size_t(a.ksize), 0.0);
    for (int i = 0; i < out_size; ++i) {
      int first = -1;
      const int n = dsc::kernels::ResampleTaps(f, in_size, in0, in1, out_size, i, &first, w.data());
      ASSERT_EQ(a.first[i], first) << r << " index " << i;
      ASSERT_EQ(a.count[i], n) << r << " index " << i;
      for (int t = 0; t < a.ksize; ++t)
        ASSERT_EQ(a.k[size_t(i) * a.ksize + t], t < n ? dsc::kernels::ResampleFixed(w[t]) : 0)
            << "case " << r << ": " << in_size << " [" << in0 << ", " << in1 << ") -> " << out_size << " filter "
            << int(f) << ", index " << i << " tap " << t;
    }
  }
}

// The loader's entry point: windows of precomputed axes over a padded-stride buffer. A whole-image
// window with taps clipped to the image is ResampleRgbScalar with the same box (checked against PIL
// above); a window of outputs is that image's window; a mirrored axis is the mirrored image; the AVX2
// path equals the scalar one. Taps outside the source are refused.
TEST(Resample, WindowsOfAxesMatchTheReference) {
  ASSERT_FALSE(Photos().empty());
  Lcg g{99};
  using dsc::kernels::ResampleAxis;
  for (int r = 0; r < 120; ++r) {
    const Image& im = Photos()[size_t(r) % Photos().size()];
    const size_t stride = size_t(im.w) * 3 + 32 * (r % 3);  // padded rows, as the decode buffer's
    std::vector<uint8_t> src(stride * size_t(im.h));
    for (int y = 0; y < im.h; ++y) std::memcpy(&src[y * stride], &im.rgb[size_t(y) * im.w * 3], size_t(im.w) * 3);
    const float x0 = float(im.w * 0.4 * g.Next()), y0 = float(im.h * 0.4 * g.Next());
    const ResampleBox b{x0, y0, x0 + float((im.w - x0) * (0.2 + 0.8 * g.Next())), y0 + float((im.h - y0) * (0.2 + 0.8 * g.Next()))};
    const int dw = 2 + int(300 * g.Next()), dh = 2 + int(300 * g.Next());
    std::vector<uint8_t> full(size_t(dw) * dh * 3);
    dsc::kernels::ResampleRgbScalar(im.rgb.data(), im.w, im.h, full.data(), dw, dh, ResampleFilter::kBilinear, b);
    // A window [ox, ox + n) x [oy, oy + m) of it, mirrored on odd cases.
    const int ox = int((dw - 1) * g.Next() * 0.5), oy = int((dh - 1) * g.Next() * 0.5);
    const int n = 1 + int((dw - ox - 1) * g.Next()), m = 1 + int((dh - oy - 1) * g.Next());
    const bool mirror = r % 2;
    ResampleAxis h, v;
    dsc::kernels::MakeResampleWindow(ResampleFilter::kBilinear, 0, im.w, b.x0, b.x1, dw, ox, n, 0, mirror, &h);
    dsc::kernels::MakeResampleWindow(ResampleFilter::kBilinear, 0, im.h, b.y0, b.y1, dh, oy, m, 0, false, &v);
    std::vector<uint8_t> want(size_t(n) * m * 3), got(want.size(), 0xAB), fast(want.size(), 0xCD);
    for (int y = 0; y < m; ++y)
      for (int x = 0; x < n; ++x)
        for (int c = 0; c < 3; ++c)
          want[(size_t(y) * n + x) * 3 + c] = full[(size_t(oy + y) * dw + ox + (mirror ? n - 1 - x : x)) * 3 + c];
    dsc::kernels::ResampleRgbAxesScalar(src.data(), im.w, im.h, stride, h, v, got.data());
    ASSERT_EQ(got, want) << "case " << r;
    dsc::kernels::ResampleRgbAxes(src.data(), im.w, im.h, stride, h, v, fast.data());
    ASSERT_EQ(fast, want) << "case " << r << " (SIMD)";
    {
      Avx2Only limit;
      std::fill(fast.begin(), fast.end(), 0xCD);
      dsc::kernels::ResampleRgbAxes(src.data(), im.w, im.h, stride, h, v, fast.data());
      ASSERT_EQ(fast, want) << "case " << r << " (AVX2 only)";
    }
  }
  // Taps reaching past the buffer are refused, not read.
  const Image& im = Photos()[0];
  ResampleAxis h, v;
  dsc::kernels::MakeResampleWindow(ResampleFilter::kBilinear, 0, im.w, 0, float(im.w), 50, 0, 50, 0, false, &h);
  dsc::kernels::MakeResampleWindow(ResampleFilter::kBilinear, 0, im.h, 0, float(im.h), 50, 0, 50, 0, false, &v);
  std::vector<uint8_t> out(50 * 50 * 3);
  EXPECT_THROW(dsc::kernels::ResampleRgbAxes(im.rgb.data(), im.w - 1, im.h, size_t(im.w) * 3, h, v, out.data()),
               dsc::Error);
}

// With a row sink, each output row reaches the sink once, in order, already final (equal to the
// reference's row when it arrives), for the scalar and AVX2 paths: heights around the 8-row blocks of
// the pipelined horizontal pass, upscales and downscales, a mirrored vertical axis (its first row needs
// the last source rows) and windows of a larger resize.
TEST(Resample, RowSinkGetsFinalRowsInOrder) {
  ASSERT_FALSE(Photos().empty());
  struct Record final : dsc::kernels::ResampleRowSink {
    std::vector<int> ys;
    std::vector<uint8_t> rows;
    size_t row_bytes = 0;
    void Row(int y, const uint8_t* rgb) override {
      ys.push_back(y);
      rows.insert(rows.end(), rgb, rgb + row_bytes);
    }
  };
  Lcg g{7};
  using dsc::kernels::ResampleAxis;
  const int heights[] = {1, 2, 7, 8, 9, 15, 16, 17, 57, 224, 300};
  for (int r = 0; r < 44; ++r) {
    const Image& im = Photos()[size_t(r * 7) % Photos().size()];
    const size_t stride = size_t(im.w) * 3 + 32 * (r % 2);
    std::vector<uint8_t> src(stride * size_t(im.h));
    for (int y = 0; y < im.h; ++y) std::memcpy(&src[y * stride], &im.rgb[size_t(y) * im.w * 3], size_t(im.w) * 3);
    const int dw = 1 + int(260 * g.Next()), dh = heights[r % 11];
    const int lo = int(im.h * 0.3 * g.Next()), hi = lo + 1 + int((im.h - lo - 1) * g.Next());
    const bool window = r % 4 == 3;  // outputs [oy, oy + dh) of a resize to 2 * dh + 3 rows
    const int full = window ? 2 * dh + 3 : dh, oy = window ? int((dh + 3) * g.Next()) : 0;
    ResampleAxis h, v;
    dsc::kernels::MakeResampleWindow(ResampleFilter::kBilinear, 0, im.w, 0, float(im.w), dw, 0, dw, 0, r % 3 == 0, &h);
    dsc::kernels::MakeResampleWindow(ResampleFilter::kBilinear, lo, hi, float(lo), float(hi), full, oy, dh, 0,
                                     /*mirror=*/r % 2 == 1, &v);
    std::vector<uint8_t> want(size_t(dw) * dh * 3);
    dsc::kernels::ResampleRgbAxesScalar(src.data(), im.w, im.h, stride, h, v, want.data());
    for (int fast = 0; fast < 3; ++fast) {  // scalar, SIMD as dispatched, AVX2 only
      std::optional<Avx2Only> limit;
      if (fast == 2) limit.emplace();
      Record rec;
      rec.row_bytes = size_t(dw) * 3;
      std::vector<uint8_t> got(want.size(), 0xEE);
      if (fast) dsc::kernels::ResampleRgbAxes(src.data(), im.w, im.h, stride, h, v, got.data(), nullptr, &rec);
      else dsc::kernels::ResampleRgbAxesScalar(src.data(), im.w, im.h, stride, h, v, got.data(), nullptr, &rec);
      std::vector<int> order(static_cast<size_t>(dh));
      for (int y = 0; y < dh; ++y) order[size_t(y)] = y;
      ASSERT_EQ(rec.ys, order) << "case " << r << (fast ? " (SIMD)" : " (scalar)") << fast;
      ASSERT_EQ(rec.rows, want) << "case " << r << (fast ? " (SIMD)" : " (scalar)") << fast;
      ASSERT_EQ(got, want) << "case " << r << (fast ? " (SIMD)" : " (scalar)") << fast;
    }
  }
}

TEST(Resample, RefusesBadGeometry) {
  std::vector<uint8_t> src(10 * 8 * 3, 7), dst(5 * 5 * 3);
  auto run = [&](int sw, int sh, int dw, int dh, ResampleBox b) -> std::string {
    try {
      dsc::kernels::ResampleRgb(src.data(), sw, sh, dst.data(), dw, dh, ResampleFilter::kBilinear, b);
    } catch (const dsc::Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(run(10, 8, 5, 5, {-0.5f, 0, 4, 4}).find("negative"), std::string::npos);
  EXPECT_NE(run(10, 8, 5, 5, {0, 0, 10.5f, 4}).find("exceeds the 10x8 image"), std::string::npos);
  EXPECT_NE(run(10, 8, 5, 5, {0, 0, 4, 8.01f}).find("exceeds"), std::string::npos);
  EXPECT_NE(run(10, 8, 5, 5, {5, 1, 4, 4}).find("inverted"), std::string::npos);
  EXPECT_NE(run(10, 8, 5, 5, {0, 0, std::numeric_limits<float>::quiet_NaN(), 4}).find("not finite"),
            std::string::npos);
  EXPECT_NE(run(10, 8, 5, 5, {0, 0, std::numeric_limits<float>::infinity(), 4}).find("not finite"),
            std::string::npos);
  EXPECT_NE(run(10, 8, 0, 5, {}).find("output size 0x5"), std::string::npos);
  EXPECT_NE(run(0, 8, 5, 5, {}).find("source size 0x8"), std::string::npos);
  // Pillow accepts an empty (zero-width) box; so does this, and the result is defined.
  EXPECT_EQ(run(10, 8, 5, 5, {3, 2, 3, 6}), "");
}

}  // namespace
