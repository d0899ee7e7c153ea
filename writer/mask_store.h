// Masks at build time: each is checked against its image (same width and height, the field's channel
// count) and stored as a PNG (docs/format.md "Typed fields", type 8). A PNG given is kept byte for byte
// once it decodes; pixels are encoded with fixed settings, so the file never depends on the thread.
#pragma once
#include <cstdint>
#include <vector>

#include "writer/encoder.h"
#include "writer/source.h"

namespace dsc::writer {

// The stored bytes of each of item.masks, in order, for an image stored as `image` (its width and
// height are the source's: a build that resizes or crops refuses masks up front). Throws dsc::Error
// naming the sample (item.where), the field and, when given, the mask's file.
void StoreMasks(const SourceItem& item, const Encoded& image, uint64_t max_pixels, std::vector<std::vector<uint8_t>>* out);

}  // namespace dsc::writer
