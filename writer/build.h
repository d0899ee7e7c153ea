// `dsc build`: source -> payload encoding (all cores) -> packed file, written atomically.
// The output depends only on the source and the options, never on the thread count.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "writer/encoder.h"
#include "writer/source.h"

namespace dsc::writer {

struct BuildOptions {
  std::string format = "auto";     // see OpenSource
  std::string split = "train";
  EncodeOptions encode;
  std::string jpeg_tables = "shared";  // or "inline"
  uint64_t block_size = 4u << 20;
  int threads = 0;                 // 0 = all cores
  uint64_t max_file_size = kDefaultMaxFileSize;  // image files larger than this are refused
  bool skip_invalid = false;
  bool progress = false;           // draw a progress bar on stderr
  // Receives warnings and skipped-sample lines; stderr when unset.
  std::function<void(const std::string&)> log;
  // Part shard_index of shard_count (dsc build --shard I/N; 0 parts = the whole source, no part): the
  // source's samples [total * I / N, total * (I + 1) / N), recorded as "shard=I/N" in the build
  // options so that `dsc merge` (writer/merge.h) can join the parts into the file one build writes.
  uint32_t shard_index = 0, shard_count = 0;
  // WebDataset sources (--format wds, or a .tar file): the member extensions of the image (first
  // found, in this order) and of the label.
  std::string wds_image = "jpg,jpeg,png";
  std::string wds_label = "cls";
};

struct BuildReport {
  std::string format;
  uint64_t samples = 0;
  uint64_t skipped = 0;
  uint64_t file_size = 0;
  uint64_t payload_bytes = 0;
  uint64_t jpeg_tables = 0;
  std::map<std::string, uint64_t> encodings;  // encoding name -> sample count
  uint64_t restart_images = 0;     // JPEG payloads with restart markers
  uint64_t restart_whole_row = 0;  // ... whose interval is a whole MCU row
  double seconds = 0;
};

// Throws dsc::Error naming the file or sample at fault; the target is then left untouched.
BuildReport Build(const std::string& source, const std::string& out, const BuildOptions& options);

}  // namespace dsc::writer
