// `dsc build IMAGES OUT --masks MASKS`: segmentation pairs, as VOC and ADE20K ship them. Each image
// file in IMAGES (JPEG or PNG, the folder itself, not below it) pairs with MASKS/<its stem>.png; the
// file holds fields `image` and `mask` (1 channel, lossless, palette indices kept), in file-name order.
// An image without its mask, or a mask without its image, is an error naming it (--skip-invalid
// leaves such files out and lists each one); nothing is dropped silently.
#pragma once
#include <string>

#include "writer/build.h"

namespace dsc::writer {

BuildReport BuildSegmentation(const std::string& images_dir, const std::string& out, const BuildOptions& options);

}  // namespace dsc::writer
