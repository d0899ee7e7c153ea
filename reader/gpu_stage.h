// The loader's side of LoaderOptions::Decoder::kGpu, in two steps per batch, so that batch order,
// leases and determinism are those of the CPU decoder:
// 1. Each worker, per sample (SampleProcessor::Process): whether the GPU decoder takes the payload
//    (TwinStageWorker::Check). If so the sample is left undecoded (fallback 0); if not it is decoded
//    on the CPU into its slot as with defer_augment, and the reason is recorded.
// 2. The worker completing the batch, before the consumer may see it (TwinStageWorker::StageBatch):
//    the left samples, in batch order, are staged (kernels/jpeg_twin_batch.h) in the batch buffer
//    right after the images, each to decode into its own slot. What does not fit is decoded there.
// The consumer finishes the batch on the GPU (gpu::Augmenter) or on the host (DecodeStagedOnHost).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "reader/dataset.h"
#include "reader/loader.h"

namespace dsc {
namespace kernels {
struct TwinTables;
struct TwinFrame;
struct TwinCropInput;
class TwinBatchStager;
}  // namespace kernels

// A fallback reason's name (Batch::fallback, StageStats::twin_fallback): kernels::TwinReasonName, or
// "not a JPEG" for Batch::kNotJpeg.
const char* FallbackName(int reason);
// "progressive: 4, not a JPEG: 2": the non-zero fallback counts; "" when none.
std::string FallbackSummary(const StageStats& s);

// Per worker thread: the scratch both steps reuse (no allocation per sample).
class TwinStageWorker {
 public:
  // `fancy`: the GPU decoder upsamples chroma with libjpeg's fancy filter (LoaderOptions::fancy_upsampling).
  // `image`: the image field staged (OutputFormat::image).
  explicit TwinStageWorker(bool fancy = false, uint32_t image = 0);
  ~TwinStageWorker();
  TwinStageWorker(const TwinStageWorker&) = delete;
  TwinStageWorker& operator=(const TwinStageWorker&) = delete;

  // Step 1: 0 when the GPU decoder takes the payload (a supported JPEG of exactly width x height,
  // the index's size, so its output fills its slot and no more; with `crop`, one whose crop the twin
  // does: kernels/jpeg_twin_crop.h), else the reason to decode it here.
  // `sample`: the payload's index in the dataset, by which a payload with its own header (no shared
  // set) is remembered across epochs; kNoSample: parsed every time.
  static constexpr uint64_t kNoSample = ~uint64_t(0);
  uint8_t Check(const Dataset::Parts& parts, uint32_t width, uint32_t height,
                const kernels::TwinCropInput* crop = nullptr, uint64_t sample = kNoSample);

  // Step 2's source of each sample's crop (batch position j): fills *in and returns true, or false
  // when the loader has no crop transform.
  using CropSource = std::function<bool(uint32_t j, kernels::TwinCropInput* in)>;

  // Step 2: stages samples j < n with fallback[j] == 0 into buf[0, capacity); sample j decodes to
  // byte sample_bytes * j of the batch's images. Those that do not fit get fallback[j] =
  // kReasonTooLarge and are listed in left_for_cpu() (the caller decodes them). Returns the staged
  // bytes. Throws dsc::Error naming the sample when its payload cannot be read.
  size_t StageBatch(const Dataset& ds, const uint32_t* indices, uint8_t* fallback, uint32_t n, size_t sample_bytes,
                    uint8_t* buf, size_t capacity, uint32_t max_images, StageStats* st,
                    const CropSource& crop = nullptr);
  const std::vector<uint32_t>& left_for_cpu() const { return cpu_; }

 private:
  // The frames of the headers Check has parsed, by a shared set's address or a payload's sample
  // (payloads sharing one skip the header parse; photos have a header each, so this spans epochs).
  // Fixed size, direct-mapped.
  struct HeadCache;
  std::unique_ptr<HeadCache> heads_;
  std::vector<uint32_t> begin_, end_;
  std::unique_ptr<kernels::TwinBatchStager> stager_;
  size_t stager_units_ = 0;
  uint32_t stager_images_ = 0;
  format::ReadBuffer scratch_;
  std::vector<uint32_t> cpu_;
  bool fancy_ = false;
  uint32_t image_ = 0;  // the image field staged
};

// Bytes of a kGpu batch buffer's staging area for these options (LoaderOptions::gpu_staging_bytes).
size_t StagingBytes(const LoaderOptions& o, size_t sample_bytes);

// The dataset index of each staged image of batch b (staged image i decodes into sample j's slot).
std::vector<uint32_t> StagedSamples(const Batch& b);
// Why staged images failed to decode (`status`: one kernels::TwinReason per staged image, as the
// decoder's stages leave it; `samples` from StagedSamples), naming the samples (and `path` when not
// empty); "" when all decoded.
std::string StagedErrors(const std::vector<uint32_t>& samples, const int* status, const std::string& path);

// The host twin of the GPU decoder's stage (kernels::DecodeTwinBatchCpu): decodes batch b's staged
// images into `images`, which holds a copy of b's images (b.size x image bytes), exactly as the
// device does; then the batch equals a Decoder::kCpu deferred one. Throws dsc::Error naming the
// sample when a staged payload does not decode. `path` names the file in messages.
void DecodeStagedOnHost(const Batch& b, uint8_t* images, const std::string& path);

}  // namespace dsc
