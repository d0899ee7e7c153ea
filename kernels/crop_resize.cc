#include "kernels/crop_resize.h"

#include <algorithm>
#include <cmath>

namespace dsc::kernels {

namespace {

// One axis of "crop, then resize": the crop [q0, q0 + qw) (Q16, buffer pixels); taps clipped to the
// pixels it touches.
ResampleSpan CropAxis(int64_t q0, int64_t qw, int buf_size, int out, bool mirror) {
  const float in0 = float(double(q0) / 65536), in1 = float(double(q0 + qw) / 65536);
  const int lo = std::max(0, int(std::floor(in0)));
  const int hi = std::min(buf_size, std::max(lo + 1, int(std::ceil(in1))));
  return MakeResampleSpan(ResampleFilter::kBilinear, lo, hi, in0, in1, out, 0, out, 0, mirror);
}

// One axis of "resize, then window": the image (size pixels, scaled by k / 8) resized to `resized`,
// outputs [o0, o0 + out); buffer pixel 0 is scaled image pixel `origin`.
ResampleSpan WindowAxis(int size, int k, int resized, int o0, int out, int origin, bool mirror) {
  const int scaled = (size * k + 7) / 8;  // libjpeg's scaled output size
  return MakeResampleSpan(ResampleFilter::kBilinear, 0, scaled, 0.0f, float(double(size) * k / 8), resized, o0, out,
                          origin, mirror);
}

}  // namespace

void CropResizeSpans(const AugmentSpec& s, int img_w, int img_h, const SampleParams& p, const DecodedRegion& region,
                     bool flip, ResampleSpan* h, ResampleSpan* v) {
  if (s.crop == CropMode::kCenter && s.resize > 0) {
    const ResizeWindow win = CenterWindow(s, img_w, img_h);
    *h = WindowAxis(img_w, region.scale_num, win.w, win.left, s.out_w, region.x, flip);
    *v = WindowAxis(img_h, region.scale_num, win.h, win.top, s.out_h, region.y, false);
    return;
  }
  *h = CropAxis(p.src_x, p.src_w, region.width, s.out_w, flip);
  *v = CropAxis(p.src_y, p.src_h, region.height, s.out_h, false);
}

void CropResizeAxes(const AugmentSpec& s, int img_w, int img_h, const SampleParams& p, const DecodedRegion& region,
                    bool flip, ResampleAxis* h, ResampleAxis* v) {
  ResampleSpan sh, sv;
  CropResizeSpans(s, img_w, img_h, p, region, flip, &sh, &sv);
  MakeResampleAxis(sh, h);
  MakeResampleAxis(sv, v);
}

void CropDecodeMinSize(const AugmentSpec& s, int img_w, int img_h, const CropRect& rect, int out_w, int out_h,
                       bool dct_scaling, int* min_w, int* min_h) {
  *min_w = out_w, *min_h = out_h;  // DCT-scale no further than the output needs
  if (s.crop == CropMode::kCenter && s.resize > 0) {  // the whole image at its resized size
    const ResizeWindow win = CenterWindow(s, img_w, img_h);
    *min_w = int((int64_t(win.w) * rect.w + img_w - 1) / img_w);
    *min_h = int((int64_t(win.h) * rect.h + img_h - 1) / img_h);
  }
  if (!dct_scaling) *min_w = rect.w, *min_h = rect.h;
}

}  // namespace dsc::kernels
