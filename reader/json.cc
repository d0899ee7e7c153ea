#include "reader/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "format/error.h"
#include "format/meta.h"

namespace dsc {

std::string JsonString(std::string_view s) {
  std::string o = "\"";
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') { o += '\\'; o += char(c); ++i; continue; }
    if (c == '\n') { o += "\\n"; ++i; continue; }
    if (c < 0x20) { char b[8]; std::snprintf(b, sizeof b, "\\u%04x", c); o += b; ++i; continue; }
    // JSON is UTF-8: a byte that starts no valid sequence (a file name's, a damaged file's class
    // name) becomes U+FFFD, or every JSON parser refuses the whole document.
    const size_t n = format::Utf8SequenceAt(s, i);
    if (n) o.append(s.substr(i, n));
    else o += "\xEF\xBF\xBD";
    i += n ? n : 1;
  }
  return o + "\"";
}

void JsonWriter::NextMember() {
  Level& l = stack_.back();
  if (l.layout == kLines) out_ += l.empty ? "\n" : ",\n", out_.append(2 * stack_.size(), ' ');
  else if (!l.empty) out_ += ", ";
  l.empty = false;
}

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (stack_.empty()) {
    if (!out_.empty()) throw Error("internal: a JSON document holds one value");
    return;
  }
  if (stack_.back().close == '}') throw Error("internal: a JSON object's value needs its key first");
  NextMember();
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  if (stack_.empty() || stack_.back().close != '}' || after_key_) throw Error("internal: a JSON key outside an object");
  NextMember();
  out_ += JsonString(key);
  out_ += ": ";
  after_key_ = true;
  return *this;
}

void JsonWriter::Open(char bracket, Layout layout) {
  BeforeValue();
  out_ += bracket;
  stack_.push_back({bracket == '{' ? '}' : ']', layout});
}

JsonWriter& JsonWriter::Object(Layout layout) {
  Open('{', layout);
  return *this;
}

JsonWriter& JsonWriter::Array(Layout layout) {
  Open('[', layout);
  return *this;
}

JsonWriter& JsonWriter::End() {
  if (stack_.empty() || after_key_) throw Error("internal: a JSON container closed twice, or after a key");
  const Level l = stack_.back();
  stack_.pop_back();
  if (l.layout == kLines && !l.empty) out_ += '\n', out_.append(2 * stack_.size(), ' ');
  out_ += l.close;
  return *this;
}

JsonWriter& JsonWriter::String(std::string_view s) {
  BeforeValue();
  out_ += JsonString(s);
  return *this;
}

JsonWriter& JsonWriter::Number(double v) {
  if (!std::isfinite(v)) return Null();
  BeforeValue();
  char b[32];
  const auto r = std::to_chars(b, b + sizeof b, v, std::chars_format::general, 6);  // as %g, in any locale
  out_.append(b, r.ptr);
  return *this;
}

JsonWriter& JsonWriter::Int(int64_t v) {
  BeforeValue();
  out_ += std::to_string(v);
  return *this;
}

JsonWriter& JsonWriter::Uint(uint64_t v) {
  BeforeValue();
  out_ += std::to_string(v);
  return *this;
}

JsonWriter& JsonWriter::Bool(bool v) {
  BeforeValue();
  out_ += v ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::Null() {
  BeforeValue();
  out_ += "null";
  return *this;
}

std::string JsonWriter::Finish() {
  if (!stack_.empty() || after_key_ || out_.empty()) throw Error("internal: an unfinished JSON document");
  return out_ + "\n";
}

}  // namespace dsc
