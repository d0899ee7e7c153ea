// FFCV .beton files as a build source (docs/ffcv-format.md): what `dsc convert` reads.
#pragma once
#include <memory>
#include <string>

#include "format/byte_source.h"
#include "writer/build.h"
#include "writer/source.h"

namespace dsc::writer {

// Whether `path` is a regular file that starts as an FFCV file (format/ffcv.h IsFfcv).
bool IsFfcvFile(const std::string& path);
// Every built-in FFCV field type. Throws dsc::Error naming the file, sample and field of any
// structural fault, and the field of a type dsc cannot store (an array dtype or rank dsc lacks).
std::unique_ptr<Source> OpenFfcv(const std::string& path);
// The same, read through `bytes` (dsc convert of a URL: the reader's streaming source).
std::unique_ptr<Source> OpenFfcv(std::unique_ptr<format::ByteSource> bytes);

// Whether `src` (from OpenFfcv) has fields beyond an RGBImageField and up to two IntFields that fit
// int32: such a file is written with typed fields (BuildFfcvTyped), any other through Build's own
// path, byte for byte as before typed fields existed.
bool FfcvNeedsTypedFields(const Source& src);
// The typed conversion (format/ffcv.h PlanConversion, docs/ffcv-format.md "Converting"), written by
// dsc::Writer: atomic, the same bytes for any thread count. Values are checked as read (array sizes,
// JSON's NUL, UTF-8), and a bad one is an error naming the FFCV file, sample and field.
BuildReport BuildFfcvTyped(const Source& src, const std::string& out, const BuildOptions& options);

}  // namespace dsc::writer
