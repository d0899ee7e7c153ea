#include "format/checksum.h"

#include "format/checksum_impl.h"

namespace dsc {

namespace {

const checksum_impl::Functions& Impl() {
  static const checksum_impl::Functions& f = [] () -> const checksum_impl::Functions& {
#if defined(__x86_64__)
    if (const checksum_impl::Functions* a = checksum_impl::Avx2(); a && __builtin_cpu_supports("avx2")) return *a;
#endif
    return checksum_impl::Baseline();
  }();
  return f;
}

}  // namespace

uint64_t Checksum(const void* data, size_t size) { return Impl().hash(data, size); }

ChecksumStream::ChecksumStream() : state_(Impl().create()) { Impl().reset(state_); }
ChecksumStream::~ChecksumStream() { Impl().destroy(state_); }
void ChecksumStream::Reset() { Impl().reset(state_); }
void ChecksumStream::Update(const void* data, size_t size) { Impl().update(state_, data, size); }
uint64_t ChecksumStream::Digest() const { return Impl().digest(state_); }

}  // namespace dsc
