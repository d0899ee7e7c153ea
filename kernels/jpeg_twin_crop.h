// Crop transforms for the GPU JPEG decoder (host side): which restart intervals a sample's crop needs
// and how the resampler turns them into its output, chosen exactly as the CPU decoder path chooses
// (reader/sample_processor.cc: JpegDecoder::DecodeRegion, then kernels/crop_resize.h), so that the
// twin's pixels are the CPU decoder's bit for bit.
//
// The CPU path decodes a crop at full size (DCT scale 8/8) into a buffer that starts at the crop's
// left edge rounded down to an iMCU column (jpeg_crop_scanline) and its exact top row, then resizes
// with axes relative to that buffer. The twin entropy-decodes only the restart intervals covering
// that buffer (a smaller frame of whole intervals, as kernels/jpeg_crop.h assembles for libjpeg),
// and resamples from the same buffer origin with the same axes. A crop the CPU path decodes
// DCT-scaled is left to it (kReasonCropScaled), as are streams whose restart intervals do not tile
// MCU rows (kReasonCropIntervals).
#pragma once
#include "kernels/augment.h"
#include "kernels/jpeg_decoder.h"
#include "kernels/jpeg_twin.h"
#include "kernels/resample.h"

namespace dsc::kernels {

// The most taps per output index the twin's crop stage handles (a fixed array per GPU thread); more
// (a downscale by over ~31x) is kReasonTooLarge.
constexpr int kTwinMaxTaps = 64;

// One sample's crop as the loader draws it (SampleProcessor::TwinCropInputFor).
struct TwinCropInput {
  const AugmentSpec* spec = nullptr;  // crop mode and output size
  int img_w = 0, img_h = 0;
  CropRect rect;             // MakeParams' rectangle
  SampleParams params;       // MakeParams' parameters (relative to the whole image)
  int min_w = 0, min_h = 0;  // CropDecodeMinSize: the DCT scale the CPU path would pick
  bool fancy = false;        // fancy upsampling (LoaderOptions::fancy_upsampling): a margin is decoded
};

struct TwinCropPlan {
  DecodedRegion region;        // the CPU path's decoded buffer, in image pixels
  int col0 = 0, col1 = 0;      // restart-interval columns [col0, col1) of a row
  int row0 = 0, row1 = 0;      // MCU rows [row0, row1)
  int x0 = 0, y0 = 0;          // the intervals' top-left pixel in the image
  ResampleSpan h, v;           // the resize's axes, relative to the region
  int ksize_h = 0, ksize_v = 0;
};

// Plans the crop of a payload whose frame the twin parsed: 0 (kReasonNone), or the TwinReason for
// which the CPU decodes it.
int PlanTwinCrop(const TwinCropInput& in, const TwinFrame& f, TwinCropPlan* plan);

// The frame of the plan's intervals alone: what decoding just them looks like (its MCU m is MCU
// (row0 + m / w) * f.mcus_x + col0 * interval + m % w of f, with w its MCUs per row).
TwinFrame TwinCropFrame(const TwinFrame& f, const TwinCropPlan& plan);

}  // namespace dsc::kernels
