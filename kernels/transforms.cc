// The random half of the list transforms: each transform's draws (torchvision 0.14's get_params with
// dsc's per-sample stream), the registry and the list parser. Arguments and the shared draws are
// transform_args.cc, the pixel work transform_ops.cc.
#include "kernels/transforms.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>

#include "format/error.h"
#include "kernels/color_jitter.h"
#include "kernels/transforms_internal.h"

namespace dsc::kernels {

namespace {
using namespace detail;

// --- the transforms -----------------------------------------------------------------------------

class RandomCrop final : public StepTransform {
 public:
  bool HasPlanes() const override { return true; }
  explicit RandomCrop(const TransformArgs& a) {
    std::vector<double> size = a.Nums(0, "size", {});
    if (size.empty() || size.size() > 2) throw Error("transform random_crop: size is N or (H, W)");
    h_ = IntIn(a, size[0], "size", 1, 1 << 16);
    w_ = IntIn(a, size.size() == 2 ? size[1] : size[0], "size", 1, 1 << 16);
    std::vector<double> pad = a.Nums(1, "padding", {0});
    if (pad.size() == 1) pad = {pad[0], pad[0], pad[0], pad[0]};
    else if (pad.size() == 2) pad = {pad[0], pad[1], pad[0], pad[1]};
    if (pad.size() != 4) throw Error("transform random_crop: padding takes 1, 2 or 4 values");
    for (int i = 0; i < 4; ++i) {
      pad_[i] = IntIn(a, pad[size_t(i)], "padding", 0, 1 << 16);
    }
    pad_if_needed_ = a.Num(2, "pad_if_needed", 0) != 0;
    std::vector<double> fill = a.Nums(3, "fill", {0});
    if (fill.size() == 1) fill = {fill[0], fill[0], fill[0]};
    if (fill.size() != 3) throw Error("transform random_crop: fill takes one value or three");
    for (int c = 0; c < 3; ++c) fill_[c] = uint8_t(std::clamp(fill[size_t(c)], 0.0, 255.0));
    const std::string m = a.Word(4, "padding_mode", a.Word(99, "mode", "constant"));
    if (m == "constant") mode_ = PadMode::kConstant;
    else if (m == "edge") mode_ = PadMode::kEdge;
    else if (m == "reflect") mode_ = PadMode::kReflect;
    else if (m == "symmetric") mode_ = PadMode::kSymmetric;
    else throw Error("transform random_crop: padding_mode '" + m + "' is not constant, edge, reflect or symmetric");
    if (w_ <= 0 || h_ <= 0) throw Error("transform random_crop: size must be positive");
  }
  void Plan(int w, int h, Rng& rng, ParamLog* log, std::vector<TransformStep>* steps) const override {
    if (w != w_ || h != h_)
      throw Error("transform random_crop(" + std::to_string(h_) + "," + std::to_string(w_) + "): the image is " +
                  std::to_string(w) + "x" + std::to_string(h) +
                  "; list transforms keep the output size (crop with the loader's crop options first)");
    const int pl = pad_[0], pt = pad_[1], pr = pad_[2], pb = pad_[3];
    if (mode_ == PadMode::kReflect && (pl >= w || pr >= w || pt >= h || pb >= h))
      throw Error("random_crop: reflect padding must be smaller than the image (" + std::to_string(w) + "x" + std::to_string(h) + ")");
    const int pw = w + pl + pr, ph = h + pt + pb;
    (void)pad_if_needed_;  // the image is the crop's size, so nothing is ever needed
    const int top = int(rng.Below(uint64_t(ph - h_ + 1)));
    const int left = int(rng.Below(uint64_t(pw - w_ + 1)));
    Log(log, "top", top);
    Log(log, "left", left);
    TransformStep st;
    st.kind = kStepPadCrop;
    st.i[0] = pl, st.i[1] = pt, st.i[2] = left, st.i[3] = top;
    st.mode = int32_t(mode_);
    for (int c = 0; c < 3; ++c) st.fill[c] = fill_[c];
    steps->push_back(st);
  }

 private:
  int w_ = 0, h_ = 0, pad_[4] = {0, 0, 0, 0};
  bool pad_if_needed_ = false;
  uint8_t fill_[3] = {0, 0, 0};
  PadMode mode_ = PadMode::kConstant;
};

class RandomFlip final : public StepTransform {
 public:
  RandomFlip(const TransformArgs& a, bool vertical) : vertical_(vertical), p_(Probability(a, 0, 0.5)) {}
  bool HasPlanes() const override { return true; }
  void Plan(int, int, Rng& rng, ParamLog* log, std::vector<TransformStep>* steps) const override {
    const bool f = Chance(rng, p_);
    Log(log, "flip", f);
    if (f) steps->push_back(Step(vertical_ ? kStepFlipV : kStepFlipH));
  }

 private:
  bool vertical_;
  double p_;
};

class ColorJitter final : public Transform {
 public:
  explicit ColorJitter(const TransformArgs& a) {
    b_ = Range(a, 0, "brightness", 1, 0, true);
    c_ = Range(a, 1, "contrast", 1, 0, true);
    s_ = Range(a, 2, "saturation", 1, 0, true);
    h_ = Range(a, 3, "hue", 0, -0.5, false);
    if (h_.first < -0.5 || h_.second > 0.5) throw Error("transform color_jitter: hue must lie in [-0.5, 0.5]");
    // torchvision sets a component to None when its range is the identity; None draws nothing.
    has_[0] = !(b_.first == 1 && b_.second == 1);
    has_[1] = !(c_.first == 1 && c_.second == 1);
    has_[2] = !(s_.first == 1 && s_.second == 1);
    has_[3] = !(h_.first == 0 && h_.second == 0);
  }
  void Apply(ImageU8 img, Rng& rng, TransformScratch& s, ParamLog* log) const override {
    ColorJitterRgb(img, Draw(rng, log), s);
  }
  bool OnDevice() const override { return true; }
  int MaxSteps() const override { return 4; }
  void Plan(int, int, Rng& rng, ParamLog* log, std::vector<TransformStep>* steps) const override {
    static const int32_t kinds[4] = {kStepBrightness, kStepContrast, kStepSaturation, kStepHue};
    const JitterOps ops = Draw(rng, log);
    for (int k = 0; k < ops.n; ++k) steps->push_back(Step(kinds[ops.id[k]], ops.factor[k]));
  }
  bool HasPlanes() const override { return true; }
  void ApplyPlanes(PlanesU8 img, Rng& rng, TransformScratch&, ParamLog* log) const override {
    ColorJitterPlanes(img.plane, size_t(img.width) * size_t(img.height), Draw(rng, log));
  }

 private:
  // get_params: a random order of the four, then each factor drawn (brightness, contrast,
  // saturation, hue), whether or not the order puts it first. The ops in the order applied.
  JitterOps Draw(Rng& rng, ParamLog* log) const {
    int order[4] = {0, 1, 2, 3};
    for (int i = 3; i > 0; --i) std::swap(order[i], order[rng.Below(uint64_t(i + 1))]);
    double f[4] = {1, 1, 1, 0};
    const std::pair<double, double>* r[4] = {&b_, &c_, &s_, &h_};
    for (int k = 0; k < 4; ++k)
      if (has_[k]) f[k] = UniformIn(rng, r[k]->first, r[k]->second);
    for (int k = 0; k < 4; ++k) Log(log, "order", order[k]);
    static const char* names[4] = {"brightness", "contrast", "saturation", "hue"};
    for (int k = 0; k < 4; ++k)
      if (has_[k]) Log(log, names[k], f[k]);
    JitterOps ops;
    for (int id : order)
      if (has_[id]) ops.id[ops.n] = id, ops.factor[ops.n++] = f[id];
    return ops;
  }

  std::pair<double, double> b_, c_, s_, h_;
  bool has_[4] = {};
};

// A deterministic op applied with probability p (RandomSolarize, RandomInvert, ...): p > rand().
class RandomApply final : public StepTransform {
 public:
  RandomApply(double p, TransformStep op) : p_(p), op_(op) {}
  bool HasPlanes() const override { return StepHasPlanes(op_.kind); }
  void Plan(int, int, Rng& rng, ParamLog* log, std::vector<TransformStep>* steps) const override {
    const bool on = Chance(rng, p_);
    Log(log, "applied", on);
    if (on) steps->push_back(op_);
  }

 private:
  double p_;
  TransformStep op_;
};

class Blur final : public StepTransform {
 public:
  explicit Blur(const TransformArgs& a) {
    std::vector<double> k = a.Nums(0, "kernel_size", {});
    if (k.empty() || k.size() > 2) throw Error("transform gaussian_blur: kernel_size is N or (W, H)");
    kx_ = IntIn(a, k[0], "kernel_size", 1, 1001);
    ky_ = IntIn(a, k.size() == 2 ? k[1] : k[0], "kernel_size", 1, 1001);
    if (kx_ <= 0 || ky_ <= 0 || kx_ % 2 == 0 || ky_ % 2 == 0)
      throw Error("transform gaussian_blur: kernel sizes must be odd and positive");
    std::vector<double> s = a.Nums(1, "sigma", {0.1, 2.0});
    if (s.size() == 1) s = {s[0], s[0]};
    if (s.size() != 2 || !(s[0] > 0) || s[0] > s[1]) throw Error("transform gaussian_blur: sigma is x > 0 or (min, max)");
    lo_ = s[0], hi_ = s[1];
  }
  bool OnDevice() const override { return kx_ <= kMaxBlurTaps && ky_ <= kMaxBlurTaps; }
  void Plan(int w, int h, Rng& rng, ParamLog* log, std::vector<TransformStep>* steps) const override {
    if (kx_ / 2 >= w || ky_ / 2 >= h) throw Error("gaussian_blur: kernel larger than the image (reflect padding needs pad < size)");
    const double sigma = UniformIn(rng, lo_, hi_);
    Log(log, "sigma", sigma);
    TransformStep st = Step(kStepBlur, sigma);
    st.b = sigma;
    st.i[0] = kx_, st.i[1] = ky_;
    steps->push_back(st);
  }

 private:
  int kx_ = 0, ky_ = 0;
  double lo_ = 0.1, hi_ = 2.0;
};

class RandomAffine final : public StepTransform {
 public:
  RandomAffine(const TransformArgs& a, bool rotation_only) : rotation_(rotation_only) {
    deg_ = Degrees(a, 0, "degrees");
    if (rotation_only) {
      interp_ = ParseInterp(a, 1);
      if (a.Num(2, "expand", 0) != 0) throw Error("transform random_rotation: expand=True changes the image size; not supported");
      center_ = a.Nums(3, "center", {});
      fill_ = ParseFill(a, 4, false);
    } else {
      std::vector<double> t = a.Nums(1, "translate", {});
      if (!t.empty()) {
        if (t.size() != 2 || t[0] < 0 || t[0] > 1 || t[1] < 0 || t[1] > 1)
          throw Error("transform random_affine: translate is (a, b) in [0, 1]");
        translate_ = {t[0], t[1]};
      }
      std::vector<double> sc = a.Nums(2, "scale", {});
      if (!sc.empty()) {
        if (sc.size() != 2 || !(sc[0] > 0) || sc[0] > sc[1]) throw Error("transform random_affine: scale is (min, max) > 0");
        scale_ = {sc[0], sc[1]};
      }
      std::vector<double> sh = a.Nums(3, "shear", {});
      if (sh.size() == 1) sh = {-std::abs(sh[0]), std::abs(sh[0])};
      if (!sh.empty() && sh.size() != 2 && sh.size() != 4) throw Error("transform random_affine: shear takes 1, 2 or 4 values");
      shear_ = sh;
      interp_ = ParseInterp(a, 4);
      fill_ = ParseFill(a, 5, false);
      center_ = a.Nums(6, "center", {});
    }
    if (!center_.empty() && center_.size() != 2) throw Error("transform " + a.name() + ": center is (x, y)");
  }
  void Plan(int w, int h, Rng& rng, ParamLog* log, std::vector<TransformStep>* steps) const override {
    // RandomAffine.get_params draws angle, translation, scale, shear in that order.
    const double angle = UniformIn(rng, deg_.first, deg_.second);
    double tx = 0, ty = 0, scale = 1, shx = 0, shy = 0;
    if (!rotation_) {
      if (!translate_.empty()) {
        const double mx = translate_[0] * w, my = translate_[1] * h;
        tx = std::nearbyint(UniformIn(rng, -mx, mx));  // int(round(...)): half to even
        ty = std::nearbyint(UniformIn(rng, -my, my));
      }
      if (!scale_.empty()) scale = UniformIn(rng, scale_[0], scale_[1]);
      if (!shear_.empty()) {
        shx = UniformIn(rng, shear_[0], shear_[1]);
        if (shear_.size() == 4) shy = UniformIn(rng, shear_[2], shear_[3]);
      }
    }
    Log(log, "angle", angle);
    Log(log, "tx", tx);
    Log(log, "ty", ty);
    Log(log, "scale", scale);
    Log(log, "shear_x", shx);
    Log(log, "shear_y", shy);
    double cx = 0, cy = 0;
    if (!center_.empty()) cx = center_[0] - w * 0.5, cy = center_[1] - h * 0.5;
    double m[6];
    // F.rotate passes -angle; F.affine passes angle (and the rotation's sense differs accordingly).
    InverseAffineMatrix(cx, cy, rotation_ ? -angle : angle, tx, ty, scale, shx, shy, m);
    steps->push_back(AffineStep(m, w, h, interp_, fill_));
  }

 private:
  bool rotation_;
  std::pair<double, double> deg_;
  std::vector<double> translate_, scale_, shear_, center_;
  Interp interp_ = Interp::kNearest;
  Fill fill_;
};

// RandomPerspective.get_params draws each corner's end point (torch.randint: x then y, top-left,
// top-right, bottom-right, bottom-left) within distortion_scale of half the size from its corner.
class RandomPerspective final : public StepTransform {
 public:
  explicit RandomPerspective(const TransformArgs& a) {
    scale_ = a.Num(0, "distortion_scale", 0.5);
    if (!(scale_ >= 0 && scale_ <= 1)) throw Error("transform random_perspective: distortion_scale is in [0, 1]");
    p_ = Probability(a, 1, 0.5);
    interp_ = a.Has(2, "interpolation") ? ParseInterp(a, 2) : Interp::kBilinear;  // torchvision's default here
    fill_ = ParseFill(a, 3, false);
  }
  void Plan(int w, int h, Rng& rng, ParamLog* log, std::vector<TransformStep>* steps) const override {
    const bool on = Chance(rng, p_);
    Log(log, "applied", on);
    if (!on) return;
    const int dw = int(scale_ * (w / 2)), dh = int(scale_ * (h / 2));
    auto near = [&](int lo) { return lo + int(rng.Below(uint64_t(dw + 1))); };  // x in [lo, lo + dw]
    auto near_y = [&](int lo) { return lo + int(rng.Below(uint64_t(dh + 1))); };
    int end[8];
    end[0] = near(0), end[1] = near_y(0);                  // top-left
    end[2] = near(w - dw - 1), end[3] = near_y(0);         // top-right
    end[4] = near(w - dw - 1), end[5] = near_y(h - dh - 1);  // bottom-right
    end[6] = near(0), end[7] = near_y(h - dh - 1);         // bottom-left
    static const char* const kNames[8] = {"x0", "y0", "x1", "y1", "x2", "y2", "x3", "y3"};
    for (int k = 0; k < 8; ++k) Log(log, kNames[k], end[k]);
    const int start[8] = {0, 0, w - 1, 0, w - 1, h - 1, 0, h - 1};
    float c[8];
    if (!PerspectiveCoefficients(start, end, c)) return;  // a 1-pixel side: the corners coincide, nothing moves
    TransformStep st = Step(kStepPerspective);
    PerspectiveGridOf(c, w, h, st.g);
    SetWarp(interp_, fill_, &st);
    steps->push_back(st);
  }

 private:
  double scale_ = 0.5, p_ = 0.5;
  Interp interp_ = Interp::kBilinear;
  Fill fill_;
};

class RandomErasing final : public StepTransform {
 public:
  bool HasPlanes() const override { return true; }
  explicit RandomErasing(const TransformArgs& a) {
    p_ = Probability(a, 0, 0.5);
    std::vector<double> sc = a.Nums(1, "scale", {0.02, 0.33}), r = a.Nums(2, "ratio", {0.3, 3.3});
    if (sc.size() != 2 || sc[0] > sc[1] || sc[0] < 0 || sc[1] > 1) throw Error("transform random_erasing: scale is (min, max) in [0, 1]");
    if (r.size() != 2 || r[0] > r[1] || !(r[0] > 0)) throw Error("transform random_erasing: ratio is (min, max) > 0");
    if (a.Word(3, "value", "0") == "random")
      throw Error("transform random_erasing: value='random' (normal noise) has no meaning on uint8 images; give a number or (r,g,b)");
    std::vector<double> v = a.Nums(3, "value", {0});
    if (v.size() == 1) v = {v[0], v[0], v[0]};
    if (v.size() != 3) throw Error("transform random_erasing: value takes one number or three");
    for (int c = 0; c < 3; ++c) value_[c] = uint8_t(std::clamp(v[size_t(c)], 0.0, 255.0));
    (void)a.Num(4, "inplace", 0);  // always in place here: every sample is a fresh buffer
    scale_ = {sc[0], sc[1]};
    // torch.log(torch.tensor(ratio)): float32 logs.
    log_ratio_ = {double(std::log(float(r[0]))), double(std::log(float(r[1])))};
  }
  void Plan(int iw, int ih, Rng& rng, ParamLog* log, std::vector<TransformStep>* steps) const override {
    const bool on = Chance(rng, p_);
    Log(log, "applied", on);
    if (!on) return;
    const double area = double(ih) * iw;
    for (int attempt = 0; attempt < 10; ++attempt) {
      const double erase = area * UniformIn(rng, scale_.first, scale_.second);
      const double aspect = std::exp(UniformIn(rng, log_ratio_.first, log_ratio_.second));
      const int h = int(std::nearbyint(std::sqrt(erase * aspect)));
      const int w = int(std::nearbyint(std::sqrt(erase / aspect)));
      if (!(h < ih && w < iw)) continue;
      const int i = int(rng.Below(uint64_t(ih - h + 1)));
      const int j = int(rng.Below(uint64_t(iw - w + 1)));
      Log(log, "i", i);
      Log(log, "j", j);
      Log(log, "h", h);
      Log(log, "w", w);
      TransformStep st = Step(kStepErase);
      st.i[0] = i, st.i[1] = j, st.i[2] = h, st.i[3] = w;
      for (int c = 0; c < 3; ++c) st.fill[c] = value_[c];
      steps->push_back(st);
      return;
    }
  }

 private:
  double p_ = 0.5;
  std::pair<double, double> scale_, log_ratio_;
  uint8_t value_[3] = {0, 0, 0};
};

// --- registry -----------------------------------------------------------------------------------

struct Entry {
  TransformFactory make;
  std::string help;
};
std::mutex& RegistryMutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, Entry>& Registry() {
  static std::map<std::string, Entry> r = [] {
    std::map<std::string, Entry> b;
    auto add = [&b](const char* name, TransformFactory f, const char* help) { b[name] = {std::move(f), help}; };
    add("random_crop", [](const TransformArgs& a) { return std::make_unique<RandomCrop>(a); },
        "RandomCrop(size, padding=None, pad_if_needed=False, fill=0, padding_mode='constant')");
    add("flip", [](const TransformArgs& a) { return std::make_unique<RandomFlip>(a, false); }, "RandomHorizontalFlip(p=0.5)");
    add("random_horizontal_flip", [](const TransformArgs& a) { return std::make_unique<RandomFlip>(a, false); },
        "RandomHorizontalFlip(p=0.5)");
    add("random_vertical_flip", [](const TransformArgs& a) { return std::make_unique<RandomFlip>(a, true); },
        "RandomVerticalFlip(p=0.5)");
    add("color_jitter", [](const TransformArgs& a) { return std::make_unique<ColorJitter>(a); },
        "ColorJitter(brightness=0, contrast=0, saturation=0, hue=0)");
    add("grayscale", [](const TransformArgs& a) {
          if (a.Num(0, "num_output_channels", 3) != 3) throw Error("transform grayscale: images stay RGB (num_output_channels=3)");
          return std::make_unique<RandomApply>(1.0, Step(kStepGray));
        }, "Grayscale(num_output_channels=3)");
    add("random_grayscale", [](const TransformArgs& a) {
          return std::make_unique<RandomApply>(Probability(a, 0, 0.1), Step(kStepGray));
        }, "RandomGrayscale(p=0.1)");
    add("random_solarize", [](const TransformArgs& a) {
          if (!a.Has(0, "threshold")) throw Error("transform random_solarize: threshold is required");
          const double t = a.Num(0, "threshold", 128);
          return std::make_unique<RandomApply>(Probability(a, 1, 0.5), Step(kStepSolarize, t));
        }, "RandomSolarize(threshold, p=0.5)");
    add("random_posterize", [](const TransformArgs& a) {
          if (!a.Has(0, "bits")) throw Error("transform random_posterize: bits is required");
          const int b = IntIn(a, a.Num(0, "bits", 8), "bits", 0, 8);
          TransformStep st = Step(kStepPosterize);
          st.i[0] = b;
          return std::make_unique<RandomApply>(Probability(a, 1, 0.5), st);
        }, "RandomPosterize(bits, p=0.5)");
    add("random_autocontrast", [](const TransformArgs& a) {
          return std::make_unique<RandomApply>(Probability(a, 0, 0.5), Step(kStepAutocontrast));
        }, "RandomAutocontrast(p=0.5)");
    add("random_equalize", [](const TransformArgs& a) {
          return std::make_unique<RandomApply>(Probability(a, 0, 0.5), Step(kStepEqualize));
        }, "RandomEqualize(p=0.5)");
    add("random_invert", [](const TransformArgs& a) {
          return std::make_unique<RandomApply>(Probability(a, 0, 0.5), Step(kStepInvert));
        }, "RandomInvert(p=0.5)");
    add("random_adjust_sharpness", [](const TransformArgs& a) {
          if (!a.Has(0, "sharpness_factor")) throw Error("transform random_adjust_sharpness: sharpness_factor is required");
          const double f = a.Num(0, "sharpness_factor", 1);
          if (f < 0) throw Error("transform random_adjust_sharpness: sharpness_factor must be non-negative");
          return std::make_unique<RandomApply>(Probability(a, 1, 0.5), Step(kStepSharpness, f));
        }, "RandomAdjustSharpness(sharpness_factor, p=0.5)");
    add("gaussian_blur", [](const TransformArgs& a) { return std::make_unique<Blur>(a); },
        "GaussianBlur(kernel_size, sigma=(0.1, 2.0))");
    add("random_rotation", [](const TransformArgs& a) { return std::make_unique<RandomAffine>(a, true); },
        "RandomRotation(degrees, interpolation='nearest', expand=False, center=None, fill=0)");
    add("random_affine", [](const TransformArgs& a) { return std::make_unique<RandomAffine>(a, false); },
        "RandomAffine(degrees, translate=None, scale=None, shear=None, interpolation='nearest', fill=0, center=None)");
    add("random_perspective", [](const TransformArgs& a) { return std::make_unique<RandomPerspective>(a); },
        "RandomPerspective(distortion_scale=0.5, p=0.5, interpolation='bilinear', fill=0)");
    add("random_erasing", [](const TransformArgs& a) { return std::make_unique<RandomErasing>(a); },
        "RandomErasing(p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0)");
    add("rand_augment", MakeRandAugment,
        "RandAugment(num_ops=2, magnitude=9, num_magnitude_bins=31, interpolation='nearest', fill=None)");
    add("trivial_augment_wide", MakeTrivialAugmentWide,
        "TrivialAugmentWide(num_magnitude_bins=31, interpolation='nearest', fill=None)");
    add("auto_augment", MakeAutoAugment,
        "AutoAugment(policy='imagenet', interpolation='nearest', fill=None)");
    return b;
  }();
  return r;
}

// Splits at top-level commas (outside parentheses and brackets).
std::vector<std::string> SplitTop(std::string_view s, const std::string& what) {
  std::vector<std::string> out;
  int depth = 0;
  std::string cur;
  for (char ch : s) {
    if (ch == '(' || ch == '[') ++depth;
    if (ch == ')' || ch == ']') {
      if (--depth < 0) throw Error(what + ": unbalanced ')' in '" + std::string(s) + "'");
    }
    if (ch == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
      continue;
    }
    cur += ch;
  }
  if (depth != 0) throw Error(what + ": unbalanced '(' in '" + std::string(s) + "'");
  out.push_back(cur);
  return out;
}

std::string Unquote(std::string v) {
  if (v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front()) return v.substr(1, v.size() - 2);
  return v;
}

}  // namespace

bool RegisterTransform(const std::string& name, TransformFactory factory, std::string help) {
  if (name.empty() || name.find_first_of("(),= \t\n") != std::string::npos)
    throw Error("RegisterTransform: '" + name + "' is not a plain name");
  std::lock_guard<std::mutex> lock(RegistryMutex());
  auto& r = Registry();
  if (r.count(name)) throw Error("RegisterTransform: a transform named '" + name + "' exists already");
  r[name] = {std::move(factory), std::move(help)};
  return true;
}

std::vector<std::pair<std::string, std::string>> TransformNames() {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [k, v] : Registry()) out.emplace_back(k, v.help);
  return out;
}

TransformList ParseTransforms(std::string_view text) {
  std::string compact;
  for (char c : text)
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') compact += c;
  TransformList list;
  if (compact.empty()) return list;
  for (const std::string& item : SplitTop(compact, "transforms")) {
    if (item.empty()) throw Error("transforms: an empty item in '" + compact + "'");
    const size_t open = item.find('(');
    const std::string name = item.substr(0, open);
    std::vector<std::string> pos;
    std::vector<std::pair<std::string, std::string>> named;
    if (open != std::string::npos) {
      if (item.back() != ')') throw Error("transforms: '" + item + "' has text after its ')'");
      const std::string inner = item.substr(open + 1, item.size() - open - 2);
      if (!inner.empty())
        for (const std::string& arg : SplitTop(inner, "transform " + name)) {
          const size_t eq = arg.find('=');
          if (eq != std::string::npos && arg.find('(') > eq) {
            named.emplace_back(arg.substr(0, eq), Unquote(arg.substr(eq + 1)));
          } else {
            if (!named.empty()) throw Error("transform " + name + ": positional argument '" + arg + "' after a named one");
            pos.push_back(Unquote(arg));
          }
        }
    }
    TransformFactory make;
    {
      std::lock_guard<std::mutex> lock(RegistryMutex());
      auto it = Registry().find(name);
      if (it == Registry().end()) {
        std::string known;
        for (const auto& kv : Registry()) known += (known.empty() ? "" : ", ") + kv.first;
        throw Error("transforms: unknown transform '" + name + "' (known: " + known + ")");
      }
      make = it->second.make;
    }
    TransformArgs args(name, pos, named);
    std::unique_ptr<Transform> t = make(args);
    args.CheckAllUsed();
    list.Add(item, std::move(t));
  }
  return list;
}

void TransformList::Apply(ImageU8 img, uint64_t seed, uint64_t epoch, uint64_t index, TransformScratch& scratch,
                          ParamLog* log) const {
  Rng rng(seed, epoch, index, kStreamTransforms);
  for (const auto& op : ops_) op->Apply(img, rng, scratch, log);
}

std::string TransformList::Text() const {
  std::string out;
  for (const std::string& t : texts_) out += (out.empty() ? "" : ",") + t;
  return out;
}

void Transform::ApplyPlanes(PlanesU8, Rng&, TransformScratch&, ParamLog*) const {
  throw Error("internal: a transform without a planar form run on planes");
}

bool TransformList::OnPlanes() const {
  for (const auto& op : ops_)
    if (!op->HasPlanes()) return false;
  return true;
}

void TransformList::ApplyPlanes(PlanesU8 img, uint64_t seed, uint64_t epoch, uint64_t index, TransformScratch& scratch,
                                ParamLog* log) const {
  Rng rng(seed, epoch, index, kStreamTransforms);
  for (const auto& op : ops_) op->ApplyPlanes(img, rng, scratch, log);
}

bool TransformList::OnDevice() const {
  for (const auto& op : ops_)
    if (!op->OnDevice()) return false;
  return true;
}

int TransformList::MaxSteps() const {
  int n = 0;
  for (const auto& op : ops_) n += op->MaxSteps();
  return n;
}

void TransformList::Plan(int w, int h, uint64_t seed, uint64_t epoch, uint64_t index, TransformStep* out,
                         std::vector<TransformStep>* scratch, ParamLog* log) const {
  Rng rng(seed, epoch, index, kStreamTransforms);
  scratch->clear();
  for (const auto& op : ops_) {
    const size_t before = scratch->size();
    op->Plan(w, h, rng, log, scratch);
    if (scratch->size() - before > size_t(op->MaxSteps()))
      throw Error("internal: a transform planned more steps than its MaxSteps()");
  }
  const size_t n = size_t(MaxSteps());
  for (size_t i = 0; i < n; ++i) out[i] = i < scratch->size() ? (*scratch)[i] : TransformStep{};
}

void Transform::Plan(int, int, Rng&, ParamLog*, std::vector<TransformStep>*) const {
  throw Error("internal: Plan on a transform without a device form");
}

}  // namespace dsc::kernels
