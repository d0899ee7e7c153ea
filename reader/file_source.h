// Storage backends for format::ByteSource: mmap (the default: payloads are read in place) and pread
// (for network filesystems, where mmap page faults are slow or unreliable).
#pragma once
#include <memory>
#include <string>

#include "format/byte_source.h"

namespace dsc {

// Both throw dsc::Error naming the path when the file cannot be opened. Builds with DSC_EXACT_HEAP_SOURCE
// (sanitizer and fuzz builds) make OpenMmapSource return an exact-size heap copy of the file instead.
std::unique_ptr<format::ByteSource> OpenMmapSource(const std::string& path);
std::unique_ptr<format::ByteSource> OpenPreadSource(const std::string& path);

struct DatasetOptions;
// http://, https:// or s3://: a path read by streaming (docs/streaming.md).
bool IsUrl(const std::string& path);
// A URL through the streaming cache (a build without libcurl refuses it, saying so); otherwise the
// file by mmap, or pread when options.use_pread.
std::unique_ptr<format::ByteSource> OpenSource(const std::string& path, const DatasetOptions& options);

}  // namespace dsc
