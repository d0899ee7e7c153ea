// A fingerprint of everything a loader delivered, to check that two runs agree byte for byte: any
// thread count, prefetch, mix of local threads and remote workers, faults, or the scalar code paths
// forced (kernels/cpu.h), so a SIMD difference between machines would show.
//
//   dsc::BatchDigest d;
//   for (const dsc::Batch& b : loader.epoch(e)) d.Add(b);
//   std::printf("epoch %llu digest %s\n", (unsigned long long)e, d.Hex().c_str());
//
// XXH3-128 over the batches in delivery order: for each batch its index and size, its geometry (dtype,
// layout, channels, height, width), its images (image_bytes() x size bytes), every label field, the
// dataset indices and the padding flags. Batch::params are hashed only for deferred batches
// (Batch::deferred): their images are un-augmented and the params carry the rest; otherwise the params
// only describe work the images already show. The epoch number is not hashed (a digest is per epoch).
// Arrays are hashed in host byte order (little-endian on every platform dsc builds for).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "reader/loader.h"

namespace dsc {

class BatchDigest {
 public:
  BatchDigest();
  ~BatchDigest();
  BatchDigest(const BatchDigest&) = delete;
  BatchDigest& operator=(const BatchDigest&) = delete;

  // Throws dsc::Error for a batch with size > 0 whose images, a label field, indices, padding or (when
  // deferred) params are missing.
  void Add(const Batch& b);
  std::string Hex() const;  // 32 lowercase hex digits (XXH128's canonical, big-endian form)
  uint64_t batches() const;  // batches added so far

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace dsc
