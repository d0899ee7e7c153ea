// Batch-level MixUp and CutMix (torchvision's references/classification/transforms.py RandomMixup /
// RandomCutmix, with timm's switch between them): each sample is mixed with the batch's previous one
// (torch.roll(1)), labels become soft float rows [B, classes] with optional label smoothing. The draws
// come from Rng(seed, epoch, batch, kStreamMix): the same batch is mixed the same way on any run.
#pragma once
#include <cstddef>
#include <cstdint>

namespace dsc::kernels {

constexpr uint64_t kStreamMix = 6;

struct MixSpec {
  float mixup_alpha = 0.2f;   // 0: no MixUp
  float cutmix_alpha = 1.0f;  // 0: no CutMix
  float prob = 1.0f;          // probability that a batch is mixed at all
  float switch_prob = 0.5f;   // with both on: probability of CutMix
  float label_smoothing = 0.0f;
  int num_classes = 0;
};

// What was drawn for a batch (also what MixBatch applied).
struct MixDraw {
  bool mixed = false, cutmix = false;
  double lam = 1.0;              // weight of each sample itself (CutMix: 1 - box area / image area)
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;  // CutMix box [x0, x1) x [y0, y1)
};

// A draw from Beta(a, a) with `rng` (two Gamma(a) draws, Marsaglia-Tsang).
class Rng;
double BetaSample(double a, Rng& rng);

MixDraw DrawMix(const MixSpec& s, int width, int height, uint64_t seed, uint64_t epoch, uint64_t batch);

// Mixes n float32 images in place (NCHW when nchw, else NHWC; c x h x w each) and writes n x classes
// soft labels from `labels`. Throws dsc::Error for a label outside [0, classes).
MixDraw MixBatch(const MixSpec& s, float* images, int n, int c, int h, int w, bool nchw, const int32_t* labels,
                 float* soft, uint64_t seed, uint64_t epoch, uint64_t batch);

}  // namespace dsc::kernels
