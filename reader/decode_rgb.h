// Decodes one stored sample to packed RGB, whatever its encoding. Used by `dsc export`, `dsc verify
// --decode` and tests; the loader's hot path decodes straight into batch slots instead.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/jpeg_codec.h"
#include "reader/dataset.h"

namespace dsc {

// Fills *rgb with height*width*3 bytes. Throws dsc::Error naming the file and sample on bad data.
void DecodeSampleRGB(const Dataset& ds, uint64_t i, kernels::JpegCodec* codec, std::vector<uint8_t>* scratch,
                     std::vector<uint8_t>* rgb);

}  // namespace dsc
