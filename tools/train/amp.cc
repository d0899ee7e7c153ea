#include "tools/train/amp.h"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <torch/version.h>

#include "format/error.h"

namespace dsc::train {

Precision ChoosePrecision(const std::string& flag, int cc) {
  if (flag == "auto") return cc >= 80 ? Precision::kBFloat16 : Precision::kFloat16;
  if (flag == "fp32") return Precision::kFloat32;
  if (flag == "fp16") return Precision::kFloat16;
  if (flag == "bf16") {
    if (cc > 0 && cc < 80) throw Error("--precision bf16 needs compute capability 8.0 or newer (this GPU: " + std::to_string(cc / 10) + "." + std::to_string(cc % 10) + ")");
    return Precision::kBFloat16;
  }
  throw Error("--precision: expected auto, bf16, fp16 or fp32, not \"" + flag + "\"");
}

const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kBFloat16: return "bf16 autocast";
    case Precision::kFloat16: return "fp16 autocast with loss scaling";
    default: return "fp32";
  }
}

void SetCudaAutocast(bool enabled, Precision p) {
  const bool on = enabled && p != Precision::kFloat32;
  const at::ScalarType t = p == Precision::kBFloat16 ? at::kBFloat16 : at::kHalf;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  // The per-device API; the device-less one below is deprecated from 2.4.
  at::autocast::set_autocast_dtype(at::kCUDA, t);
  at::autocast::set_autocast_enabled(at::kCUDA, on);
#else
  at::autocast::set_autocast_gpu_dtype(t);
  at::autocast::set_enabled(on);
#endif
  // Autocast caches the low-precision copy of each weight while it is on, keyed by the weight, and
  // only clearing drops it (Python's torch.autocast clears on leaving its outermost region). Without
  // this every later step's forward would reuse step 0's weights: on an H100 bf16 training stalled
  // (train loss 1.84 after 2 epochs against 1.28 in fp32) and the fp32 weights diverged (test accuracy
  // 10%, logits ~1e12).
  if (!enabled) at::autocast::clear_cache();
}

LossScaler::LossScaler(const Options& o) : o_(o), scale_(o.init_scale) {
  if (!(o.init_scale > 0) || !(o.growth_factor >= 1) || !(o.backoff_factor > 0 && o.backoff_factor < 1) || o.growth_interval < 1)
    throw Error("LossScaler: invalid options");
}

at::Tensor LossScaler::Scale(const at::Tensor& loss) const { return loss * scale_; }

bool LossScaler::Step(torch::optim::Optimizer& opt) {
  const double inv = 1.0 / scale_;
  at::Tensor found;  // "some gradient is not finite", kept on the gradients' device until the one read
  for (auto& group : opt.param_groups())
    for (auto& p : group.params()) {
      at::Tensor g = p.grad();
      if (!g.defined()) continue;
      g.mul_(inv);
      at::Tensor bad = g.isfinite().logical_not().any();
      found = found.defined() ? found.logical_or(bad) : bad;
    }
  const bool finite = !found.defined() || !found.item<bool>();  // the step's one host sync
  if (!finite) {
    scale_ *= o_.backoff_factor;
    good_ = 0;
    ++skipped_;
    return false;
  }
  opt.step();
  if (++good_ >= o_.growth_interval) {
    scale_ *= o_.growth_factor;
    good_ = 0;
  }
  return true;
}

}  // namespace dsc::train
