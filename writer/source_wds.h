// WebDataset shards written with typed fields: what `dsc build` does when their samples carry
// KEY.json (writer/source_wds.cc; OpenWebDataset in writer/source.h opens them).
#pragma once
#include <string>

#include "writer/build.h"
#include "writer/source.h"

namespace dsc::writer {

// Whether `src` (from OpenWebDataset) has .json members or further images (KEY.NAME.jpg/.jpeg/.png):
// then it is built by BuildWdsTyped, any other through Build's own path, byte for byte as before.
bool WdsNeedsTypedFields(const Source& src);
// Fields image, label (the .cls class), json (the .json member's bytes as text, checked for UTF-8)
// when the samples have one, and a further image (format 1.3) per NAME of KEY.NAME.jpg/.jpeg/.png
// members, in name order; written by dsc::Writer: atomic, the same bytes for any thread count,
// --shard as Build's.
BuildReport BuildWdsTyped(const Source& src, const std::string& out, const BuildOptions& options);

}  // namespace dsc::writer
