// What kernels/transforms.cc and kernels/autoaugment.cc share: argument helpers and torchvision's
// draws. Internal to dsc_kernels.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/transforms.h"

namespace dsc::kernels {
namespace detail {

// An integer argument in [lo, hi] (checked before any conversion: a huge double does not fit an int).
int IntIn(const TransformArgs& a, double v, const char* key, int lo, int hi);
double UniformIn(Rng& rng, double lo, double hi);  // torch.empty(1).uniform_(lo, hi)
bool Chance(Rng& rng, double p);                   // torch.rand(1) < p
void Log(ParamLog* log, const char* name, double v);
Interp ParseInterp(const TransformArgs& a, size_t pos);
// fill: a number or (r,g,b); none (torchvision's fill=None) when not given and `default_none`.
struct Fill {
  bool none = true;
  float v[3] = {0, 0, 0};
  const float* ptr() const { return none ? nullptr : v; }
};
Fill ParseFill(const TransformArgs& a, size_t pos, bool default_none);
// ColorJitter's _check_input: x -> [center - x, center + x] (the low end clipped at lo_bound when
// clip_first), or (lo, hi) as given.
std::pair<double, double> Range(const TransformArgs& a, size_t pos, const char* key, double center, double lo_bound,
                                bool clip_first);
std::pair<double, double> Degrees(const TransformArgs& a, size_t pos, const char* key);  // x -> (-x, x), or (lo, hi)
double Probability(const TransformArgs& a, size_t pos, double def);                    // argument p in [0, 1]

// A transform defined by its draws (Plan): Apply runs the planned steps with the reference ops, so the
// CPU and the deferred path share every random choice.
class StepTransform : public Transform {
 public:
  void Apply(ImageU8 img, Rng& rng, TransformScratch& s, ParamLog* log) const override;
  bool OnDevice() const override { return true; }
  int MaxSteps() const override { return 1; }
  // Transforms whose steps all have planar forms (StepHasPlanes) say so with HasPlanes().
  void ApplyPlanes(PlanesU8 img, Rng& rng, TransformScratch& s, ParamLog* log) const override;

 private:
  // Plans a w x h image's steps into the scratch's step buffer and runs run(step) on each.
  template <typename Run>
  void PlanAndRun(int w, int h, Rng& rng, TransformScratch& s, ParamLog* log, Run run) const;
};
TransformStep Step(int32_t kind, double a = 0);
void SetWarp(Interp interp, const Fill& fill, TransformStep* st);
// kStepAffine for the inverse matrix m on a w x h image.
TransformStep AffineStep(const double m[6], int w, int h, Interp interp, const Fill& fill);

}  // namespace detail

std::unique_ptr<Transform> MakeRandAugment(const TransformArgs& a);
std::unique_ptr<Transform> MakeTrivialAugmentWide(const TransformArgs& a);
std::unique_ptr<Transform> MakeAutoAugment(const TransformArgs& a);

}  // namespace dsc::kernels
