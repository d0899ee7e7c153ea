// The baseline dsc is measured against: what torchvision's ImageFolder + DataLoader do, in C++ and
// without Python. Each sample is read from its own file, decoded with TurboJPEG into a fresh buffer,
// augmented one transform at a time (each producing a new image), converted to a normalised float
// CHW tensor, and collated by copying into the batch. Workers build whole batches, as DataLoader's do.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dsc::bench {

struct NaiveOptions {
  int threads = 1;
  uint32_t batch_size = 512;
  bool flip = true;
  int translate = 2, cutout = 4;
  uint8_t fill[3] = {125, 123, 114};
  float mean[3] = {125.307f, 122.961f, 113.8575f}, std[3] = {51.5865f, 50.847f, 51.255f};
};

class NaiveLoader {
 public:
  NaiveLoader(const std::string& tree_root, const NaiveOptions& o);
  // Runs one epoch; returns the number of images delivered. `checksum` accumulates the batches' first
  // values so that the work cannot be optimised away.
  uint64_t RunEpoch(uint64_t epoch, double* checksum);
  size_t size() const { return files_.size(); }

 private:
  std::vector<float> MakeBatch(const std::vector<uint32_t>& order, size_t first, size_t count, uint64_t epoch) const;
  NaiveOptions o_;
  std::vector<std::string> files_;
  std::vector<int> labels_;
};

}  // namespace dsc::bench
