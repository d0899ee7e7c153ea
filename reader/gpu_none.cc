// gpu.h in a build without the CUDA toolkit: nothing is usable, and the reason says so.
#include <cstdlib>

#include "format/error.h"
#include "reader/gpu.h"

namespace dsc::gpu {

namespace {
constexpr const char* kNoCuda = "dsc was built without the CUDA toolkit";
}

bool BuiltWithCuda() { return false; }

bool Available(std::string* why, int) {
  if (why) *why = kNoCuda;
  return false;
}

std::string Describe(int) { return kNoCuda; }
int ComputeCapability(int) { return 0; }
int DeviceCount() { return 0; }
void SetCurrentDevice(int) { throw Error(std::string("no usable GPU: ") + kNoCuda); }

void UsePinnedMemory(LoaderOptions& o, int) {
  o.allocate = [](size_t bytes) { return std::aligned_alloc(64, (bytes + 63) / 64 * 64); };
  o.release = [](void* p) { std::free(p); };
}

void Wait(const DeviceBatch&) {}
void* LegacyDefaultStream() { return nullptr; }
void CopyToHost(const DeviceBatch&, void*) { throw Error(std::string("no usable GPU: ") + kNoCuda); }

struct Augmenter::Impl {};

Augmenter::Augmenter(const kernels::AugmentSpec&, uint32_t, uint32_t, uint32_t, DType, Layout, const AugmenterOptions&) {
  throw Error(std::string("no usable GPU: ") + kNoCuda);
}
Augmenter::~Augmenter() = default;
DeviceBatch Augmenter::Process(BatchLease) { throw Error(std::string("no usable GPU: ") + kNoCuda); }
DeviceBatch Augmenter::ProcessFor(BatchLease, void*) { throw Error(std::string("no usable GPU: ") + kNoCuda); }
void Augmenter::Finish() { throw Error(std::string("no usable GPU: ") + kNoCuda); }
void Augmenter::Release(const DeviceBatch&, void*) { throw Error(std::string("no usable GPU: ") + kNoCuda); }
DeviceBatch Augmenter::Run(BatchLease, bool, void*) { throw Error(std::string("no usable GPU: ") + kNoCuda); }

}  // namespace dsc::gpu
