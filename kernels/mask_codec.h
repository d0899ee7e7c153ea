// A mask value (format 1.2, type 8) in either of its stored encodings: runs (format/mask_runs.h) or a
// PNG stream. The writer picks the encoding; every reader decodes both through here.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dsc::kernels {

// Decodes a stored mask to width x height x `channels` (1 or 3) bytes, values kept (palette indices,
// never colours). A mask of more than `max_pixels` pixels is refused from its header, before its pixel
// memory is allocated. On false, *error says why.
bool DecodeMask(const uint8_t* data, size_t size, int channels, uint64_t max_pixels, std::vector<uint8_t>* out,
                int* width, int* height, std::string* error);

// The bytes to store for width x height pixels of `channels` bytes (rows `stride` apart): runs, unless
// they would take more bytes than the pixels themselves (a noisy mask), then a PNG. Deterministic.
bool EncodeMask(const uint8_t* pixels, int width, int height, int channels, size_t stride, std::vector<uint8_t>* out,
                std::string* error);

}  // namespace dsc::kernels
