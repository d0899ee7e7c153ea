// Resource limits shared by every reader of untrusted images (writer, loader, export, verify).
#pragma once
#include <cstdint>

namespace dsc::kernels {

// The largest image (width x height) decoded without being asked to: PIL's decompression-bomb
// threshold (2 x Image.MAX_IMAGE_PIXELS), so dsc refuses what PIL refuses. `--max-pixels` overrides.
constexpr uint64_t kDefaultMaxPixels = 178956970;

}  // namespace dsc::kernels
