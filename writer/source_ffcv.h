// FFCV .beton files as a build source (docs/ffcv-format.md): what `dsc convert` reads.
#pragma once
#include <memory>
#include <string>

#include "writer/source.h"

namespace dsc::writer {

// Whether `path` is a regular file that starts as an FFCV file (format/ffcv.h IsFfcv).
bool IsFfcvFile(const std::string& path);
// One RGBImageField and up to two IntFields; any other field is refused, named (typed fields carry
// them). Throws dsc::Error naming the file, sample and field of any structural fault.
std::unique_ptr<Source> OpenFfcv(const std::string& path);

}  // namespace dsc::writer
