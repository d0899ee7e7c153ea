// `dsc build`: source -> payload encoding (all cores) -> packed file, written atomically.
// The output depends only on the source and the options, never on the thread count.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "format/byte_source.h"
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
  // Part shard_index of shard_count (0: the whole source): samples [index * n / count, (index + 1) * n /
  // count) of the source's n, in source order. Parts joined by Merge (writer/merge.h) give the file a
  // one-machine build writes, byte for byte.
  uint32_t shard_index = 0, shard_count = 0;
  std::string images_dir;  // COCO sources: the folder of the instances file's images (--images)
  std::string coco_masks;  // COCO sources: "" (none), "instance" (annotation k is k + 1) or "semantic" (category ids)
  std::string masks_dir;   // segmentation pairs: the folder of PNG masks matched to the images by stem (--masks)
  bool progress = false;           // draw a progress bar on stderr
  // Set: the source is an FFCV file read through the ByteSource this returns for the source's path
  // (dsc convert of a URL passes the reader's streaming source; the writer never opens URLs itself).
  std::function<std::unique_ptr<format::ByteSource>(const std::string&)> ffcv_bytes;
  // Receives warnings and skipped-sample lines; stderr when unset.
  std::function<void(const std::string&)> log;
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

// A part's build_options line "shard=I/N of S" (S: the source's samples), "" for a whole build. Merge
// checks and drops it, so that the joined file equals a one-machine build.
constexpr const char* kShardKey = "shard";
std::string ShardLine(uint32_t index, uint32_t count, uint64_t source_samples);
// The samples [begin, end) of a source of `all` that o's shard holds, the same split every time: part i
// of n holds [i * all / n, (i + 1) * all / n); the whole source without --shard. OptionError for i >= n.
struct ShardRange {
  size_t begin = 0, end = 0;
};
ShardRange ShardOf(const BuildOptions& o, size_t all);

// Throws dsc::Error naming the file or sample at fault; the target is then left untouched.
BuildReport Build(const std::string& source, const std::string& out, const BuildOptions& options);

}  // namespace dsc::writer
