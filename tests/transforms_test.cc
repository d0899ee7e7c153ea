// The transform list's C++ side (kernels/transforms.h): every registered transform runs on odd-sized
// images without touching memory outside them (ASan/UBSan run this), is a pure function of (seed,
// epoch, index), and bad lists are refused naming the transform. Equality with torchvision is
// python/tests/test_augment_torchvision.py's.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format/error.h"
#include "kernels/mix.h"
#include "kernels/transforms.h"

namespace dsc::kernels {
namespace {

std::vector<uint8_t> Pattern(int w, int h, uint32_t salt) {
  std::vector<uint8_t> v(size_t(w) * size_t(h) * 3);
  uint32_t x = salt * 2654435761u + 1;
  for (uint8_t& b : v) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    b = uint8_t(x >> 24);
  }
  return v;
}

const char* kLists[] = {
    "random_crop((13,17),padding=(2,3),padding_mode=reflect)", "random_crop((13,17),padding=4,padding_mode=edge)",
    "random_crop((13,17),padding=1,padding_mode=symmetric,fill=(1,2,3))", "flip(p=1),random_vertical_flip(p=1)",
    "color_jitter(0.4,0.4,0.4,0.5)", "grayscale,random_grayscale(p=1)", "random_solarize(100,p=1)",
    "random_posterize(1,p=1)", "random_autocontrast(p=1),random_equalize(p=1),random_invert(p=1)",
    "random_adjust_sharpness(3,p=1)", "gaussian_blur((3,5),sigma=(0.5,3))",
    "random_rotation(180,interpolation=bilinear,fill=(9,8,7))", "random_rotation((10,20),center=(0,0))",
    "random_affine(45,translate=(0.5,0.5),scale=(0.2,3),shear=(-30,30,-20,20))",
    "random_affine(0,interpolation=bilinear,scale=(0.5,0.5))", "random_erasing(p=1,value=(1,2,3))",
    "rand_augment(4,30)", "rand_augment(2,9,interpolation=bilinear,fill=128)", "trivial_augment_wide",
    "auto_augment(interpolation=bilinear)"};

TEST(TransformList, EveryTransformStaysInsideTheImageAndIsAFunctionOfItsSample) {
  const int w = 17, h = 13;
  for (const char* text : kLists) {
    SCOPED_TRACE(text);
    const TransformList list = ParseTransforms(text);
    EXPECT_EQ(ParseTransforms(list.Text()).Text(), list.Text());
    TransformScratch s1, s2;
    int changed = 0;
    for (uint64_t index = 0; index < 24; ++index) {
      const std::vector<uint8_t> in = Pattern(w, h, uint32_t(index));
      std::vector<uint8_t> a = in, b = in;
      list.Apply(ImageU8{a.data(), w, h}, 3, 1, index, s1);
      list.Apply(ImageU8{b.data(), w, h}, 3, 1, index, s2);
      EXPECT_EQ(a, b);
      changed += a != in;
    }
    EXPECT_GT(changed, 0) << "never changed an image";
  }
}

TEST(TransformList, RefusesBadListsNamingTheTransform) {
  const std::pair<const char*, const char*> bad[] = {
      {"colour_jitter", "unknown transform 'colour_jitter'"}, {"flip(p=2)", "not in [0, 1]"},
      {"color_jitter(0.4,bright=1)", "unknown argument 'bright'"}, {"flip(0.5,0.5)", "too many arguments"},
      {"gaussian_blur(4)", "odd"}, {"random_posterize(9)", "[0, 8]"}, {"random_crop(1e300)", "integer"}, {"color_jitter(hue=0.7)", "hue"},
      {"auto_augment(policy=cifar10)", "imagenet"}, {"random_rotation(10,expand=True)", "expand"},
      {"flip,,flip", "empty item"}, {"flip(", "unbalanced"}, {"random_erasing(value=random)", "uint8"}};
  for (const auto& [text, words] : bad) {
    try {
      ParseTransforms(text);
      ADD_FAILURE() << text << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << text << ": " << e.what();
    }
  }
  // Reflect padding as wide as the image has no reflection to take.
  const TransformList list = ParseTransforms("random_crop(4,padding=4,padding_mode=reflect)");
  std::vector<uint8_t> img = Pattern(4, 4, 1);
  TransformScratch s;
  EXPECT_THROW(list.Apply(ImageU8{img.data(), 4, 4}, 0, 0, 0, s), Error);
}

class Swap final : public Transform {
 public:
  void Apply(ImageU8 img, Rng& rng, TransformScratch&, ParamLog*) const override {
    if (rng.Below(2)) std::swap(img.data[0], img.data[1]);
  }
};

TEST(TransformList, RegisteredTransformsAreUsableByName) {
  ASSERT_TRUE(RegisterTransform("test_swap", [](const TransformArgs&) { return std::make_unique<Swap>(); }, "Swap()"));
  EXPECT_THROW(RegisterTransform("test_swap", [](const TransformArgs&) { return std::make_unique<Swap>(); }, ""), Error);
  EXPECT_THROW(RegisterTransform("bad name", [](const TransformArgs&) { return std::make_unique<Swap>(); }, ""), Error);
  const TransformList list = ParseTransforms("flip,test_swap");
  EXPECT_EQ(list.size(), 2u);
  EXPECT_FALSE(list.OnDevice());
  EXPECT_THROW(ParseTransforms("test_swap(1)"), Error);  // an argument it never reads
}

TEST(Mix, LabelsSumToOneAndBadLabelsAreRefused) {
  MixSpec s;
  s.num_classes = 5;
  s.label_smoothing = 0.2f;
  std::vector<float> img(size_t(6) * 3 * 8 * 8, 1.f), soft(6 * 5);
  std::vector<int32_t> labels = {0, 1, 2, 3, 4, 0};
  for (uint64_t b = 0; b < 10; ++b) {
    MixBatch(s, img.data(), 6, 3, 8, 8, b % 2 == 0, labels.data(), soft.data(), 1, 0, b);
    for (int i = 0; i < 6; ++i) {
      float sum = 0;
      for (int k = 0; k < 5; ++k) sum += soft[size_t(i) * 5 + size_t(k)];
      EXPECT_NEAR(sum, 1.f, 1e-5);
    }
  }
  labels[3] = 5;
  EXPECT_THROW(MixBatch(s, img.data(), 6, 3, 8, 8, true, labels.data(), soft.data(), 1, 0, 0), Error);
}

}  // namespace
}  // namespace dsc::kernels
