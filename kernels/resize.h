// Geometric per-pixel work shared by the writer (pre-resize / crop at build time).
#pragma once
#include <cstdint>

namespace dsc::kernels {

// Area-averaging (box) downscale of packed pixels with `channels` interleaved channels: each output
// pixel is the exact area-weighted mean of the source pixels it covers. For upscaling it degrades to
// nearest-neighbour, which build-time resizing never asks for.
void ResizeArea(const uint8_t* src, int sw, int sh, int channels, uint8_t* dst, int dw, int dh);

// Output size that keeps the aspect ratio and makes the longest side at most `max_side`.
void FitLongestSide(int w, int h, int max_side, int* ow, int* oh);

// Copies the rectangle (x, y, cw, ch) out of a packed image.
void CropCopy(const uint8_t* src, int sw, int channels, int x, int y, int cw, int ch, uint8_t* dst);

}  // namespace dsc::kernels
