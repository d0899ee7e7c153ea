#include "reader/gpu_stage.h"

#include <algorithm>
#include <cstring>

#include "format/error.h"
#include "format/layout.h"
#include "kernels/jpeg_twin.h"
#include "kernels/jpeg_twin_batch.h"
#include "reader/gpu.h"

namespace dsc {

static_assert(kernels::kTwinReasonCount <= Batch::kNotJpeg, "fallback reasons share one byte with kNotJpeg");
static_assert(Batch::kNotJpeg < sizeof(StageStats::twin_fallback) / sizeof(uint64_t), "a count per reason");

const char* FallbackName(int reason) {
  return reason == Batch::kNotJpeg ? "not a JPEG" : kernels::TwinReasonName(reason);
}

std::string FallbackSummary(const StageStats& s) {
  std::string out;
  for (int r = 1; r <= Batch::kNotJpeg; ++r)
    if (s.twin_fallback[r]) out += (out.empty() ? "" : ", ") + std::string(FallbackName(r)) + ": " + std::to_string(s.twin_fallback[r]);
  return out;
}

struct TwinStageWorker::HeadCache {
  // 1,024 entries of ~100 bytes: every photo's own table set of a 1,000-photo file stays parsed
  // across epochs (a header parse is ~5% of a photo's check + stage); a collision only costs a parse.
  static constexpr size_t kEntries = 1024;
  static_assert(kEntries == size_t(1) << 10, "At() takes the top 10 bits");
  // A shared table set (sample 0): its bytes' address and size. A payload holding its own header
  // (sample = index + 1): its body's address and size, and where its scan starts in the body.
  struct Entry {
    const uint8_t* head = nullptr;
    size_t size = 0;
    uint64_t sample = 0;
    size_t start = 0;
    kernels::TwinFrame frame;
  };
  std::vector<Entry> entries = std::vector<Entry>(kEntries);
  Entry& At(uint64_t key) {  // a set's address / 8, or a sample
    const uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return entries[size_t(h >> 54)];  // the top 10 bits
  }
};

TwinStageWorker::TwinStageWorker(bool fancy, uint32_t image) : heads_(std::make_unique<HeadCache>()), fancy_(fancy), image_(image) {}
TwinStageWorker::~TwinStageWorker() = default;

uint8_t TwinStageWorker::Check(const Dataset::Parts& parts, uint32_t width, uint32_t height,
                               const kernels::TwinCropInput* crop, uint64_t sample) {
  if (format::Encoding(parts.entry.encoding) != format::Encoding::kJpeg) return Batch::kNotJpeg;
  const size_t most = parts.body.size / 2 + 2;  // as the stager bounds a scan's intervals
  if (begin_.size() < most) begin_.resize(most), end_.resize(most);
  kernels::TwinFrame frame;
  kernels::TwinScan scan;
  scan.unit_begin = begin_.data();
  scan.unit_end = end_.data();
  // A crop's intervals are found (and checked) when it is staged: the header suffices here, read alike
  // by a fresh worker and one that parsed it before (so the route a payload takes does not depend on
  // which thread checked it).
  if (crop) scan.header_only = true;
  kernels::TwinParseResult r;
  // A shared set by its address (it lives as long as the dataset); a payload with its own header by
  // its sample (its bytes may be read into scratch, at an address others share) and its bytes' place.
  const bool own = !parts.head.size && sample != kNoSample;
  HeadCache::Entry* cached = parts.head.size ? &heads_->At(uint64_t(reinterpret_cast<uintptr_t>(parts.head.data)) >> 3)
                             : own           ? &heads_->At(sample)
                                             : nullptr;
  const uint8_t* key = own ? parts.body.data : parts.head.data;
  const size_t key_size = own ? parts.body.size : parts.head.size;
  const uint64_t key_sample = own ? sample + 1 : 0;
  if (cached && cached->head == key && cached->size == key_size && cached->sample == key_sample) {
    // Parsed before (as the stager does a shared set within a batch): scan the body only.
    frame = cached->frame;
    r = kernels::ScanTwinEntropy(frame, parts.body.data, parts.body.size, cached->start, parts.head.size, &scan);
  } else {
    r = kernels::ParseTwin(parts.head.data, parts.head.size, parts.body.data, parts.body.size, &frame, nullptr,
                           &scan, uint32_t(most));
    // Kept only when the scan lies in the body (after the whole shared head, or inside its own).
    const bool in_body = own ? scan.data >= parts.body.data && scan.data < parts.body.data + parts.body.size
                             : scan.data == parts.body.data;
    if (cached && r.status == kernels::kTwinOk && in_body) {
      cached->head = key, cached->size = key_size, cached->sample = key_sample;
      cached->start = size_t(scan.data - parts.body.data);
      cached->frame = frame;
    }
  }
  if (r.status != kernels::kTwinOk) return uint8_t(r.reason ? r.reason : kernels::kReasonBadMarker);
  // Another size or channel count than the index's: the CPU decoder reports the disagreement.
  if (frame.width != width || frame.height != height || frame.ncomp != parts.entry.channels)
    return kernels::kReasonBadMarker;
  if (crop) {
    kernels::TwinCropPlan plan;
    return uint8_t(kernels::PlanTwinCrop(*crop, frame, &plan));
  }
  return 0;
}

size_t TwinStageWorker::StageBatch(const Dataset& ds, const uint32_t* indices, uint8_t* fallback, uint32_t n,
                                   size_t sample_bytes, uint8_t* buf, size_t capacity, uint32_t max_images,
                                   StageStats* st, const CropSource& crop) {
  // A bound on the decode units (restart intervals) per batch, which the stager reserves: an image
  // staged with more is decoded on the CPU (too large).
  const size_t units = std::min<size_t>(capacity / 64, UINT32_MAX);
  if (!stager_ || stager_units_ != units || stager_images_ != max_images)
    stager_ = std::make_unique<kernels::TwinBatchStager>(buf, capacity, max_images, uint32_t(units));
  stager_units_ = units;
  stager_images_ = max_images;
  stager_->Reset(buf, capacity);
  stager_->set_fancy(fancy_);
  cpu_.clear();
  kernels::TwinCropInput in;
  for (uint32_t j = 0; j < n; ++j) {
    if (fallback[j]) continue;
    // Step 1 read this sample moments ago (its pages are in): no second touch.
    const Dataset::Parts p = ds.ReadPayloadParts(indices[j], &scratch_, /*touch=*/false, image_);
    const bool cropped = crop && crop(j, &in);
    const kernels::TwinParseResult r = stager_->Add(p.head.data, p.head.size, p.body.data, p.body.size,
                                                    uint64_t(sample_bytes) * j, cropped ? &in : nullptr);
    if (r.status == kernels::kTwinOk) {
      ++st->twin_staged;
      continue;
    }
    fallback[j] = uint8_t(r.reason ? r.reason : kernels::kReasonTooLarge);
    ++st->twin_fallback[fallback[j]];
    cpu_.push_back(j);
  }
  if (!stager_->Finish()) throw Error("staging a batch for the GPU decoder: the arrays do not fit (a bug)");
  return stager_->bytes_used();
}

size_t StagingBytes(const LoaderOptions& o, size_t sample_bytes) {
  if (o.decoder != LoaderOptions::Decoder::kGpu) return 0;
  if (o.gpu_staging_bytes) return size_t(o.gpu_staging_bytes);
  return size_t(o.batch_size) * std::max<size_t>(sample_bytes, 4096) + (size_t(1) << 20);
}

std::vector<uint32_t> StagedSamples(const Batch& b) {
  std::vector<uint32_t> out;
  if (!b.staged) return out;
  const auto& h = kernels::TwinHeader(b.staged);
  const kernels::TwinImage* im = kernels::TwinImages(b.staged);
  const size_t sample_bytes = b.image_bytes();
  for (uint32_t i = 0; i < h.images; ++i) {
    // A cropped image decodes into scratch (TwinImage::rgb) and its resize writes the sample's slot.
    const uint64_t slot = im[i].crop == kernels::kTwinNoCrop ? im[i].rgb : kernels::TwinCrops(b.staged)[im[i].crop].out;
    const size_t j = size_t(slot / sample_bytes);
    out.push_back(j < b.size ? b.indices[j] : UINT32_MAX);
  }
  return out;
}

std::string StagedErrors(const std::vector<uint32_t>& samples, const int* status, const std::string& path) {
  std::string out;
  for (size_t i = 0; i < samples.size(); ++i) {
    if (!status[i]) continue;
    if (!out.empty()) out += "; ";
    out += (path.empty() ? "" : path + ": ") + "sample " + std::to_string(samples[i]) +
           ": corrupt JPEG (GPU decoder): " + kernels::TwinReasonName(status[i]);
  }
  return out;
}

void DecodeStagedOnHost(const Batch& b, uint8_t* images, const std::string& path) {
  if (!b.staged) return;
  const auto& h = kernels::TwinHeader(b.staged);
  if (h.rgb_bytes > b.image_bytes() * b.size) throw Error("DecodeStagedOnHost: staged images outside the batch");
  std::vector<int16_t> coef(h.total_blocks * 64);
  std::vector<uint8_t> planes(h.total_blocks * 64), decoded(h.decoded_bytes);
  std::vector<int32_t> taps(h.tap_ints);
  std::vector<int> status(h.images);
  kernels::DecodeTwinBatchCpu(b.staged, coef.data(), planes.data(), images, status.data(), decoded.data(), taps.data());
  const std::string err = StagedErrors(StagedSamples(b), status.data(), path);
  if (!err.empty()) throw Error(err);
}

}  // namespace dsc

namespace dsc::gpu {
// Declared in reader/gpu.h; plain host code, the same with or without CUDA.
uint64_t StagingBytesFor(const Loader& loader) {
  return StagingBytes(loader.options(), size_t(loader.width()) * loader.height() * 3);
}
}  // namespace dsc::gpu
