// PNG input for the writer (libpng's simplified API; errors come back as text, never longjmp out).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dsc::kernels {

bool IsPng(const uint8_t* data, size_t size);
// Decodes any PNG (gray, palette, 16-bit, alpha, interlaced) to 8-bit RGB; alpha is dropped, not
// composited. On false, *error says why.
bool DecodePngRGB(const uint8_t* data, size_t size, std::vector<uint8_t>* rgb, int* width, int* height,
                  std::string* error);

}  // namespace dsc::kernels
