// `dsc verify --decode --decoder gpu-twin`: the GPU JPEG decoder's host twin (kernels/jpeg_twin.h)
// against libjpeg-turbo (tjDecompress2, TJPF_RGB, ACCURATEDCT, and FASTUPSAMPLE unless `fancy`), one
// sample at a time, so that dsc verify checks each sample while the block pass holds its block.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "reader/dataset.h"

namespace dsc::tools {

class TwinCheck {
 public:
  TwinCheck(std::string file, bool fancy);
  ~TwinCheck();
  TwinCheck(const TwinCheck&) = delete;
  TwinCheck& operator=(const TwinCheck&) = delete;

  // Checks sample i's first image (its JPEG, if it is one). A mismatch or a JPEG the twin finds
  // corrupt is kept as a line for Print (dsc verify reports samples only once the blocks are intact).
  void Check(const Dataset& ds, uint64_t i);
  // Those lines on stderr, then the counts, one line on stdout.
  void Print() const;
  // No mismatch (a JPEG the twin refuses as corrupt is reported, not failed: libjpeg-turbo judged it).
  bool ok() const { return mismatches_ == 0; }

 private:
  std::string file_;
  bool fancy_;
  void* tj_;
  std::vector<uint8_t> scratch_, whole_, ref_, twin_;
  size_t supported_ = 0, mismatches_ = 0, corrupt_ = 0, other_ = 0;
  std::map<std::string, size_t> unsupported_;
  std::vector<std::string> lines_;
};

}  // namespace dsc::tools
