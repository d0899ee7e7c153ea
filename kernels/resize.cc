#include "kernels/resize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace dsc::kernels {

namespace {

// For one axis: the source span [lo, hi) and per-source-pixel weights covered by each destination pixel.
struct Span {
  int lo = 0;
  std::vector<double> w;
};

std::vector<Span> AreaSpans(int src, int dst) {
  std::vector<Span> spans(dst);
  const double scale = double(src) / dst;
  for (int d = 0; d < dst; ++d) {
    double a = d * scale, b = (d + 1) * scale;
    int lo = int(std::floor(a)), hi = std::min(src, int(std::ceil(b)));
    spans[d].lo = lo;
    for (int s = lo; s < hi; ++s) {
      double cover = std::min(b, double(s + 1)) - std::max(a, double(s));
      spans[d].w.push_back(cover / scale);
    }
  }
  return spans;
}

}  // namespace

void ResizeArea(const uint8_t* src, int sw, int sh, int channels, uint8_t* dst, int dw, int dh) {
  if (sw == dw && sh == dh) {
    std::memcpy(dst, src, size_t(sw) * sh * channels);
    return;
  }
  auto xs = AreaSpans(sw, dw), ys = AreaSpans(sh, dh);
  std::vector<double> row(size_t(sw) * channels);
  for (int y = 0; y < dh; ++y) {
    std::fill(row.begin(), row.end(), 0.0);
    for (size_t k = 0; k < ys[y].w.size(); ++k) {
      const uint8_t* s = src + size_t(ys[y].lo + int(k)) * sw * channels;
      const double wy = ys[y].w[k];
      for (size_t i = 0; i < row.size(); ++i) row[i] += wy * s[i];
    }
    uint8_t* d = dst + size_t(y) * dw * channels;
    for (int x = 0; x < dw; ++x) {
      for (int c = 0; c < channels; ++c) {
        double acc = 0;
        for (size_t k = 0; k < xs[x].w.size(); ++k) acc += xs[x].w[k] * row[size_t(xs[x].lo + int(k)) * channels + c];
        d[x * channels + c] = uint8_t(std::clamp(std::lround(acc), 0L, 255L));
      }
    }
  }
}

void FitLongestSide(int w, int h, int max_side, int* ow, int* oh) {
  *ow = w;
  *oh = h;
  if (max_side <= 0 || std::max(w, h) <= max_side) return;
  if (w >= h) {
    *ow = max_side;
    *oh = std::max(1, int(std::lround(double(h) * max_side / w)));
  } else {
    *oh = max_side;
    *ow = std::max(1, int(std::lround(double(w) * max_side / h)));
  }
}

void CropCopy(const uint8_t* src, int sw, int channels, int x, int y, int cw, int ch, uint8_t* dst) {
  for (int r = 0; r < ch; ++r)
    std::memcpy(dst + size_t(r) * cw * channels, src + (size_t(y + r) * sw + x) * channels, size_t(cw) * channels);
}

}  // namespace dsc::kernels
