#include "reader/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace dsc {

bool HugePagesWanted() {
  static const bool wanted = [] {
    const char* e = std::getenv("DSC_NO_HUGEPAGES");
    return !(e && *e && std::strcmp(e, "0") != 0);
  }();
  return wanted;
}

void* AllocateHugePages(size_t bytes, size_t* capacity) {
  const size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (rounded < bytes || rounded == 0) return nullptr;
  void* p = std::aligned_alloc(kHugePageBytes, rounded);
  if (p && HugePagesWanted()) ::madvise(p, rounded, MADV_HUGEPAGE);
  if (capacity) *capacity = rounded;
  return p;
}

void* MapHugePages(size_t bytes, size_t* capacity) {
  const size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (rounded < bytes || rounded == 0 || rounded + kHugePageBytes < rounded) return nullptr;
  // mmap aligns to 4 KiB only: map a huge page more and cut the unaligned ends off.
  void* raw = ::mmap(nullptr, rounded + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePageBytes - 1) & ~(uintptr_t(kHugePageBytes) - 1);
  if (aligned > start) ::munmap(raw, aligned - start);
  if (const size_t tail = kHugePageBytes - (aligned - start)) ::munmap(reinterpret_cast<void*>(aligned + rounded), tail);
  void* p = reinterpret_cast<void*>(aligned);
  if (HugePagesWanted()) ::madvise(p, rounded, MADV_HUGEPAGE);
  if (capacity) *capacity = rounded;
  return p;
}

void UnmapHugePages(void* p, size_t capacity) {
  if (p) ::munmap(p, capacity);
}

}  // namespace dsc
