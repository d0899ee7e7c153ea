// The transform list's C++ side (kernels/transforms.h): every registered transform runs on odd-sized
// images without touching memory outside them (ASan/UBSan run this), is a pure function of (seed,
// epoch, index), and bad lists are refused naming the transform. Equality with torchvision is
// python/tests/test_augment_torchvision.py's.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "format/error.h"
#include "kernels/color_jitter.h"
#include "kernels/cpu.h"
#include "kernels/mix.h"
#include "kernels/transform_ops.h"
#include "kernels/transform_steps.h"
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
    "random_perspective(1,p=1,fill=(9,8,7))", "random_perspective(0.3,p=1,interpolation=nearest)",
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

struct Recorder final : ParamLog {
  std::vector<std::pair<std::string, double>> got;
  void Put(const char* name, double v) override { got.emplace_back(name, v); }
};

// An image whose channels span less than the full range (so autocontrast and equalize have work):
// noise squeezed into [lo, lo + span) with a gradient, or the plain pattern.
std::vector<uint8_t> Varied(int w, int h, uint32_t salt) {
  std::vector<uint8_t> v = Pattern(w, h, salt);
  if (salt % 3 == 0) return v;
  const int lo = int(salt * 37 % 120), span = 20 + int(salt * 11 % 100);
  for (size_t i = 0; i < v.size(); ++i) v[i] = uint8_t(lo + (v[i] % 7 + int(i / 3 % size_t(w)) * span / w) % span);
  return v;
}

// The deferred (GPU) path's per-element code, run by its CPU twin over a batch, equals the reference
// ops (TransformList::Apply) byte for byte, for every transform, on several sizes; and Plan draws and
// logs exactly what Apply does.
TEST(TransformSteps, DeviceCodeEqualsTheReferenceForEveryTransform) {
  const int sizes[][2] = {{17, 13}, {32, 32}, {5, 9}};
  std::vector<std::string> lists(std::begin(kLists), std::end(kLists));
  lists.push_back("random_posterize(3,p=1),random_solarize(0,p=1),random_solarize(255.5,p=1)");
  lists.push_back("random_adjust_sharpness(0.2,p=1),gaussian_blur(3,sigma=0.3)");
  lists.push_back("auto_augment,rand_augment(3,15,num_magnitude_bins=16)");
  for (const auto& size : sizes) {
    const int w = size[0], h = size[1];
    for (const std::string& text : lists) {
      SCOPED_TRACE(text + " on " + std::to_string(w) + "x" + std::to_string(h));
      TransformList list;
      try {
        list = ParseTransforms(w == 17 || text.find("random_crop") == std::string::npos ? text : "flip");
      } catch (const Error&) {
        continue;
      }
      ASSERT_TRUE(list.OnDevice());
      const int k = list.MaxSteps();
      const int n = 12;
      const size_t bytes = size_t(w) * size_t(h) * 3;
      std::vector<uint8_t> batch(bytes * n), want(bytes * n);
      std::vector<TransformStep> steps(size_t(n) * size_t(k)), scratch;
      TransformScratch ts;
      bool refused = false;
      for (int i = 0; i < n; ++i) {
        const std::vector<uint8_t> in = Varied(w, h, uint32_t(i + 7 * w));
        std::copy(in.begin(), in.end(), batch.begin() + long(bytes) * i);
        std::vector<uint8_t> ref = in;
        Recorder a, b;
        try {
          list.Apply(ImageU8{ref.data(), w, h}, 11, 2, uint64_t(i), ts, &a);
        } catch (const Error&) {  // a kernel or padding larger than this small image: Plan refuses too
          EXPECT_THROW(list.Plan(w, h, 11, 2, uint64_t(i), steps.data(), &scratch), Error);
          refused = true;
          break;
        }
        std::copy(ref.begin(), ref.end(), want.begin() + long(bytes) * i);
        list.Plan(w, h, 11, 2, uint64_t(i), steps.data() + size_t(i) * size_t(k), &scratch, &b);
        EXPECT_EQ(a.got, b.got);
      }
      if (refused) continue;
      std::vector<uint8_t> tmp;
      RunStepsCpu(steps.data(), k, batch.data(), n, w, h, &tmp);
      for (int i = 0; i < n; ++i)
        EXPECT_TRUE(std::equal(want.begin() + long(bytes) * i, want.begin() + long(bytes) * (i + 1), batch.begin() + long(bytes) * i))
            << "sample " << i;
    }
  }
}

// Lists of transforms with planar forms give on planes exactly what they give on packed RGB rows
// (the loader keeps a JPEG's pixels planar for them), for any sample's draws.
TEST(TransformList, PlanarFormsEqualThePackedOnes) {
  const char* lists[] = {"random_crop(32,padding=4,padding_mode=reflect),flip,color_jitter(0.4,0.4,0.4,0.1)",
                         "random_crop((20,32),padding=(3,5),padding_mode=edge),random_vertical_flip(p=0.7)",
                         "random_crop(32,padding=6,fill=(9,8,7)),random_crop(32,padding=2,padding_mode=symmetric)",
                         "random_erasing(p=0.8,value=(1,2,3)),random_grayscale(0.5),random_invert,random_solarize(99),"
                         "random_posterize(2)"};
  for (const char* text : lists) {
    SCOPED_TRACE(text);
    const TransformList list = ParseTransforms(text);
    ASSERT_TRUE(list.OnPlanes());
    const int w = 32, h = std::string(text).find("(20,32)") != std::string::npos ? 20 : 32;
    const size_t n = size_t(w) * size_t(h);
    TransformScratch s1, s2;
    int changed = 0;
    for (uint64_t index = 0; index < 40; ++index) {
      const std::vector<uint8_t> in = Varied(w, h, uint32_t(index));
      std::vector<uint8_t> packed = in, planes(3 * n), back(3 * n);
      for (size_t i = 0; i < n; ++i)
        for (int c = 0; c < 3; ++c) planes[size_t(c) * n + i] = in[3 * i + size_t(c)];
      list.Apply(ImageU8{packed.data(), w, h}, 5, 3, index, s1);
      list.ApplyPlanes(PlanesU8{{planes.data(), planes.data() + n, planes.data() + 2 * n}, w, h}, 5, 3, index, s2);
      for (size_t i = 0; i < n; ++i)
        for (int c = 0; c < 3; ++c) back[3 * i + size_t(c)] = planes[size_t(c) * n + i];
      EXPECT_EQ(back, packed) << "sample " << index;
      changed += packed != in;
    }
    EXPECT_GT(changed, 20);
  }
  EXPECT_FALSE(ParseTransforms("random_crop(32,padding=4),random_rotation(10)").OnPlanes());
}

// ColorJitter's fast path (tables, AVX-512 where the CPU has it, the portable loops under
// LimitToAvx2) against its definition, torchvision's ops one after another: every order of every
// subset of the four ops, factors across their ranges and past them (0: a flat image, 2.5 and 1e6: clamping),
// on noise and on a smooth gradient, at sizes with and without a 64-pixel tail; bit-equal, packed and
// planar, and the list's planar form equal to its packed one.
TEST(ColorJitter, FastPathEqualsTheReferenceOpByOp) {
  const int sizes[][2] = {{32, 32}, {7, 5}, {65, 3}, {100, 37}};
  const double factors[] = {0.0, 0.6, 0.97, 1.0, 1.23, 1.4, 2.5, 1e6};
  const double hues[] = {-0.5, -0.1, 0.03, 0.5};
  uint32_t draw = 1;
  auto next = [&draw](uint32_t n) {
    draw ^= draw << 13, draw ^= draw >> 17, draw ^= draw << 5;
    return draw % n;
  };
  for (const bool avx2_only : {false, true}) {
    LimitToAvx2(avx2_only);
    int cases = 0;
    for (const auto& size : sizes) {
      const int w = size[0], h = size[1];
      const size_t n = size_t(w) * size_t(h);
      for (int img_kind = 0; img_kind < 2; ++img_kind) {
        std::vector<uint8_t> in = Pattern(w, h, uint32_t(w * 7 + h));
        if (img_kind == 1)  // smooth: neighbouring values, where a rounding slip shows as a wrong level
          for (size_t i = 0; i < n; ++i)
            for (int c = 0; c < 3; ++c) in[3 * i + size_t(c)] = uint8_t((i * (c + 1) * 255) / n);
        for (int mask = 1; mask < 16; ++mask) {
          int order[4] = {0, 1, 2, 3};
          for (int perm = 0; perm < 6; ++perm) {
            for (int i = 3; i > 0; --i) std::swap(order[i], order[next(uint32_t(i + 1))]);
            JitterOps ops;
            for (int id : order)
              if (mask & (1 << id))
                ops.id[ops.n] = id,
                ops.factor[ops.n++] = id == 3 ? hues[next(4)] : factors[next(sizeof(factors) / sizeof(factors[0]))];
            std::vector<uint8_t> ref = in, fast = in, planes(3 * n);
            ColorJitterReference(ImageU8{ref.data(), w, h}, ops);
            TransformScratch s;
            ColorJitterRgb(ImageU8{fast.data(), w, h}, ops, s);
            ASSERT_EQ(fast, ref) << w << "x" << h << " image " << img_kind << " ops " << mask << " perm " << perm
                                 << (avx2_only ? " (portable)" : "");
            for (size_t i = 0; i < n; ++i)
              for (int c = 0; c < 3; ++c) planes[size_t(c) * n + i] = in[3 * i + size_t(c)];
            uint8_t* const p[3] = {planes.data(), planes.data() + n, planes.data() + 2 * n};
            ColorJitterPlanes(p, n, ops);
            for (size_t i = 0; i < n; ++i)
              for (int c = 0; c < 3; ++c) ASSERT_EQ(planes[size_t(c) * n + i], ref[3 * i + size_t(c)]);
            ++cases;
          }
        }
      }
    }
    EXPECT_EQ(cases, 4 * 2 * 15 * 6);
  }
  LimitToAvx2(false);
  // The list's planar form draws and writes what its packed form does.
  const TransformList list = ParseTransforms("color_jitter(0.4,0.4,0.4,0.1)");
  ASSERT_TRUE(list.OnPlanes());
  EXPECT_FALSE(ParseTransforms("random_affine(5),color_jitter(0.4)").OnPlanes());
  const int w = 19, h = 11;
  const size_t n = size_t(w) * size_t(h);
  for (uint64_t index = 0; index < 20; ++index) {
    std::vector<uint8_t> packed = Pattern(w, h, uint32_t(index)), planes(3 * n);
    for (size_t i = 0; i < n; ++i)
      for (int c = 0; c < 3; ++c) planes[size_t(c) * n + i] = packed[3 * i + size_t(c)];
    TransformScratch s;
    list.Apply(ImageU8{packed.data(), w, h}, 4, 2, index, s);
    list.ApplyPlanes(PlanesU8{{planes.data(), planes.data() + n, planes.data() + 2 * n}, w, h}, 4, 2, index, s);
    for (size_t i = 0; i < n; ++i)
      for (int c = 0; c < 3; ++c) ASSERT_EQ(planes[size_t(c) * n + i], packed[3 * i + size_t(c)]) << index;
  }
}

// The vectorised hue (HueLanes) against HuePixel, the per-pixel reference, over a lattice of the RGB
// cube (every grey, every hue sector and its edges) and factors across [-0.5, 0.5].
TEST(ColorJitter, HueLanesEqualHuePixelAcrossTheCube) {
  std::vector<uint8_t> r, g, b;
  for (int x = 0; x < 256; x += 3)
    for (int y = 0; y < 256; y += 5)
      for (int z = 0; z < 256; ++z) r.push_back(uint8_t(x)), g.push_back(uint8_t(y)), b.push_back(uint8_t(z));
  for (int pass = 0; pass < 2; ++pass)  // AVX-512 where the CPU has it, then AVX2 alone
  for (float f : {-0.5f, -0.3333f, -0.01f, 0.f, 0.1f, 0.25f, 0.4999f, 0.5f}) {
    LimitToAvx2(pass == 1);
    std::vector<uint8_t> rr = r, gg = g, bb = b;
    HueLanes(rr.data(), gg.data(), bb.data(), rr.size(), f);
    size_t bad = 0;
    for (size_t i = 0; i < r.size(); ++i) {
      const uint8_t in[3] = {r[i], g[i], b[i]};
      uint8_t want[3];
      HuePixel(in, f, want);
      bad += want[0] != rr[i] || want[1] != gg[i] || want[2] != bb[i];
    }
    EXPECT_EQ(bad, 0u) << "factor " << f;
    std::vector<uint8_t> tail_r(r.begin(), r.begin() + 13), tail_g(g.begin(), g.begin() + 13), tail_b(b.begin(), b.begin() + 13);
    HueLanes(tail_r.data(), tail_g.data(), tail_b.data(), 13, f);  // 8 lanes and a tail of 5 (or a tail of 13)
    EXPECT_TRUE(std::equal(tail_r.begin(), tail_r.end(), rr.begin()) && std::equal(tail_b.begin(), tail_b.end(), bb.begin()));
  }
  LimitToAvx2(false);
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
