// FFCV's own files for the FFCV tests (tests/ffcv_test.cc, tests/ffcv_files_test.cc): unpacked from
// ../shared/data/ffcv-samples.tar.zst once per process, with FFCV's decoded arrays as raw files.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "format/error.h"
#include "tests/test_util.h"

namespace dsc::test {

inline const std::string kRef = std::string(DSC_SOURCE_DIR) + "/tests/ffcv/ffcv_ref.py";

// The two files FFCV's writer made, unpacked once per process, with the .npz arrays as raw files.
inline const std::string& Samples() {
  static const std::string dir = [] {
    const std::string d = ScratchDir("ffcv-samples");
    const std::string cmd = "zstd -dc " + std::string(DSC_FFCV_SAMPLES) + " | tar -x -C " + d + " && /usr/bin/python3 " + kRef +
                            " dump " + d + "/ffcv-samples/cifar-test-smart.npz " + d + "/cifar-ref && /usr/bin/python3 " + kRef +
                            " dump " + d + "/ffcv-samples/allfields.npz " + d + "/all-ref";
    return std::system(cmd.c_str()) == 0 ? d : std::string();
  }();
  return dir;
}

template <typename T>
inline std::vector<T> ReadArray(const std::string& path) {
  const std::vector<uint8_t> b = ReadFile(path);
  std::vector<T> v(b.size() / sizeof(T));
  std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
  return v;
}

inline std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace dsc::test
