#include "kernels/geometry.h"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <vector>

namespace dsc::kernels {

namespace {

constexpr double kQ16 = 65536.0;

// Output column of source coordinate u along one axis: (u - origin) * out / span, origin and span Q16.
double Forward(double u, int64_t origin, int64_t span, int out) {
  return (u - double(origin) / kQ16) * double(out) / (double(span) / kQ16);
}

// Source pixel under the centre of output pixel f: floor(origin + (f + 0.5) * span / out), exact in
// integers (origin and span are Q16), clamped to the image.
int Nearest(int f, int64_t origin, int64_t span, int out, int size) {
  const int64_t num = origin * 2 * out + (2 * int64_t(f) + 1) * span;  // Q16 * 2 * out
  const int64_t den = int64_t(2) * out * 65536;
  int64_t i = num >= 0 ? num / den : -((-num + den - 1) / den);
  i = std::clamp<int64_t>(i, 0, size - 1);
  return int(i);
}

}  // namespace

void MapPoint(const SampleParams& p, int out_w, int out_h, double u, double v, double* x, double* y) {
  double fx = Forward(u, p.src_x, p.src_w, out_w);
  const double fy = Forward(v, p.src_y, p.src_h, out_h);
  // OutputPixel reads output column x from fx = out_w - 1 - (x - dx): in continuous coordinates a
  // point at fx lands at out_w - fx.
  if (p.flip) fx = out_w - fx;
  *x = fx + p.dx;
  *y = fy + p.dy;
}

size_t TransformBoxes(const SampleParams& p, int out_w, int out_h, const float* in, size_t n, float* out,
                      uint32_t* kept, float min_side) {
  size_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    const double bx = in[4 * i], by = in[4 * i + 1], bw = in[4 * i + 2], bh = in[4 * i + 3];
    // In the crop's output frame first (before the translate): what lies outside the crop is gone even
    // where the translate would have moved it back into view (OutputPixel fills there).
    double x0 = Forward(bx, p.src_x, p.src_w, out_w), x1 = Forward(bx + bw, p.src_x, p.src_w, out_w);
    double y0 = Forward(by, p.src_y, p.src_h, out_h), y1 = Forward(by + bh, p.src_y, p.src_h, out_h);
    if (p.flip) {  // the sides swap
      const double l = out_w - x1, r = out_w - x0;
      x0 = l;
      x1 = r;
    }
    x0 = std::clamp(x0, 0.0, double(out_w)) + p.dx;
    x1 = std::clamp(x1, 0.0, double(out_w)) + p.dx;
    y0 = std::clamp(y0, 0.0, double(out_h)) + p.dy;
    y1 = std::clamp(y1, 0.0, double(out_h)) + p.dy;
    x0 = std::clamp(x0, 0.0, double(out_w));
    x1 = std::clamp(x1, 0.0, double(out_w));
    y0 = std::clamp(y0, 0.0, double(out_h));
    y1 = std::clamp(y1, 0.0, double(out_h));
    const float w = float(x1 - x0), h = float(y1 - y0);
    if (!(w > min_side && h > min_side)) continue;  // also drops NaN boxes
    out[4 * m] = float(x0);
    out[4 * m + 1] = float(y0);
    out[4 * m + 2] = w;
    out[4 * m + 3] = h;
    if (kept) kept[m] = uint32_t(i);
    ++m;
  }
  return m;
}

void TransformPoints(const SampleParams& p, int out_w, int out_h, float* xy, size_t n, uint8_t* visible) {
  for (size_t i = 0; i < n; ++i) {
    double x, y;
    MapPoint(p, out_w, out_h, xy[2 * i], xy[2 * i + 1], &x, &y);
    xy[2 * i] = float(x);
    xy[2 * i + 1] = float(y);
    // Visible only inside the crop (before the translate) and inside the output (after it).
    const double cx = x - p.dx, cy = y - p.dy;
    const bool in_crop = cx >= 0 && cx < out_w && cy >= 0 && cy < out_h;
    if (visible && !(in_crop && x >= 0 && x < out_w && y >= 0 && y < out_h)) visible[i] = 0;
  }
}

void TransformMask(const SampleParams& p, int out_w, int out_h, const uint8_t* src, int src_w, int src_h,
                   int stride, int channels, uint8_t fill, uint8_t* dst) {
  const size_t c = size_t(channels);
  // The source column of every output column, computed once per mask (rows reuse it).
  std::vector<int> cols(size_t(out_w), -1);
  for (int x = 0; x < out_w; ++x) {
    const int tx = x - p.dx;
    if (tx < 0 || tx >= out_w) continue;
    const int fx = p.flip ? out_w - 1 - tx : tx;
    cols[size_t(x)] = Nearest(fx, p.src_x, p.src_w, out_w, src_w);
  }
  const size_t row_bytes = size_t(out_w) * c;
  int last_sy = -1;  // an upscaled crop maps runs of output rows to one source row: copy, not gather
  for (int y = 0; y < out_h; ++y) {
    uint8_t* row = dst + size_t(y) * row_bytes;
    const int ty = y - p.dy;
    if (ty < 0 || ty >= out_h) {
      std::fill(row, row + row_bytes, fill);
      last_sy = -1;
      continue;
    }
    const int sy = Nearest(ty, p.src_y, p.src_h, out_h, src_h);
    if (sy == last_sy) {
      std::memcpy(row, row - row_bytes, row_bytes);
      continue;
    }
    last_sy = sy;
    const uint8_t* s = src + size_t(sy) * size_t(stride);
    if (c == 1) {
      for (int x = 0; x < out_w; ++x) {
        const int sx = cols[size_t(x)];
        row[x] = sx < 0 ? fill : s[sx];
      }
    } else {
      for (int x = 0; x < out_w; ++x) {
        const int sx = cols[size_t(x)];
        for (size_t k = 0; k < c; ++k) row[size_t(x) * c + k] = sx < 0 ? fill : s[size_t(sx) * c + k];
      }
    }
  }
}

}  // namespace dsc::kernels
