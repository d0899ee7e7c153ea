// For the GPU tests: the device's decode + augment against the host twin, batch by batch.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/batch_augment.h"
#include "reader/gpu.h"
#include "reader/gpu_stage.h"
#include "reader/loader.h"

namespace dsc::test {

// Loads `file` with the GPU decoder (`o` gives the preset and batch size; defer_augment, uint8 NHWC
// and pinned memory are set here) and checks every batch of epoch 1: what the device decodes and
// augments (float32 NCHW) equals the host twin's finish of the same batch byte for byte. Returns the
// payloads staged for the device. Needs a usable GPU (callers skip without one).
inline uint64_t ExpectDeviceEqualsHostTwin(const std::string& file, LoaderOptions o) {
  o.defer_augment = true;
  o.dtype = DType::kUint8;
  o.layout = Layout::kNHWC;
  o.decoder = LoaderOptions::Decoder::kGpu;
  gpu::UsePinnedMemory(o);
  Loader loader(file, o);
  gpu::AugmenterOptions ao;
  ao.staging_bytes = gpu::StagingBytesFor(loader);
  gpu::Augmenter aug(o.augment, loader.width(), loader.height(), o.batch_size, DType::kFloat32, Layout::kNCHW, ao);
  const auto twin = kernels::MakeDeferredAugment(o.augment, int(loader.width()), int(loader.height()),
                                                 kernels::kOutFloat32, kernels::kOutNCHW);
  uint64_t staged = 0;
  auto range = loader.epoch(1);
  for (auto it = range.begin(); it != range.end(); ++it) {
    const Batch& b = *it;
    for (uint32_t j = 0; j < b.size; ++j) staged += b.fallback[j] == 0;
    std::vector<uint8_t> images(static_cast<const uint8_t*>(b.images),
                                static_cast<const uint8_t*>(b.images) + b.image_bytes() * b.size);
    DecodeStagedOnHost(b, images.data(), file);
    std::vector<float> want(size_t(b.size) * 3 * b.height * b.width), got(want.size());
    kernels::AugmentBatchCpu(twin, images.data(), b.params, int(b.size), want.data());
    const gpu::DeviceBatch d = aug.ProcessFor(it.lease(), gpu::LegacyDefaultStream());
    gpu::CopyToHost(d, got.data());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0) << file << ": batch " << b.index;
    if (::testing::Test::HasFailure()) break;  // one batch named is enough
  }
  return staged;
}

// In a copy of GPU-staged batch `b`, fills the first staged image's entropy bytes with 0xFF 0xFF...
// (not a Huffman code) and expects the host twin to refuse it, naming `path` and that image's sample;
// the untouched batch still decodes.
// Each staged image in turn made corrupt: the error names its sample. With a crop, an image's output
// offset is not its sample's slot, and the error named the wrong sample (or 4294967295) for all but
// the first image.
// Fills staged image i's first entropy-coded unit with 0xFF 0xFF... (not a Huffman code), in place.
inline void CorruptStagedImage(uint8_t* staged, uint32_t i) {
  const kernels::TwinImage& im = kernels::TwinImages(staged)[i];
  const kernels::TwinUnit& u = reinterpret_cast<const kernels::TwinUnit*>(staged + kernels::TwinHeader(staged).units_at)[im.first_unit];
  ASSERT_GT(u.end, u.begin);
  std::memset(staged + im.data + u.begin, 0xFF, u.end - u.begin);
}

inline void ExpectCorruptStagedImageNamed(const Batch& b, const std::string& path) {
  ASSERT_NE(b.staged, nullptr);
  const uint32_t images = kernels::TwinHeader(b.staged).images;
  ASSERT_GT(images, 0u);
  std::vector<uint8_t> out(b.image_bytes() * b.size);
  for (uint32_t i = 0; i < images; ++i) {
    std::vector<uint8_t> staged(b.staged, b.staged + b.staged_bytes);
    CorruptStagedImage(staged.data(), i);
    if (::testing::Test::HasFatalFailure()) return;
    Batch bad = b;
    bad.staged = staged.data();
    // Independently of the staging's offsets: images are staged in batch order, one per sample the
    // workers left for the GPU (fallback 0).
    uint32_t sample = UINT32_MAX, k = 0;
    for (uint32_t j = 0; j < b.size; ++j)
      if (b.fallback[j] == 0 && k++ == i) sample = b.indices[j];
    ASSERT_NE(sample, UINT32_MAX);
    try {
      DecodeStagedOnHost(bad, out.data(), path);
      ADD_FAILURE() << "a corrupt staged payload decoded (image " << i << ")";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path + ": sample " + std::to_string(sample) + ": corrupt JPEG (GPU decoder)"),
                std::string::npos)
          << "image " << i << ": " << e.what();
    }
  }
  DecodeStagedOnHost(b, out.data(), path);
}

}  // namespace dsc::test
