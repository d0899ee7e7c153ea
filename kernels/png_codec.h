// PNG images and masks (libpng's classic API behind setjmp; errors come back as text).
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

// Decodes a mask (format 1.2's type 8) to `channels` (1 or 3) bytes per pixel, keeping values, not
// colours: a palette PNG gives its indices when channels is 1 (its colours when 3); gray stays gray;
// alpha is dropped; 16-bit keeps the high byte. An RGB PNG for 1 channel or a gray one for 3 is an error.
bool DecodePngMask(const uint8_t* data, size_t size, int channels, uint64_t max_pixels, std::vector<uint8_t>* out,
                   int* width, int* height, std::string* error);

// Encodes width x height pixels of `channels` (1 gray or 3 RGB) bytes, rows `stride` bytes apart, as an
// 8-bit non-interlaced PNG into *out. The same pixels always give the same bytes (fixed zlib level and
// filters, no time or text chunks).
bool EncodePng(const uint8_t* pixels, int width, int height, int channels, size_t stride, std::vector<uint8_t>* out,
               std::string* error);

}  // namespace dsc::kernels
