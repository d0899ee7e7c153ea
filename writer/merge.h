// `dsc merge`: the parts of a build split across machines (dsc build --shard I/N) joined into the file
// one `dsc build` of the whole source would have written, byte for byte, without decoding or
// re-encoding a payload.
//
// Contract: `parts` are all N parts of one build (any order; each records "shard=I/N" in its build
// options, and every other option, the fields and the class lists must be equal). Their samples are
// replayed in part order through the same packer the build uses (writer/file_builder.h): payloads
// are copied, the block table, index and meta are rewritten, JPEG table sets are re-shared exactly
// as one build shares them, and the restart statistics are summed. Throws dsc::Error naming the part
// at fault (missing or repeated part, different options, damaged file); `out` is then untouched.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dsc::writer {

struct MergeReport {
  uint64_t samples = 0;
  uint64_t file_size = 0;
  uint64_t parts = 0;
  double seconds = 0;
};

MergeReport Merge(const std::vector<std::string>& parts, const std::string& out);

}  // namespace dsc::writer
