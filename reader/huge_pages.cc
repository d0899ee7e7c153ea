#include "reader/huge_pages.h"

#include <sys/mman.h>

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

}  // namespace dsc
