// PNG input for the writer (libpng's classic API behind setjmp; errors come back as text).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dsc::kernels {

bool IsPng(const uint8_t* data, size_t size);
// Decodes any PNG (gray, palette, 16-bit, alpha, interlaced) to 8-bit RGB the way PIL's
// convert("RGB") does: alpha and tRNS are dropped, not composited; 16-bit samples keep their high byte
// (PIL clamps 16-bit *gray* instead, which dsc does not copy); no gamma conversion. An image of more
// than `max_pixels` pixels is refused from its header, before any pixel memory is allocated.
// On false, *error says why.
bool DecodePngRGB(const uint8_t* data, size_t size, uint64_t max_pixels, std::vector<uint8_t>* rgb, int* width,
                  int* height, std::string* error);

}  // namespace dsc::kernels
