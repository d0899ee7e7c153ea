// Masks stored as runs (docs/format.md, field type 8): hand-written streams decode as the spec says,
// hostile ones are refused naming why, and stored masks give their pixels back in either encoding
// (runs, or a PNG that libpng decodes independently of the run code).
#include <gtest/gtest.h>

#include <random>

#include "format/fields.h"
#include "format/mask_runs.h"
#include "kernels/mask_codec.h"
#include "kernels/png_codec.h"

namespace dsc::test {
namespace {

// Streams written by hand from the spec, not by the encoder.
std::vector<uint8_t> RunsHeader(uint16_t w, uint16_t h, uint8_t ch) {
  return {'M', 'R', 'L', 'E', uint8_t(w), uint8_t(w >> 8), uint8_t(h), uint8_t(h >> 8), ch, 0, 0, 0};
}

TEST(MaskRuns, HandWrittenStreamsDecodeAsTheSpecSays) {
  auto decode = [](const std::vector<uint8_t>& v, int ch) {
    std::vector<uint8_t> px;
    int w = 0, h = 0;
    std::string err;
    EXPECT_TRUE(kernels::DecodeMask(v.data(), v.size(), ch, 1 << 20, &px, &w, &h, &err)) << err;
    return px;
  };
  std::vector<uint8_t> a = RunsHeader(5, 2, 1);
  for (uint8_t b : {2, 7, 1, 9, /* row 1 */ 4, 0}) a.push_back(b);  // 3 x 7, 2 x 9 | 5 x 0
  EXPECT_EQ(decode(a, 1), (std::vector<uint8_t>{7, 7, 7, 9, 9, 0, 0, 0, 0, 0}));
  std::vector<uint8_t> b = RunsHeader(300, 1, 1);
  for (uint8_t x : {0xC7, 0x01, 4, /* 200 x 4 */ 0x63, 5 /* 100 x 5 */}) b.push_back(x);
  std::vector<uint8_t> want(200, 4);
  want.resize(300, 5);
  EXPECT_EQ(decode(b, 1), want);
  std::vector<uint8_t> c = RunsHeader(3, 1, 3);
  for (uint8_t x : {1, 1, 2, 3, 0, 9, 8, 7}) c.push_back(x);  // 2 x (1,2,3), 1 x (9,8,7)
  EXPECT_EQ(decode(c, 3), (std::vector<uint8_t>{1, 2, 3, 1, 2, 3, 9, 8, 7}));
  format::Field f{format::FieldType::kMask, "mask", {}, format::DType::kUInt8, {1}};
  EXPECT_EQ(format::MaskProblem(f, a.data(), a.size(), 5, 2), "");
  EXPECT_EQ(format::MaskProblem(f, a.data(), a.size(), 6, 2), "a 5x2 mask for a 6x2 image");
}

TEST(MaskRuns, HostileStreamsAreRefusedNamingWhy) {
  struct Case {
    std::vector<uint8_t> v;
    int channels;
    const char* why;
  };
  auto with = [](std::vector<uint8_t> h, std::initializer_list<uint8_t> rest) {
    h.insert(h.end(), rest);
    return h;
  };
  std::vector<uint8_t> reserved = with(RunsHeader(2, 1, 1), {1, 0});
  reserved[10] = 1;
  const std::vector<Case> cases = {
      {with(RunsHeader(4, 1, 1), {1, 7}), 1, "row 0 ends early"},                   // 2 of 4 pixels
      {with(RunsHeader(4, 1, 1), {4, 7}), 1, "a run of 5 past the row's end"},      // 5 > 4
      {with(RunsHeader(4, 2, 1), {3, 7}), 1, "row 1 ends early"},                   // no second row
      {with(RunsHeader(4, 1, 1), {0x80, 0x80, 0x80, 0x00, 7}), 1, "more than 3 bytes"},
      {with(RunsHeader(4, 1, 1), {3, 7, 0}), 1, "1 bytes after the last row"},
      {with(RunsHeader(4, 1, 1), {3}), 1, "row 0 ends early"},                      // no value byte
      {with(RunsHeader(4, 1, 3), {3, 7, 7, 7}), 1, "runs of 3 channels for a 1-channel mask"},
      {with(RunsHeader(0, 1, 1), {}), 1, "runs of a 0x1 mask"},
      {reserved, 1, "reserved bytes are not zero"},
      {with(RunsHeader(4, 1, 3), {3, 7, 7}), 3, "row 0 ends early"},                // 2 of 3 value bytes
  };
  for (const Case& c : cases) {
    format::Field f{format::FieldType::kMask, "mask", {}, format::DType::kUInt8, {uint32_t(c.channels)}};
    EXPECT_NE(format::MaskProblem(f, c.v.data(), c.v.size(), 0, 0).find(c.why), std::string::npos)
        << c.why << ": got " << format::MaskProblem(f, c.v.data(), c.v.size(), 0, 0);
    std::vector<uint8_t> px;
    int w = 0, h = 0;
    std::string err;
    EXPECT_FALSE(kernels::DecodeMask(c.v.data(), c.v.size(), c.channels, 1 << 20, &px, &w, &h, &err)) << c.why;
    EXPECT_NE(err.find(c.why), std::string::npos) << c.why << ": got " << err;
  }
  // A header claiming 65535 x 65535 in 14 bytes is refused before its pixels are allocated.
  const std::vector<uint8_t> huge = with(RunsHeader(65535, 65535, 1), {0, 0});
  std::vector<uint8_t> px;
  int w = 0, h = 0;
  std::string err;
  EXPECT_FALSE(kernels::DecodeMask(huge.data(), huge.size(), 1, 1 << 20, &px, &w, &h, &err));
  EXPECT_NE(err.find("more than 1048576 pixels"), std::string::npos) << err;
  EXPECT_EQ(px.capacity(), 0u);
}

TEST(MaskRuns, StoredMasksGiveTheirPixelsBackInEitherEncoding) {
  std::mt19937 rng(56);
  for (int ch : {1, 3}) {
    for (bool noisy : {false, true}) {
      const int w = 97, h = 61;
      std::vector<uint8_t> px(size_t(w) * h * ch, 0);
      if (noisy) {
        for (auto& p : px) p = uint8_t(rng());
      } else {
        for (int k = 1; k <= 20; ++k) {  // overlapping rectangles of ids, as instance masks are
          const int x0 = int(rng() % w), y0 = int(rng() % h), x1 = x0 + int(rng() % (w - x0)) + 1, y1 = y0 + int(rng() % (h - y0)) + 1;
          for (int y = y0; y < y1; ++y)
            for (int x = x0; x < x1; ++x)
              for (int c = 0; c < ch; ++c) px[(size_t(y) * w + x) * ch + c] = uint8_t(k * (c + 1));
        }
      }
      std::vector<uint8_t> stored, back;
      std::string err;
      ASSERT_TRUE(kernels::EncodeMask(px.data(), w, h, ch, size_t(w) * ch, &stored, &err)) << err;
      // Smooth masks are stored as runs (and smaller than their pixels); noisy ones as a PNG, which
      // libpng decodes independently of the run code.
      EXPECT_EQ(format::IsMaskRuns(stored.data(), stored.size()), !noisy) << ch << " " << noisy;
      EXPECT_EQ(kernels::IsPng(stored.data(), stored.size()), noisy);
      int bw = 0, bh = 0;
      ASSERT_TRUE(kernels::DecodeMask(stored.data(), stored.size(), ch, 1 << 20, &back, &bw, &bh, &err)) << err;
      EXPECT_EQ(bw, w);
      EXPECT_EQ(bh, h);
      EXPECT_EQ(back, px) << ch << " channels, noisy " << noisy;
      if (!noisy) {  // the same pixels through libpng give the same values
        std::vector<uint8_t> png, via_png;
        ASSERT_TRUE(kernels::EncodePng(px.data(), w, h, ch, size_t(w) * ch, &png, &err));
        ASSERT_TRUE(kernels::DecodeMask(png.data(), png.size(), ch, 1 << 20, &via_png, &bw, &bh, &err)) << err;
        EXPECT_EQ(via_png, back);
      }
    }
  }
}

}  // namespace
}  // namespace dsc::test
