// The loader's crop transforms as Pillow resizes: the two resampler axes (kernels/resample.h) that
// turn a sample's decoded buffer into its output, for torchvision's semantics through PIL:
// - RandomResizedCrop and ratio CenterCrop: img.crop(rect).resize(out, BILINEAR): the taps stay inside
//   the crop. After a DCT-scaled decode the crop's edges are fractional (x * k / 8): the float box.
// - Resize(resize) + CenterCrop(out): img.resize(resized, BILINEAR) then the centred window: the
//   window's outputs of the whole-image resize, whose taps may reach outside the window.
// Without DCT scaling both equal PIL's own result exactly; a flip mirrors the horizontal axis.
#pragma once
#include "kernels/augment.h"
#include "kernels/jpeg_decoder.h"
#include "kernels/resample.h"

namespace dsc::kernels {

// `rebased`: MakeParams' params after RebaseParams for `region` (the decoded buffer: image scaled by
// region.scale_num / 8, its pixels from (region.x, region.y) on). img_w x img_h: the original image.
void CropResizeAxes(const AugmentSpec& s, int img_w, int img_h, const SampleParams& rebased,
                    const DecodedRegion& region, bool flip, ResampleAxis* h, ResampleAxis* v);
// The same axes as spans (their taps not yet computed: the GPU decoder stages these).
void CropResizeSpans(const AugmentSpec& s, int img_w, int img_h, const SampleParams& rebased,
                     const DecodedRegion& region, bool flip, ResampleSpan* h, ResampleSpan* v);

// The least size (*min_w x *min_h) the crop `rect` of an img_w x img_h image may be DCT-scaled down to
// for an out_w x out_h output (JpegDecoder::DecodeRegion's min_w / min_h): the loader's choice, which
// the GPU decoder follows to decode the same pixels.
void CropDecodeMinSize(const AugmentSpec& s, int img_w, int img_h, const CropRect& rect, int out_w, int out_h,
                       bool dct_scaling, int* min_w, int* min_h);

}  // namespace dsc::kernels
