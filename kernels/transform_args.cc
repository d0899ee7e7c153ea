// The list transforms' arguments as written (TransformArgs) and torchvision 0.14's draws with dsc's
// per-sample stream (kernels/transforms_internal.h), shared by kernels/transforms.cc and
// kernels/autoaugment.cc.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "format/error.h"
#include "kernels/transforms_internal.h"

namespace dsc::kernels {

// --- arguments ----------------------------------------------------------------------------------

TransformArgs::TransformArgs(std::string name, std::vector<std::string> positional,
                             std::vector<std::pair<std::string, std::string>> named)
    : name_(std::move(name)), positional_(std::move(positional)), named_(std::move(named)),
      used_pos_(positional_.size(), false), used_named_(named_.size(), false) {}

const std::string* TransformArgs::Find(size_t pos, const char* key) const {
  for (size_t i = 0; i < named_.size(); ++i)
    if (named_[i].first == key) {
      used_named_[i] = true;
      return named_[i].second == "None" ? nullptr : &named_[i].second;
    }
  if (pos < positional_.size()) {
    used_pos_[pos] = true;
    return positional_[pos] == "None" ? nullptr : &positional_[pos];
  }
  return nullptr;
}

bool TransformArgs::Has(size_t pos, const char* key) const {
  for (const auto& kv : named_)
    if (kv.first == key) return kv.second != "None";
  return pos < positional_.size() && positional_[pos] != "None";
}

namespace {
bool ParseNumber(const std::string& s, double* v) {
  if (s == "True" || s == "true") return *v = 1, true;
  if (s == "False" || s == "false") return *v = 0, true;
  char* end = nullptr;
  *v = std::strtod(s.c_str(), &end);
  return !s.empty() && end == s.c_str() + s.size() && std::isfinite(*v);
}
}  // namespace

std::vector<double> TransformArgs::Nums(size_t pos, const char* key, std::vector<double> def) const {
  const std::string* v = Find(pos, key);
  if (!v) return def;
  std::string body = *v;
  if (body.size() >= 2 && (body.front() == '(' || body.front() == '[')) body = body.substr(1, body.size() - 2);
  std::vector<double> out;
  size_t at = 0;
  while (at <= body.size()) {
    const size_t comma = std::min(body.find(',', at), body.size());
    double x;
    if (!ParseNumber(body.substr(at, comma - at), &x))
      throw Error("transform " + name_ + ": argument " + key + " = '" + *v + "' is not a number or a tuple of numbers");
    out.push_back(x);
    at = comma + 1;
  }
  return out;
}

double TransformArgs::Num(size_t pos, const char* key, double def) const {
  const std::string* v = Find(pos, key);
  if (!v) return def;
  double x;
  if (!ParseNumber(*v, &x)) throw Error("transform " + name_ + ": argument " + key + " = '" + *v + "' is not a number");
  return x;
}

std::string TransformArgs::Word(size_t pos, const char* key, std::string def) const {
  const std::string* v = Find(pos, key);
  return v ? *v : def;
}

void TransformArgs::CheckAllUsed() const {
  for (size_t i = 0; i < named_.size(); ++i)
    if (!used_named_[i]) throw Error("transform " + name_ + ": unknown argument '" + named_[i].first + "'");
  for (size_t i = 0; i < positional_.size(); ++i)
    if (!used_pos_[i]) throw Error("transform " + name_ + ": too many arguments ('" + positional_[i] + "' is extra)");
}

// --- draws as torchvision makes them (kernels/transforms_internal.h) -------------------------------

namespace detail {

// An integer argument in [lo, hi] (checked before any conversion: a huge double does not fit an int).
int IntIn(const TransformArgs& a, double v, const char* key, int lo, int hi) {
  if (!(v >= lo && v <= hi) || v != double(int64_t(v)))
    throw Error("transform " + a.name() + ": " + key + " must be an integer in [" + std::to_string(lo) + ", " +
                std::to_string(hi) + "]");
  return int(v);
}

double UniformIn(Rng& rng, double lo, double hi) { return lo + (hi - lo) * rng.Uniform(); }
bool Chance(Rng& rng, double p) { return rng.Uniform() < p; }  // torch.rand(1) < p
void Log(ParamLog* log, const char* name, double v) {
  if (log) log->Put(name, v);
}

Interp ParseInterp(const TransformArgs& a, size_t pos) {
  const std::string v = a.Word(pos, "interpolation", "nearest");
  if (v == "nearest" || v == "NEAREST" || v == "InterpolationMode.NEAREST") return Interp::kNearest;
  if (v == "bilinear" || v == "BILINEAR" || v == "InterpolationMode.BILINEAR") return Interp::kBilinear;
  throw Error("transform " + a.name() + ": interpolation '" + v + "' is not nearest or bilinear");
}

Fill ParseFill(const TransformArgs& a, size_t pos, bool default_none) {
  Fill f;
  if (!a.Has(pos, "fill")) {
    f.none = default_none;
    a.Nums(pos, "fill", {});  // marks a given None as used
    return f;
  }
  std::vector<double> v = a.Nums(pos, "fill", {0});
  if (v.size() == 1) v = {v[0], v[0], v[0]};
  if (v.size() != 3) throw Error("transform " + a.name() + ": fill takes one value or three");
  f.none = false;
  for (int c = 0; c < 3; ++c) f.v[c] = float(v[size_t(c)]);
  return f;
}

std::pair<double, double> Range(const TransformArgs& a, size_t pos, const char* key, double center, double lo_bound,
                                bool clip_first) {
  // ColorJitter's _check_input: x -> [center - x, center + x] (clipped at lo_bound), or (lo, hi).
  std::vector<double> v = a.Nums(pos, key, {0});
  if (v.size() == 1) {
    if (v[0] < 0) throw Error("transform " + a.name() + ": " + key + " must be non-negative");
    double lo = center - v[0];
    if (clip_first) lo = std::max(lo, lo_bound);
    return {lo, center + v[0]};
  }
  if (v.size() != 2 || v[0] > v[1]) throw Error("transform " + a.name() + ": " + key + " takes x or (min, max)");
  return {v[0], v[1]};
}

std::pair<double, double> Degrees(const TransformArgs& a, size_t pos, const char* key) {
  std::vector<double> v = a.Nums(pos, key, {0});
  if (v.size() == 1) {
    if (v[0] < 0) throw Error("transform " + a.name() + ": " + key + " must be non-negative when a single number");
    return {-v[0], v[0]};
  }
  if (v.size() != 2) throw Error("transform " + a.name() + ": " + key + " takes x or (min, max)");
  return {v[0], v[1]};
}

double Probability(const TransformArgs& a, size_t pos, double def) {
  const double p = a.Num(pos, "p", def);
  if (!(p >= 0 && p <= 1)) throw Error("transform " + a.name() + ": p = " + std::to_string(p) + " is not in [0, 1]");
  return p;
}

template <typename Run>
void StepTransform::PlanAndRun(int w, int h, Rng& rng, TransformScratch& s, ParamLog* log, Run run) const {
  std::vector<TransformStep> steps;  // taken out of the scratch: run may use its other buffers
  steps.swap(s.steps);
  steps.clear();
  Plan(w, h, rng, log, &steps);
  for (const TransformStep& st : steps) run(st);
  steps.swap(s.steps);
}

void StepTransform::Apply(ImageU8 img, Rng& rng, TransformScratch& s, ParamLog* log) const {
  PlanAndRun(img.width, img.height, rng, s, log, [&](const TransformStep& st) { RunStep(img, st, s); });
}

void StepTransform::ApplyPlanes(PlanesU8 img, Rng& rng, TransformScratch& s, ParamLog* log) const {
  PlanAndRun(img.width, img.height, rng, s, log, [&](const TransformStep& st) { RunStepPlanes(img, st, s); });
}

TransformStep Step(int32_t kind, double a) {
  TransformStep st;
  st.kind = kind;
  st.a = a;
  return st;
}

void SetWarp(Interp interp, const Fill& fill, TransformStep* st) {
  st->mode = interp == Interp::kBilinear ? 1 : 0;
  st->has_fill = !fill.none;
  for (int c = 0; c < 3; ++c) st->fill[c] = fill.v[c];
}

TransformStep AffineStep(const double m[6], int w, int h, Interp interp, const Fill& fill) {
  TransformStep st = Step(kStepAffine);
  AffineGridOf(m, w, h, st.g);
  SetWarp(interp, fill, &st);
  return st;
}

}  // namespace detail

}  // namespace dsc::kernels
