// Joint geometry: what one sample's crop, resize, flip and translate (SampleParams, as MakeParams
// draws them for its image) do to the fields that travel with that image — boxes, points and masks —
// so that they stay where the pixels went. Cutout and colour work leave them alone.
//
// Coordinates are continuous pixel coordinates of the full image as stored (pixel (i, j) covers
// [i, i + 1) x [j, j + 1)), which is how COCO writes boxes; params must be MakeParams' (relative to the
// full image), not rebased onto a DCT-scaled buffer.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/augment.h"

namespace dsc::kernels {

// The output point of source point (u, v): into the crop region, scaled to out_w x out_h, mirrored
// when flipped, shifted by the translate. Not clipped.
void MapPoint(const SampleParams& p, int out_w, int out_h, double u, double v, double* x, double* y);

// Boxes `in[4 * i ..]` = (x, y, w, h) in source pixels. Each maps to the axis-aligned box of its mapped
// corners, clipped to the output [0, out_w] x [0, out_h]; a box left with no area (w or h <= min_side)
// is dropped. Writes the kept boxes, in input order, to `out` (room for n boxes; may alias `in`) and,
// when `kept` is not null, kept[i] = index of the input box that output box i came from. Returns the
// number kept.
size_t TransformBoxes(const SampleParams& p, int out_w, int out_h, const float* in, size_t n, float* out,
                      uint32_t* kept = nullptr, float min_side = 0.0f);

// Points (x, y) mapped in place; a point outside the crop or the output gets visible[i] = 0 (when given) and
// keeps its mapped, unclipped coordinates, as keypoint formats expect.
void TransformPoints(const SampleParams& p, int out_w, int out_h, float* xy, size_t n, uint8_t* visible = nullptr);

// The mask of an image: `src` holds src_w x src_h pixels of `channels` bytes, rows `stride` bytes
// apart; `dst` receives out_w x out_h x channels, tightly packed. Each output pixel takes the source
// pixel under its centre (nearest neighbour, the same rule as PIL's NEAREST resize of the crop box),
// never a blend of labels; pixels the translate shifted in from outside get `fill`.
void TransformMask(const SampleParams& p, int out_w, int out_h, const uint8_t* src, int src_w, int src_h,
                   int stride, int channels, uint8_t fill, uint8_t* dst);

}  // namespace dsc::kernels
