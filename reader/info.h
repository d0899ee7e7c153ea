// What `dsc info` reports about a dsc file, as data and as JSON; shared by the CLI and the Python
// module (dsc.info), so both describe a file the same way.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "reader/dataset.h"
#include "reader/json.h"  // JsonString, for the includers that used it from here

namespace dsc {

struct DatasetSummary {
  // Per label field: samples per value, the values 0 .. max listed (zeros included) when they are
  // class names or all below kDenseLabels; empty otherwise (label values such as 200000000 would
  // take memory and output in proportion to the value), and label_values holds the values seen.
  static constexpr int32_t kDenseLabels = 1 << 16;
  std::vector<std::vector<uint64_t>> label_counts;
  std::vector<std::map<int32_t, uint64_t>> label_values;  // per label field: value -> samples
  std::map<std::string, std::pair<uint64_t, uint64_t>> encodings;  // name -> (samples, bytes)
  uint64_t payload_bytes = 0;
  uint32_t min_w = 0, max_w = 0, min_h = 0, max_h = 0;  // all 0 in a file without samples
  // Typed fields (format 1.2), per field of the schema (empty entries for image and labels): bytes
  // stored; numeric fixed fields' value range; variable fields' lengths (rows of a variable array,
  // bytes of bytes and text). From the columns and varsizes sections only, never the payloads.
  struct FieldStats {
    uint64_t bytes = 0;
    double min = 0, max = 0;            // fixed numeric fields (NaN values skipped)
    uint64_t min_len = 0, max_len = 0;  // variable fields
    uint32_t min_w = 0, max_w = 0, min_h = 0, max_h = 0;  // further images (format 1.3)
  };
  std::vector<FieldStats> fields;
};

// One pass over the index (no payload is read).
DatasetSummary Summarize(const Dataset& ds);

// The JSON object of `dsc info --json` (file, format_version, samples, classes, label_counts, fields,
// encodings, image_size, build_options, sections...), newline-terminated.
std::string InfoJson(const Dataset& ds, const DatasetSummary& s);

}  // namespace dsc
