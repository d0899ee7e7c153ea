// JpegDecoder::DecodePlanesGroup: images sharing one header decoded as one stacked stream equal their
// own decodes (libjpeg through DecodePlanes, one image at a time), plane byte for plane byte, on the
// real CIFAR-10 JPEGs and on TurboJPEG encodes of other samplings and sizes; anything it cannot take,
// or damaged data, is refused so that the caller decodes image by image.
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "kernels/jpeg_codec.h"
#include "kernels/jpeg_decoder.h"
#include "tests/test_util.h"

namespace dsc::test {
namespace {

namespace fs = std::filesystem;
using kernels::JpegDecoder;
using kernels::JpegPlanes;

struct Split {  // a stream's shared header and its body (the file's layout with --jpeg-tables shared)
  std::vector<uint8_t> head, body;
};

Split SplitJpeg(const std::vector<uint8_t>& jpeg) {
  const size_t n = kernels::JpegPrefixLength(jpeg.data(), jpeg.size());
  return {std::vector<uint8_t>(jpeg.begin(), jpeg.begin() + long(n)), std::vector<uint8_t>(jpeg.begin() + long(n), jpeg.end())};
}

// Every row of every plane an image's own decode gives (its padded rows included) against image i of a group.
::testing::AssertionResult SamePlanes(const JpegPlanes& a, const JpegPlanes& b) {
  if (a.components != b.components || a.width != b.width || a.height != b.height)
    return ::testing::AssertionFailure() << "geometry " << a.width << "x" << a.height << " vs " << b.width << "x" << b.height;
  for (int c = 0; c < a.components; ++c) {
    if (a.hshift[c] != b.hshift[c] || a.vshift[c] != b.vshift[c]) return ::testing::AssertionFailure() << "shift of plane " << c;
    const int rows = (a.height + (1 << a.vshift[c]) - 1) >> a.vshift[c], cols = (a.width + (1 << a.hshift[c]) - 1) >> a.hshift[c];
    for (int y = 0; y < rows; ++y)
      if (std::memcmp(a.plane[c] + size_t(y) * a.stride[c], b.plane[c] + size_t(y) * b.stride[c], size_t(cols)))
        return ::testing::AssertionFailure() << "plane " << c << " row " << y;
  }
  return ::testing::AssertionSuccess();
}

// Decodes `jpegs` (one shared header) in groups of `group`, each image against its own decode.
void ExpectGroupsEqualSingles(const std::vector<std::vector<uint8_t>>& jpegs, int group, const std::string& what) {
  JpegDecoder single, grouped;
  const Split first = SplitJpeg(jpegs[0]);
  std::vector<Split> parts;
  for (const auto& j : jpegs) {
    parts.push_back(SplitJpeg(j));
    ASSERT_EQ(parts.back().head, first.head) << what << ": the images must share one header";
  }
  size_t compared = 0;
  for (size_t g = 0; g < parts.size(); g += size_t(group)) {
    const int n = int(std::min(parts.size() - g, size_t(group)));
    std::vector<const uint8_t*> bodies;
    std::vector<size_t> sizes;
    for (int i = 0; i < n; ++i) bodies.push_back(parts[g + size_t(i)].body.data()), sizes.push_back(parts[g + size_t(i)].body.size());
    ASSERT_TRUE(grouped.DecodePlanesGroup(first.head.data(), first.head.size(), bodies.data(), sizes.data(), n))
        << what << ", images " << g << "+: " << grouped.error();
    for (int i = 0; i < n; ++i) {
      const auto& p = parts[g + size_t(i)];
      int w, h;
      ASSERT_TRUE(single.ReadHeader(p.head.data(), p.head.size(), p.body.data(), p.body.size(), &w, &h));
      ASSERT_EQ(grouped.group_width(), w);
      ASSERT_EQ(grouped.group_height(), h);
      JpegPlanes own;
      ASSERT_TRUE(single.DecodePlanes(&own)) << single.error();
      ASSERT_TRUE(SamePlanes(own, grouped.GroupPlanes(i))) << what << ", image " << g + size_t(i);
      ++compared;
    }
  }
  EXPECT_EQ(compared, jpegs.size());
}

std::vector<std::vector<uint8_t>> CifarJpegs(const std::string& split) {
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(CifarJpegRoot() + "/" + split))
    if (e.path().extension() == ".jpg") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  std::vector<std::vector<uint8_t>> out;
  for (const auto& f : files) out.push_back(ReadFile(f));
  return out;
}

TEST(JpegGroup, EveryCifarImageEqualsItsOwnDecode) {
  // Groups of 37: the restart markers' numbers wrap (0..7) at varying places.
  for (const char* split : {"test", "train"}) {
    const auto jpegs = CifarJpegs(split);
    ASSERT_EQ(jpegs.size(), std::string(split) == "test" ? 10000u : 50000u);
    ExpectGroupsEqualSingles(jpegs, 37, split);
  }
}

// Random pictures of one size and sampling, encoded by TurboJPEG (its standard tables: one header).
std::vector<std::vector<uint8_t>> Encoded(int w, int h, int subsampling, int count, uint32_t seed) {
  std::mt19937 rng(seed);
  tjhandle tj = tjInitCompress();
  std::vector<std::vector<uint8_t>> out;
  const int pf = subsampling == TJSAMP_GRAY ? TJPF_GRAY : TJPF_RGB, ch = subsampling == TJSAMP_GRAY ? 1 : 3;
  for (int i = 0; i < count; ++i) {
    std::vector<uint8_t> px(size_t(w) * h * ch);
    for (size_t k = 0; k < px.size(); ++k) px[k] = uint8_t((k * 7 + i * 13) % 256 / 2 + rng() % 128);
    unsigned char* buf = nullptr;
    unsigned long size = 0;
    EXPECT_EQ(tjCompress2(tj, px.data(), w, 0, h, pf, &buf, &size, subsampling, 85, 0), 0) << tjGetErrorStr2(tj);
    out.emplace_back(buf, buf + size);
    tjFree(buf);
  }
  tjDestroy(tj);
  return out;
}

TEST(JpegGroup, OtherSamplingsAndSizesNotMultiplesOfTheMcu) {
  struct Case {
    int w, h, sampling;
  } cases[] = {{32, 32, TJSAMP_444}, {30, 27, TJSAMP_420}, {33, 17, TJSAMP_422}, {24, 40, TJSAMP_440},
               {19, 45, TJSAMP_GRAY}, {64, 64, TJSAMP_420}, {1, 1, TJSAMP_420}, {7, 9, TJSAMP_444}};
  uint32_t seed = 1;
  for (const auto& c : cases) {
    const std::string what = std::to_string(c.w) + "x" + std::to_string(c.h) + " sampling " + std::to_string(c.sampling);
    ExpectGroupsEqualSingles(Encoded(c.w, c.h, c.sampling, 23, seed++), 10, what);
  }
}

TEST(JpegGroup, RefusesWhatItCannotTakeAndDamagedData) {
  auto jpegs = Encoded(32, 32, TJSAMP_420, 4, 7);
  const Split a = SplitJpeg(jpegs[0]);
  std::vector<Split> s;
  for (const auto& j : jpegs) s.push_back(SplitJpeg(j));
  JpegDecoder d;
  auto group = [&](const std::vector<uint8_t>& head, std::vector<Split> parts) {
    std::vector<const uint8_t*> b;
    std::vector<size_t> n;
    for (const auto& p : parts) b.push_back(p.body.data()), n.push_back(p.body.size());
    return d.DecodePlanesGroup(head.data(), head.size(), b.data(), n.data(), int(parts.size()));
  };
  ASSERT_TRUE(group(a.head, s)) << d.error();
  // A body cut short: libjpeg meets the next image's restart marker too early (its warning is an error).
  auto cut = s;
  cut[1].body.erase(cut[1].body.begin() + long(cut[1].body.size() / 2), cut[1].body.end() - 2);
  EXPECT_FALSE(group(a.head, cut));
  // Two bytes between the entropy data and EOI: the image's own decode takes them (libjpeg's bit
  // buffer swallows them past the last MCU), and so does the group, with the same pixels for every image.
  auto extra = s;
  extra[2].body.insert(extra[2].body.end() - 2, {0x12, 0x34});
  ASSERT_TRUE(group(a.head, extra)) << d.error();
  for (int i = 0; i < 4; ++i) {
    JpegDecoder own;
    int w, h;
    JpegPlanes p;
    ASSERT_TRUE(own.ReadHeader(a.head.data(), a.head.size(), extra[size_t(i)].body.data(), extra[size_t(i)].body.size(), &w, &h));
    ASSERT_TRUE(own.DecodePlanes(&p)) << own.error();
    EXPECT_TRUE(SamePlanes(p, d.GroupPlanes(i))) << "image " << i;
  }
  // Many such bytes: the image's own decode calls them extraneous, and the group refuses them too.
  auto more = s;
  more[2].body.insert(more[2].body.end() - 2, 40, 0x12);
  EXPECT_FALSE(group(a.head, more));
  {
    JpegDecoder own;
    int w, h;
    JpegPlanes p;
    ASSERT_TRUE(own.ReadHeader(a.head.data(), a.head.size(), more[2].body.data(), more[2].body.size(), &w, &h));
    EXPECT_FALSE(own.DecodePlanes(&p));
  }
  // No EOI at the end of a body.
  auto open = s;
  open[3].body.resize(open[3].body.size() - 2);
  EXPECT_FALSE(group(a.head, open));
  // A header with a restart interval of its own, a progressive one, too-large images.
  std::vector<uint8_t> dri = a.head;
  const size_t sos = [&] { size_t p = 2; while (dri[p + 1] != 0xDA) p += 2 + (size_t(dri[p + 2]) << 8 | dri[p + 3]); return p; }();
  dri.insert(dri.begin() + long(sos), {0xFF, 0xDD, 0, 4, 0, 2});
  EXPECT_FALSE(group(dri, s));
  EXPECT_NE(d.error().find("restart interval"), std::string::npos) << d.error();
  std::vector<uint8_t> prog = a.head;
  for (size_t k = 2; k + 1 < prog.size(); ++k)
    if (prog[k] == 0xFF && prog[k + 1] == 0xC0) prog[k + 1] = 0xC2;
  EXPECT_FALSE(group(prog, s));
  auto big = Encoded(128, 72, TJSAMP_420, 2, 9);  // 8 x 5 MCUs of 16x16: fine; 128 x 80 would be 40
  std::vector<Split> bs = {SplitJpeg(big[0]), SplitJpeg(big[1])};
  EXPECT_TRUE(group(bs[0].head, bs)) << d.error();
  auto huge = Encoded(160, 112, TJSAMP_420, 2, 9);  // 10 x 7 = 70 MCUs > kGroupMaxMcus
  std::vector<Split> hs = {SplitJpeg(huge[0]), SplitJpeg(huge[1])};
  EXPECT_FALSE(group(hs[0].head, hs));
  EXPECT_FALSE(group(a.head, {}));
}

}  // namespace
}  // namespace dsc::test

namespace dsc::test {
namespace {

// libjpeg-turbo 2.1's jpeg_skip_scanlines with merged upsampling (4:2:0 or 4:2:2, box upsampling)
// reads and writes cinfo->cconvert, which that mode never sets: a decoder that had decoded another
// kind of image (4:4:4, gray, fancy) handed it the previous image's colour converter, freed since
// (valgrind: "Invalid read of size 8 ... inside a block free'd by jpeg_abort"; loader batches then
// differed from run to run and a valid sample failed as "bad Huffman code"). libjpeg is not built
// with the sanitizers: ctest runs this test under valgrind too (JpegRegion.UnderValgrind), which fails
// without the fix. Here every crop must also equal the same crop by a decoder that has decoded nothing else.
TEST(JpegRegion, ASkipAfterAnotherKindOfImageUsesNothingFreed) {
  auto other = Encoded(48, 48, TJSAMP_444, 1, 3)[0];
  auto gray = Encoded(40, 56, TJSAMP_GRAY, 1, 4)[0];
  auto merged = Encoded(96, 160, TJSAMP_420, 1, 5)[0];
  auto merged422 = Encoded(80, 120, TJSAMP_422, 1, 6)[0];
  JpegDecoder d;
  std::vector<uint8_t> out(96 * 3 * 160), want(out.size()), rgb(64 * 64 * 3);
  for (int round = 0; round < 4; ++round) {
    for (const auto* prev : {&other, &gray}) {
      int w, h;
      ASSERT_TRUE(d.ReadHeader(prev->data(), prev->size(), &w, &h));
      ASSERT_TRUE(d.DecodeRGB(rgb.data(), size_t(w) * 3, round % 2 == 0)) << d.error();
      for (const auto* img : {&merged, &merged422}) {
        ASSERT_TRUE(d.ReadHeader(img->data(), img->size(), &w, &h));
        kernels::DecodedRegion got_region, want_region;
        // Rows 40.. of the image: libjpeg skips the first 40 (jpeg_skip_scanlines).
        ASSERT_TRUE(d.DecodeRegion(8, 40, 32, 48, 32, 48, out.data(), 96 * 3, out.size(), &got_region, false)) << d.error();
        JpegDecoder fresh;
        ASSERT_TRUE(fresh.ReadHeader(img->data(), img->size(), &w, &h));
        ASSERT_TRUE(fresh.DecodeRegion(8, 40, 32, 48, 32, 48, want.data(), 96 * 3, want.size(), &want_region, false));
        ASSERT_EQ(got_region.y, want_region.y);
        ASSERT_EQ(got_region.height, want_region.height);
        ASSERT_EQ(std::memcmp(out.data(), want.data(), size_t(got_region.height) * 96 * 3), 0) << "round " << round;
      }
    }
  }
}

}  // namespace
}  // namespace dsc::test
