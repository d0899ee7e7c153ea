// JSON as dsc writes it (dsc info, bench and train --json, traces): a writer that builds a document
// front to back, with string escaping and number formatting in one place.
//
// Layout: members of a container opened with Lines() go on lines of their own, indented two spaces per
// level; members of an inline container follow each other on one line, ", " apart. Keys and values
// are separated by ": ". Numbers: integers in full, floating point as printf's %g (6 significant
// digits), and NaN or an infinity, which JSON cannot write, as null.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace dsc {

// A JSON string literal: quotes, backslashes and control bytes escaped, and each byte that starts no
// valid UTF-8 sequence written as U+FFFD, so the document is valid JSON whatever the string held.
std::string JsonString(std::string_view s);

class JsonWriter {
 public:
  enum Layout { kInline, kLines };

  JsonWriter& Object(Layout layout = kInline);  // opens {, as a value
  JsonWriter& Array(Layout layout = kInline);   // opens [, as a value
  JsonWriter& End();                            // closes the innermost container
  JsonWriter& Key(std::string_view key);        // in an object: the next value's key

  JsonWriter& String(std::string_view s);
  JsonWriter& Number(double v);
  JsonWriter& Int(int64_t v);
  JsonWriter& Uint(uint64_t v);
  JsonWriter& Bool(bool v);
  JsonWriter& Null();

  // Any of the above by type: text, bool, integer or floating point.
  template <typename T>
  JsonWriter& Value(const T& v) {
    if constexpr (std::is_same_v<T, bool>) return Bool(v);
    else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) return Int(int64_t(v));
    else if constexpr (std::is_integral_v<T>) return Uint(uint64_t(v));
    else if constexpr (std::is_floating_point_v<T>) return Number(double(v));
    else return String(std::string_view(v));
  }
  template <typename T>
  JsonWriter& Field(std::string_view key, const T& v) {
    return Key(key).Value(v);
  }

  // The document, newline-terminated; every container must be closed.
  std::string Finish();

 private:
  void NextMember();   // the separator before a container's next member
  void BeforeValue();
  void Open(char bracket, Layout layout);

  struct Level {
    char close;
    Layout layout;
    bool empty = true;
  };
  std::string out_;
  std::vector<Level> stack_;
  bool after_key_ = false;
};

}  // namespace dsc
