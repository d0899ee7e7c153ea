#include "format/meta.h"

#include "format/bytes.h"
#include "format/error.h"
#include "format/fields.h"
#include "format/layout.h"

namespace dsc::format {

size_t Utf8SequenceAt(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n;
  uint32_t cp;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) n = 2, cp = c & 0x1F;
  else if ((c & 0xF0) == 0xE0) n = 3, cp = c & 0x0F;
  else if ((c & 0xF8) == 0xF0) n = 4, cp = c & 0x07;
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (d & 0x3F);
  }
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

bool IsUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8SequenceAt(s, i);
    if (!n) return false;
    i += n;
  }
  return true;
}

std::string BuildOptionsProblem(std::string_view s) {
  std::string_view prev;
  for (size_t start = 0, line = 1; start < s.size(); ++line) {
    const size_t nl = s.find('\n', start);
    if (nl == std::string_view::npos) return "line " + std::to_string(line) + " does not end in a newline";
    const std::string_view l = s.substr(start, nl - start);
    const size_t eq = l.find('=');
    if (eq == std::string_view::npos || eq == 0) return "line " + std::to_string(line) + " is not key=value";
    const std::string_view key = l.substr(0, eq);
    if (!prev.empty() && !(prev < key))
      return "line " + std::to_string(line) + ": key '" + std::string(key) + "' is not after '" + std::string(prev) +
             "' (keys are sorted, each once)";
    prev = key;
    start = nl + 1;
  }
  return "";
}

std::string EncodeMeta(const Meta& m) {
  // The text strings are UTF-8 by the format (DecodeMeta refuses others): never write a file it refuses.
  auto text = [](const std::string& s, const std::string& what) {
    if (!IsUtf8(s)) throw Error("meta: " + what + " is not UTF-8");
  };
  for (size_t i = 0; i < m.fields.size(); ++i) {
    text(m.fields[i].name, "field " + std::to_string(i) + "'s name");
    for (size_t k = 0; k < m.fields[i].classes.size(); ++k)
      text(m.fields[i].classes[k], "class name " + std::to_string(k) + " of field '" + m.fields[i].name + "'");
  }
  text(m.build_options, "the build options");
  if (const std::string why = SchemaProblem(m, m.typed(), m.further_images()); !why.empty()) throw Error("meta: " + why);
  if (const std::string why = BuildOptionsProblem(m.build_options); !why.empty()) throw Error("meta: build options: " + why);
  le::Appender a;
  a.u32(uint32_t(m.fields.size()));
  for (const Field& f : m.fields) {
    a.u8(uint8_t(f.type));
    a.u8(uint8_t(f.dtype));  // 0 and 0 for images and labels: a 1.0 field entry, byte for byte
    a.u8(uint8_t(f.dims.size()));
    a.u8(0);
    a.str(f.name);
    for (uint32_t d : f.dims) a.u32(d);
    a.u32(uint32_t(f.classes.size()));
    for (const auto& c : f.classes) a.str(c);
  }
  a.str(m.build_options);
  a.u64(m.skipped_count);
  a.u32(uint32_t(m.jpeg_tables.size()));
  for (const auto& t : m.jpeg_tables) a.str(t);
  return a.bytes();
}

namespace {

class Cursor {
 public:
  Cursor(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  void need(size_t k, const char* what) {
    if (n_ - pos_ < k) throw Error(std::string("meta section ends inside ") + what);
  }
  uint8_t u8(const char* what) { need(1, what); return p_[pos_++]; }
  uint32_t u32(const char* what) { need(4, what); uint32_t v = le::get32(p_ + pos_); pos_ += 4; return v; }
  uint64_t u64(const char* what) { need(8, what); uint64_t v = le::get64(p_ + pos_); pos_ += 8; return v; }
  std::string str(const char* what) {
    uint32_t len = u32(what);
    need(len, what);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return s;
  }
  std::string text(const char* what) {  // a str the format says is UTF-8
    std::string s = str(what);
    if (!IsUtf8(s)) throw Error(std::string("meta: ") + what + " is not UTF-8");
    return s;
  }
  bool at_end() const { return pos_ == n_; }
  size_t remaining() const { return n_ - pos_; }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
};

}  // namespace

Meta DecodeMeta(const uint8_t* p, size_t n, bool typed, bool images) {
  Cursor c(p, n);
  Meta m;
  uint32_t fields = c.u32("field count");
  if (!typed && (fields < 2 || fields > 1 + kMaxLabelFields))
    throw Error("meta: field count " + std::to_string(fields) + " (expected 2 or 3)");
  if (typed && (fields < 1 || fields > kMaxFields))
    throw Error("meta: field count " + std::to_string(fields) + " (expected 1 to " + std::to_string(kMaxFields) + ")");
  const uint8_t max_type = typed ? uint8_t(FieldType::kMask) : uint8_t(FieldType::kLabel);
  for (uint32_t i = 0; i < fields; ++i) {
    Field f;
    uint8_t type = c.u8("field type");
    if (type < uint8_t(FieldType::kImage) || type > max_type)
      throw Error("meta: field " + std::to_string(i) + " has unknown type " + std::to_string(type));
    if (i == 0 && type != uint8_t(FieldType::kImage)) throw Error("meta: field 0: the first field must be an image");
    if (i > 0 && type == uint8_t(FieldType::kImage) && !images)
      throw Error("meta: field " + std::to_string(i) + ": the first field must be the only image field");
    f.type = FieldType(type);
    const uint8_t dtype = c.u8("field"), ndim = c.u8("field");
    if (c.u8("field") != 0 || (!typed && (dtype != 0 || ndim != 0)))
      throw Error("meta: field " + std::to_string(i) + ": reserved byte not zero");
    if (ndim > kMaxFixedDims) throw Error("meta: field " + std::to_string(i) + ": " + std::to_string(ndim) + " dims, at most 8");
    f.dtype = DType(dtype);
    f.name = c.text("field name");
    for (uint8_t d = 0; d < ndim; ++d) f.dims.push_back(c.u32("field dims"));
    uint32_t classes = c.u32("class count");
    if (classes > c.remaining() / 4) throw Error("meta: class count " + std::to_string(classes) + " too large");
    if (f.type == FieldType::kImage && classes != 0) throw Error("meta: image field has class names");
    for (uint32_t k = 0; k < classes; ++k) f.classes.push_back(c.text("class name"));
    m.fields.push_back(std::move(f));
  }
  if (const std::string why = SchemaProblem(m, typed, images); !why.empty()) throw Error("meta: " + why);
  m.build_options = c.text("build options");
  if (const std::string why = BuildOptionsProblem(m.build_options); !why.empty()) throw Error("meta: build options: " + why);
  m.skipped_count = c.u64("skipped count");
  uint32_t tables = c.u32("table count");
  if (tables > kMaxJpegTables || tables > c.remaining() / 4)
    throw Error("meta: JPEG table count " + std::to_string(tables) + " too large");
  for (uint32_t k = 0; k < tables; ++k) m.jpeg_tables.push_back(c.str("JPEG table set"));
  if (!c.at_end()) throw Error("meta: " + std::to_string(c.remaining()) + " unexpected bytes after the last table set");
  return m;
}

}  // namespace dsc::format
