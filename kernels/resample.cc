#include "kernels/resample.h"

#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include "format/error.h"
#include "kernels/cpu.h"
#include "kernels/resample_x86.h"

namespace dsc::kernels {

using resample_internal::HorizontalScalar;
using resample_internal::HorizontalSimd;
using resample_internal::Plan;
using resample_internal::VerticalScalar;
#if defined(__x86_64__)
using resample_internal::FillBilinearAvx2;
using resample_internal::HorizontalAvx2;
using resample_internal::HorizontalAvx512;
using resample_internal::VerticalAvx2;
using resample_internal::VerticalAvx512;
#endif

namespace {

// Outputs [o0, o0 + n) of an axis (ResampleTaps for each, as Q22), mirrored when asked; source indices
// shifted by `shift`. The filter is a template argument so that its weight function folds into the
// loop (the axes are built for every sample: this was a tenth of the RandomResizedCrop step).
template <ResampleFilter F>
void FillAxis(int in_size, float in0, float in1, int out_size, int o0, int n, int shift, bool mirror, bool simd,
              ResampleAxis* a) {
  thread_local std::vector<double> w;
  w.resize(size_t(a->ksize));
  int i = 0;
#if defined(__x86_64__)
  if (F == ResampleFilter::kBilinear && simd) i = FillBilinearAvx2(in_size, in0, in1, out_size, o0, n, shift, mirror, a);
#endif
  for (; i < n; ++i) {
    const int o = mirror ? n - 1 - i : i;
    a->count[i] = ResampleIndexTaps(F, in_size, in0, in1, out_size, o0 + o, shift, &a->first[i], w.data(),
                                    &a->k[size_t(i) * a->ksize]);
  }
}

// Sizes *a for n outputs (keeping its memory) and fills it (`simd`: with the AVX2 twin where there is one;
// the scalar reference resampler builds its axes without).
void MakeAxis(ResampleFilter f, int in_size, float in0, float in1, int out_size, int o0, int n, int shift, bool mirror,
              bool simd, ResampleAxis* a) {
  a->ksize = ResampleMaxTaps(f, in0, in1, out_size);
  a->first.resize(size_t(n));  // assign/resize keep the capacity: no allocation from sample to sample
  a->count.resize(size_t(n));
  a->k.assign(size_t(n) * a->ksize, 0);
  switch (f) {
    case ResampleFilter::kBox: return FillAxis<ResampleFilter::kBox>(in_size, in0, in1, out_size, o0, n, shift, mirror, simd, a);
    case ResampleFilter::kBilinear:
      return FillAxis<ResampleFilter::kBilinear>(in_size, in0, in1, out_size, o0, n, shift, mirror, simd, a);
    case ResampleFilter::kBicubic:
      return FillAxis<ResampleFilter::kBicubic>(in_size, in0, in1, out_size, o0, n, shift, mirror, simd, a);
  }
  throw Error("resample: unsupported filter " + std::to_string(int(f)));
}

}  // namespace

ResampleAxis MakeResampleAxis(ResampleFilter f, int in_size, float in0, float in1, int out_size) {
  ResampleAxis a;
  MakeAxis(f, in_size, in0, in1, out_size, 0, out_size, 0, false, UseAvx2(), &a);
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

bool MakeHorizontalSimd(const ResampleAxis& a, int iw, HorizontalSimd* h) {
  int most = 0;
  for (int n : a.count) most = n > most ? n : most;
  h->taps = most;
  if (most == 0 || most > iw) return false;  // narrower than the taps: the scalar pass does it
  const size_t ow = a.count.size();
  h->start.resize(ow);
  h->k.assign(ow * most, 0);
  int lo = iw, hi = 0;
  for (size_t x = 0; x < ow; ++x) {
    const int s = a.first[x] + most > iw ? iw - most : a.first[x];
    h->start[x] = s;
    lo = s < lo ? s : lo;
    hi = s + most > hi ? s + most : hi;
    for (int t = 0; t < a.count[x]; ++t) h->k[x * most + size_t(a.first[x] - s + t)] = a.k[x * a.ksize + t];
  }
  for (int& s : h->start) s -= lo;
  h->x0 = lo;
  h->width = hi - lo;
  return true;
}

// ImagingResampleInner's set-up. Its need_* tests compare box[2] with the output size (not the input
// size); kept as is, it only decides whether an identity pass is skipped.
void MakePlan(int sw, int sh, int dw, int dh, ResampleFilter f, const ResampleBox& b, bool simd, Plan* p) {
  p->need_h = dw != sw || b.x0 != 0 || b.x1 != dw;
  p->need_v = dh != sh || b.y0 != 0 || b.y1 != dh;
  p->simd = simd;
  p->hs_ok = false;
  if (p->need_v) {
    MakeAxis(f, sh, b.y0, b.y1, dh, 0, dh, 0, false, simd, &p->v);
    p->y_first = p->v.first[0];
    p->y_last = p->v.first[dh - 1] + p->v.count[dh - 1];
    if (p->y_last < p->y_first) p->y_last = p->y_first;
  }
  if (p->need_h) {
    MakeAxis(f, sw, b.x0, b.x1, dw, 0, dw, 0, false, simd, &p->h);
    if (p->need_v)
      for (int& y : p->v.first) y -= p->y_first;
    if (simd) p->hs_ok = MakeHorizontalSimd(p->h, sw, &p->hs);
  }
}

// The plan for this geometry: the last one this thread made when the geometry (box bits included) is
// the same, as when one crop size is used over and over, else a new one.
const Plan& CachedPlan(int sw, int sh, int dw, int dh, ResampleFilter f, const ResampleBox& b, bool simd) {
  struct Key {
    int sw, sh, dw, dh, f, simd;
    float box[4];
  };
  thread_local Key last;
  thread_local bool valid = false;
  thread_local Plan plan;
  Key k;
  std::memset(&k, 0, sizeof k);  // no stray padding bytes in the comparison
  k.sw = sw, k.sh = sh, k.dw = dw, k.dh = dh, k.f = int(f), k.simd = simd;
  k.box[0] = b.x0, k.box[1] = b.y0, k.box[2] = b.x1, k.box[3] = b.y1;
  if (!valid || std::memcmp(&k, &last, sizeof k) != 0) {
    valid = false;  // stays so if MakePlan throws (allocation)
    MakePlan(sw, sh, dw, dh, f, b, simd, &plan);
    last = k;
    valid = true;
  }
  return plan;
}

}  // namespace

namespace resample_internal {

// Horizontal pass over `rows` rows of `in` (`in_stride` bytes apart) into `out` (ow pixels each).
void HorizontalScalar(const uint8_t* in, size_t in_stride, int rows, const Plan& p, uint8_t* out, int ow) {
  const ResampleAxis& a = p.h;
  for (int y = 0; y < rows; ++y) {
    const uint8_t* row = in + size_t(y) * in_stride;
    uint8_t* o = out + size_t(y) * ow * 3;
    for (int x = 0; x < ow; ++x) {
      const uint8_t* s = row + size_t(a.first[x]) * 3;
      const int32_t* k = &a.k[size_t(x) * a.ksize];
      for (int c = 0; c < 3; ++c) o[3 * x + c] = ResampleByte(s + c, 3, k, a.count[x]);
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
    for (size_t i = b0; i < b1; ++i) o[i] = ResampleByte(s + i, stride, k, a.count[y]);
  }
}

}  // namespace resample_internal

namespace {

using HorizontalFn = void (*)(const uint8_t*, size_t, int, const Plan&, uint8_t*, int);
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
  const Plan& p = CachedPlan(sw, sh, dw, dh, f, box, horizontal != HorizontalScalar);
  if (!p.need_h && !p.need_v) {
    std::memcpy(dst, src, size_t(sw) * sh * 3);
    return;
  }
  if (!p.need_v) {  // dh == sh and every row is used: straight into dst
    horizontal(src, size_t(sw) * 3, sh, p, dst, dw);
    return;
  }
  const uint8_t* in = src;
  if (p.need_h) {
    std::vector<uint8_t> local;
    std::vector<uint8_t>& tmp = scratch ? *scratch : local;
    const int rows = p.y_last - p.y_first;
    tmp.resize(size_t(dw) * rows * 3);
    horizontal(src + size_t(p.y_first) * sw * 3, size_t(sw) * 3, rows, p, tmp.data(), dw);
    vertical(tmp.data(), size_t(dw) * 3, p.v, dst, 0, dh);
    return;
  }
  vertical(in, size_t(sw) * 3, p.v, dst, 0, dh);
}

// Both passes over precomputed axes (ResampleRgbAxes).
void RunAxes(const uint8_t* src, int sw, int sh, size_t stride, const ResampleAxis& h, const ResampleAxis& v,
             uint8_t* dst, std::vector<uint8_t>* scratch, ResampleRowSink* sink, bool simd, HorizontalFn horizontal,
             VerticalFn vertical, int block = 8) {
  const int dw = int(h.count.size()), dh = int(v.count.size());
  auto check = [](const ResampleAxis& a, int size, const char* name) {
    for (size_t i = 0; i < a.count.size(); ++i)
      if (a.count[i] < 1 || a.count[i] > a.ksize || a.first[i] < 0 || a.first[i] + a.count[i] > size)
        throw Error(std::string("resample: ") + name + " output " + std::to_string(i) + " reads outside the " +
                    std::to_string(size) + "-pixel source");
  };
  if (dw < 1 || dh < 1) throw Error("resample: empty output");
  if (stride < size_t(sw) * 3) throw Error("resample: source stride shorter than a row");
  check(h, sw, "horizontal");
  check(v, sh, "vertical");
  thread_local Plan p;  // keeps its vectors' memory from sample to sample
  p.h = h;
  p.v = v;
  p.need_h = p.need_v = true;
  p.simd = simd;
  p.y_first = v.first[0];
  p.y_last = 0;
  for (int y = 0; y < dh; ++y) {  // a mirrored or windowed axis need not be monotonic at its ends
    p.y_first = v.first[y] < p.y_first ? v.first[y] : p.y_first;
    p.y_last = v.first[y] + v.count[y] > p.y_last ? v.first[y] + v.count[y] : p.y_last;
  }
  for (int& y : p.v.first) y -= p.y_first;
  p.hs_ok = simd && MakeHorizontalSimd(p.h, sw, &p.hs);
  std::vector<uint8_t> local;
  std::vector<uint8_t>& tmp = scratch ? *scratch : local;
  const int rows = p.y_last - p.y_first;
  tmp.resize(size_t(dw) * rows * 3);
  if (!sink) {
    horizontal(src + size_t(p.y_first) * stride, stride, rows, p, tmp.data(), dw);
    vertical(tmp.data(), size_t(dw) * 3, p.v, dst, 0, dh);
    return;
  }
  // Pipelined: the horizontal pass runs a block of rows (its SIMD block: 8 or 16) ahead of the vertical
  // rows that need them, and each output row goes to the sink at once, so the sink's stores (the batch, past the
  // cache) overlap the arithmetic instead of following it, and the intermediate rows are still hot.
  const size_t row_bytes = size_t(dw) * 3;
  int done = 0;  // intermediate rows [0, done) are computed
  for (int y = 0; y < dh; ++y) {
    const int need = p.v.first[y] + p.v.count[y];
    if (need > done) {
      int upto = done + (need - done + block - 1) / block * block;  // whole blocks from `done`
      if (upto > rows) upto = rows;
      horizontal(src + size_t(p.y_first + done) * stride, stride, upto - done, p, tmp.data() + size_t(done) * row_bytes,
                 dw);
      done = upto;
    }
    vertical(tmp.data(), row_bytes, p.v, dst, y, y + 1);
    sink->Row(y, dst + size_t(y) * row_bytes);
  }
}

}  // namespace

ResampleSpan MakeResampleSpan(ResampleFilter f, int lo, int hi, float in0, float in1, int out_size, int o0, int n,
                              int origin, bool mirror) {
  if (hi <= lo || n < 1 || o0 < 0 || o0 + n > out_size || !(in1 >= in0))
    throw Error("resample: bad window (pixels " + std::to_string(lo) + ".." + std::to_string(hi) + ", outputs " +
                std::to_string(o0) + "+" + std::to_string(n) + " of " + std::to_string(out_size) + ")");
  // Relative to lo, as Pillow sees a cropped image: exact (float minus a smaller integer) for the
  // integer crops of an unscaled decode.
  ResampleSpan s;
  s.filter = f;
  s.mirror = mirror;
  s.in_size = hi - lo;
  s.out_size = out_size;
  s.o0 = o0;
  s.n = n;
  s.shift = lo - origin;
  s.in0 = in0 - float(lo);
  s.in1 = in1 - float(lo);
  return s;
}

void MakeResampleAxis(const ResampleSpan& s, ResampleAxis* a) {
  MakeAxis(s.filter, s.in_size, s.in0, s.in1, s.out_size, s.o0, s.n, s.shift, s.mirror, UseAvx2(), a);
}

void MakeResampleWindow(ResampleFilter f, int lo, int hi, float in0, float in1, int out_size, int o0, int n, int origin,
                        bool mirror, ResampleAxis* a) {
  MakeResampleAxis(MakeResampleSpan(f, lo, hi, in0, in1, out_size, o0, n, origin, mirror), a);
}

void ResampleRgbAxes(const uint8_t* src, int sw, int sh, size_t stride, const ResampleAxis& h, const ResampleAxis& v,
                     uint8_t* dst, std::vector<uint8_t>* scratch, ResampleRowSink* sink) {
#if defined(__x86_64__)
  if (UseAvx512())
    return RunAxes(src, sw, sh, stride, h, v, dst, scratch, sink, true, HorizontalAvx512, VerticalAvx512, 16);
  if (UseAvx2()) return RunAxes(src, sw, sh, stride, h, v, dst, scratch, sink, true, HorizontalAvx2, VerticalAvx2);
#endif
  RunAxes(src, sw, sh, stride, h, v, dst, scratch, sink, false, HorizontalScalar, VerticalScalarAll);
}

void ResampleRgbAxesScalar(const uint8_t* src, int sw, int sh, size_t stride, const ResampleAxis& h,
                           const ResampleAxis& v, uint8_t* dst, std::vector<uint8_t>* scratch, ResampleRowSink* sink) {
  RunAxes(src, sw, sh, stride, h, v, dst, scratch, sink, false, HorizontalScalar, VerticalScalarAll);
}

void ResampleRgbScalar(const uint8_t* src, int sw, int sh, uint8_t* dst, int dw, int dh, ResampleFilter f,
                       ResampleBox box, std::vector<uint8_t>* scratch) {
  Run(src, sw, sh, dst, dw, dh, f, box, scratch, HorizontalScalar, VerticalScalarAll);
}

void ResampleRgb(const uint8_t* src, int sw, int sh, uint8_t* dst, int dw, int dh, ResampleFilter f,
                 ResampleBox box, std::vector<uint8_t>* scratch) {
#if defined(__x86_64__)
  if (UseAvx512()) return Run(src, sw, sh, dst, dw, dh, f, box, scratch, HorizontalAvx512, VerticalAvx512);
  if (UseAvx2()) return Run(src, sw, sh, dst, dw, dh, f, box, scratch, HorizontalAvx2, VerticalAvx2);
#endif
  ResampleRgbScalar(src, sw, sh, dst, dw, dh, f, box, scratch);
}

}  // namespace dsc::kernels
