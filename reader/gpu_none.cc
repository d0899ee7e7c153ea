// gpu.h in a build without the CUDA toolkit: nothing is usable, and the reason says so.
#include <cstdlib>

#include "format/error.h"
#include "reader/gpu.h"

namespace dsc::gpu {

bool BuiltWithCuda() { return false; }

bool Available(std::string* why) {
  if (why) *why = "dsc was built without the CUDA toolkit";
  return false;
}

void* PinnedAllocate(size_t bytes) { return std::aligned_alloc(64, (bytes + 63) / 64 * 64); }
void PinnedRelease(void* p) { std::free(p); }

void Wait(const DeviceBatch&) {}

struct Augmenter::Impl {};

Augmenter::Augmenter(const kernels::AugmentSpec&, uint32_t, uint32_t, uint32_t, DType, Layout, int) : impl_(nullptr) {
  throw Error("no usable GPU: dsc was built without the CUDA toolkit");
}
Augmenter::~Augmenter() = default;
DeviceBatch Augmenter::Process(const Batch&) { throw Error("no usable GPU: dsc was built without the CUDA toolkit"); }

}  // namespace dsc::gpu
