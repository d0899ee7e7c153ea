// YCbCr -> RGB exactly as libjpeg(-turbo) computes it (jdcolor.c / jdmerge.c: 16-bit fixed point,
// round half up, clamp to 0..255). Decoding JPEGs to planes and converting here gives the same pixels
// as libjpeg-turbo's own decode with box ("fast") chroma upsampling, TurboJPEG's TJFLAG_FASTUPSAMPLE.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/hd.h"

namespace dsc::kernels {

DSC_HD uint8_t Clamp255(int v) { return uint8_t(v < 0 ? 0 : v > 255 ? 255 : v); }

DSC_HD void YccToRgb(int y, int cb, int cr, uint8_t* r, uint8_t* g, uint8_t* b) {
  cb -= 128;
  cr -= 128;
  *r = Clamp255(y + ((91881 * cr + 32768) >> 16));
  *g = Clamp255(y + ((-22554 * cb + 32768 - 46802 * cr) >> 16));
  *b = Clamp255(y + ((116130 * cb + 32768) >> 16));
}

// One row: luma y[0..w), chroma at x >> hshift (hshift 0: 4:4:4 rows, 1: 4:2:x rows), into planar rows.
void ColorConvertRow(const uint8_t* y, const uint8_t* cb, const uint8_t* cr, size_t w, int hshift, uint8_t* r,
                     uint8_t* g, uint8_t* b);
void ColorConvertRowScalar(const uint8_t* y, const uint8_t* cb, const uint8_t* cr, size_t w, int hshift, uint8_t* r,
                           uint8_t* g, uint8_t* b);

// out[x] = Normalize(in[x], scale, bias) (mirrored when reverse); streaming stores when aligned.
void NormalizePlaneRow(const uint8_t* in, size_t w, float* out, float scale, float bias, bool reverse);
void NormalizePlaneRowScalar(const uint8_t* in, size_t w, float* out, float scale, float bias, bool reverse);

// Planar rows -> one interleaved RGB row: rgb[3x + c] = plane_c[x] (plane_c[w - 1 - x] with reverse),
// plane_0..2 = r, g, b. The uint8 (NHWC) output of a JPEG decoded to planes, flipped or not.
void InterleaveRow(const uint8_t* r, const uint8_t* g, const uint8_t* b, size_t w, uint8_t* rgb, bool reverse);
void InterleaveRowScalar(const uint8_t* r, const uint8_t* g, const uint8_t* b, size_t w, uint8_t* rgb, bool reverse);

// One output row of a JPEG's planes as normalised float32 planes, in one pass (the fused path's
// float32 NCHW row, reader/sample_processor.cc). Before mirroring, pixel x of the row is fill[c] where
// x is outside [lo, hi) or inside [cut_from, cut_to), else source pixel x - shift:
// YccToRgb(y[x - shift], cb[(x - shift) >> hshift], cr[(x - shift) >> hshift]). Then
// out_c[mirror ? w - 1 - x : x] = Normalize(pixel_c, scale[c], bias[c]). The source pixels of
// [lo, hi) must lie in the row (0 <= lo - shift, hi - shift <= w); lo == hi: a row of fill (y, cb and
// cr unused). With AVX-512, streaming stores where the rows allow them (with AVX2 ordinary ones: see
// kernels/color.cc).
// With `rgb`, y, cb and cr are already a row's r, g and b bytes (hshift 0): the pixel is (y[s], cb[s],
// cr[s]), no conversion (the planes the list transforms leave, reader/sample_processor.cc).
struct YccRow {
  const uint8_t *y = nullptr, *cb = nullptr, *cr = nullptr;
  int hshift = 0;  // 0 or 1
  int w = 0;
  int shift = 0, lo = 0, hi = 0, cut_from = 0, cut_to = 0;
  bool rgb = false;
};
void YccRowToFloatScalar(const YccRow& row, const uint8_t fill[3], const float scale[3], const float bias[3],
                         bool mirror, float* r, float* g, float* b);
// The same row as uint8 RGB, interleaved: rgb[3 (mirror ? w - 1 - x : x) + c] = pixel_c (the uint8
// NHWC output, and the deferred form remote workers ship).
void YccRowToRgbScalar(const YccRow& row, const uint8_t fill[3], bool mirror, uint8_t* rgb);
// n rows of one image, all of the same w and hshift, each as the references above write it: row i
// into r, g and b + i * stride floats, or rgb + i * stride bytes. One call per image: setting up the
// vector constants per row cost as much as a 32-pixel row's work.
void YccRowsToFloat(const YccRow* rows, size_t n, const uint8_t fill[3], const float scale[3], const float bias[3],
                    bool mirror, float* r, float* g, float* b, size_t stride);
void YccRowsToRgb(const YccRow* rows, size_t n, const uint8_t fill[3], bool mirror, uint8_t* rgb, size_t stride);
inline void YccRowToFloat(const YccRow& row, const uint8_t fill[3], const float scale[3], const float bias[3],
                          bool mirror, float* r, float* g, float* b) {
  YccRowsToFloat(&row, 1, fill, scale, bias, mirror, r, g, b, 0);
}
inline void YccRowToRgb(const YccRow& row, const uint8_t fill[3], bool mirror, uint8_t* rgb) {
  YccRowsToRgb(&row, 1, fill, mirror, rgb, 0);
}
// n rows of one image converted as they are (no shift, cut or fill: YccRow's y, cb, cr, hshift and w
// only) into planes: row i as ColorConvertRow writes it, into r, g and b + i * stride. One call per
// image, as above (AVX-512 where YccRowIsFast; else ColorConvertRow row by row).
void YccRowsToPlanes(const YccRow* rows, size_t n, uint8_t* r, uint8_t* g, uint8_t* b, size_t stride);
// Whether YccRowsToFloat and YccRowsToRgb have a vector path for rows of w pixels at hshift on this
// CPU (AVX-512, or AVX2 up to 32,752 pixels; w a multiple of 16): elsewhere converting the row to
// planes first is faster.
bool YccRowIsFast(size_t w, int hshift);

// An interleaved RGB row mirrored: out[3x + c] = in[3(w - 1 - x) + c]. in and out must not overlap.
void MirrorRgbRow(const uint8_t* in, size_t w, uint8_t* out);
void MirrorRgbRowScalar(const uint8_t* in, size_t w, uint8_t* out);

}  // namespace dsc::kernels
