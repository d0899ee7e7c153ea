// The format's one checksum: xxHash XXH3_64bits, seed 0 (docs/format.md).
#pragma once
#include <cstddef>
#include <cstdint>

namespace dsc {

uint64_t Checksum(const void* data, size_t size);

}  // namespace dsc
