// What lets another trainer (examples/train_cifar.py on `import dsc`) check that it reproduces a
// dsc train run: the initial weights, and per step a digest of the batch and the loss.
#pragma once
#include <cstdio>
#include <memory>
#include <string>

#include "reader/loader.h"
#include "tools/train/resnet9.h"

namespace dsc::train {

// Writes every parameter and buffer as a line "NAME ELEMENT_SIZE COUNT\n" followed by its raw
// little-endian bytes (contiguous, CPU), in named_parameters() then named_buffers() order.
void SaveWeights(ResNet9& model, const std::string& path);

// One line per optimiser step: "EPOCH BATCH IMAGES_DIGEST LABELS_DIGEST LOSS", the digests being
// dsc::Checksum (XXH3-64) of the batch's image bytes and of its first label field, in hex.
class StepLog {
 public:
  explicit StepLog(const std::string& path);  // "" = off
  void Add(const Batch& b, double loss);
  void Close();  // throws dsc::Error when a write failed

 private:
  std::string path_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f_{nullptr, &std::fclose};
};

}  // namespace dsc::train
