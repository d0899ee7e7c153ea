// Runs a fuzz target over every file in the directories (or files) given: the normal-compiler build
// of each target, used by ctest to replay the seed corpus and every past crash.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <vector>

#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  size_t runs = 0;
  for (int i = 1; i < argc; ++i) {
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(argv[i])) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(argv[i]))
        if (e.is_regular_file()) files.push_back(e.path());
    } else if (std::filesystem::exists(argv[i])) {
      files.push_back(argv[i]);
    }
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      // An exact-size heap copy, as libFuzzer passes it: a read one byte past the end is then outside
      // the allocation (a vector's spare capacity would hide it from ASan).
      std::unique_ptr<uint8_t[]> exact(new uint8_t[bytes.size()]);
      if (!bytes.empty()) std::memcpy(exact.get(), bytes.data(), bytes.size());
      LLVMFuzzerTestOneInput(exact.get(), bytes.size());
      ++runs;
    }
  }
  std::printf("replayed %zu inputs without a crash\n", runs);
  return 0;
}
