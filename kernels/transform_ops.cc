// torchvision.transforms.functional (0.14, tensor backend) on uint8 RGB images: the deterministic
// half of the list transforms. Each follows functional_tensor.py's arithmetic (transform_ops.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "format/error.h"
#include "kernels/transform_ops.h"
#include "kernels/transforms.h"

namespace dsc::kernels {

static_assert(int(PadMode::kConstant) == 0 && int(PadMode::kEdge) == 1 && int(PadMode::kReflect) == 2 &&
                  int(PadMode::kSymmetric) == 3,
              "PadIndex (transform_ops.h) takes PadMode's values");

namespace {
size_t Pixels(const ImageU8& img) { return size_t(img.width) * size_t(img.height); }
}  // namespace

// Plain float loops the compiler vectorises (an AVX2 clone where the CPU has it): the same float32
// operations in the same order, lane by lane.
// Not under TSan: its instrumentation of the clone resolver runs before the runtime is up (a crash at
// load time); the tested code is the same loop either way.
#if defined(__SANITIZE_THREAD__)
#define DSC_VECTOR_CLONES
#else
#define DSC_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#endif

DSC_VECTOR_CLONES void AdjustBrightness(ImageU8 img, double factor) {
  const BlendFactors f = MakeBlend(factor);
  uint8_t* p = img.data;
  for (size_t i = 0, n = Pixels(img) * 3; i < n; ++i) p[i] = TruncU8(f.r * float(p[i]) + f.rc * 0.f);
}

namespace {
DSC_VECTOR_CLONES uint64_t GraySum(const uint8_t* p, size_t n) {
  uint32_t sum = 0;  // n <= 2^24 pixels per call (the caller splits)
  for (size_t i = 0; i < n; ++i)
    sum += uint32_t(int((0.2989f * float(p[3 * i]) + 0.587f * float(p[3 * i + 1])) + 0.114f * float(p[3 * i + 2])));
  return sum;
}
}  // namespace

DSC_VECTOR_CLONES void AdjustContrast(ImageU8 img, double factor) {
  // mean of the grayscale image (uint8, truncated) as float32; torch's reduction order is its own,
  // so the sum is taken exactly (integers) and divided once.
  const size_t n = Pixels(img);
  uint64_t sum = 0;
  for (size_t at = 0; at < n; at += size_t(1) << 24) sum += GraySum(img.data + 3 * at, std::min(n - at, size_t(1) << 24));
  const float mean = n ? float(double(sum) / double(n)) : 0.f;
  const BlendFactors f = MakeBlend(factor);
  const float o = f.rc * mean;
  uint8_t* p = img.data;
  for (size_t i = 0; i < n * 3; ++i) p[i] = TruncU8(f.r * float(p[i]) + o);
}

DSC_VECTOR_CLONES void AdjustSaturation(ImageU8 img, double factor) {
  const BlendFactors f = MakeBlend(factor);
  uint8_t* p = img.data;
  for (size_t i = 0, n = Pixels(img); i < n; ++i) {
    const float r = float(p[3 * i]), g = float(p[3 * i + 1]), b = float(p[3 * i + 2]);
    const float o = f.rc * float(int((0.2989f * r + 0.587f * g) + 0.114f * b));
    p[3 * i] = TruncU8(f.r * r + o);
    p[3 * i + 1] = TruncU8(f.r * g + o);
    p[3 * i + 2] = TruncU8(f.r * b + o);
  }
}

// The products ratio * v and 0.2989 * r, ... as 256-entry tables (the same float values, one
// rounding each), for the ops below.
namespace {
struct GrayTables {
  float r[256], g[256], b[256];
  GrayTables() {
    for (int v = 0; v < 256; ++v) r[v] = 0.2989f * float(v), g[v] = 0.587f * float(v), b[v] = 0.114f * float(v);
  }
};
const GrayTables& Grays() {
  static const GrayTables t;
  return t;
}
inline uint8_t GrayOf(const GrayTables& t, const uint8_t* p) { return uint8_t((t.r[p[0]] + t.g[p[1]]) + t.b[p[2]]); }
void ApplyTable(ImageU8 img, const uint8_t lut[256]) {
  uint8_t* p = img.data;
  for (size_t i = 0, n = Pixels(img) * 3; i < n; ++i) p[i] = lut[p[i]];
}
}  // namespace

void AdjustHue(ImageU8 img, double factor) {
  if (!(factor >= -0.5 && factor <= 0.5)) throw Error("adjust_hue: factor " + std::to_string(factor) + " not in [-0.5, 0.5]");
  const float h = float(factor);
  uint8_t* p = img.data;
  for (size_t i = 0, n = Pixels(img); i < n; ++i, p += 3) {
    const uint8_t in[3] = {p[0], p[1], p[2]};
    HuePixel(in, h, p);
  }
}

void RgbToGrayscale(ImageU8 img) {
  const GrayTables& t = Grays();
  uint8_t* p = img.data;
  for (size_t i = 0, n = Pixels(img); i < n; ++i, p += 3) p[0] = p[1] = p[2] = GrayOf(t, p);
}

void Solarize(ImageU8 img, double threshold) {
  const float t = float(threshold);
  uint8_t lut[256];
  for (int v = 0; v < 256; ++v) lut[v] = SolarizeValue(uint8_t(v), t);
  ApplyTable(img, lut);
}

void Posterize(ImageU8 img, int bits) {
  if (bits < 0 || bits > 8) throw Error("posterize: bits " + std::to_string(bits) + " not in [0, 8]");
  for (size_t i = 0, n = Pixels(img) * 3; i < n; ++i) img.data[i] = PosterizeValue(img.data[i], bits);
}

void Autocontrast(ImageU8 img) {
  // Per channel: ((img - min) * (255 / (max - min))).clamp(0, 255).to(uint8), scale in float32;
  // a flat channel is left as it is (scale 1, min 0).
  const size_t n = Pixels(img);
  for (int c = 0; c < 3; ++c) {
    uint8_t lo = 255, hi = 0;
    for (size_t i = 0; i < n; ++i) {
      lo = std::min(lo, img.data[3 * i + c]);
      hi = std::max(hi, img.data[3 * i + c]);
    }
    if (hi == lo) continue;
    const float scale = 255.f / float(hi - lo);
    for (size_t i = 0; i < n; ++i) img.data[3 * i + c] = TruncU8(float(img.data[3 * i + c] - lo) * scale);
  }
}

void Equalize(ImageU8 img) {
  // _scale_channel: step = (sum of the histogram's nonzero bins but the last) // 255; lut[v] =
  // (cumsum[v - 1] + step // 2) // step, clamped; step 0 leaves the channel as it is. Integers.
  const size_t n = Pixels(img);
  for (int c = 0; c < 3; ++c) {
    int64_t hist[256] = {};
    for (size_t i = 0; i < n; ++i) ++hist[img.data[3 * i + c]];
    int last = 255;
    while (last > 0 && hist[last] == 0) --last;
    int64_t nonzero = 0;
    for (int v = 0; v < last; ++v) nonzero += hist[v];
    const int64_t step = nonzero / 255;
    if (step == 0) continue;
    uint8_t lut[256];
    int64_t cum = 0;
    for (int v = 0; v < 256; ++v) {
      lut[v] = uint8_t(std::min<int64_t>(255, (cum + step / 2) / step));
      cum += hist[v];
    }
    for (size_t i = 0; i < n; ++i) img.data[3 * i + c] = lut[img.data[3 * i + c]];
  }
}

void Invert(ImageU8 img) {
  for (size_t i = 0, n = Pixels(img) * 3; i < n; ++i) img.data[i] = uint8_t(255 - img.data[i]);
}

DSC_VECTOR_CLONES void AdjustSharpness(ImageU8 img, double factor, TransformScratch& s) {
  // _blurred_degenerate_image: the 3x3 kernel (1 1 1 / 1 5 1 / 1 1 1) / 13 in float32, rounded, on
  // the interior (borders keep the image), then _blend(img, degenerate, factor). The taps are summed
  // row by row, left to right, for each element; the loop runs across a row's elements.
  const int w = img.width, h = img.height;
  if (w <= 2 || h <= 2) return;
  const size_t bytes = Pixels(img) * 3;
  s.bytes.resize(bytes);
  uint8_t* deg = s.bytes.data();
  std::memcpy(deg, img.data, bytes);
  const float k1 = 1.f / 13.f, k5 = 5.f / 13.f;
  const size_t stride = size_t(w) * 3;
  for (int y = 1; y < h - 1; ++y) {
    const uint8_t* u = img.data + size_t(y - 1) * stride;
    const uint8_t* m = u + stride;
    const uint8_t* d = m + stride;
    uint8_t* o = deg + size_t(y) * stride;
    for (size_t e = 3; e < stride - 3; ++e) {
      float acc = k1 * float(u[e - 3]);
      acc += k1 * float(u[e]);
      acc += k1 * float(u[e + 3]);
      acc += k1 * float(m[e - 3]);
      acc += k5 * float(m[e]);
      acc += k1 * float(m[e + 3]);
      acc += k1 * float(d[e - 3]);
      acc += k1 * float(d[e]);
      acc += k1 * float(d[e + 3]);
      o[e] = RoundU8(acc);
    }
  }
  const BlendFactors f = MakeBlend(factor);
  for (size_t i = 0; i < bytes; ++i) img.data[i] = TruncU8(f.r * float(img.data[i]) + f.rc * float(deg[i]));
}

void GaussianBlur(ImageU8 img, int kx, int ky, double sigma_x, double sigma_y, TransformScratch& s) {
  if (kx <= 0 || ky <= 0 || kx % 2 == 0 || ky % 2 == 0) throw Error("gaussian_blur: kernel sizes must be odd and positive");
  if (!(sigma_x > 0) || !(sigma_y > 0)) throw Error("gaussian_blur: sigma must be positive");
  const int w = img.width, h = img.height;
  if (kx / 2 >= w || ky / 2 >= h) throw Error("gaussian_blur: kernel larger than the image (reflect padding needs pad < size)");
  std::vector<float> kxv(static_cast<size_t>(kx)), kyv(static_cast<size_t>(ky));
  GaussianKernel1d(kx, sigma_x, kxv.data());
  GaussianKernel1d(ky, sigma_y, kyv.data());
  // The 2-D kernel as torch.mm makes it (outer product in float32), applied as one 2-D convolution.
  std::vector<float> k2(size_t(kx) * size_t(ky));
  for (int j = 0; j < ky; ++j)
    for (int i = 0; i < kx; ++i) k2[size_t(j) * size_t(kx) + size_t(i)] = kyv[size_t(j)] * kxv[size_t(i)];
  const size_t bytes = Pixels(img) * 3;
  s.bytes.assign(img.data, img.data + bytes);
  const uint8_t* src = s.bytes.data();
  const int rx = kx / 2, ry = ky / 2;
  std::vector<int> xs(size_t(w + 2 * rx)), ys(size_t(h + 2 * ry));
  for (int i = 0; i < w + 2 * rx; ++i) xs[size_t(i)] = ReflectIndex(i - rx, w);
  for (int i = 0; i < h + 2 * ry; ++i) ys[size_t(i)] = ReflectIndex(i - ry, h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) {
        float acc = 0.f;
        for (int j = 0; j < ky; ++j) {
          const uint8_t* row = src + size_t(ys[size_t(y + j)]) * size_t(w) * 3;
          for (int i = 0; i < kx; ++i) acc += k2[size_t(j) * size_t(kx) + size_t(i)] * float(row[size_t(xs[size_t(x + i)]) * 3 + size_t(c)]);
        }
        img.data[(size_t(y) * size_t(w) + size_t(x)) * 3 + size_t(c)] = RoundU8(acc);
      }
}

void HorizontalFlip(ImageU8 img) {
  for (int y = 0; y < img.height; ++y) {
    uint8_t* r = img.data + size_t(y) * size_t(img.width) * 3;
    for (int a = 0, b = img.width - 1; a < b; ++a, --b)
      for (int c = 0; c < 3; ++c) std::swap(r[a * 3 + c], r[b * 3 + c]);
  }
}

void VerticalFlip(ImageU8 img) {
  const size_t stride = size_t(img.width) * 3;
  for (int a = 0, b = img.height - 1; a < b; ++a, --b)
    std::swap_ranges(img.data + size_t(a) * stride, img.data + size_t(a + 1) * stride, img.data + size_t(b) * stride);
}

void Erase(ImageU8 img, int top, int left, int h, int w, const uint8_t value[3]) {
  for (int y = std::max(0, top); y < std::min(img.height, top + h); ++y)
    for (int x = std::max(0, left); x < std::min(img.width, left + w); ++x)
      std::memcpy(img.data + (size_t(y) * size_t(img.width) + size_t(x)) * 3, value, 3);
}

void PadCrop(const ImageU8& src, int pad_l, int pad_t, int pad_r, int pad_b, PadMode mode, const uint8_t fill[3],
             int left, int top, uint8_t* dst, int out_w, int out_h) {
  const int w = src.width, h = src.height;
  if (mode == PadMode::kReflect && (pad_l >= w || pad_r >= w || pad_t >= h || pad_b >= h))
    throw Error("random_crop: reflect padding must be smaller than the image (" + std::to_string(w) + "x" + std::to_string(h) + ")");
  for (int y = 0; y < out_h; ++y) {
    const int sy = PadIndex(top + y - pad_t, h, int(mode));
    uint8_t* d = dst + size_t(y) * size_t(out_w) * 3;
    for (int x = 0; x < out_w; ++x) {
      const int sx = PadIndex(left + x - pad_l, w, int(mode));
      if (sx < 0 || sy < 0) std::memcpy(d + x * 3, fill, 3);
      else std::memcpy(d + x * 3, src.data + (size_t(sy) * size_t(w) + size_t(sx)) * 3, 3);
    }
  }
}

void InverseAffineMatrix(double cx, double cy, double angle, double tx, double ty, double scale, double shear_x,
                         double shear_y, double m[6]) {
  const double pi = 3.14159265358979323846;
  const double rot = angle * pi / 180, sx = shear_x * pi / 180, sy = shear_y * pi / 180;
  const double a = std::cos(rot - sy) / std::cos(sy);
  const double b = -std::cos(rot - sy) * std::tan(sx) / std::cos(sy) - std::sin(rot);
  const double c = std::sin(rot - sy) / std::cos(sy);
  const double d = -std::sin(rot - sy) * std::tan(sx) / std::cos(sy) + std::cos(rot);
  double r[6] = {d, -b, 0.0, -c, a, 0.0};
  for (double& v : r) v /= scale;
  r[2] += r[0] * (-cx - tx) + r[1] * (-cy - ty);
  r[5] += r[3] * (-cx - tx) + r[4] * (-cy - ty);
  r[2] += cx;
  r[5] += cy;
  std::copy(r, r + 6, m);
}

void AffineWarp(ImageU8 img, const double m[6], Interp interp, const float* fill, TransformScratch& s) {
  float g[6];
  AffineGridOf(m, img.width, img.height, g);
  AffineWarpGrid(img, g, interp, fill, s);
}

DSC_VECTOR_CLONES void AffineWarpGrid(ImageU8 img, const float g[6], Interp interp, const float* fill, TransformScratch& s) {
  const int w = img.width, h = img.height;
  const size_t bytes = Pixels(img) * 3;
  s.bytes.assign(img.data, img.data + bytes);
  const uint8_t* src = s.bytes.data();
  // _gen_affine_grid: base (x, y, 1) at pixel centres relative to the image centre, times theta^T
  // scaled by (0.5 w, 0.5 h) (kernels/transform_ops.h's AffineSource).
  const float fw = float(w), fh = float(h);
  s.floats.resize(size_t(w));
  float* xbs = s.floats.data();
  for (int x = 0; x < w; ++x) xbs[x] = AffineBase(w, x);
  const int bilinear = interp == Interp::kBilinear;
  for (int y = 0; y < h; ++y) {
    const float yb = AffineBase(h, y);
    for (int x = 0; x < w; ++x) {
      float ix, iy;
      AffineSource(g, xbs[x], yb, fw, fh, &ix, &iy);
      GridSampleAt(src, w, h, ix, iy, bilinear, fill, img.data + (size_t(y) * size_t(w) + size_t(x)) * 3);
    }
  }
}

void AffineGridOf(const double m[6], int w, int h, float g[6]) {
  const float hw = float(0.5 * w), hh = float(0.5 * h);
  g[0] = float(m[0]) / hw, g[1] = float(m[1]) / hw, g[2] = float(m[2]) / hw;
  g[3] = float(m[3]) / hh, g[4] = float(m[4]) / hh, g[5] = float(m[5]) / hh;
}

void PerspectiveGridOf(const float c[8], int w, int h, float g[8]) {
  const float hw = 0.5f * float(w), hh = 0.5f * float(h);
  g[0] = c[0] / hw, g[1] = c[1] / hw, g[2] = c[2] / hw, g[3] = c[3] / hh, g[4] = c[4] / hh, g[5] = c[5] / hh;
  g[6] = c[6], g[7] = c[7];
}

bool PerspectiveCoefficients(const int start[8], const int end[8], float c[8]) {
  // Rows as _get_perspective_coeffs builds them: for each corner, p1 = end, p2 = start,
  // [p1x, p1y, 1, 0, 0, 0, -p2x p1x, -p2x p1y] = p2x and [0, 0, 0, p1x, p1y, 1, -p2y p1x, -p2y p1y] = p2y.
  double a[8][9];
  for (int i = 0; i < 4; ++i) {
    const double x = end[2 * i], y = end[2 * i + 1], u = start[2 * i], v = start[2 * i + 1];
    const double r0[9] = {x, y, 1, 0, 0, 0, -u * x, -u * y, u}, r1[9] = {0, 0, 0, x, y, 1, -v * x, -v * y, v};
    std::copy(r0, r0 + 9, a[2 * i]);
    std::copy(r1, r1 + 9, a[2 * i + 1]);
  }
  for (int col = 0; col < 8; ++col) {  // Gaussian elimination with partial pivoting
    int piv = col;
    for (int r = col + 1; r < 8; ++r)
      if (std::fabs(a[r][col]) > std::fabs(a[piv][col])) piv = r;
    if (!(std::fabs(a[piv][col]) > 1e-12)) return false;
    if (piv != col) std::swap(a[piv], a[col]);
    for (int r = 0; r < 8; ++r) {
      if (r == col) continue;
      const double f = a[r][col] / a[col][col];
      for (int k = col; k < 9; ++k) a[r][k] -= f * a[col][k];
    }
  }
  for (int k = 0; k < 8; ++k) c[k] = float(a[k][8] / a[k][k]);
  return true;
}

void PerspectiveWarp(ImageU8 img, const float c[8], Interp interp, const float* fill, TransformScratch& s) {
  float g[8];
  PerspectiveGridOf(c, img.width, img.height, g);
  PerspectiveWarpGrid(img, g, interp, fill, s);
}

DSC_VECTOR_CLONES void PerspectiveWarpGrid(ImageU8 img, const float g[8], Interp interp, const float* fill, TransformScratch& s) {
  const int w = img.width, h = img.height;
  s.bytes.assign(img.data, img.data + Pixels(img) * 3);
  const uint8_t* src = s.bytes.data();
  // _perspective_grid: base (x, y, 1) at pixel centres (linspace(0.5, size - 0.5)); grid1 = base @
  // (theta1^T / (0.5 w, 0.5 h)), grid2 = base @ theta2^T = c6 x + c7 y + 1; grid = grid1 / grid2 - 1.
  const float fw = float(w), fh = float(h);
  s.floats.resize(size_t(w));
  float* xbs = s.floats.data();
  for (int x = 0; x < w; ++x) xbs[x] = PerspectiveBase(w, x);
  const int bilinear = interp == Interp::kBilinear;
  for (int y = 0; y < h; ++y) {
    const float yb = PerspectiveBase(h, y);
    for (int x = 0; x < w; ++x) {
      float ix, iy;
      PerspectiveSource(g, xbs[x], yb, fw, fh, &ix, &iy);
      GridSampleAt(src, w, h, ix, iy, bilinear, fill, img.data + (size_t(y) * size_t(w) + size_t(x)) * 3);
    }
  }
}

bool StepHasPlanes(int32_t kind) {
  switch (kind) {
    case kStepNone:
    case kStepPadCrop:
    case kStepFlipH:
    case kStepFlipV:
    case kStepGray:
    case kStepSolarize:
    case kStepPosterize:
    case kStepInvert:
    case kStepErase: return true;
    default: return false;
  }
}

void RunStepPlanes(PlanesU8 img, const TransformStep& st, TransformScratch& s) {
  const int w = img.width, h = img.height;
  const size_t n = size_t(w) * size_t(h);
  switch (st.kind) {
    case kStepNone: return;
    case kStepPadCrop: {
      // PadCrop on each plane as a one-channel image: each output column's source column (or -1 for
      // the fill) once, then row by row.
      const size_t at = (n + alignof(int) - 1) / alignof(int) * alignof(int);  // the buffer is new[]'s: aligned
      s.bytes.resize(at + sizeof(int) * size_t(w));
      int* xs = reinterpret_cast<int*>(s.bytes.data() + at);
      for (int x = 0; x < w; ++x) xs[x] = PadIndex(st.i[2] + x - st.i[0], w, st.mode);
      for (int c = 0; c < 3; ++c) {
        uint8_t* p = img.plane[c];
        uint8_t* out = s.bytes.data();
        const uint8_t fill = uint8_t(st.fill[c]);
        for (int y = 0; y < h; ++y) {
          const int sy = PadIndex(st.i[3] + y - st.i[1], h, st.mode);
          uint8_t* o = out + size_t(y) * size_t(w);
          if (sy < 0) {
            std::memset(o, fill, size_t(w));
            continue;
          }
          const uint8_t* row = p + size_t(sy) * size_t(w);
          for (int x = 0; x < w; ++x) o[x] = xs[x] < 0 ? fill : row[xs[x]];
        }
        std::memcpy(p, out, n);
      }
      return;
    }
    case kStepFlipH:
      for (int c = 0; c < 3; ++c)
        for (int y = 0; y < h; ++y) std::reverse(img.plane[c] + size_t(y) * size_t(w), img.plane[c] + size_t(y + 1) * size_t(w));
      return;
    case kStepFlipV:
      for (int c = 0; c < 3; ++c)
        for (int a = 0, b = h - 1; a < b; ++a, --b)
          std::swap_ranges(img.plane[c] + size_t(a) * size_t(w), img.plane[c] + size_t(a + 1) * size_t(w),
                           img.plane[c] + size_t(b) * size_t(w));
      return;
    case kStepGray:
      for (size_t i = 0; i < n; ++i)
        img.plane[0][i] = img.plane[1][i] = img.plane[2][i] = Gray(img.plane[0][i], img.plane[1][i], img.plane[2][i]);
      return;
    case kStepSolarize:
    case kStepPosterize:
    case kStepInvert: {
      uint8_t lut[256];
      for (int v = 0; v < 256; ++v)
        lut[v] = st.kind == kStepSolarize    ? SolarizeValue(uint8_t(v), float(st.a))
                 : st.kind == kStepPosterize ? PosterizeValue(uint8_t(v), st.i[0])
                                             : uint8_t(255 - v);
      for (int c = 0; c < 3; ++c)
        for (size_t i = 0; i < n; ++i) img.plane[c][i] = lut[img.plane[c][i]];
      return;
    }
    case kStepErase:
      for (int c = 0; c < 3; ++c)
        for (int y = std::max(0, st.i[0]); y < std::min(h, st.i[0] + st.i[2]); ++y)
          for (int x = std::max(0, st.i[1]); x < std::min(w, st.i[1] + st.i[3]); ++x)
            img.plane[c][size_t(y) * size_t(w) + size_t(x)] = uint8_t(st.fill[c]);
      return;
    default: throw Error("internal: transform step kind " + std::to_string(st.kind) + " on planes");
  }
}

void RunStep(ImageU8 img, const TransformStep& st, TransformScratch& s) {
  const Interp interp = st.mode ? Interp::kBilinear : Interp::kNearest;
  const float* fill = st.has_fill ? st.fill : nullptr;
  switch (st.kind) {
    case kStepNone: return;
    case kStepPadCrop: {
      const uint8_t f[3] = {uint8_t(st.fill[0]), uint8_t(st.fill[1]), uint8_t(st.fill[2])};
      s.bytes.resize(Pixels(img) * 3);
      // Right and bottom padding only bound the draw (done): the window stays inside.
      PadCrop(img, st.i[0], st.i[1], 0, 0, PadMode(st.mode), f, st.i[2], st.i[3], s.bytes.data(), img.width, img.height);
      std::memcpy(img.data, s.bytes.data(), Pixels(img) * 3);
      return;
    }
    case kStepFlipH: return HorizontalFlip(img);
    case kStepFlipV: return VerticalFlip(img);
    case kStepBrightness: return AdjustBrightness(img, st.a);
    case kStepContrast: return AdjustContrast(img, st.a);
    case kStepSaturation: return AdjustSaturation(img, st.a);
    case kStepHue: return AdjustHue(img, st.a);
    case kStepGray: return RgbToGrayscale(img);
    case kStepSolarize: return Solarize(img, st.a);
    case kStepPosterize: return Posterize(img, st.i[0]);
    case kStepAutocontrast: return Autocontrast(img);
    case kStepEqualize: return Equalize(img);
    case kStepInvert: return Invert(img);
    case kStepSharpness: return AdjustSharpness(img, st.a, s);
    case kStepBlur: return GaussianBlur(img, st.i[0], st.i[1], st.a, st.b, s);
    case kStepAffine: return AffineWarpGrid(img, st.g, interp, fill, s);
    case kStepPerspective: return PerspectiveWarpGrid(img, st.g, interp, fill, s);
    case kStepErase: {
      const uint8_t v[3] = {uint8_t(st.fill[0]), uint8_t(st.fill[1]), uint8_t(st.fill[2])};
      return Erase(img, st.i[0], st.i[1], st.i[2], st.i[3], v);
    }
    default: throw Error("internal: transform step kind " + std::to_string(st.kind));
  }
}

}  // namespace dsc::kernels
