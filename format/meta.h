// The meta section: field table, class names, build options and JPEG table sets (docs/format.md).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dsc::format {

// 1, 2: every version; 3..8: typed fields (format 1.2, incompat bit 0; format/fields.h); an image
// after the first: further images (format 1.3, incompat bit 1).
enum class FieldType : uint8_t {
  kImage = 1, kLabel = 2, kScalar = 3, kArray = 4, kVarArray = 5, kBytes = 6, kText = 7,
  kMask = 8,  // a lossless image (PNG) of the primary image's size that follows its geometry
};

// Element types of scalars and arrays (format 1.2); kNone for the other field types.
enum class DType : uint8_t {
  kNone = 0, kInt8 = 1, kInt16 = 2, kInt32 = 3, kInt64 = 4, kUInt8 = 5, kUInt16 = 6, kUInt32 = 7, kUInt64 = 8,
  kFloat16 = 9, kFloat32 = 10, kFloat64 = 11, kBool = 12,
};

struct Field {
  Field() = default;
  Field(FieldType t, std::string n, std::vector<std::string> c = {}, DType d = DType::kNone, std::vector<uint32_t> s = {})
      : type(t), name(std::move(n)), classes(std::move(c)), dtype(d), dims(std::move(s)) {}
  FieldType type = FieldType::kImage;
  std::string name;
  std::vector<std::string> classes;  // classes[i] names label value i; empty when unnamed
  DType dtype = DType::kNone;        // scalars and arrays
  std::vector<uint32_t> dims;        // fixed array: shape; variable array: trailing shape; mask: {channels}
};

struct Meta {
  // fields[0] is the image; then 1..2 label fields; with typed fields (1.2) any others after them.
  std::vector<Field> fields;
  std::string build_options;  // "key=value\n" lines sorted by key
  uint64_t skipped_count = 0;
  std::vector<std::string> jpeg_tables;  // shared JPEG prefixes (SOI..SOS header)

  // Label fields (in the index's label slots) follow the image directly: label k is fields[k + 1].
  size_t label_field_count() const {
    size_t n = 0;
    for (const Field& f : fields) n += f.type == FieldType::kLabel;
    return n;
  }
  // Whether any field needs format 1.2's typed fields (incompat bit 0): further images do too.
  bool typed() const {
    for (size_t i = 0; i < fields.size(); ++i)
      if (fields[i].type != FieldType::kLabel && (i > 0 || fields[i].type != FieldType::kImage)) return true;
    return false;
  }
  // Whether an image field follows the first (format 1.3's further images, incompat bit 1).
  bool further_images() const {
    for (size_t i = 1; i < fields.size(); ++i)
      if (fields[i].type == FieldType::kImage) return true;
    return false;
  }
};

// Structurally valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF): field names,
// class names and build options must be.
bool IsUtf8(std::string_view s);

// The length (1-4) of the valid UTF-8 sequence at s[i], or 0 where none starts there.
size_t Utf8SequenceAt(std::string_view s, size_t i);

// Why `s` is not build options as the format has them ("key=value\n" lines, keys sorted, each
// once); empty when it is.
std::string BuildOptionsProblem(std::string_view s);

// Throws dsc::Error for a text string that is not UTF-8 or build options out of form.
std::string EncodeMeta(const Meta& m);
// Throws dsc::Error with `what` describing the first inconsistency (the caller adds the file name).
// `typed`: the header has incompat bit 0, so the field table follows format 1.2's rules; `images`: bit
// 1 too, so image fields may follow the first (1.3).
Meta DecodeMeta(const uint8_t* p, size_t n, bool typed = false, bool images = false);

}  // namespace dsc::format
