// Large buffers that are written afresh again and again (a loader's batches, a worker's replies):
// in 2 MiB pages where the kernel gives them on request (THP "madvise" mode, Debian's default). Each
// image writes a fresh span of hundreds of KB; in 4 KiB pages that is a TLB miss every 4 KiB, which
// dominates the cost of writing float32 output.
#pragma once
#include <cstddef>

namespace dsc {

inline constexpr size_t kHugePageBytes = size_t(2) << 20;

// False when the environment has DSC_NO_HUGEPAGES set (not "0"): 4 KiB pages everywhere, to measure
// the difference or where the kernel's compaction stalls. Read once.
bool HugePagesWanted();

// `bytes` rounded up to whole 2 MiB pages, 2 MiB aligned, and advised MADV_HUGEPAGE when
// HugePagesWanted() (a hint: where it fails nothing changes). *capacity gets the rounded size.
// nullptr when the memory cannot be had. Freed with std::free.
void* AllocateHugePages(size_t bytes, size_t* capacity);

// The same, mapped from the kernel and given back with UnmapHugePages(p, *capacity): for buffers that
// must return to the kernel when freed (a heap keeps freed memory resident, and glibc's malloc_trim
// does not shrink the heaps of threads' arenas).
void* MapHugePages(size_t bytes, size_t* capacity);
void UnmapHugePages(void* p, size_t capacity);

}  // namespace dsc
