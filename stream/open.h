// The reader's entry to streaming (reader/file_source.cc calls it in builds with libcurl): a URL and
// the loader's cache options to a ByteSource.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "format/byte_source.h"

namespace dsc::stream {

// http:// and https:// as they are; s3://bucket/key through the S3 endpoint with Signature V4.
std::unique_ptr<format::ByteSource> OpenUrl(const std::string& url, const std::string& cache_dir, uint64_t cache_budget);

}  // namespace dsc::stream
