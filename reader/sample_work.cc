#include "reader/sample_work.h"

#include "kernels/jpeg_seek.h"

namespace dsc {

SampleWork::SampleWork(const LoaderOptions& o, uint32_t width, uint32_t height,
                       std::shared_ptr<kernels::JpegSeekCache> seek)
    : augment_(o.augment), transforms_(kernels::ParseTransforms(o.transforms)), defer_(o.defer_augment), verify_(o.verify),
      image_(o.image) {
  if (o.augment.crop != kernels::CropMode::kNone) {  // Loader::set_output_size may have changed it
    augment_.out_w = int(width);
    augment_.out_h = int(height);
  }
  kernels::MakeNormalizeTable(o.augment, table_);
  for (int i = 0; i < 3 * 256; ++i) half_[i] = kernels::FloatToHalf(table_[i]);
  format_ = {o.dtype, o.layout, width, height, table_, half_, o.fancy_upsampling, {1, 1, 1}, {0, 0, 0}, o.max_pixels,
             o.dct_scaling};
  format_.twin = o.decoder == LoaderOptions::Decoder::kGpu;
  if (o.augment.crop != kernels::CropMode::kNone && o.jpeg_index_budget > 0) {
    seek_ = seek ? std::move(seek) : std::make_shared<kernels::JpegSeekCache>(o.jpeg_index_budget);
    format_.seek = seek_.get();
  }
  // FFCV's decode (TJFLAG_FASTDCT) upsamples chroma with the fancy filter: the whole-image paths.
  format_.fast_idct = o.fast_idct && !format_.twin;
  format_.fancy_upsampling = format_.fancy_upsampling || format_.fast_idct;
  if (o.defer_augment) {  // the CPU stage writes plain pixels
    kernels::AugmentSpec plain;
    kernels::MakeNormalizeTable(plain, table_);
  }
  kernels::NormalizeCoefficients(o.augment, format_.scale, format_.bias);
  format_.channels = o.channels == 1 ? 1 : 3;
  sample_bytes_ = size_t(format_.channels) * width * height * DTypeSize(o.dtype);
}

std::unique_ptr<SampleProcessor> SampleWork::NewProcessor(const Dataset& ds, bool stats, Tracer* tracer,
                                                          uint32_t track) const {
  OutputFormat out = format_;
  out.image = ds.ImageField(image_);
  auto p = std::make_unique<SampleProcessor>(ds, augment_, out, stats, tracer, track, defer_);
  if (!transforms_.empty() && !defer_) p->set_transforms(&transforms_);  // deferred: Batch::steps
  return p;
}

}  // namespace dsc
