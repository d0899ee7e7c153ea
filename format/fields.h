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
constexpr uint32_t kFurtherImagesFlag = 2;  // incompat bit 1: image fields after the first (with bit 0)
constexpr uint16_t kImagesMinor = 3;        // the version_minor of a file with further images
constexpr uint64_t kImageDescriptorSize = 8;  // a further image's row in the columns section
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
bool IsVarField(FieldType t);      // var_array, bytes, text, mask: in the blocks
// A further image (format 1.3) is both: its descriptor is a column, its payload in the blocks.
inline bool IsFurtherImage(const Meta& m, size_t f) { return f > 0 && m.fields[f].type == FieldType::kImage; }

// Why `m`'s field table breaks format 1.2's rules (typed == true) or 1.0's (false); empty when it
// keeps them. Checks counts, names, dtypes, dims and widths without allocating from them.
std::string SchemaProblem(const Meta& m, bool typed, bool images = false);

// Where each field of a typed file lives, from its schema (which SchemaProblem accepted).
struct FieldLayout {
  std::vector<int> fixed;      // field indices of the fixed fields (and further images' descriptors), in order
  std::vector<int> var;        // field indices of the variable fields (and further images' payloads), in order
  std::vector<int> slot;       // per field: its position in `fixed`, or `var` (a further image: var); -1 for
                               // the first image and labels
  std::vector<uint64_t> width; // per field: row width (fixed; a further image: its descriptor's 8),
                               // element row (var array), 1 (bytes, text, mask)
  uint64_t row_bytes = 0;      // sum of the fixed fields' widths

  static FieldLayout Of(const Meta& m);
  // The columns section's exact size for n samples, or UINT64_MAX when it would overflow.
  uint64_t ColumnsSize(uint64_t n) const;
  // Where field f's column starts in the columns section of a file of n samples.
  uint64_t ColumnStart(size_t f, uint64_t n) const;
  uint64_t VarSizesSize(uint64_t n) const;  // n × 4 × var.size(), or UINT64_MAX on overflow
};

// A further image's descriptor (its columns row): what an index entry says of the first image.
struct ImageDescriptor {
  uint16_t width = 0, height = 0;
  uint8_t encoding = 0, channels = 0;  // format::Encoding; 1 or 3
};
void EncodeImageDescriptor(const ImageDescriptor& d, uint8_t* out8);
ImageDescriptor DecodeImageDescriptor(const uint8_t* p8);
// Why a descriptor and its payload's length break the index entry's rules (known encoding, 1 or 3
// channels and raw 3, a size of at least 1x1, a raw payload of exactly w x h x 3 bytes, a payload
// at all, zero reserved bytes); empty when they keep them.
std::string ImageDescriptorProblem(const uint8_t* p8, uint64_t payload_size);

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
