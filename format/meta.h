// The meta section: field table, class names, build options and JPEG table sets (docs/format.md).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dsc::format {

enum class FieldType : uint8_t { kImage = 1, kLabel = 2 };

struct Field {
  FieldType type = FieldType::kImage;
  std::string name;
  std::vector<std::string> classes;  // classes[i] names label value i; empty when unnamed
};

struct Meta {
  std::vector<Field> fields;  // fields[0] is the image; then 1..2 label fields
  std::string build_options;  // "key=value\n" lines sorted by key
  uint64_t skipped_count = 0;
  std::vector<std::string> jpeg_tables;  // shared JPEG prefixes (SOI..SOS header)

  size_t label_field_count() const { return fields.empty() ? 0 : fields.size() - 1; }
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
Meta DecodeMeta(const uint8_t* p, size_t n);

}  // namespace dsc::format
