// Masks at build time: each is checked against its image (same width and height, the field's channel
// count) and stored as runs, or as a PNG when runs would be bigger than the pixels (docs/format.md
// "Typed fields", type 8; a PNG given is then kept byte for byte). Fixed settings: the file never
// depends on the thread.
#pragma once
#include <cstdint>
#include <vector>

#include "writer/encoder.h"
#include "writer/source.h"

namespace dsc::writer {

// The stored bytes of each of item.masks, in order, for an image stored as `image`: each mask has its
// image's source size and takes the build's --center-crop and --max-resolution as the image did
// (GeometryOf), nearest-neighbour. Throws dsc::Error naming the sample (item.where), the field and,
// when given, the mask's file.
void StoreMasks(const SourceItem& item, const Encoded& image, const EncodeOptions& options,
                std::vector<std::vector<uint8_t>>* out);

}  // namespace dsc::writer
