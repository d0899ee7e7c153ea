// ColorJitter's pixel work for one sample, fast: brightness and contrast are per-value maps, so a run
// of them becomes one 256-entry table (contrast's grayscale mean taken through the table of the ops
// before it), applied together with the next saturation or hue, or at the end. The reference is
// AdjustBrightness / AdjustContrast / AdjustSaturation / AdjustHue (kernels/transform_ops.cc) in
// order; ColorJitterReference runs it, and tests/transforms_test.cc holds the two bit-equal.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/transforms.h"

namespace dsc::kernels {

// The ops as drawn for one sample, in the order applied: id 0 brightness, 1 contrast, 2 saturation,
// 3 hue (factor in [-0.5, 0.5]), each at most once.
struct JitterOps {
  int n = 0;
  int id[4] = {0, 0, 0, 0};
  double factor[4] = {0, 0, 0, 0};
};

// The definition: torchvision's functional ops one after another on the packed RGB image.
void ColorJitterReference(ImageU8 img, const JitterOps& ops);
// The same on three planes of n pixels (r, g, b), in place. AVX-512 (with VBMI for the tables) where
// the CPU has it, else portable loops; the same bits either way.
void ColorJitterPlanes(uint8_t* const planes[3], size_t n, const JitterOps& ops);
// adjust_hue on three planes of n values, in place: HuePixel's values, 16 at a time with AVX-512 and
// 8 with AVX2.
void HueLanes(uint8_t* r, uint8_t* g, uint8_t* b, size_t n, float factor);
// The same on a packed RGB image: split into planes (scratch), ColorJitterPlanes, interleaved back.
void ColorJitterRgb(ImageU8 img, const JitterOps& ops, TransformScratch& scratch);

}  // namespace dsc::kernels
