// Generates CIFAR's own download layouts (binary and python versions, CIFAR-10 and CIFAR-100) in the
// build tree from the real CIFAR-10 pixels, so the writer's parsers are tested on real image data.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dsc::test {

struct CifarSet {
  std::vector<std::vector<uint8_t>> hwc;  // 32x32x3 interleaved pixels per image
  std::vector<int> fine;                  // CIFAR-10 label, or CIFAR-100 fine label
  std::vector<int> coarse;                // CIFAR-100 only
  size_t size() const { return hwc.size(); }
};

// `n` real CIFAR-10 images of `split`, classes interleaved (image k is class k % 10). With
// `hundred`, labels are spread over 100 fine / 20 coarse classes (fine = 10 * label + k / 10 % 10).
CifarSet LoadCifar(int n, const std::string& split, bool hundred = false);

// Each returns the download folder it wrote into `dir`. Train images are split into `batches` files.
std::string WriteCifar10Binary(const std::string& dir, const CifarSet& train, int batches, const CifarSet& test);
std::string WriteCifar100Binary(const std::string& dir, const CifarSet& train, const CifarSet& test);
std::string WriteCifar10PythonPy2(const std::string& dir, const CifarSet& train, int batches, const CifarSet& test);
std::string WriteCifar100PythonPy2(const std::string& dir, const CifarSet& train, const CifarSet& test);

// Runs Python 3 + numpy (tests/gen_cifar_py3.py) to write the python version with `protocol`.
// Returns "" when /usr/bin/python3 with numpy is unavailable.
std::string WriteCifarPythonPy3(const std::string& dir, const CifarSet& train, int batches, const CifarSet& test,
                                int protocol, bool hundred, bool bytes_keys);

// CIFAR's planar CHW record layout of an HWC image.
std::vector<uint8_t> ToPlanar(const std::vector<uint8_t>& hwc);

}  // namespace dsc::test
