// `dsc info` of an FFCV .beton file (docs/ffcv-format.md): text for the CLI, JSON for it and dsc.info.
#pragma once
#include <string>

#include "format/ffcv.h"

namespace dsc {

void PrintFfcvInfo(const format::ffcv::File& f);
std::string FfcvInfoJson(const format::ffcv::File& f);

}  // namespace dsc
