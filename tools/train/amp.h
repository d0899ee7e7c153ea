// Mixed precision for `dsc train --device cuda` (run on an H100: bench/RESULTS.md).
//
// bf16 (the default on sm_80 and newer) keeps float32's exponent range, so it trains without loss
// scaling and adds no host synchronisation. fp16 (the default below sm_80, where bf16 is emulated)
// needs loss scaling; LossScaler follows torch.cuda.amp.GradScaler: scale the loss, unscale the
// gradients, skip the optimiser step and halve the scale when any gradient is inf or NaN, double it
// after `growth_interval` good steps in a row. Deciding whether to step needs the flag on the host:
// that is ONE host synchronisation per step (reading one boolean), as GradScaler.step does.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <string>

namespace dsc::train {

enum class Precision { kFloat32, kBFloat16, kFloat16 };

// `flag`: auto, bf16, fp16 or fp32. auto picks bf16 from compute capability 80 (sm_80) up, fp16
// below. Throws dsc::Error for an unknown name or bf16 on a device without it.
Precision ChoosePrecision(const std::string& flag, int compute_capability);
const char* PrecisionName(Precision p);
// Turns CUDA autocast on (to `p`'s type; off for kFloat32) or off, across libtorch versions. Turning it
// off also clears autocast's cache of low-precision weights, as leaving Python's outermost
// torch.autocast region does: turn it off after every step's forward, so the next step casts the
// updated weights.
void SetCudaAutocast(bool enabled, Precision p);

class LossScaler {
 public:
  struct Options {
    double init_scale = 65536.0, growth_factor = 2.0, backoff_factor = 0.5;
    int64_t growth_interval = 2000;
  };
  LossScaler() : LossScaler(Options{}) {}
  explicit LossScaler(const Options& o);
  at::Tensor Scale(const at::Tensor& loss) const;
  // Unscales every gradient of `opt`'s parameters in place and checks them for inf/NaN (one host
  // sync); steps `opt` only when all are finite, then updates the scale. Returns whether it stepped.
  bool Step(torch::optim::Optimizer& opt);
  double scale() const { return scale_; }
  int64_t skipped() const { return skipped_; }

 private:
  Options o_;
  double scale_;
  int64_t good_ = 0, skipped_ = 0;
};

}  // namespace dsc::train
