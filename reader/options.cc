// Loader option validation. Every option a caller can get wrong is checked once, when the loader is
// built, so that a bad value is an OptionError naming it instead of a crash, a write past a buffer or
// NaN pixels deep inside a worker thread.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "kernels/augment.h"
#include "kernels/limits.h"
#include "kernels/transforms.h"
#include "reader/executor.h"
#include "reader/loader.h"

namespace dsc {

namespace {

// Limits that keep a typo from turning into a multi-terabyte allocation or thousands of threads.
constexpr uint32_t kMaxBatchSize = 1u << 20;
constexpr uint32_t kMaxPrefetch = 64;
constexpr uint32_t kMaxLeases = 64;
constexpr int kMaxThreads = 1024;
constexpr uint32_t kMaxWorldSize = 1u << 20;  // order planning is O(world_size) per epoch

template <typename T>
std::string Str(T v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

[[noreturn]] void Bad(const std::string& option, const std::string& value, const std::string& why) {
  throw OptionError("invalid loader option " + option + " = " + value + ": " + why);
}

void Finite(const char* option, float v) {
  if (!std::isfinite(v)) Bad(option, Str(v), "must be a finite number");
}

// lo and hi a positive, finite, ordered range.
void Range(const char* lo_name, float lo, const char* hi_name, float hi) {
  Finite(lo_name, lo);
  Finite(hi_name, hi);
  if (!(lo > 0)) Bad(lo_name, Str(lo), "must be positive");
  if (!(hi >= lo)) Bad(hi_name, Str(hi), std::string("must be at least ") + lo_name + " (" + Str(lo) + ")");
}

}  // namespace

void ValidateOptions(const LoaderOptions& o, uint32_t width, uint32_t height) {
  if (o.batch_size == 0) Bad("batch_size", "0", "must be at least 1");
  if (o.batch_size > kMaxBatchSize) Bad("batch_size", Str(o.batch_size), "must be at most " + Str(kMaxBatchSize));
  if (o.prefetch > kMaxPrefetch) Bad("prefetch", Str(o.prefetch), "must be at most " + Str(kMaxPrefetch));
  if (o.max_leases > kMaxLeases) Bad("max_leases", Str(o.max_leases), "must be at most " + Str(kMaxLeases));
  if (o.world_size == 0 || o.world_size > kMaxWorldSize)
    Bad("world_size", Str(o.world_size), "must be 1 to " + Str(kMaxWorldSize));
  if (o.rank >= o.world_size) Bad("rank", Str(o.rank), "must be below world_size (" + Str(o.world_size) + ")");
  if (o.threads < 0 || o.threads > kMaxThreads)
    Bad("threads", Str(o.threads), "must be 0 (all cores) to " + Str(kMaxThreads));
  if (o.remote.local_threads > kMaxThreads)
    Bad("local_threads", Str(o.remote.local_threads), "must be at most " + Str(kMaxThreads));
  if (bool(o.allocate) != bool(o.release))
    Bad(o.allocate ? "allocate" : "release", "set", std::string("needs ") + (o.allocate ? "release" : "allocate") +
                                                   " too: buffers must be freed by the allocator that made them");
  if (o.wait_poll && o.wait_poll_ms == 0) Bad("wait_poll_ms", "0", "must be at least 1 when wait_poll is set");
  if (o.dtype == DType::kUint8 && o.layout != Layout::kNHWC) Bad("layout", "NCHW", "uint8 output must be NHWC");
  if (o.dtype == DType::kUint8 && o.augment.normalize && !o.defer_augment)
    Bad("augment.normalize", "true", "uint8 output is unnormalised (normalise on the GPU, or use defer_augment)");
  if (o.defer_augment && o.dtype != DType::kUint8) Bad("defer_augment", "true", "needs uint8 NHWC output");
  if (o.channels == 2) Bad("channels", "2", "is 0 (the images' own), 1 or 3");
  if (o.defer_augment && o.channels == 1) Bad("channels", "1", "is not deferred yet (the GPU path writes 3 channels); use channels=3");
  if (o.decoder == LoaderOptions::Decoder::kGpu) {
    if (!o.defer_augment) Bad("decoder", "gpu", "needs defer_augment (the GPU finishes the batch)");
    if (!o.remote.addresses.empty()) Bad("decoder", "gpu", "cannot be combined with remote workers");
    if (o.gpu_staging_bytes > (uint64_t(4) << 30)) Bad("gpu_staging_bytes", Str(o.gpu_staging_bytes), "must be at most 4 GiB");
    // The decode kernels give each staged image a row of the grid, whose y dimension CUDA caps.
    if (o.batch_size > 65535) Bad("batch_size", Str(o.batch_size), "must be at most 65535 with decoder gpu");
  }

  if (!o.transforms.empty()) {
    kernels::TransformList list;
    try {
      list = kernels::ParseTransforms(o.transforms);
    } catch (const OptionError&) {
      throw;
    } catch (const std::exception& e) {
      Bad("transforms", o.transforms, e.what());
    }
    if (o.defer_augment && !list.OnDevice())
      Bad("transforms", o.transforms,
          "a transform here has no device form (your own registered transforms, gaussian_blur with a kernel over " +
              std::to_string(kernels::kMaxBlurTaps) + "): without defer_augment the list runs on the CPU workers");
  }

  const kernels::AugmentSpec& a = o.augment;
  if (a.crop != kernels::CropMode::kNone) {
    if (a.out_w <= 0) Bad("augment.out_w", Str(a.out_w), "crop transforms need a positive output size");
    if (a.out_h <= 0) Bad("augment.out_h", Str(a.out_h), "crop transforms need a positive output size");
    if (uint64_t(a.out_w) * uint64_t(a.out_h) > kernels::kDefaultMaxPixels)
      Bad("augment.out_w x augment.out_h", Str(a.out_w) + "x" + Str(a.out_h),
          "more than " + Str(kernels::kDefaultMaxPixels) + " pixels");
  }
  if (a.crop == kernels::CropMode::kRandomResized) {
    Range("augment.scale_min", a.scale_min, "augment.scale_max", a.scale_max);
    Range("augment.ratio_min", a.ratio_min, "augment.ratio_max", a.ratio_max);
  }
  if (a.crop == kernels::CropMode::kCenter) {
    if (a.resize < 0) Bad("augment.resize", Str(a.resize), "must not be negative");
    if (a.resize > 0 && a.resize < std::max(a.out_w, a.out_h))
      Bad("augment.resize", Str(a.resize), "must be at least the output size (" + Str(std::max(a.out_w, a.out_h)) + ")");
    if (a.resize > 1 << 16) Bad("augment.resize", Str(a.resize), "must be at most 65536");
    Finite("augment.center_ratio", a.center_ratio);
    if (!(a.center_ratio > 0 && a.center_ratio <= 1)) Bad("augment.center_ratio", Str(a.center_ratio), "must be in (0, 1]");
  }
  if (a.translate < 0) Bad("augment.translate", Str(a.translate), "must not be negative");
  if (a.cutout < 0) Bad("augment.cutout", Str(a.cutout), "must not be negative");
  if (a.normalize) {
    const char* mean[3] = {"augment.mean[0]", "augment.mean[1]", "augment.mean[2]"};
    const char* std[3] = {"augment.std[0]", "augment.std[1]", "augment.std[2]"};
    for (int c = 0; c < 3; ++c) {
      Finite(mean[c], a.mean[c]);
      Finite(std[c], a.std[c]);
      if (!(a.std[c] > 0)) Bad(std[c], Str(a.std[c]), "must be positive");
    }
    // Every pixel value's normalised float must be finite: a tiny std (1e-40) made 1/std infinite
    // and a whole channel NaN.
    float table[3 * 256];
    kernels::MakeNormalizeTable(a, table);
    for (int c = 0; c < 3; ++c)
      for (int v = 0; v < 256; ++v)
        if (!std::isfinite(table[c * 256 + v]))
          Bad(std[c], Str(a.std[c]), "with mean " + Str(a.mean[c]) + " turns pixel value " + Str(v) +
                                         " into a non-finite float (" + Str(table[c * 256 + v]) + ")");
        // float16 holds at most 65504: beyond it the output was +-inf, silently.
        else if (o.dtype == DType::kFloat16 && std::fabs(table[c * 256 + v]) > 65504.0f)
          Bad(std[c], Str(a.std[c]), "with mean " + Str(a.mean[c]) + " turns pixel value " + Str(v) + " into " +
                                         Str(table[c * 256 + v]) + ", beyond float16's 65504 (dtype float16)");
  }
  // The output image's size, once the file is known: the shift and the square live inside it.
  if (width > 0 && height > 0) {
    const uint32_t side = std::min(width, height);
    if (uint32_t(a.translate) >= side)
      Bad("augment.translate", Str(a.translate), "must be smaller than the image side (" + Str(side) + ")");
    if (uint32_t(a.cutout) > side)
      Bad("augment.cutout", Str(a.cutout), "must be at most the image side (" + Str(side) + ")");
  }
}

// batch_size becomes the per-rank share of global_batch_size, which world_size must divide.
LoaderOptions WithRankBatch(LoaderOptions o) {
  if (o.world_size == 0) throw OptionError("world_size must be at least 1");
  if (o.global_batch_size) {
    if (o.global_batch_size % o.world_size)
      throw OptionError("global_batch_size " + std::to_string(o.global_batch_size) + " is not divisible by world_size " +
                  std::to_string(o.world_size));
    o.batch_size = o.global_batch_size / o.world_size;
    // Named as the user set it: the batch_size check below would name a value they never gave.
    if (o.batch_size > (1u << 20))
      throw OptionError("invalid loader option global_batch_size = " + std::to_string(o.global_batch_size) + ": " +
                        std::to_string(o.batch_size) + " per rank (world_size " + std::to_string(o.world_size) +
                        "), more than 1048576");
  }
  if (uint64_t(o.batch_size) * o.world_size > UINT32_MAX)
    throw OptionError("batch_size " + std::to_string(o.batch_size) + " x world_size " + std::to_string(o.world_size) + " is too large");
  o.global_batch_size = o.batch_size * o.world_size;
  return o;
}

void CheckBufferMemory(const LoaderOptions& o, uint64_t buffer_bytes) {
  // Each buffer also holds per-sample arrays (augmentation parameters, labels, indices, flags): with
  // small images they outweigh the pixels (1-pixel crops at batch 2^20: 4.4 GB counted as 390 MB).
  buffer_bytes += uint64_t(o.batch_size) * kBatchSampleOverhead;
  const double buffers = double(o.prefetch + 1 + o.max_leases) * double(buffer_bytes);
  const double ram = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGESIZE));
  if (ram > 0 && buffers > ram)
    Bad("batch_size", Str(o.batch_size),
        "the loader's batch buffers ((prefetch + 1 + max_leases) x " + Str(buffer_bytes) + " bytes) would take " +
            Str(uint64_t(buffers / (1 << 20))) + " MiB, more than this machine's " + Str(uint64_t(ram / (1 << 20))) +
            " MiB of memory");
}

}  // namespace dsc

namespace dsc {

std::vector<std::string> SplitAddresses(const std::string& list) {
  std::vector<std::string> out;
  for (size_t at = 0; at <= list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    if (comma > at) out.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

}  // namespace dsc
