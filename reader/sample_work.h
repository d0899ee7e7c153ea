// The per-sample work a loader's options ask for, set up once: normalisation tables and the output
// format its SampleProcessors share. The loader's threads and a remote worker (remote/) build their
// processors from it, so a sample comes out byte-identical wherever it is decoded.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/transforms.h"
#include "reader/loader.h"
#include "reader/sample_processor.h"

namespace dsc {

class SampleWork {
 public:
  // `o` as the loader normalised it; the output is width x height (the crop size, or the image size).
  // Crops keep JPEG entry points (LoaderOptions::jpeg_index_budget) in `seek` when given (a remote
  // worker's, shared by every spec of a file and bounded by the worker), else in their own cache.
  SampleWork(const LoaderOptions& o, uint32_t width, uint32_t height,
             std::shared_ptr<kernels::JpegSeekCache> seek = nullptr);
  SampleWork(const SampleWork&) = delete;
  SampleWork& operator=(const SampleWork&) = delete;

  // A processor for `ds` that must not outlive this object (it reads its tables). Throws OptionError
  // when `ds` has no image field of LoaderOptions::image's name.
  std::unique_ptr<SampleProcessor> NewProcessor(const Dataset& ds, bool stats, class Tracer* tracer = nullptr,
                                                uint32_t track = 0) const;
  size_t sample_bytes() const { return sample_bytes_; }  // one output image
  uint32_t width() const { return format_.width; }
  uint32_t height() const { return format_.height; }
  bool defers() const { return defer_; }  // its processors write the deferred form
  bool verify() const { return verify_; }  // LoaderOptions::verify: payload blocks are checked on first touch
  // Its processors can write samples as planes (SampleProcessor::Process's `form`): finished uint8 NHWC.
  bool writes_forms() const { return SampleProcessor::WritesForms(defer_, format_); }
  uint32_t channels() const { return format_.channels; }

 private:
  kernels::AugmentSpec augment_;
  kernels::TransformList transforms_;  // LoaderOptions::transforms, parsed once
  bool defer_ = false, verify_ = false;
  float table_[3 * 256];
  uint16_t half_[3 * 256];
  OutputFormat format_;
  std::shared_ptr<kernels::JpegSeekCache> seek_;  // format_.seek: shared by every processor
  std::string image_;  // LoaderOptions::image, resolved per file by NewProcessor
  size_t sample_bytes_ = 0;
};

}  // namespace dsc
