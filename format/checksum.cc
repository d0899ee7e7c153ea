#include "format/checksum.h"

#include <xxhash.h>

namespace dsc {

uint64_t Checksum(const void* data, size_t size) { return XXH3_64bits(data, size); }

}  // namespace dsc
