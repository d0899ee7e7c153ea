// Joint geometry (kernels/geometry.h) against the image path itself: a box is painted into an image,
// the image goes through OutputPixel (the reference per-pixel transform) with the same params, and the
// painted region found in the output must be where TransformBoxes puts the box; masks against a direct
// double-precision sampling of the crop box (PIL's NEAREST rule).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "kernels/augment.h"
#include "kernels/geometry.h"

namespace dsc::kernels {
namespace {

struct Found {
  int x0 = 1 << 30, y0 = 1 << 30, x1 = -1, y1 = -1;  // inclusive pixel bounds
  bool any() const { return x1 >= 0; }
};

// Paints box [bx, bx + bw) x [by, by + bh) white on black, runs the image path, and returns the bounds
// of the output pixels that are mostly white (bilinear sampling blurs one pixel at the edges).
Found PaintAndTransform(const SampleParams& p, const AugmentSpec& s, int w, int h, int bx, int by, int bw, int bh,
                        int out_w, int out_h) {
  std::vector<uint8_t> img(size_t(w) * h * 3, 0);
  for (int y = by; y < by + bh; ++y)
    for (int x = bx; x < bx + bw; ++x)
      for (int c = 0; c < 3; ++c) img[(size_t(y) * w + x) * 3 + c] = 255;
  Found f;
  for (int y = 0; y < out_h; ++y)
    for (int x = 0; x < out_w; ++x) {
      uint8_t rgb[3];
      OutputPixel(p, s, out_w, out_h, img.data(), w, h, w * 3, x, y, rgb);
      if (rgb[0] >= 128) {
        f.x0 = std::min(f.x0, x);
        f.y0 = std::min(f.y0, y);
        f.x1 = std::max(f.x1, x);
        f.y1 = std::max(f.y1, y);
      }
    }
  return f;
}

TEST(Geometry, BoxesFollowTheImagePixels) {
  const int w = 160, h = 120;
  AugmentSpec s;
  s.crop = CropMode::kRandomResized;
  s.out_w = 64;
  s.out_h = 48;
  s.scale_min = 0.3f;
  s.flip = true;
  s.translate = 6;
  int checked = 0, flipped = 0, dropped = 0;
  for (uint64_t idx = 0; idx < 300; ++idx) {
    CropRect rect;
    SampleParams p;
    MakeParams(s, w, h, 7, 0, idx, &rect, &p);
    const int bx = int(idx * 37 % 120), by = int(idx * 53 % 90), bw = 12 + int(idx % 25), bh = 10 + int(idx % 19);
    const float box[4] = {float(bx), float(by), float(bw), float(bh)};
    float out[4];
    uint32_t kept = 99;
    const size_t n = TransformBoxes(p, s.out_w, s.out_h, box, 1, out, &kept);
    const Found f = PaintAndTransform(p, s, w, h, bx, by, bw, bh, s.out_w, s.out_h);
    if (n == 0) {
      // Dropped: at most a sliver of the painted box can be visible.
      ++dropped;
      if (f.any()) {
        EXPECT_LE(std::min(f.x1 - f.x0, f.y1 - f.y0), 1) << idx;
      }
      continue;
    }
    ASSERT_EQ(kept, 0u);
    if (!f.any()) {  // a sliver under half a pixel may not reach the threshold anywhere
      EXPECT_LT(std::min(out[2], out[3]), 1.5f) << "box kept but nothing painted is visible, sample " << idx;
      continue;
    }
    // Pixel bounds of the mapped box vs the painted pixels: within 1.5 pixels (scaling rounds at edges).
    const double tol = 1.5;
    EXPECT_NEAR(out[0], f.x0, tol) << idx;
    EXPECT_NEAR(out[1], f.y0, tol) << idx;
    EXPECT_NEAR(out[0] + out[2], f.x1 + 1, tol) << idx;
    EXPECT_NEAR(out[1] + out[3], f.y1 + 1, tol) << idx;
    EXPECT_GE(out[0], 0.0f);
    EXPECT_LE(out[0] + out[2], float(s.out_w));
    ++checked;
    flipped += p.flip;
  }
  EXPECT_GT(checked, 150);
  EXPECT_GT(flipped, 40);
  EXPECT_GT(dropped, 5);
}

TEST(Geometry, DroppedBoxesKeepTheOthersInOrder) {
  SampleParams p;  // the region [50, 100) x [0, 100) scaled to 100 x 100: x doubles
  p.src_x = int64_t(50) << 16;
  p.src_w = int64_t(50) << 16;
  p.src_h = int64_t(100) << 16;
  const float in[12] = {60, 10, 10, 10,   // inside
                        0, 0, 20, 20,     // left of the region: dropped
                        95, 90, 20, 20};  // partly outside: clipped
  float out[12];
  uint32_t kept[3];
  ASSERT_EQ(TransformBoxes(p, 100, 100, in, 3, out, kept), 2u);
  EXPECT_EQ(kept[0], 0u);
  EXPECT_EQ(kept[1], 2u);
  EXPECT_FLOAT_EQ(out[0], 20);
  EXPECT_FLOAT_EQ(out[2], 20);
  EXPECT_FLOAT_EQ(out[4], 90);
  EXPECT_FLOAT_EQ(out[6], 10);  // clipped at x = 100
  EXPECT_FLOAT_EQ(out[7], 10);  // clipped at y = 100
}

TEST(Geometry, PointsMirrorAndReportVisibility) {
  SampleParams p;
  p.src_w = int64_t(40) << 16;
  p.src_h = int64_t(20) << 16;
  p.flip = 1;
  p.dx = 3;
  float xy[4] = {10, 5, 39.5f, 19};
  uint8_t vis[2] = {1, 1};
  TransformPoints(p, 40, 20, xy, 2, vis);
  EXPECT_FLOAT_EQ(xy[0], 40 - 10 + 3);
  EXPECT_FLOAT_EQ(xy[1], 5);
  EXPECT_FLOAT_EQ(xy[2], 40 - 39.5f + 3);
  EXPECT_EQ(vis[0], 1);
  EXPECT_EQ(vis[1], 1);
  p.dx = 35;
  float far[2] = {1, 1};
  TransformPoints(p, 40, 20, far, 1, vis);
  EXPECT_EQ(vis[0], 0);
}

TEST(Geometry, MasksAreNearestNeverBlended) {
  const int w = 97, h = 71;
  std::vector<uint8_t> mask(size_t(w) * h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) mask[size_t(y) * w + x] = uint8_t((x / 7 + y / 5 * 3) % 21);
  AugmentSpec s;
  s.crop = CropMode::kRandomResized;
  s.out_w = 50;
  s.out_h = 40;
  s.flip = true;
  s.translate = 4;
  std::set<uint8_t> labels(mask.begin(), mask.end());
  for (uint64_t idx = 0; idx < 50; ++idx) {
    CropRect rect;
    SampleParams p;
    MakeParams(s, w, h, 3, 1, idx, &rect, &p);
    std::vector<uint8_t> out(size_t(s.out_w) * s.out_h);
    TransformMask(p, s.out_w, s.out_h, mask.data(), w, h, w, 1, 255, out.data());
    for (int y = 0; y < s.out_h; ++y)
      for (int x = 0; x < s.out_w; ++x) {
        const uint8_t v = out[size_t(y) * s.out_w + x];
        const int tx = x - p.dx, ty = y - p.dy;
        if (tx < 0 || ty < 0 || tx >= s.out_w || ty >= s.out_h) {
          ASSERT_EQ(v, 255) << "outside the translate must be the fill";
          continue;
        }
        ASSERT_TRUE(labels.count(v)) << "blended label " << int(v);
        // Direct sampling in double: the centre of the (unflipped) output pixel in the crop box.
        const int fx = p.flip ? s.out_w - 1 - tx : tx;
        const double u = p.src_x / 65536.0 + (fx + 0.5) * (p.src_w / 65536.0) / s.out_w;
        const double vv = p.src_y / 65536.0 + (ty + 0.5) * (p.src_h / 65536.0) / s.out_h;
        const int sx = std::clamp(int(std::floor(u)), 0, w - 1), sy = std::clamp(int(std::floor(vv)), 0, h - 1);
        ASSERT_EQ(v, mask[size_t(sy) * w + sx]) << "sample " << idx << " at " << x << "," << y;
      }
  }
}

TEST(Geometry, MaskAndBoxAgree) {
  // A rectangle drawn into a mask lands where the same rectangle as a box lands.
  const int w = 120, h = 90;
  AugmentSpec s;
  s.crop = CropMode::kRandomResized;
  s.out_w = 60;
  s.out_h = 60;
  s.scale_min = 0.4f;
  s.flip = true;
  for (uint64_t idx = 0; idx < 100; ++idx) {
    CropRect rect;
    SampleParams p;
    MakeParams(s, w, h, 11, 2, idx, &rect, &p);
    std::vector<uint8_t> mask(size_t(w) * h, 0);
    const int bx = 30, by = 20, bw = 50, bh = 40;
    for (int y = by; y < by + bh; ++y) std::fill_n(&mask[size_t(y) * w + bx], bw, 1);
    std::vector<uint8_t> out(size_t(s.out_w) * s.out_h);
    TransformMask(p, s.out_w, s.out_h, mask.data(), w, h, w, 1, 0, out.data());
    const float box[4] = {bx, by, bw, bh};
    float tb[4];
    const size_t n = TransformBoxes(p, s.out_w, s.out_h, box, 1, tb);
    int x0 = 1 << 20, y0 = 1 << 20, x1 = -1, y1 = -1;
    for (int y = 0; y < s.out_h; ++y)
      for (int x = 0; x < s.out_w; ++x)
        if (out[size_t(y) * s.out_w + x]) {
          x0 = std::min(x0, x), y0 = std::min(y0, y), x1 = std::max(x1, x), y1 = std::max(y1, y);
        }
    if (n == 0) {
      EXPECT_LT(x1, 0) << idx;
      continue;
    }
    ASSERT_GE(x1, 0) << idx;
    EXPECT_NEAR(tb[0], x0, 1.0) << idx;
    EXPECT_NEAR(tb[1], y0, 1.0) << idx;
    EXPECT_NEAR(tb[0] + tb[2], x1 + 1, 1.0) << idx;
    EXPECT_NEAR(tb[1] + tb[3], y1 + 1, 1.0) << idx;
  }
}

}  // namespace
}  // namespace dsc::kernels
