// `dsc merge`: joins the parts of a sharded build (`dsc build --shard I/N`) into the file a one-machine
// build of the same source and options writes, byte for byte. Payloads are copied as stored (never
// re-encoded) and repacked in sample order, so blocks, index, shared JPEG table sets, the restart
// section and meta come out as the writer would have made them.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dsc::writer {

struct MergeOptions {
  bool progress = false;  // a progress line on stderr
};

struct MergeReport {
  uint64_t parts = 0;
  uint64_t samples = 0;
  uint64_t file_size = 0;
  uint64_t payload_bytes = 0;
  double seconds = 0;
};

// `parts` in any order (they are ordered by the shard number each records). Checked before anything is
// written: every part is an intact dsc file (each block's checksum as it is copied), all come from one
// sharded build (the same N, each of 0..N-1 once, the same source size, build options, fields and block
// size). Throws dsc::Error naming the part at fault; `out` is then left untouched (atomic, as build).
MergeReport Merge(const std::vector<std::string>& parts, const std::string& out, const MergeOptions& options = {});

}  // namespace dsc::writer
