#include "kernels/resample.h"

#include <cmath>
#include <cstring>
#include <string>

#include "format/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace dsc::kernels {

ResampleAxis MakeResampleAxis(ResampleFilter f, int in_size, float in0, float in1, int out_size) {
  ResampleAxis a;
  a.ksize = ResampleMaxTaps(f, in0, in1, out_size);
  a.first.resize(size_t(out_size));
  a.count.resize(size_t(out_size));
  a.k.assign(size_t(out_size) * a.ksize, 0);
  std::vector<double> w(size_t(a.ksize));
  for (int i = 0; i < out_size; ++i) {
    const int n = ResampleTaps(f, in_size, in0, in1, out_size, i, &a.first[i], w.data());
    a.count[i] = n;
    for (int t = 0; t < n; ++t) a.k[size_t(i) * a.ksize + t] = ResampleFixed(w[t]);
  }
  return a;
}

namespace {

std::string BoxText(const ResampleBox& b) {
  return "(" + std::to_string(b.x0) + ", " + std::to_string(b.y0) + ", " + std::to_string(b.x1) + ", " +
         std::to_string(b.y1) + ")";
}

// Pillow's checks (_imaging.c _resize), plus finite edges, which Pillow does not check.
void Validate(int sw, int sh, int dw, int dh, const ResampleBox& b) {
  if (sw < 1 || sh < 1)
    throw Error("resample: source size " + std::to_string(sw) + "x" + std::to_string(sh) + " is empty");
  if (dw < 1 || dh < 1)
    throw Error("resample: output size " + std::to_string(dw) + "x" + std::to_string(dh) + " must be > 0");
  if (!std::isfinite(b.x0) || !std::isfinite(b.y0) || !std::isfinite(b.x1) || !std::isfinite(b.y1))
    throw Error("resample: box " + BoxText(b) + " is not finite");
  if (b.x0 < 0 || b.y0 < 0) throw Error("resample: box " + BoxText(b) + " has a negative offset");
  if (b.x1 > sw || b.y1 > sh)
    throw Error("resample: box " + BoxText(b) + " exceeds the " + std::to_string(sw) + "x" + std::to_string(sh) +
                " image");
  if (b.x1 - b.x0 < 0 || b.y1 - b.y0 < 0) throw Error("resample: box " + BoxText(b) + " is inverted");
}

struct Plan {
  ResampleAxis h, v;
  bool need_h = false, need_v = false;
  int y_first = 0, y_last = 0;  // source rows the vertical pass reads
};

// ImagingResampleInner's set-up. Its need_* tests compare box[2] with the output size (not the input
// size); kept as is, it only decides whether an identity pass is skipped.
Plan MakePlan(int sw, int sh, int dw, int dh, ResampleFilter f, const ResampleBox& b) {
  Plan p;
  p.need_h = dw != sw || b.x0 != 0 || b.x1 != dw;
  p.need_v = dh != sh || b.y0 != 0 || b.y1 != dh;
  p.v = MakeResampleAxis(f, sh, b.y0, b.y1, dh);
  p.y_first = p.v.first[0];
  p.y_last = p.v.first[dh - 1] + p.v.count[dh - 1];
  if (p.y_last < p.y_first) p.y_last = p.y_first;
  if (p.need_h) {
    p.h = MakeResampleAxis(f, sw, b.x0, b.x1, dw);
    for (int& y : p.v.first) y -= p.y_first;
  }
  return p;
}

// Horizontal pass over `rows` rows of `in` (iw RGB pixels each) into `out` (ow pixels each).
void HorizontalScalar(const uint8_t* in, int iw, int rows, const ResampleAxis& a, uint8_t* out, int ow) {
  for (int y = 0; y < rows; ++y) {
    const uint8_t* row = in + size_t(y) * iw * 3;
    uint8_t* o = out + size_t(y) * ow * 3;
    for (int x = 0; x < ow; ++x) {
      const uint8_t* s = row + size_t(a.first[x]) * 3;
      const int32_t* k = &a.k[size_t(x) * a.ksize];
      uint32_t r = ResampleBias(), g = ResampleBias(), b = ResampleBias();
      for (int t = 0; t < a.count[x]; ++t) {
        r = ResampleMac(r, s[3 * t], k[t]);
        g = ResampleMac(g, s[3 * t + 1], k[t]);
        b = ResampleMac(b, s[3 * t + 2], k[t]);
      }
      o[3 * x] = ResampleClip8(r);
      o[3 * x + 1] = ResampleClip8(g);
      o[3 * x + 2] = ResampleClip8(b);
    }
  }
}

// Vertical pass over bytes [b0, b1) of each row of `in` (rows of `stride` bytes) for output rows
// [y0, y1).
void VerticalScalar(const uint8_t* in, size_t stride, const ResampleAxis& a, uint8_t* out, int y0, int y1, size_t b0,
                    size_t b1) {
  for (int y = y0; y < y1; ++y) {
    const uint8_t* s = in + size_t(a.first[y]) * stride;
    const int32_t* k = &a.k[size_t(y) * a.ksize];
    uint8_t* o = out + size_t(y) * stride;
    for (size_t i = b0; i < b1; ++i) {
      uint32_t acc = ResampleBias();
      for (int t = 0; t < a.count[y]; ++t) acc = ResampleMac(acc, s[size_t(t) * stride + i], k[t]);
      o[i] = ResampleClip8(acc);
    }
  }
}

using HorizontalFn = void (*)(const uint8_t*, int, int, const ResampleAxis&, uint8_t*, int);
using VerticalFn = void (*)(const uint8_t*, size_t, const ResampleAxis&, uint8_t*, int, int);

void VerticalScalarAll(const uint8_t* in, size_t stride, const ResampleAxis& a, uint8_t* out, int y0, int y1) {
  VerticalScalar(in, stride, a, out, y0, y1, 0, stride);
}

void Run(const uint8_t* src, int sw, int sh, uint8_t* dst, int dw, int dh, ResampleFilter f, ResampleBox box,
         std::vector<uint8_t>* scratch, HorizontalFn horizontal, VerticalFn vertical) {
  if (box.x1 == 0 && box.y1 == 0 && box.x0 == 0 && box.y0 == 0) box = {0, 0, float(sw), float(sh)};
  Validate(sw, sh, dw, dh, box);
  if (f != ResampleFilter::kBox && f != ResampleFilter::kBilinear && f != ResampleFilter::kBicubic)
    throw Error("resample: unsupported filter " + std::to_string(int(f)));
  const Plan p = MakePlan(sw, sh, dw, dh, f, box);
  if (!p.need_h && !p.need_v) {
    std::memcpy(dst, src, size_t(sw) * sh * 3);
    return;
  }
  if (!p.need_v) {  // dh == sh and every row is used: straight into dst
    horizontal(src, sw, sh, p.h, dst, dw);
    return;
  }
  const uint8_t* in = src;
  if (p.need_h) {
    std::vector<uint8_t> local;
    std::vector<uint8_t>& tmp = scratch ? *scratch : local;
    const int rows = p.y_last - p.y_first;
    tmp.resize(size_t(dw) * rows * 3);
    horizontal(src + size_t(p.y_first) * sw * 3, sw, rows, p.h, tmp.data(), dw);
    vertical(tmp.data(), size_t(dw) * 3, p.v, dst, 0, dh);
    return;
  }
  vertical(in, size_t(sw) * 3, p.v, dst, 0, dh);
}

}  // namespace

void ResampleRgbScalar(const uint8_t* src, int sw, int sh, uint8_t* dst, int dw, int dh, ResampleFilter f,
                       ResampleBox box, std::vector<uint8_t>* scratch) {
  Run(src, sw, sh, dst, dw, dh, f, box, scratch, HorizontalScalar, VerticalScalarAll);
}

bool ResampleHaveAvx2() {
#if defined(__x86_64__)
  static const bool have = __builtin_cpu_supports("avx2");
  return have;
#else
  return false;
#endif
}

void ResampleRgb(const uint8_t* src, int sw, int sh, uint8_t* dst, int dw, int dh, ResampleFilter f,
                 ResampleBox box, std::vector<uint8_t>* scratch) {
  ResampleRgbScalar(src, sw, sh, dst, dw, dh, f, box, scratch);
}

}  // namespace dsc::kernels
