// What the loader measures of itself: per-stage time (StageStats) and each remote worker's share
// (RemoteWorkerStats). Part of the loader's API: reader/loader.h includes it.
#pragma once
#include <cstdint>
#include <string>

namespace dsc {

// Per-stage time summed over worker threads (nanoseconds), for `dsc bench` and reader/bottleneck.h.
struct StageStats {
  uint64_t read_ns = 0, decode_ns = 0, augment_ns = 0, collate_ns = 0;
  uint64_t consumer_wait_ns = 0;  // time the consumer waited for a batch
  uint64_t samples = 0, payload_bytes = 0;
  uint64_t advised_bytes = 0;  // bytes the block readahead asked of storage (quasi_random)
  // Decoder::kGpu: samples staged for the GPU, and samples decoded on the CPU instead, per reason
  // (index: kernels::TwinReason, or Batch::kNotJpeg; names: reader/gpu_stage.h FallbackName).
  uint64_t twin_staged = 0;
  uint64_t twin_fallback[32] = {};
  // Decoder::kGpu: host time spent checking and staging the staged payloads (part of decode_ns; the
  // CPU decodes of fallbacks excluded): the loader's share of the GPU decode.
  uint64_t twin_stage_ns = 0;
  StageStats& operator+=(const StageStats& o) {
    read_ns += o.read_ns;
    decode_ns += o.decode_ns;
    augment_ns += o.augment_ns;
    collate_ns += o.collate_ns;
    consumer_wait_ns += o.consumer_wait_ns;
    samples += o.samples;
    payload_bytes += o.payload_bytes;
    advised_bytes += o.advised_bytes;
    twin_staged += o.twin_staged;
    twin_stage_ns += o.twin_stage_ns;
    for (int i = 0; i < 32; ++i) twin_fallback[i] += o.twin_fallback[i];
    return *this;
  }
};

// One worker's share, for dsc bench and logs.
struct RemoteWorkerStats {
  std::string address;
  bool up = false;             // connected now
  uint64_t samples = 0;        // delivered by it
  uint64_t requests = 0, failures = 0;  // failures: requests given to another executor
  uint64_t wire_bytes = 0;
};

}  // namespace dsc
