// Joint geometry in the loader (LoaderOptions::boxes): images whose boxes are painted into their
// pixels, one colour per box, go through the real loader (random crop, flip, translate, Pillow's
// resize); each box the batch returns must frame the pixels of its colour in the output image, and a
// box the loader dropped must have left (almost) nothing of its colour; per-box companions stay in step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <cstring>
#include <vector>

#include "format/error.h"
#include "reader/loader.h"
#include "tests/test_util.h"
#include "writer/writer.h"

namespace dsc::test {
namespace {

struct Sample {
  int w = 0, h = 0;
  std::vector<float> boxes;  // x, y, w, h per box
};

// Up to three non-overlapping boxes per image, box k painted in channel k alone.
std::vector<Sample> MakeFile(const std::string& path, size_t n) {
  using format::DType;
  WriterOptions wo;
  wo.encode.encoding = "raw";  // no JPEG ringing at the box edges
  wo.threads = 2;
  Writer w(path, {ImageField("image"), VarArrayField("boxes", DType::kFloat32, {4}), VarArrayField("cls", DType::kInt32)}, wo);
  std::vector<Sample> out;
  for (size_t i = 0; i < n; ++i) {
    Sample s;
    s.w = 90 + int(i % 5) * 7;
    s.h = 60 + int(i % 3) * 9;
    std::vector<uint8_t> px(size_t(s.w) * s.h * 3, 0);
    std::vector<int32_t> cls;
    const int count = 1 + int(i % 3);
    for (int k = 0; k < count; ++k) {
      // Columns of the image split in three: box k lives in the k-th third.
      const int x0 = k * s.w / 3 + int(i % 4), y0 = 4 + int((i * 7 + k * 5) % 20);
      const int bw = s.w / 3 - 6 - int(i % 4), bh = 12 + int((i + k) % 25);
      for (int y = y0; y < y0 + bh; ++y)
        for (int x = x0; x < x0 + bw; ++x) px[(size_t(y) * s.w + x) * 3 + k] = 255;
      s.boxes.insert(s.boxes.end(), {float(x0), float(y0), float(bw), float(bh)});
      cls.push_back(k);
    }
    dsc::Sample v;
    v.SetPixels("image", std::move(px), s.w, s.h);
    v.SetArray<float>("boxes", s.boxes.data(), s.boxes.size());
    v.SetArray<int32_t>("cls", cls.data(), cls.size());
    w.Add(std::move(v));
    out.push_back(std::move(s));
  }
  w.Close();
  return out;
}

TEST(BoxGeometry, BoxesFrameTheirPixelsAfterCropFlipAndTranslate) {
  const std::string dir = ScratchDir();
  const std::string path = dir + "/boxes.beton";
  MakeFile(path, 120);
  LoaderOptions o;
  o.batch_size = 16;
  o.threads = 2;
  o.seed = 9;
  o.dtype = DType::kUint8;
  o.layout = Layout::kNHWC;
  o.augment.crop = kernels::CropMode::kRandomResized;
  o.augment.out_w = 48;
  o.augment.out_h = 40;
  o.augment.scale_min = 0.25f;
  o.augment.flip = true;
  o.augment.translate = 4;
  o.boxes = {"boxes", "cls"};
  size_t kept = 0, dropped = 0, samples = 0;
  Loader l(path, o);
  for (const Batch& b : l.epoch(0)) {
    ASSERT_EQ(b.field_count, 2u);
    const FieldColumn& box = b.fields[0];
    const FieldColumn& cls = b.fields[1];
    for (uint32_t j = 0; j < b.size; ++j) {
      samples += !b.padding[j];
      const uint8_t* img = b.images_as<uint8_t>() + size_t(j) * 48 * 40 * 3;
      const size_t n = (box.offsets[j + 1] - box.offsets[j]) / 16;
      ASSERT_EQ((cls.offsets[j + 1] - cls.offsets[j]) / 4, n) << "companion out of step, sample " << b.indices[j];
      bool present[3] = {false, false, false};
      for (size_t r = 0; r < n; ++r) {
        float bx[4];
        std::memcpy(bx, box.data + box.offsets[j] + 16 * r, 16);
        int32_t k;
        std::memcpy(&k, cls.data + cls.offsets[j] + 4 * r, 4);
        ASSERT_TRUE(k >= 0 && k < 3);
        present[k] = true;
        int x0 = 1 << 20, y0 = 1 << 20, x1 = -1, y1 = -1;
        for (int y = 0; y < 40; ++y)
          for (int x = 0; x < 48; ++x)
            if (img[(size_t(y) * 48 + x) * 3 + size_t(k)] >= 128)
              x0 = std::min(x0, x), y0 = std::min(y0, y), x1 = std::max(x1, x), y1 = std::max(y1, y);
        if (x1 < 0) {  // a sliver thinner than the threshold can show
          EXPECT_LT(std::min(bx[2], bx[3]), 1.5f) << "sample " << b.indices[j] << " box " << k;
          continue;
        }
        const double tol = 1.5;
        EXPECT_NEAR(bx[0], x0, tol) << "sample " << b.indices[j] << " box " << k;
        EXPECT_NEAR(bx[1], y0, tol) << "sample " << b.indices[j] << " box " << k;
        EXPECT_NEAR(bx[0] + bx[2], x1 + 1, tol) << "sample " << b.indices[j] << " box " << k;
        EXPECT_NEAR(bx[1] + bx[3], y1 + 1, tol) << "sample " << b.indices[j] << " box " << k;
        ++kept;
      }
      // Dropped boxes: their colour is (almost) gone from the output.
      const int count = 1 + int(b.indices[j] % 3);
      for (int k = 0; k < count; ++k) {
        if (present[k]) continue;
        ++dropped;
        int on = 0;
        for (size_t p = 0; p < size_t(48) * 40; ++p) on += img[p * 3 + size_t(k)] >= 128;
        EXPECT_LE(on, 48) << "dropped box " << k << " of sample " << b.indices[j] << " is visible";
      }
    }
  }
  EXPECT_EQ(samples, 120u);
  EXPECT_GT(kept, 150u);
  EXPECT_GT(dropped, 5u);
}

TEST(BoxGeometry, BadDeclarationsAreRefused) {
  const std::string dir = ScratchDir();
  const std::string path = dir + "/boxes.beton";
  MakeFile(path, 4);
  LoaderOptions o;
  o.augment.crop = kernels::CropMode::kRandomResized;  // the images differ in size
  o.augment.out_w = o.augment.out_h = 32;
  o.boxes = {"cls"};
  EXPECT_THROW(Loader(path, o), OptionError);  // not [N, 4] float32
  o.boxes = {"nope"};
  EXPECT_THROW(Loader(path, o), OptionError);
  o.boxes = {"boxes", "cls"};
  o.transforms = "random_rotation(10)";
  try {
    Loader l(path, o);
    ADD_FAILURE() << "a rotation with boxes was accepted";
  } catch (const OptionError& e) {
    EXPECT_NE(std::string(e.what()).find("random_rotation"), std::string::npos) << e.what();
  }
}

// Masks (format 1.2 type 8): images of coloured blocks, each mask holding its block's class. After the
// loader's crop, flip and translate, every output pixel away from a block edge must show the colour of
// the class its mask names: the mask followed its image, nearest-neighbour, never blended.
constexpr uint8_t kClassColour[5][3] = {{0, 0, 0}, {255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {255, 255, 0}};

void MakeMaskFile(const std::string& path, size_t n) {
  WriterOptions wo;
  wo.encode.encoding = "raw";
  wo.threads = 2;
  Writer w(path, {ImageField("image"), MaskField("mask")}, wo);
  for (size_t i = 0; i < n; ++i) {
    const int iw = 70 + int(i % 4) * 9, ih = 50 + int(i % 3) * 11;
    std::vector<uint8_t> px(size_t(iw) * ih * 3), mask(size_t(iw) * ih);
    for (int y = 0; y < ih; ++y)
      for (int x = 0; x < iw; ++x) {
        // Blocks of 9 to 17 pixels, a class each, shifted per sample.
        const int bx = (x + int(i) * 3) / (9 + int(i % 9)), by = (y + int(i)) / (10 + int(i % 7));
        const uint8_t c = uint8_t((bx * 3 + by * 2 + int(i)) % 5);
        mask[size_t(y) * iw + x] = c;
        std::memcpy(&px[(size_t(y) * iw + x) * 3], kClassColour[c], 3);
      }
    dsc::Sample v;
    v.SetPixels("image", std::move(px), iw, ih);
    v.SetMask("mask", std::move(mask), iw, ih);
    w.Add(std::move(v));
  }
  w.Close();
}

TEST(MaskGeometry, MasksFollowTheirImageThroughCropFlipAndTranslate) {
  const std::string path = ScratchDir() + "/masks.beton";
  MakeMaskFile(path, 60);
  LoaderOptions o;
  o.batch_size = 8;
  o.threads = 2;
  o.seed = 5;
  o.dtype = DType::kUint8;
  o.layout = Layout::kNHWC;
  o.augment.crop = kernels::CropMode::kRandomResized;
  o.augment.out_w = 40;
  o.augment.out_h = 36;
  o.augment.scale_min = 0.2f;
  o.augment.flip = true;
  o.augment.translate = 3;
  size_t checked = 0, wrong = 0, samples = 0, flat = 0;
  Loader l(path, o);
  for (const Batch& b : l.epoch(1)) {
    ASSERT_EQ(b.field_count, 1u);
    const FieldColumn& m = b.fields[0];
    ASSERT_EQ(m.offsets, nullptr);
    ASSERT_EQ(m.ndim, 2u);
    ASSERT_EQ(m.shape[0], 36u);
    ASSERT_EQ(m.shape[1], 40u);
    for (uint32_t j = 0; j < b.size; ++j) {
      samples += !b.padding[j];
      const uint8_t* img = b.images_as<uint8_t>() + size_t(j) * 40 * 36 * 3;
      const uint8_t* mask = m.data + size_t(j) * 40 * 36;
      bool varied = false;
      for (int y = 2; y < 34; ++y)
        for (int x = 2; x < 38; ++x) {
          const uint8_t c = mask[y * 40 + x];
          ASSERT_LT(c, 5) << "sample " << b.indices[j] << ": a value no mask holds (blended?)";
          varied |= c != mask[0];
          bool interior = true;  // the 5x5 around it in one class: the resize filter saw one colour
          for (int dy = -2; dy <= 2 && interior; ++dy)
            for (int dx = -2; dx <= 2; ++dx) interior &= mask[(y + dy) * 40 + x + dx] == c;
          if (!interior) continue;
          ++checked;
          const uint8_t* p = img + (size_t(y) * 40 + x) * 3;
          for (int k = 0; k < 3; ++k)
            if (std::abs(int(p[k]) - int(kClassColour[c][k])) > 8) {
              ++wrong;
              break;
            }
        }
      flat += !varied;
    }
  }
  EXPECT_EQ(samples, 60u);
  EXPECT_GT(checked, 20000u);
  EXPECT_LT(flat, 10u) << "crops too small to see the geometry";
  EXPECT_EQ(wrong, 0u) << "of " << checked << " interior pixels";
}

TEST(MaskGeometry, AMaskOfAnotherSizeIsRefusedNamingSampleAndField) {
  const std::string path = ScratchDir() + "/bad.beton";
  Writer w(path, {ImageField("image"), MaskField("seg")});
  dsc::Sample ok;
  ok.SetPixels("image", std::vector<uint8_t>(8 * 6 * 3, 7), 8, 6);
  ok.SetMask("seg", std::vector<uint8_t>(8 * 6, 1), 8, 6);
  w.Add(std::move(ok));
  dsc::Sample bad;
  bad.SetPixels("image", std::vector<uint8_t>(8 * 6 * 3, 7), 8, 6);
  bad.SetMask("seg", std::vector<uint8_t>(6 * 8, 1), 6, 8);
  w.Add(std::move(bad));
  try {
    w.Close();
    ADD_FAILURE() << "a 6x8 mask for an 8x6 image was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("sample 1"), std::string::npos) << m;
    EXPECT_NE(m.find("'seg'"), std::string::npos) << m;
    EXPECT_NE(m.find("6x8"), std::string::npos) << m;
  }
  EXPECT_FALSE(std::filesystem::exists(path)) << "a partial file was left";
}

}  // namespace
}  // namespace dsc::test
