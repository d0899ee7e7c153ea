// Helpers shared by the writer's tests (writer_test, writer_errors_test, writer_reference_test).
#pragma once
#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "kernels/jpeg_codec.h"
#include "reader/dataset.h"
#include "reader/decode_rgb.h"
#include "writer/build.h"

namespace dsc::test {

inline writer::BuildOptions Opts(const std::string& encoding = "default", int threads = 2) {
  writer::BuildOptions o;
  o.encode.encoding = encoding;
  o.threads = threads;
  o.log = [](const std::string&) {};
  return o;
}

inline std::vector<uint8_t> Pixels(const Dataset& ds, uint64_t i) {
  kernels::JpegCodec codec;
  std::vector<uint8_t> scratch, rgb;
  DecodeSampleRGB(ds, i, &codec, &scratch, &rgb);
  return rgb;
}

inline std::vector<uint8_t> PayloadBytes(const Dataset& ds, uint64_t i) {
  std::vector<uint8_t> scratch;
  Payload p = ds.ReadPayload(i, &scratch);
  return std::vector<uint8_t>(p.data, p.data + p.size);
}

// Sorted image files of a tree, in the order the writer must store them.
inline std::vector<std::pair<std::string, int>> TreeFiles(const std::string& root) {
  std::vector<std::string> classes;
  namespace fs = std::filesystem;
  for (const auto& c : fs::directory_iterator(root)) classes.push_back(c.path().filename().string());
  std::sort(classes.begin(), classes.end());
  std::vector<std::pair<std::string, int>> out;
  for (size_t c = 0; c < classes.size(); ++c) {
    std::vector<std::string> files;
    for (const auto& f : fs::directory_iterator(fs::path(root) / classes[c])) files.push_back(f.path().string());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) out.emplace_back(f, int(c));
  }
  return out;
}

inline bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace dsc::test
