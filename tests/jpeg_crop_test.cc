// Decoding only the restart intervals a crop needs (kernels/jpeg_crop.h, JpegDecoder::DecodeRegion),
// on the real ImageNet photos given restart markers here, independently of the writer: a lossless
// transcode with libjpeg's coefficient API (DCT coefficients unchanged). Reference: TurboJPEG's decode
// of the whole image (TJFLAG_FASTUPSAMPLE for box upsampling), then the crop.
#include "kernels/jpeg_crop.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <turbojpeg.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>
// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>

#include "kernels/augment.h"
#include "kernels/jpeg_decoder.h"
#include "kernels/jpeg_seek.h"
#include "kernels/resample.h"
#include "reader/dataset.h"
#include "reader/loader.h"
#include "tests/test_util.h"
#include "writer/build.h"

namespace dsc::test {
namespace {

using kernels::JpegDecoder;

// The 500 photos, unpacked once into the build tree; paths sorted.
const std::vector<std::string>& PhotoPaths() {
  static const std::vector<std::string> paths = [] {
    const std::string dir = PhotosTree(DSC_PHOTOS);
    if (dir.empty()) return std::vector<std::string>{};
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
      if (e.is_regular_file() && e.path().extension() == ".JPEG") out.push_back(e.path().string());
    std::sort(out.begin(), out.end());
    return out;
  }();
  return paths;
}

struct Geometry {
  int w = 0, h = 0, mcu_w = 8, mcu_h = 8, subsamp = 0;
  int mcus_per_row() const { return (w + mcu_w - 1) / mcu_w; }
};

Geometry Probe(const std::vector<uint8_t>& jpeg) {
  Geometry g;
  int cs = 0;
  tjhandle t = tjInitDecompress();
  EXPECT_EQ(tjDecompressHeader3(t, jpeg.data(), jpeg.size(), &g.w, &g.h, &g.subsamp, &cs), 0);
  tjDestroy(t);
  g.mcu_w = tjMCUWidth[g.subsamp];
  g.mcu_h = tjMCUHeight[g.subsamp];
  return g;
}

struct JpegError {
  jpeg_error_mgr mgr;
  jmp_buf jump;
};
void OnJpegError(j_common_ptr c) { std::longjmp(reinterpret_cast<JpegError*>(c->err)->jump, 1); }

// Lossless transcode with `interval` MCUs per restart interval (0: none), Huffman tables optimised.
std::vector<uint8_t> Transcode(const std::vector<uint8_t>& jpeg, int interval) {
  jpeg_decompress_struct d;
  jpeg_compress_struct c;
  JpegError err;
  d.err = jpeg_std_error(&err.mgr);
  c.err = d.err;
  err.mgr.error_exit = OnJpegError;
  unsigned char* buf = nullptr;
  unsigned long len = 0;
  jpeg_create_decompress(&d);
  jpeg_create_compress(&c);
  std::vector<uint8_t> out;
  if (setjmp(err.jump) == 0) {
    jpeg_mem_src(&d, jpeg.data(), jpeg.size());
    jpeg_read_header(&d, TRUE);
    jvirt_barray_ptr* coefs = jpeg_read_coefficients(&d);
    jpeg_copy_critical_parameters(&d, &c);
    c.restart_interval = unsigned(interval);
    c.optimize_coding = TRUE;
    jpeg_mem_dest(&c, &buf, &len);
    jpeg_write_coefficients(&c, coefs);
    jpeg_finish_compress(&c);
    jpeg_finish_decompress(&d);
    out.assign(buf, buf + len);
  }
  jpeg_destroy_compress(&c);
  jpeg_destroy_decompress(&d);
  std::free(buf);
  return out;
}

// Re-encodes RGB pixels with TurboJPEG: the subsampling variants the photos do not all have.
std::vector<uint8_t> Encode(const std::vector<uint8_t>& rgb, int w, int h, int subsamp) {
  tjhandle t = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long len = 0;
  std::vector<uint8_t> out;
  if (tjCompress2(t, rgb.data(), w, 0, h, TJPF_RGB, &buf, &len, subsamp, 90, 0) == 0) out.assign(buf, buf + len);
  tjFree(buf);
  tjDestroy(t);
  return out;
}

// TurboJPEG's decode of the whole image scaled by k/8.
std::vector<uint8_t> ReferenceScaled(const std::vector<uint8_t>& jpeg, int k, int flags, int* sw, int* sh) {
  const Geometry g = Probe(jpeg);
  *sw = (g.w * k + 7) / 8;
  *sh = (g.h * k + 7) / 8;
  std::vector<uint8_t> out(size_t(*sw) * size_t(*sh) * 3);
  tjhandle t = tjInitDecompress();
  const int r = tjDecompress2(t, jpeg.data(), jpeg.size(), out.data(), *sw, 0, *sh, TJPF_RGB, flags);
  tjDestroy(t);
  if (r != 0) out.clear();
  return out;
}

struct Rect {
  int x, y, w, h;
};

// Decodes rectangle r of `jpeg` (optionally split into two pieces at `split`) and compares it with
// TurboJPEG's whole decode at the same scale: every pixel of the returned region with box
// upsampling; with fancy upsampling, the pixels of the rectangle itself. Returns whether the decoder
// used only restart intervals or, with `shared` given a seek cache, only MCU chunks from entry points.
bool CheckRegion(const std::vector<uint8_t>& jpeg, Rect r, int min_w, int min_h, bool fancy, const std::string& what,
                 size_t split = 0, JpegDecoder* shared = nullptr) {
  JpegDecoder own;
  JpegDecoder& dec = shared ? *shared : own;
  int w = 0, h = 0;
  const bool ok = split ? dec.ReadHeader(jpeg.data(), split, jpeg.data() + split, jpeg.size() - split, &w, &h)
                        : dec.ReadHeader(jpeg.data(), jpeg.size(), &w, &h);
  EXPECT_TRUE(ok) << what << ": " << dec.error();
  if (!ok) return false;
  const size_t stride = size_t(w) * 3 + 48;  // a stride wider than a row, as the loader's
  std::vector<uint8_t> buf(stride * size_t(h));
  kernels::DecodedRegion reg;
  const bool decoded = dec.DecodeRegion(r.x, r.y, r.w, r.h, min_w, min_h, buf.data(), stride, buf.size(), &reg, fancy);
  EXPECT_TRUE(decoded) << what << ": " << dec.error();
  if (!decoded) return false;
  const int k = reg.scale_num;
  EXPECT_EQ(k, kernels::ChooseDctScale(r.w, r.h, min_w, min_h)) << what;
  int sw = 0, sh = 0;
  const std::vector<uint8_t> ref = ReferenceScaled(jpeg, k, fancy ? 0 : TJFLAG_FASTUPSAMPLE, &sw, &sh);
  EXPECT_FALSE(ref.empty()) << what;
  // The rectangle, scaled and rounded outwards, must lie in the region.
  const int sx0 = r.x * k / 8, sy0 = r.y * k / 8;
  const int sx1 = std::min(((r.x + r.w) * k + 7) / 8, sw), sy1 = std::min(((r.y + r.h) * k + 7) / 8, sh);
  EXPECT_TRUE(reg.x <= sx0 && reg.y <= sy0 && reg.x + reg.width >= sx1 && reg.y + reg.height >= sy1 &&
              reg.x + reg.width <= sw && reg.y + reg.height <= sh)
      << what << ": region " << reg.x << "," << reg.y << " " << reg.width << "x" << reg.height;
  const int cx0 = fancy ? sx0 : reg.x, cx1 = fancy ? sx1 : reg.x + reg.width;
  const int cy0 = fancy ? sy0 : reg.y, cy1 = fancy ? sy1 : reg.y + reg.height;
  int bad = 0;
  for (int y = cy0; y < cy1 && bad < 5; ++y)
    for (int x = cx0; x < cx1 && bad < 5; ++x) {
      const uint8_t* got = buf.data() + size_t(y - reg.y) * stride + size_t(x - reg.x) * 3;
      const uint8_t* want = ref.data() + (size_t(y) * size_t(sw) + size_t(x)) * 3;
      if (std::memcmp(got, want, 3) != 0) {
        ADD_FAILURE() << what << ": pixel (" << x << ", " << y << ") at scale " << k << "/8 differs: " << int(got[0])
                      << "," << int(got[1]) << "," << int(got[2]) << " vs " << int(want[0]) << "," << int(want[1])
                      << "," << int(want[2]);
        ++bad;
      }
    }
  return dec.last_region_used_intervals() || dec.last_region_used_seek();
}

std::string Name(const std::string& path) { return std::filesystem::path(path).filename().string(); }

// Edge cases and RandomResizedCrop rectangles for an image of w x h with MCUs of mw x mh.
std::vector<Rect> Rects(int w, int h, int mw, int mh, uint64_t seed) {
  std::vector<Rect> rs = {
      {0, 0, 1, 1},                                  // one pixel, top-left
      {w - 1, h - 1, 1, 1},                          // one pixel, bottom-right (partial MCU)
      {mw, mh, mw, mh},                              // exactly one MCU
      {mw + 3, mh + 2, mw, mh},                      // one MCU's worth, straddling four
      {w - mw - 5, h / 2, mw + 5, mh},               // to the right edge
      {w / 3, h - 2 * mh - 3, w / 3, 2 * mh + 3},    // to the bottom edge
      {0, h / 2, w, 1},                              // one whole row of pixels
      {w / 2, 0, 1, h},                              // one whole column
      {0, 0, w, h},                                  // the whole image (decoded as before)
  };
  kernels::AugmentSpec spec;
  spec.crop = kernels::CropMode::kRandomResized;
  spec.out_w = spec.out_h = 224;
  for (uint64_t i = 0; i < 12; ++i) {
    kernels::CropRect c;
    kernels::SampleParams p;
    kernels::MakeParams(spec, w, h, seed, 0, i, &c, &p);
    rs.push_back({c.x, c.y, c.w, c.h});
  }
  for (Rect& r : rs) {  // small images: keep the hand-picked ones inside
    r.x = std::clamp(r.x, 0, w - 1);
    r.y = std::clamp(r.y, 0, h - 1);
    r.w = std::clamp(r.w, 1, w - r.x);
    r.h = std::clamp(r.h, 1, h - r.y);
  }
  return rs;
}

TEST(JpegCrop, PhotosBitExactWithBoxUpsampling) {
  ASSERT_GE(PhotoPaths().size(), 500u);
  int used = 0, checked = 0;
  for (size_t i = 0; i < PhotoPaths().size(); i += 25) {  // 20 photos
    const std::vector<uint8_t> src = ReadFile(PhotoPaths()[i]);
    const Geometry g = Probe(src);
    const int mpr = g.mcus_per_row();
    // Intervals of one MCU, of the smallest divisor above one, and of the whole row.
    int d = 2;
    while (mpr % d != 0) ++d;
    for (int interval : {1, d, mpr}) {
      const std::vector<uint8_t> jpeg = Transcode(src, interval);
      ASSERT_FALSE(jpeg.empty());
      const std::vector<Rect> rects = Rects(g.w, g.h, g.mcu_w, g.mcu_h, i);
      for (size_t j = 0; j < rects.size(); ++j) {
        const Rect& r = rects[j];
        const std::string what = Name(PhotoPaths()[i]) + " interval " + std::to_string(interval) + " rect " +
                                 std::to_string(r.x) + "," + std::to_string(r.y) + " " + std::to_string(r.w) + "x" +
                                 std::to_string(r.h);
        // Minimum size = the crop's: never DCT-scaled here.
        const bool intervals = CheckRegion(jpeg, r, r.w, r.h, false, what);
        const bool whole = r.w == g.w && r.h == g.h;
        if (whole) {
          EXPECT_FALSE(intervals) << what;  // nothing to skip: decoded as before
        }
        // The hand-picked rectangles all leave intervals out, except a full column with whole-row intervals.
        if (j < 8 && (interval < mpr || r.h < g.h - 2 * g.mcu_h)) {
          EXPECT_TRUE(intervals) << what;
        }
        used += intervals;
        ++checked;
      }
    }
  }
  EXPECT_GT(used, checked / 2);
}

// The top-left *w x *h pixels of a photo (cut to the photo's size); empty if it does not decode.
std::vector<uint8_t> TopLeftPixels(const std::string& path, int* w, int* h) {
  int pw = 0, ph = 0;
  const std::vector<uint8_t> full = ReferenceDecode(ReadFile(path), &pw, &ph);
  if (full.empty()) return {};
  *w = std::min(pw, *w);
  *h = std::min(ph, *h);
  std::vector<uint8_t> rgb(size_t(*w) * size_t(*h) * 3);
  for (int y = 0; y < *h; ++y) std::memcpy(rgb.data() + size_t(y) * *w * 3, full.data() + size_t(y) * pw * 3, size_t(*w) * 3);
  return rgb;
}

// Every chroma subsampling and grayscale, at odd sizes: the photos' pixels re-encoded by TurboJPEG
// (cut to sizes that leave partial MCUs at the right and bottom), then given restart markers.
TEST(JpegCrop, EverySubsamplingAndOddSizesBitExact) {
  ASSERT_GE(PhotoPaths().size(), 500u);
  const int kSub[] = {TJSAMP_444, TJSAMP_422, TJSAMP_420, TJSAMP_440, TJSAMP_GRAY};
  const int kSizes[][2] = {{333, 257}, {97, 131}, {17, 9}, {200, 8}};
  int used[5] = {};
  for (int si = 0; si < 5; ++si)
    for (int zi = 0; zi < 4; ++zi) {
      const std::string path = PhotoPaths()[size_t(si * 40 + zi * 7)];
      int w = kSizes[zi][0], h = kSizes[zi][1];
      const std::vector<uint8_t> rgb = TopLeftPixels(path, &w, &h);
      ASSERT_FALSE(rgb.empty()) << path;
      const std::vector<uint8_t> plain = Encode(rgb, w, h, kSub[si]);
      ASSERT_FALSE(plain.empty());
      const Geometry g = Probe(plain);
      ASSERT_EQ(g.subsamp, kSub[si]);
      for (int interval : {1, g.mcus_per_row()}) {
        const std::vector<uint8_t> jpeg = Transcode(plain, interval);
        for (const Rect& r : Rects(w, h, g.mcu_w, g.mcu_h, uint64_t(si * 10 + zi))) {
          const std::string what = Name(path) + " subsampling " + std::to_string(kSub[si]) + " " + std::to_string(w) +
                                   "x" + std::to_string(h) + " interval " + std::to_string(interval) + " rect " +
                                   std::to_string(r.x) + "," + std::to_string(r.y) + " " + std::to_string(r.w) + "x" +
                                   std::to_string(r.h);
          used[si] += CheckRegion(jpeg, r, r.w, r.h, false, what);
        }
      }
    }
  for (int si = 0; si < 5; ++si) EXPECT_GT(used[si], 40) << "subsampling " << kSub[si];  // of 168 crops each
}

// The payload in two pieces, cut where the writer cuts (after the scan header), inside the header,
// and inside the entropy-coded data (then decoded as before): the same pixels every time.
TEST(JpegCrop, TwoPiecePayloads) {
  const std::vector<uint8_t> src = ReadFile(PhotoPaths()[3]);
  const Geometry g = Probe(src);
  const std::vector<uint8_t> jpeg = Transcode(src, 1);
  kernels::RestartLayout l;
  ASSERT_TRUE(kernels::ParseRestartLayout({nullptr, 0, jpeg.data(), jpeg.size()}, &l));
  const Rect r = {g.w / 3, g.h / 4, g.w / 3, g.h / 2};
  EXPECT_TRUE(CheckRegion(jpeg, r, r.w, r.h, false, "cut after SOS", l.entropy));
  EXPECT_TRUE(CheckRegion(jpeg, r, r.w, r.h, false, "cut before SOF", l.sof - 3));
  EXPECT_TRUE(CheckRegion(jpeg, r, r.w, r.h, false, "cut inside SOF", l.sof + 6));
  EXPECT_TRUE(CheckRegion(jpeg, r, r.w, r.h, false, "cut at SOF", l.sof));
  EXPECT_FALSE(CheckRegion(jpeg, r, r.w, r.h, false, "cut in the scan", l.entropy + 100));
}

// Streams the interval path must leave to the old one: no restart markers, intervals that span rows,
// progressive. Same pixels, decoded from the top.
TEST(JpegCrop, FallsBackWithoutSuitableIntervals) {
  const std::vector<uint8_t> src = ReadFile(PhotoPaths()[5]);
  const Geometry g = Probe(src);
  const Rect r = {g.w / 2, g.h / 2, g.w / 4, g.h / 4};
  EXPECT_FALSE(CheckRegion(Transcode(src, 0), r, r.w, r.h, false, "no restart markers"));
  EXPECT_FALSE(CheckRegion(Transcode(src, g.mcus_per_row() + 1), r, r.w, r.h, false, "intervals spanning rows"));
  int d = 2;
  while (g.mcus_per_row() % d == 0) ++d;  // an interval that does not divide the row
  EXPECT_FALSE(CheckRegion(Transcode(src, d), r, r.w, r.h, false, "interval not dividing the row"));
  int w = 0, h = 0;
  const std::vector<uint8_t> rgb = ReferenceDecode(src, &w, &h);
  tjhandle t = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long len = 0;
  ASSERT_EQ(tjCompress2(t, rgb.data(), w, 0, h, TJPF_RGB, &buf, &len, TJSAMP_420, 90, TJFLAG_PROGRESSIVE), 0);
  const std::vector<uint8_t> progressive(buf, buf + len);
  tjFree(buf);
  tjDestroy(t);
  EXPECT_FALSE(CheckRegion(progressive, r, r.w, r.h, false, "progressive"));
}

// DCT scaling: the region equals TurboJPEG's whole decode at the same scale (box upsampling), and
// after the resize to the output size (Pillow's bilinear) it stays within 35 dB of full decode -> crop
// -> resize.
TEST(JpegCrop, DctScaledRegions) {
  int scaled = 0;
  double worst = 99;
  for (size_t i = 0; i < PhotoPaths().size(); i += 50) {
    const std::vector<uint8_t> src = ReadFile(PhotoPaths()[i]);
    const Geometry g = Probe(src);
    const std::vector<uint8_t> jpeg = Transcode(src, 1);
    int fw = 0, fh = 0;
    const std::vector<uint8_t> full = ReferenceDecode(jpeg, &fw, &fh, TJFLAG_FASTUPSAMPLE);
    const std::vector<Rect> rects = {{0, 0, g.w, g.h}, {g.w / 5, g.h / 7, g.w / 2 + 3, g.h / 2 + 1}, {3, 5, g.w - 3, g.h - 5}};
    for (const Rect& r : rects)
      for (int out : {64, 100, 150}) {
        const std::string what = Name(PhotoPaths()[i]) + " rect " + std::to_string(r.x) + "," + std::to_string(r.y) +
                                 " " + std::to_string(r.w) + "x" + std::to_string(r.h) + " to " + std::to_string(out);
        if (kernels::ChooseDctScale(r.w, r.h, out, out) == 8) continue;
        ++scaled;
        CheckRegion(jpeg, r, out, out, false, what);
        // Through the loader's resample: the scaled region, and the full-size image, to out x out.
        JpegDecoder dec;
        int w = 0, h = 0;
        ASSERT_TRUE(dec.ReadHeader(jpeg.data(), jpeg.size(), &w, &h));
        std::vector<uint8_t> buf(size_t(w) * h * 3);
        kernels::DecodedRegion reg;
        ASSERT_TRUE(dec.DecodeRegion(r.x, r.y, r.w, r.h, out, out, buf.data(), size_t(w) * 3, buf.size(), &reg, false));
        // Pillow's antialiased bilinear (kernels/resample.h) for both, so that neither side aliases.
        std::vector<uint8_t> region(size_t(reg.width) * size_t(reg.height) * 3);
        for (int y = 0; y < reg.height; ++y)
          std::memcpy(&region[size_t(y) * reg.width * 3], &buf[size_t(y) * w * 3], size_t(reg.width) * 3);
        const float k = float(reg.scale_num) / 8;
        std::vector<uint8_t> a(size_t(out) * out * 3), b(a.size());
        kernels::ResampleRgb(region.data(), reg.width, reg.height, a.data(), out, out, kernels::ResampleFilter::kBilinear,
                             {float(r.x) * k - float(reg.x), float(r.y) * k - float(reg.y),
                              float(r.x + r.w) * k - float(reg.x), float(r.y + r.h) * k - float(reg.y)});
        kernels::ResampleRgb(full.data(), fw, fh, b.data(), out, out, kernels::ResampleFilter::kBilinear,
                             {float(r.x), float(r.y), float(r.x + r.w), float(r.y + r.h)});
        const double psnr = Psnr(a, b);
        EXPECT_GE(psnr, 35.0) << what << " at scale " << reg.scale_num << "/8";
        worst = std::min(worst, psnr);
      }
  }
  EXPECT_GT(scaled, 10);
  std::printf("%d DCT-scaled crops, lowest PSNR %.1f dB\n", scaled, worst);
}

// Fancy (triangle) upsampling reads chroma next to the crop: with one MCU of margin decoded, the
// rectangle's pixels equal TurboJPEG's default decode of the whole image.
TEST(JpegCrop, FancyUpsamplingExactInsideTheRectangle) {
  int used = 0;
  for (size_t i = 0; i < PhotoPaths().size(); i += 50) {
    const std::vector<uint8_t> src = ReadFile(PhotoPaths()[i]);
    const Geometry g = Probe(src);
    const std::vector<uint8_t> jpeg = Transcode(src, 1);
    for (const Rect& r : Rects(g.w, g.h, g.mcu_w, g.mcu_h, i + 1000))
      used += CheckRegion(jpeg, r, r.w, r.h, true, Name(PhotoPaths()[i]) + " fancy rect " + std::to_string(r.x) + "," +
                                                       std::to_string(r.y) + " " + std::to_string(r.w) + "x" + std::to_string(r.h));
  }
  EXPECT_GT(used, 100);
}

// Damaged streams (bytes flipped in the entropy-coded data and the markers, RST markers removed or
// renumbered, truncation): DecodeRegion succeeds or fails with a message, never reads outside the
// payload (the sanitizer builds check that) or crashes.
TEST(JpegCrop, DamagedStreamsAreSafe) {
  const std::vector<uint8_t> src = ReadFile(PhotoPaths()[7]);
  const Geometry g = Probe(src);
  const std::vector<uint8_t> jpeg = Transcode(src, 1);
  kernels::RestartLayout l;
  ASSERT_TRUE(kernels::ParseRestartLayout({nullptr, 0, jpeg.data(), jpeg.size()}, &l));
  std::vector<size_t> rst;  // offsets of the RST markers
  for (size_t i = l.entropy; i + 1 < jpeg.size(); ++i)
    if (jpeg[i] == 0xFF && jpeg[i + 1] >= 0xD0 && jpeg[i + 1] <= 0xD7) rst.push_back(i);
  ASSERT_EQ(rst.size(), size_t(l.mcus_per_row) * size_t(l.mcu_rows) - 1);
  uint64_t s = 12345;
  auto next = [&] { return (s = s * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  int failed = 0, runs = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<uint8_t> bad = jpeg;
    switch (trial % 5) {
      case 0:  // flip bytes anywhere
        for (int k = 0; k < 4; ++k) bad[next() % bad.size()] ^= uint8_t(1 + next() % 255);
        break;
      case 1: {  // remove an RST marker
        const size_t at = rst[next() % rst.size()];
        bad.erase(bad.begin() + long(at), bad.begin() + long(at) + 2);
        break;
      }
      case 2:  // renumber one
        bad[rst[next() % rst.size()] + 1] = uint8_t(0xD0 + next() % 8);
        break;
      case 3:  // truncate
        bad.resize(l.entropy + next() % (bad.size() - l.entropy));
        break;
      case 4:  // a marker in the data
        bad[rst[next() % rst.size()] + 1] = uint8_t(0xC0 + next() % 0x3F);
        break;
    }
    JpegDecoder dec;
    int w = 0, h = 0;
    if (!dec.ReadHeader(bad.data(), bad.size(), &w, &h) || w != g.w || h != g.h) continue;
    std::vector<uint8_t> buf(size_t(w) * h * 3);
    kernels::DecodedRegion reg;
    const int x = int(next() % uint64_t(w - 1)), y = int(next() % uint64_t(h - 1));
    const int rw = 1 + int(next() % uint64_t(w - x)), rh = 1 + int(next() % uint64_t(h - y));
    ++runs;
    if (!dec.DecodeRegion(x, y, rw, rh, rw, rh, buf.data(), size_t(w) * 3, buf.size(), &reg, trial % 2)) {
      EXPECT_FALSE(dec.error().empty());
      ++failed;
    }
  }
  EXPECT_GT(runs, 200);
  EXPECT_GT(failed, 10);  // damage inside the decoded intervals is reported
}

// Through the Loader: a RandomResizedCrop loader over a file whose payloads carry restart markers
// delivers the same batches as over the same photos with the markers stripped (the same DCT
// coefficients, decoded from the top down): box upsampling, uint8 and float32.
TEST(JpegCrop, LoaderBatchesUnchangedByRestartMarkers) {
  const std::string dir = ScratchDir("loader");
  for (const char* tree : {"/rst", "/plain"}) std::filesystem::create_directories(dir + tree + "/a");
  for (size_t i = 0; i < 32; ++i) {
    const std::vector<uint8_t> src = ReadFile(PhotoPaths()[i * 15]);
    const int mpr = Probe(src).mcus_per_row();
    int d = 2;  // a short interval: the smallest divisor of the row above one
    while (mpr % d != 0) ++d;
    const std::string name = "/a/" + std::to_string(i) + ".jpg";
    WriteFile(dir + "/rst" + name, Transcode(src, i % 4 == 0 ? mpr : d));
    WriteFile(dir + "/plain" + name, Transcode(src, 0));
  }
  writer::BuildOptions bo;
  bo.log = [](const std::string&) {};
  writer::Build(dir + "/rst", dir + "/rst.beton", bo);  // the writer gives these its own intervals
  bo.encode.restart_interval = "none";                   // stored as they are: no markers
  writer::Build(dir + "/plain", dir + "/plain.beton", bo);
  {  // the markers made it into the stored payloads (two pieces: the shared header, the scan)
    Dataset rst(dir + "/rst.beton"), plain(dir + "/plain.beton");
    std::vector<uint8_t> scratch;
    kernels::RestartLayout l;
    for (uint64_t i = 0; i < rst.size(); ++i) {
      const Dataset::Parts a = rst.ReadPayloadParts(i, &scratch);
      EXPECT_TRUE(kernels::ParseRestartLayout({a.head.data, a.head.size, a.body.data, a.body.size}, &l)) << i;
      const Dataset::Parts b = plain.ReadPayloadParts(i, &scratch);
      EXPECT_FALSE(kernels::ParseRestartLayout({b.head.data, b.head.size, b.body.data, b.body.size}, &l)) << i;
    }
  }
  for (const bool as_uint8 : {true, false}) {
    LoaderOptions o = LoaderOptions::ImagenetTrain();
    if (as_uint8) {
      o.dtype = DType::kUint8;
      o.layout = Layout::kNHWC;
      o.augment.normalize = false;
    }
    o.batch_size = 8;
    o.threads = 2;
    o.seed = 5;
    auto epochs = [&](const std::string& file) {
      Loader l(file, o);
      std::vector<uint8_t> all;
      for (uint64_t e = 0; e < 2; ++e)
        for (const Batch& b : l.epoch(e)) {
          const auto* p = static_cast<const uint8_t*>(b.images);
          all.insert(all.end(), p, p + b.image_bytes() * b.size);
        }
      return all;
    };
    const std::vector<uint8_t> a = epochs(dir + "/rst.beton"), b = epochs(dir + "/plain.beton");
    ASSERT_EQ(a.size(), size_t(64) * 224 * 224 * 3 * (as_uint8 ? 1 : 4));
    EXPECT_TRUE(a == b) << (as_uint8 ? "uint8" : "float32");
    // Without entry points (the plain file's second epoch above decoded from them).
    o.jpeg_index_budget = 0;
    EXPECT_TRUE(epochs(dir + "/plain.beton") == b) << (as_uint8 ? "uint8" : "float32") << ", no entry points";
  }
}

// Entry points (kernels/jpeg_seek.h) for streams without restart markers: the photos as stored and
// as re-encoded without markers by a lossless transcode (optimised Huffman tables), box and fancy
// upsampling, DCT-scaled and full size. Each rectangle is decoded twice by one decoder: the first
// walks the codes down to it, the second builds its JPEG from the entry points; both must equal
// TurboJPEG's whole decode, and the second must not walk.
TEST(JpegSeek, PhotosWithoutMarkersBitExact) {
  int seeks = 0, checked = 0;
  for (size_t i = 0; i < PhotoPaths().size(); i += 25) {  // 20 photos
    const std::vector<uint8_t> stored = ReadFile(PhotoPaths()[i]);
    const Geometry g = Probe(stored);
    for (int variant = 0; variant < 2; ++variant) {
      const std::vector<uint8_t> jpeg = variant ? Transcode(stored, 0) : stored;
      kernels::RestartLayout l;
      if (!kernels::ParseScanLayout({nullptr, 0, jpeg.data(), jpeg.size()}, &l) || l.interval) continue;
      kernels::JpegSeekCache cache(64 << 20);
      JpegDecoder dec;
      dec.set_seek(&cache, 0);
      const std::vector<Rect> rects = Rects(g.w, g.h, g.mcu_w, g.mcu_h, i + 77);
      for (size_t j = 0; j < rects.size(); ++j) {
        const Rect& r = rects[j];
        const bool fancy = j % 2, scaled = j % 3 == 0;
        const int min_w = scaled ? std::max(1, r.w / 3) : r.w, min_h = scaled ? std::max(1, r.h / 3) : r.h;
        const std::string what = Name(PhotoPaths()[i]) + (variant ? " transcoded" : " as stored") + " rect " +
                                 std::to_string(r.x) + "," + std::to_string(r.y) + " " + std::to_string(r.w) + "x" +
                                 std::to_string(r.h) + (fancy ? " fancy" : " box") + (scaled ? " scaled" : "");
        const bool first = CheckRegion(jpeg, r, min_w, min_h, fancy, what + " (first)", 0, &dec);
        const bool walked = dec.last_region_walked();
        const bool second = CheckRegion(jpeg, r, min_w, min_h, fancy, what + " (again)", 0, &dec);
        EXPECT_EQ(first, second) << what;
        if (second) {
          EXPECT_FALSE(dec.last_region_walked()) << what;
        }
        if (first && j == 0) {
          EXPECT_TRUE(walked) << what;  // the image's first crop walks
        }
        seeks += second;
        ++checked;
      }
      EXPECT_GT(cache.bytes(), 0u);
      EXPECT_EQ(cache.images(), 1u);
    }
  }
  EXPECT_GT(checked, 500);
  EXPECT_GT(seeks, checked / 2) << "of " << checked;
}

// Every chroma subsampling and grayscale at odd sizes (partial MCUs and chunks at the right and
// bottom), as TurboJPEG encodes them: no restart markers, standard tables.
TEST(JpegSeek, EverySubsamplingAndOddSizesBitExact) {
  const int kSub[] = {TJSAMP_444, TJSAMP_422, TJSAMP_420, TJSAMP_440, TJSAMP_GRAY};
  const int kSizes[][2] = {{333, 257}, {97, 131}, {17, 9}, {200, 8}, {41, 300}};
  for (int si = 0; si < 5; ++si) {
    int seeks = 0;
    for (int zi = 0; zi < 5; ++zi) {
      const std::string path = PhotoPaths()[size_t(si * 40 + zi * 7 + 3)];
      int w = kSizes[zi][0], h = kSizes[zi][1];
      const std::vector<uint8_t> rgb = TopLeftPixels(path, &w, &h);
      ASSERT_FALSE(rgb.empty()) << path;
      const std::vector<uint8_t> jpeg = Encode(rgb, w, h, kSub[si]);
      const Geometry g = Probe(jpeg);
      kernels::JpegSeekCache cache(1 << 20);
      JpegDecoder dec;
      dec.set_seek(&cache, 7);
      for (const Rect& r : Rects(w, h, g.mcu_w, g.mcu_h, uint64_t(si * 10 + zi)))
        for (const bool fancy : {false, true}) {
          const std::string what = Name(path) + " subsampling " + std::to_string(kSub[si]) + " " + std::to_string(w) +
                                   "x" + std::to_string(h) + " rect " + std::to_string(r.x) + "," + std::to_string(r.y) +
                                   " " + std::to_string(r.w) + "x" + std::to_string(r.h) + (fancy ? " fancy" : "");
          seeks += CheckRegion(jpeg, r, r.w, r.h, fancy, what, 0, &dec);
        }
    }
    EXPECT_GT(seeks, 60) << "subsampling " << kSub[si];  // of 210 crops
  }
}

// The budget holds: with room for a few photos' entry points, later photos decode from the top (same
// pixels), the cache never passes its budget, and the photos it holds keep decoding from entry points.
TEST(JpegSeek, BudgetBoundsTheEntryPoints) {
  constexpr uint64_t kBudget = 12 << 10;
  kernels::JpegSeekCache cache(kBudget);
  JpegDecoder dec;
  int from_entries = 0, from_top = 0;
  for (int round = 0; round < 2; ++round)
    for (size_t i = 0; i < 40; ++i) {
      const std::vector<uint8_t> jpeg = ReadFile(PhotoPaths()[i * 12]);
      kernels::RestartLayout l;
      if (!kernels::ParseScanLayout({nullptr, 0, jpeg.data(), jpeg.size()}, &l) || l.interval) continue;
      const Geometry g = Probe(jpeg);
      dec.set_seek(&cache, i);
      const Rect r = {g.w / 4, g.h / 2, g.w / 2, g.h / 3};
      const bool seek = CheckRegion(jpeg, r, r.w, r.h, false, Name(PhotoPaths()[i * 12]), 0, &dec);
      EXPECT_LE(cache.bytes(), kBudget);
      if (round == 1) (seek ? from_entries : from_top) += 1;
      if (round == 1 && seek) {
        EXPECT_FALSE(dec.last_region_walked());
      }
    }
  EXPECT_GE(from_entries, 2);
  EXPECT_GE(from_top, 20);
  EXPECT_EQ(size_t(from_entries), cache.images());
}

// Damaged streams without markers: bytes flipped in the entropy-coded data, truncation, a marker
// inside it, with and without entry points already held for the intact image. DecodeRegion succeeds
// or fails with a message; never reads outside the payload (the sanitizer builds check) or crashes.
TEST(JpegSeek, DamagedStreamsAreSafe) {
  const std::vector<uint8_t> jpeg = Transcode(ReadFile(PhotoPaths()[9]), 0);
  kernels::RestartLayout l;
  ASSERT_TRUE(kernels::ParseScanLayout({nullptr, 0, jpeg.data(), jpeg.size()}, &l));
  ASSERT_EQ(l.interval, 0);
  uint64_t s = 987;
  auto next = [&] { return (s = s * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  int failed = 0, runs = 0, seeks = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<uint8_t> bad = jpeg;
    const size_t data = bad.size() - l.entropy;
    switch (trial % 3) {
      case 0:
        for (int k = 0; k < 3; ++k) bad[l.entropy + next() % data] ^= uint8_t(1 + next() % 255);
        break;
      case 1:
        bad.resize(l.entropy + next() % data);
        break;
      case 2: {
        const size_t at = l.entropy + next() % (data - 1);
        bad[at] = 0xFF;
        bad[at + 1] = uint8_t(0xC0 + next() % 0x3F);
        break;
      }
    }
    // Half the trials reuse entry points walked on the intact image (a payload that changed under the
    // loader): the assembled stream is then checked by libjpeg like any other.
    kernels::JpegSeekCache cache(1 << 20);
    JpegDecoder dec;
    int w = 0, h = 0;
    dec.set_seek(&cache, 1);
    if (trial % 2) {
      std::vector<uint8_t> buf(size_t(l.width) * l.height * 3);
      kernels::DecodedRegion reg;
      ASSERT_TRUE(dec.ReadHeader(jpeg.data(), jpeg.size(), &w, &h));
      ASSERT_TRUE(dec.DecodeRegion(0, h - 1, w, 1, w, 1, buf.data(), size_t(w) * 3, buf.size(), &reg, false));
    }
    if (!dec.ReadHeader(bad.data(), bad.size(), &w, &h)) continue;
    std::vector<uint8_t> buf(size_t(w) * h * 3);
    kernels::DecodedRegion reg;
    const int x = int(next() % uint64_t(w - 1)), y = int(next() % uint64_t(h - 1));
    const int rw = 1 + int(next() % uint64_t(w - x)), rh = 1 + int(next() % uint64_t(h - y));
    ++runs;
    if (!dec.DecodeRegion(x, y, rw, rh, rw, rh, buf.data(), size_t(w) * 3, buf.size(), &reg, trial % 4 < 2)) {
      EXPECT_FALSE(dec.error().empty());
      ++failed;
    }
    seeks += dec.last_region_used_seek();
  }
  EXPECT_GT(runs, 250);
  EXPECT_GT(failed, 30);
  EXPECT_GT(seeks, 50);
}

}  // namespace
}  // namespace dsc::test
