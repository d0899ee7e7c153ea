// `dsc info` of an FFCV .beton file (docs/ffcv-format.md).
#pragma once
#include <string>

#include "format/ffcv.h"

namespace dsc::tools {

void PrintFfcvInfo(const format::ffcv::File& f);
std::string FfcvInfoJson(const format::ffcv::File& f);

}  // namespace dsc::tools
