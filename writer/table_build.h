// `dsc build` from a table of samples: JSON Lines (one object per line) or CSV/TSV with a header row.
// A column of image paths becomes the image field, integer columns named `label` the label, other
// numbers scalars, lists variable arrays, strings text; --schema gives the types instead (below).
// Written through dsc::Writer (typed fields, format 1.2), atomically, the same for any thread count.
#pragma once
#include <string>

#include "writer/build.h"

namespace dsc::writer {

// Whether `source` is read as a table: --format jsonl, csv or tsv, or --format auto and a name
// ending in .jsonl, .ndjson or .csv (a .tsv stays a `path<TAB>label` manifest unless --format tsv).
bool IsTableSource(const std::string& source, const std::string& format);

struct TableOptions {
  // Space-separated NAME:TYPE, TYPE one of image, label, text, a dtype (int8 .. float64, bool) for a
  // scalar, DTYPE[D1,D2,..] for a fixed array, DTYPE[*,D2,..] for a variable array. Columns it does
  // not name are inferred; "" infers all.
  std::string schema;
  std::string image_column;  // "" : --schema's image, else a column named image, else the first of paths
};

// Throws dsc::Error naming the file, row (1-based line) and column of a bad value; with
// options.skip_invalid such rows are skipped and each is logged. The target is then left untouched.
BuildReport BuildTable(const std::string& source, const std::string& out, const BuildOptions& options,
                       const TableOptions& table);

}  // namespace dsc::writer
