#include "kernels/crop_resize.h"

#include <algorithm>
#include <cmath>

namespace dsc::kernels {

namespace {

// One axis of "crop, then resize": the crop [q0, q0 + qw) (Q16, buffer pixels); taps clipped to the
// pixels it touches.
void CropAxis(int64_t q0, int64_t qw, int buf_size, int out, bool mirror, ResampleAxis* a) {
  const float in0 = float(double(q0) / 65536), in1 = float(double(q0 + qw) / 65536);
  const int lo = std::max(0, int(std::floor(in0)));
  const int hi = std::min(buf_size, std::max(lo + 1, int(std::ceil(in1))));
  MakeResampleWindow(ResampleFilter::kBilinear, lo, hi, in0, in1, out, 0, out, 0, mirror, a);
}

// One axis of "resize, then window": the image (size pixels, scaled by k / 8) resized to `resized`,
// outputs [o0, o0 + out); buffer pixel 0 is scaled image pixel `origin`.
void WindowAxis(int size, int k, int resized, int o0, int out, int origin, bool mirror, ResampleAxis* a) {
  const int scaled = (size * k + 7) / 8;  // libjpeg's scaled output size
  MakeResampleWindow(ResampleFilter::kBilinear, 0, scaled, 0.0f, float(double(size) * k / 8), resized, o0, out, origin,
                     mirror, a);
}

}  // namespace

void CropResizeAxes(const AugmentSpec& s, int img_w, int img_h, const SampleParams& p, const DecodedRegion& region,
                    bool flip, ResampleAxis* h, ResampleAxis* v) {
  if (s.crop == CropMode::kCenter && s.resize > 0) {
    const ResizeWindow win = CenterWindow(s, img_w, img_h);
    WindowAxis(img_w, region.scale_num, win.w, win.left, s.out_w, region.x, flip, h);
    WindowAxis(img_h, region.scale_num, win.h, win.top, s.out_h, region.y, false, v);
    return;
  }
  CropAxis(p.src_x, p.src_w, region.width, s.out_w, flip, h);
  CropAxis(p.src_y, p.src_h, region.height, s.out_h, false, v);
}

}  // namespace dsc::kernels
