// Typed fields (format 1.2, incompat bit 0; docs/format.md "Typed fields"): element types, the
// schema's rules, and where each field's values live (the columns and varsizes sections).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "format/meta.h"

namespace dsc::format {

constexpr uint32_t kTypedFieldsFlag = 1;   // incompat bit 0
constexpr uint16_t kTypedMinor = 2;        // the version_minor of a file with typed fields
constexpr size_t kMaxFields = 64;
constexpr size_t kMaxFieldName = 255;      // bytes
constexpr size_t kMaxFixedDims = 8, kMaxVarDims = 7;
constexpr uint64_t kMaxRowWidth = 16u << 20;  // a fixed field's row, a variable array's element row

size_t DTypeSize(DType t);         // 0 for kNone and unknown values
const char* DTypeName(DType t);    // "int8" ... "bool"; "none"
bool ParseDType(const std::string& name, DType* out);  // the names DTypeName gives
bool IsIntegerDType(DType t);      // int8..uint64
const char* FieldTypeName(FieldType t);  // "image", "label", "scalar", "array", "var_array", "bytes", "text"
bool IsFixedField(FieldType t);    // scalar, array: a column
bool IsVarField(FieldType t);      // var_array, bytes, text: in the blocks

// Why `m`'s field table breaks format 1.2's rules (typed == true) or 1.0's (false); empty when it
// keeps them. Checks counts, names, dtypes, dims and widths without allocating from them.
std::string SchemaProblem(const Meta& m, bool typed);

// Where each field of a typed file lives, from its schema (which SchemaProblem accepted).
struct FieldLayout {
  std::vector<int> fixed;      // field indices of the fixed fields, in order
  std::vector<int> var;        // field indices of the variable fields, in order
  std::vector<int> slot;       // per field: its position in `fixed` or `var`; -1 for image and labels
  std::vector<uint64_t> width; // per field: row width (fixed), element row (var array), 1 (bytes, text)
  uint64_t row_bytes = 0;      // sum of the fixed fields' widths

  static FieldLayout Of(const Meta& m);
  // The columns section's exact size for n samples, or UINT64_MAX when it would overflow.
  uint64_t ColumnsSize(uint64_t n) const;
  // Where field f's column starts in the columns section of a file of n samples.
  uint64_t ColumnStart(size_t f, uint64_t n) const;
  uint64_t VarSizesSize(uint64_t n) const;  // n × 4 × var.size(), or UINT64_MAX on overflow
};

// One element of `t` at p (little-endian) as a double (int64 beyond 2^53 rounds; float16 exactly).
double ElementAsDouble(DType t, const uint8_t* p);

// Why `value` (size bytes) is not a valid mask of field `f` for an image_w x image_h primary image
// (0 x 0: any size). Runs (format/mask_runs.h) are walked whole; of a PNG only the header's signature,
// colour type against the channels, and size are checked (its pixels need a PNG decoder: the reader
// names a stream that fails to decode).
std::string MaskProblem(const Field& f, const uint8_t* value, uint64_t size, uint32_t image_w, uint32_t image_h);

// Why `value` is not a valid value of field `f` (length, UTF-8, bool bytes, class range); empty when
// it is. `value` is a fixed field's row or a variable field's bytes.
std::string ValueProblem(const Field& f, uint64_t width, const uint8_t* value, uint64_t size);

}  // namespace dsc::format
