// The list transforms: torchvision's augmentations on uint8 RGB images, one definition each, applied
// per sample after decode and crop (reader/sample_processor.cc) and named in a transform list
// ("random_crop(32,padding=4,padding_mode=reflect),flip,color_jitter(0.4,0.4,0.4,0.1)").
//
// Contract:
// - An image is packed RGB rows (HWC uint8); a transform changes it in place and keeps its size.
// - Every random choice comes from the sample's own stream, Rng(seed, epoch, index, kStreamTransforms),
//   drawn in the list's order: batches are the same for any thread, rank or remote-worker count.
// - Each op computes what torchvision 0.14's tensor functional does on uint8 (docs/augment.md: which
//   are bit-exact and which within one level), and draws its parameters from the same distributions
//   as torchvision's get_params. A ParamLog, when given, receives every drawn parameter by name: the
//   tests replay them through torchvision.
// - Your own: RegisterTransform("name", factory) makes "name(args)" usable in any list
//   (examples/custom_transform.cc).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/random.h"
#include "kernels/transform_steps.h"

namespace dsc::kernels {

// The stream of the list transforms (kernels/random.h's purposes continue here).
constexpr uint64_t kStreamTransforms = 5;

struct ImageU8 {
  uint8_t* data = nullptr;  // width * height * 3 bytes, rows packed
  int width = 0, height = 0;
};
// The same image as three planes of width * height bytes (r, g, b): what a JPEG's planes convert to.
struct PlanesU8 {
  uint8_t* plane[3] = {nullptr, nullptr, nullptr};
  int width = 0, height = 0;
};

// Receives each drawn parameter (name, value) in the order drawn.
class ParamLog {
 public:
  virtual ~ParamLog() = default;
  virtual void Put(const char* name, double value) = 0;
};

// Reusable per-thread memory: the hot path does not allocate once it has grown.
struct TransformScratch {
  std::vector<uint8_t> bytes;
  std::vector<float> floats;
  std::vector<TransformStep> steps;
};

// A transform's arguments as written: positional values, then name=value pairs. Values are numbers,
// bare words (reflect, bilinear) or parenthesised tuples "(0.1,2.0)".
class TransformArgs {
 public:
  TransformArgs(std::string name, std::vector<std::string> positional, std::vector<std::pair<std::string, std::string>> named);
  const std::string& name() const { return name_; }
  // The value of argument `key` at position `pos` (or named `key`), or `def` when absent. Throw
  // dsc::Error naming the transform and the argument for a value of the wrong kind.
  double Num(size_t pos, const char* key, double def) const;
  std::vector<double> Nums(size_t pos, const char* key, std::vector<double> def) const;  // x or (x,y,...)
  std::string Word(size_t pos, const char* key, std::string def) const;
  bool Has(size_t pos, const char* key) const;
  // Throws when an argument was given that no accessor asked for (a misspelt name, one too many).
  void CheckAllUsed() const;

 private:
  const std::string* Find(size_t pos, const char* key) const;
  std::string name_;
  std::vector<std::string> positional_;
  std::vector<std::pair<std::string, std::string>> named_;
  mutable std::vector<bool> used_pos_, used_named_;
};

class Transform {
 public:
  virtual ~Transform() = default;
  // Transforms `img` in place, drawing from `rng` only.
  virtual void Apply(ImageU8 img, Rng& rng, TransformScratch& scratch, ParamLog* log) const = 0;
  // Where the GPU deferred path implements it; false: the loader refuses it with defer_augment.
  virtual bool OnDevice() const { return false; }
  // The deferred path (kernels/transform_steps.h): draws exactly what Apply draws for a w x h image,
  // logs the same, and appends what Apply would do as at most MaxSteps() steps. Only for OnDevice().
  virtual int MaxSteps() const { return 0; }
  virtual void Plan(int w, int h, Rng& rng, ParamLog* log, std::vector<TransformStep>* steps) const;
  // Transforms that also run on planes, drawing and writing exactly what Apply does: a list of only
  // those lets the loader keep a JPEG's pixels planar (reader/sample_processor.cc).
  virtual bool HasPlanes() const { return false; }
  virtual void ApplyPlanes(PlanesU8 img, Rng& rng, TransformScratch& scratch, ParamLog* log) const;
};

using TransformFactory = std::function<std::unique_ptr<Transform>(const TransformArgs&)>;
// Makes `name` usable in transform lists. Returns true (for static registration); throws dsc::Error
// when the name is taken. Thread-safe; call before loaders that use it are made.
bool RegisterTransform(const std::string& name, TransformFactory factory, std::string help);
std::vector<std::pair<std::string, std::string>> TransformNames();  // (name, help), sorted

class TransformList {
 public:
  TransformList() = default;
  bool empty() const { return ops_.empty(); }
  size_t size() const { return ops_.size(); }
  const Transform& at(size_t i) const { return *ops_[i]; }
  // Applies every transform in order with sample `index`'s stream.
  void Apply(ImageU8 img, uint64_t seed, uint64_t epoch, uint64_t index, TransformScratch& scratch,
             ParamLog* log = nullptr) const;
  // Every transform has ApplyPlanes; then ApplyPlanes is Apply on the planar form.
  bool OnPlanes() const;
  void ApplyPlanes(PlanesU8 img, uint64_t seed, uint64_t epoch, uint64_t index, TransformScratch& scratch,
                   ParamLog* log = nullptr) const;
  std::string Text() const;  // canonical, comma-separated
  void Add(std::string text, std::unique_ptr<Transform> t) {
    texts_.push_back(std::move(text));
    ops_.push_back(std::shared_ptr<Transform>(std::move(t)));
  }
  bool OnDevice() const;  // every transform has a device path
  int MaxSteps() const;   // the sum of the transforms' MaxSteps()
  // Sample `index`'s steps: writes exactly MaxSteps() of them to `out`, padded with kStepNone.
  void Plan(int w, int h, uint64_t seed, uint64_t epoch, uint64_t index, TransformStep* out,
            std::vector<TransformStep>* scratch, ParamLog* log = nullptr) const;

 private:
  std::vector<std::string> texts_;                      // each as written, white space removed
  std::vector<std::shared_ptr<const Transform>> ops_;  // shared: copies of a list share the ops
};

// Parses a transform list. Throws dsc::Error naming the transform, argument and position of the
// first thing wrong (an unknown name lists the known ones).
TransformList ParseTransforms(std::string_view text);

// --- torchvision.transforms.functional on uint8 RGB, in place (kernels/transform_ops.cc) ----------
void AdjustBrightness(ImageU8 img, double factor);
void AdjustContrast(ImageU8 img, double factor);
void AdjustSaturation(ImageU8 img, double factor);
void AdjustHue(ImageU8 img, double factor);  // factor in [-0.5, 0.5]
void RgbToGrayscale(ImageU8 img);            // three equal channels
void Solarize(ImageU8 img, double threshold);
void Posterize(ImageU8 img, int bits);
void Autocontrast(ImageU8 img);
void Equalize(ImageU8 img);
void Invert(ImageU8 img);
void AdjustSharpness(ImageU8 img, double factor, TransformScratch& s);
void GaussianBlur(ImageU8 img, int kx, int ky, double sigma_x, double sigma_y, TransformScratch& s);
void HorizontalFlip(ImageU8 img);
void VerticalFlip(ImageU8 img);
void Erase(ImageU8 img, int top, int left, int h, int w, const uint8_t value[3]);

enum class PadMode : uint8_t { kConstant, kEdge, kReflect, kSymmetric };
// RandomCrop's pad-then-crop: the out_w x out_h window at (left, top) of the image padded by
// (pad_l, pad_t, pad_r, pad_b) in `mode` (F.pad), written to `dst`.
void PadCrop(const ImageU8& src, int pad_l, int pad_t, int pad_r, int pad_b, PadMode mode, const uint8_t fill[3],
             int left, int top, uint8_t* dst, int out_w, int out_h);

enum class Interp : uint8_t { kNearest, kBilinear };
// torchvision's _get_inverse_affine_matrix (angle and shear in degrees; center relative to the
// image centre, as F.affine passes it for tensors).
void InverseAffineMatrix(double cx, double cy, double angle, double tx, double ty, double scale, double shear_x,
                         double shear_y, double m[6]);
// F_t.affine / F_t.rotate (expand = false) with the inverse matrix m: grid_sample's float32 grid,
// zero padding; `fill` nullptr is torchvision's fill=None, else the mask blend it does for a fill.
void AffineWarp(ImageU8 img, const double m[6], Interp interp, const float* fill, TransformScratch& s);
void AffineWarpGrid(ImageU8 img, const float g[6], Interp interp, const float* fill, TransformScratch& s);  // g: AffineGridOf
// torchvision's _get_perspective_coeffs: the 8 coefficients mapping output pixels to input ones for
// the quadrilateral `start` (x, y of 4 corners) moved to `end`, solved in double and kept as float32
// (torch solves in float32). False when the corners give no unique solution (collinear).
bool PerspectiveCoefficients(const int start[8], const int end[8], float c[8]);
// F_t.perspective with those coefficients: _perspective_grid in float32, then grid_sample as for
// AffineWarp (zero padding; `fill` nullptr is fill=None, else its mask blend).
void PerspectiveWarp(ImageU8 img, const float c[8], Interp interp, const float* fill, TransformScratch& s);
void PerspectiveWarpGrid(ImageU8 img, const float g[8], Interp interp, const float* fill, TransformScratch& s);

// One drawn step on one image with the reference ops above (what Apply runs; the device path's
// per-element code is tested against it).
void RunStep(ImageU8 img, const TransformStep& step, TransformScratch& s);
// The step kinds that also run on planes (StepHasPlanes), and that run: the same bytes as RunStep.
bool StepHasPlanes(int32_t kind);
void RunStepPlanes(PlanesU8 img, const TransformStep& step, TransformScratch& s);

// The float32 sampling grid coefficients (kernels/transform_ops.h AffineSource, PerspectiveSource) of
// the inverse affine matrix m / the perspective coefficients c, for a w x h image.
void AffineGridOf(const double m[6], int w, int h, float g[6]);
void PerspectiveGridOf(const float c[8], int w, int h, float g[8]);

}  // namespace dsc::kernels
