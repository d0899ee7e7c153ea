// The AutoAugment family (torchvision/transforms/autoaugment.py, 0.14): RandAugment,
// TrivialAugmentWide and AutoAugment's IMAGENET policy, with torchvision's op lists, magnitude bins
// and fills; the ops themselves are transform_ops.cc's.
#include <cmath>
#include <memory>
#include <vector>

#include "format/error.h"
#include "kernels/transform_ops.h"
#include "kernels/transforms_internal.h"

namespace dsc::kernels {

using namespace detail;

namespace {

enum Op : int { kIdentity, kShearX, kShearY, kTranslateX, kTranslateY, kRotate, kBrightness, kColor, kContrast,
                kSharpness, kPosterize, kSolarize, kAutoContrast, kEqualize, kInvert };

// _apply_op, as a step on a w x h image (kStepNone for the identity).
TransformStep PlanOp(int w, int h, Op op, double mag, Interp interp, const Fill& fill) {
  const double pi = 3.14159265358979323846;
  double m[6];
  switch (op) {
    case kIdentity: return Step(kStepNone);
    case kShearX:
    case kShearY: {
      const double deg = std::atan(mag) * 180 / pi;
      // center=[0, 0]: relative to the image centre that is (-w/2, -h/2).
      InverseAffineMatrix(-w * 0.5, -h * 0.5, 0, 0, 0, 1, op == kShearX ? deg : 0, op == kShearY ? deg : 0, m);
      return AffineStep(m, w, h, interp, fill);
    }
    case kTranslateX:
    case kTranslateY:
      InverseAffineMatrix(0, 0, 0, op == kTranslateX ? double(int(mag)) : 0, op == kTranslateY ? double(int(mag)) : 0, 1, 0, 0, m);
      return AffineStep(m, w, h, interp, fill);
    case kRotate:
      InverseAffineMatrix(0, 0, -mag, 0, 0, 1, 0, 0, m);
      return AffineStep(m, w, h, interp, fill);
    case kBrightness: return Step(kStepBrightness, 1.0 + mag);
    case kColor: return Step(kStepSaturation, 1.0 + mag);
    case kContrast: return Step(kStepContrast, 1.0 + mag);
    case kSharpness: return Step(kStepSharpness, 1.0 + mag);
    case kPosterize: {
      TransformStep st = Step(kStepPosterize);
      st.i[0] = int(mag);
      return st;
    }
    case kSolarize: return Step(kStepSolarize, mag);
    case kAutoContrast: return Step(kStepAutocontrast);
    case kEqualize: return Step(kStepEqualize);
    case kInvert: return Step(kStepInvert);
  }
  return Step(kStepNone);
}

// An op's magnitude table: bins over [0, top] (top may depend on the image), or the posterize bins
// 8 - round(i / ((bins - 1) / div)), or none (magnitude 0).
struct Space {
  Op op;
  enum Kind { kLinear, kPosterizeBins, kNone } kind;
  float lo, hi;  // kLinear: linspace(lo, hi); kPosterizeBins: lo = div
  bool signed_;
};

float Magnitude(const Space& sp, int bins, int bin, int w, int h) {
  switch (sp.kind) {
    case Space::kNone: return 0.f;
    case Space::kPosterizeBins: {
      // (torch.arange(bins) / ((bins - 1) / div)).round().int(): float32 division, half to even.
      const float q = float(bin) / float((bins - 1) / double(sp.lo));
      return float(8 - int(nearbyintf(q)));
    }
    case Space::kLinear: {
      float hi = sp.hi;
      if (sp.op == kTranslateX && sp.hi < 0) hi = float(150.0 / 331.0 * w);
      if (sp.op == kTranslateY && sp.hi < 0) hi = float(150.0 / 331.0 * h);
      return LinspaceF32(sp.lo, hi, bins, bin);
    }
  }
  return 0.f;
}

// RandAugment's and AutoAugment's space (TranslateX/Y: hi < 0 means 150/331 of the image side).
const std::vector<Space>& RandAugmentSpace() {
  static const std::vector<Space> s = {
      {kIdentity, Space::kNone, 0, 0, false},       {kShearX, Space::kLinear, 0, 0.3f, true},
      {kShearY, Space::kLinear, 0, 0.3f, true},     {kTranslateX, Space::kLinear, 0, -1, true},
      {kTranslateY, Space::kLinear, 0, -1, true},   {kRotate, Space::kLinear, 0, 30, true},
      {kBrightness, Space::kLinear, 0, 0.9f, true}, {kColor, Space::kLinear, 0, 0.9f, true},
      {kContrast, Space::kLinear, 0, 0.9f, true},   {kSharpness, Space::kLinear, 0, 0.9f, true},
      {kPosterize, Space::kPosterizeBins, 4, 0, false}, {kSolarize, Space::kLinear, 255, 0, false},
      {kAutoContrast, Space::kNone, 0, 0, false},   {kEqualize, Space::kNone, 0, 0, false}};
  return s;
}
const std::vector<Space>& TrivialSpace() {
  static const std::vector<Space> s = {
      {kIdentity, Space::kNone, 0, 0, false},        {kShearX, Space::kLinear, 0, 0.99f, true},
      {kShearY, Space::kLinear, 0, 0.99f, true},     {kTranslateX, Space::kLinear, 0, 32, true},
      {kTranslateY, Space::kLinear, 0, 32, true},    {kRotate, Space::kLinear, 0, 135, true},
      {kBrightness, Space::kLinear, 0, 0.99f, true}, {kColor, Space::kLinear, 0, 0.99f, true},
      {kContrast, Space::kLinear, 0, 0.99f, true},   {kSharpness, Space::kLinear, 0, 0.99f, true},
      {kPosterize, Space::kPosterizeBins, 6, 0, false}, {kSolarize, Space::kLinear, 255, 0, false},
      {kAutoContrast, Space::kNone, 0, 0, false},    {kEqualize, Space::kNone, 0, 0, false}};
  return s;
}

class RandAugment final : public StepTransform {
 public:
  explicit RandAugment(const TransformArgs& a) {
    num_ops_ = IntIn(a, a.Num(0, "num_ops", 2), "num_ops", 0, 64);
    magnitude_ = IntIn(a, a.Num(1, "magnitude", 9), "magnitude", 0, 1 << 16);
    bins_ = IntIn(a, a.Num(2, "num_magnitude_bins", 31), "num_magnitude_bins", 2, 1 << 16);
    interp_ = ParseInterp(a, 3);
    fill_ = ParseFill(a, 4, true);
    if (num_ops_ < 0 || bins_ < 2 || magnitude_ < 0 || magnitude_ >= bins_)
      throw Error("transform rand_augment: needs num_ops >= 0, num_magnitude_bins >= 2 and 0 <= magnitude < num_magnitude_bins");
  }
  int MaxSteps() const override { return num_ops_; }
  void Plan(int w, int h, Rng& rng, ParamLog* log, std::vector<TransformStep>* steps) const override {
    const std::vector<Space>& space = RandAugmentSpace();
    for (int k = 0; k < num_ops_; ++k) {
      const Space& sp = space[rng.Below(space.size())];
      double mag = Magnitude(sp, bins_, magnitude_, w, h);
      if (sp.signed_ && rng.Below(2)) mag = -mag;  // torch.randint(2, (1,)) true: negative
      Log(log, "op", sp.op);
      Log(log, "magnitude", mag);
      steps->push_back(PlanOp(w, h, sp.op, mag, interp_, fill_));
    }
  }

 private:
  int num_ops_ = 2, magnitude_ = 9, bins_ = 31;
  Interp interp_ = Interp::kNearest;
  Fill fill_;
};

class TrivialAugmentWide final : public StepTransform {
 public:
  explicit TrivialAugmentWide(const TransformArgs& a) {
    bins_ = IntIn(a, a.Num(0, "num_magnitude_bins", 31), "num_magnitude_bins", 2, 1 << 16);
    interp_ = ParseInterp(a, 1);
    fill_ = ParseFill(a, 2, true);
    if (bins_ < 2) throw Error("transform trivial_augment_wide: num_magnitude_bins must be at least 2");
  }
  void Plan(int w, int h, Rng& rng, ParamLog* log, std::vector<TransformStep>* steps) const override {
    const std::vector<Space>& space = TrivialSpace();
    const Space& sp = space[rng.Below(space.size())];
    double mag = 0;
    if (sp.kind != Space::kNone) mag = Magnitude(sp, bins_, int(rng.Below(uint64_t(bins_))), w, h);
    if (sp.signed_ && rng.Below(2)) mag = -mag;
    Log(log, "op", sp.op);
    Log(log, "magnitude", mag);
    steps->push_back(PlanOp(w, h, sp.op, mag, interp_, fill_));
  }

 private:
  int bins_ = 31;
  Interp interp_ = Interp::kNearest;
  Fill fill_;
};

struct PolicyStep {
  Op op;
  float p;
  int bin;  // -1: None
};
// AutoAugmentPolicy.IMAGENET.
const PolicyStep kImageNetPolicy[25][2] = {
    {{kPosterize, 0.4f, 8}, {kRotate, 0.6f, 9}},     {{kSolarize, 0.6f, 5}, {kAutoContrast, 0.6f, -1}},
    {{kEqualize, 0.8f, -1}, {kEqualize, 0.6f, -1}},  {{kPosterize, 0.6f, 7}, {kPosterize, 0.6f, 6}},
    {{kEqualize, 0.4f, -1}, {kSolarize, 0.2f, 4}},   {{kEqualize, 0.4f, -1}, {kRotate, 0.8f, 8}},
    {{kSolarize, 0.6f, 3}, {kEqualize, 0.6f, -1}},   {{kPosterize, 0.8f, 5}, {kEqualize, 1.0f, -1}},
    {{kRotate, 0.2f, 3}, {kSolarize, 0.6f, 8}},      {{kEqualize, 0.6f, -1}, {kPosterize, 0.4f, 6}},
    {{kRotate, 0.8f, 8}, {kColor, 0.4f, 0}},         {{kRotate, 0.4f, 9}, {kEqualize, 0.6f, -1}},
    {{kEqualize, 0.0f, -1}, {kEqualize, 0.8f, -1}},  {{kInvert, 0.6f, -1}, {kEqualize, 1.0f, -1}},
    {{kColor, 0.6f, 4}, {kContrast, 1.0f, 8}},       {{kRotate, 0.8f, 8}, {kColor, 1.0f, 2}},
    {{kColor, 0.8f, 8}, {kSolarize, 0.8f, 7}},       {{kSharpness, 0.4f, 7}, {kInvert, 0.6f, -1}},
    {{kShearX, 0.6f, 5}, {kEqualize, 1.0f, -1}},     {{kColor, 0.4f, 0}, {kEqualize, 0.6f, -1}},
    {{kEqualize, 0.4f, -1}, {kSolarize, 0.2f, 4}},   {{kSolarize, 0.6f, 5}, {kAutoContrast, 0.6f, -1}},
    {{kInvert, 0.6f, -1}, {kEqualize, 1.0f, -1}},    {{kColor, 0.6f, 4}, {kContrast, 1.0f, 8}},
    {{kEqualize, 0.8f, -1}, {kEqualize, 0.6f, -1}}};

class AutoAugment final : public StepTransform {
 public:
  explicit AutoAugment(const TransformArgs& a) {
    const std::string policy = a.Word(0, "policy", "imagenet");
    if (policy != "imagenet" && policy != "IMAGENET" && policy != "AutoAugmentPolicy.IMAGENET")
      throw Error("transform auto_augment: policy '" + policy + "': only the imagenet policy is implemented");
    interp_ = ParseInterp(a, 1);
    fill_ = ParseFill(a, 2, true);
  }
  int MaxSteps() const override { return 2; }
  void Plan(int w, int h, Rng& rng, ParamLog* log, std::vector<TransformStep>* steps) const override {
    // get_params: policy id, two probabilities, two signs; magnitudes from the 10-bin space.
    const int id = int(rng.Below(25));
    const double probs[2] = {double(float(rng.Uniform())), double(float(rng.Uniform()))};
    const int signs[2] = {int(rng.Below(2)), int(rng.Below(2))};
    Log(log, "policy", id);
    for (int i = 0; i < 2; ++i) {
      const PolicyStep& st = kImageNetPolicy[id][i];
      const bool on = probs[i] <= double(st.p);
      Log(log, "applied", on);
      if (!on) continue;
      const Space* sp = nullptr;
      for (const Space& x : RandAugmentSpace())
        if (x.op == st.op) sp = &x;
      static const Space invert{kInvert, Space::kNone, 0, 0, false};
      if (!sp) sp = &invert;
      double mag = st.bin >= 0 ? Magnitude(*sp, 10, st.bin, w, h) : 0.0;
      if (sp->signed_ && signs[i] == 0) mag = -mag;
      Log(log, "magnitude", mag);
      steps->push_back(PlanOp(w, h, st.op, mag, interp_, fill_));
    }
  }

 private:
  Interp interp_ = Interp::kNearest;
  Fill fill_;
};

}  // namespace

std::unique_ptr<Transform> MakeRandAugment(const TransformArgs& a) { return std::make_unique<RandAugment>(a); }
std::unique_ptr<Transform> MakeTrivialAugmentWide(const TransformArgs& a) { return std::make_unique<TrivialAugmentWide>(a); }
std::unique_ptr<Transform> MakeAutoAugment(const TransformArgs& a) { return std::make_unique<AutoAugment>(a); }

}  // namespace dsc::kernels
