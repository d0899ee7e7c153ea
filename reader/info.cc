// dsc info's summary and JSON (reader/info.h).
#include "reader/info.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "format/meta.h"

namespace dsc {

namespace {

std::string Counts(const std::vector<uint64_t>& c) {
  std::string o = "[";
  for (size_t i = 0; i < c.size(); ++i) o += (i ? ", " : "") + std::to_string(c[i]);
  return o + "]";
}

// Dense counts as a list, else the values seen as {"value": samples} (label_counts is then null).
std::string LabelCounts(const DatasetSummary& s, size_t f) {
  if (f >= s.label_counts.size()) return "[]";
  if (!s.label_counts[f].empty() || s.label_values[f].empty()) return Counts(s.label_counts[f]);
  std::string o = "null, \"label_values\": {";
  bool first = true;
  for (const auto& [v, n] : s.label_values[f]) {
    o += (first ? "\"" : ", \"") + std::to_string(v) + "\": " + std::to_string(n);
    first = false;
  }
  return o + "}";
}

std::string Strings(const std::vector<std::string>& v) {
  std::string o = "[";
  for (size_t i = 0; i < v.size(); ++i) o += (i ? ", " : "") + JsonString(v[i]);
  return o + "]";
}

}  // namespace

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

DatasetSummary Summarize(const Dataset& ds) {
  DatasetSummary s;
  const auto& m = ds.meta();
  const size_t fields = m.label_field_count();
  s.label_counts.resize(fields);
  s.label_values.resize(fields);
  for (uint64_t i = 0; i < ds.size(); ++i) {
    auto e = ds.entry(i);
    for (size_t f = 0; f < fields; ++f) ++s.label_values[f][e.label[f]];  // values are >= 0 (FileView checks)
    auto& enc = s.encodings[format::EncodingName(format::Encoding(e.encoding))];
    ++enc.first;
    enc.second += e.size;
    s.payload_bytes += e.size;
    s.min_w = i == 0 ? e.width : std::min<uint32_t>(s.min_w, e.width);
    s.max_w = std::max<uint32_t>(s.max_w, e.width);
    s.min_h = i == 0 ? e.height : std::min<uint32_t>(s.min_h, e.height);
    s.max_h = std::max<uint32_t>(s.max_h, e.height);
  }
  for (size_t f = 0; f < fields; ++f) {
    const auto& seen = s.label_values[f];
    const size_t classes = m.fields[f + 1].classes.size();
    const int32_t top = seen.empty() ? -1 : seen.rbegin()->first;
    if (top < DatasetSummary::kDenseLabels || size_t(top) < classes) {
      s.label_counts[f].assign(std::max(classes, size_t(top + 1)), 0);
      for (const auto& [v, n] : seen) s.label_counts[f][size_t(v)] = n;
    }
  }
  return s;
}

std::string InfoJson(const Dataset& ds, const DatasetSummary& s) {
  const auto& h = ds.view().header();
  const auto& m = ds.meta();
  std::ostringstream o;
  o << "{\n  \"file\": " << JsonString(ds.path()) << ",\n";
  o << "  \"format_version\": \"" << h.version_major << "." << h.version_minor << "\",\n";
  o << "  \"samples\": " << ds.size() << ",\n";
  o << "  \"file_size\": " << h.file_size << ",\n";
  o << "  \"block_size\": " << h.block_size << ",\n";
  o << "  \"blocks\": " << ds.view().block_count() << ",\n";
  o << "  \"payload_bytes\": " << s.payload_bytes << ",\n";
  o << "  \"jpeg_table_sets\": " << m.jpeg_tables.size() << ",\n";
  o << "  \"skipped\": " << m.skipped_count << ",\n";
  o << "  \"classes\": " << Strings(m.label_field_count() ? m.fields[1].classes : std::vector<std::string>{}) << ",\n";
  o << "  \"label_counts\": " << LabelCounts(s, 0) << ",\n";
  o << "  \"fields\": [";
  for (size_t f = 0; f < m.fields.size(); ++f) {
    o << (f ? ", " : "") << "{\"name\": " << JsonString(m.fields[f].name) << ", \"type\": \""
      << (f == 0 ? "image" : "label") << "\"";
    if (f > 0) o << ", \"classes\": " << Strings(m.fields[f].classes) << ", \"label_counts\": " << LabelCounts(s, f - 1);
    o << "}";
  }
  o << "],\n  \"encodings\": {";
  bool first = true;
  for (const auto& [name, v] : s.encodings) {
    o << (first ? "" : ", ") << JsonString(name) << ": {\"samples\": " << v.first << ", \"bytes\": " << v.second << "}";
    first = false;
  }
  if (ds.size() == 0) {
    o << "},\n  \"image_size\": null,\n";  // no samples, no sizes
  } else {
    o << "},\n  \"image_size\": {\"min_width\": " << s.min_w << ", \"max_width\": " << s.max_w
      << ", \"min_height\": " << s.min_h << ", \"max_height\": " << s.max_h << "},\n";
  }
  o << "  \"build_options\": {";
  std::istringstream lines(m.build_options);
  std::string line;
  first = true;
  while (std::getline(lines, line)) {
    size_t eq = line.find('=');
    o << (first ? "" : ", ") << JsonString(line.substr(0, eq)) << ": " << JsonString(eq == std::string::npos ? "" : line.substr(eq + 1));
    first = false;
  }
  o << "},\n";
  if (const auto& r = ds.view().restart()) {
    o << "  \"restart\": {\"mode\": \"" << (r->mode == format::RestartStats::kFixed ? "fixed" : "auto")
      << "\", \"target_mcus\": " << r->target << ", \"min_mcus\": " << r->min_mcus << ", \"images\": " << r->images
      << ", \"transcoded\": " << r->transcoded << ", \"reencoded\": " << r->reencoded << ", \"whole_row\": " << r->whole_row
      << ", \"untouched\": " << r->untouched << ", \"intervals\": {";
    for (size_t i = 0; i < r->intervals.size(); ++i)
      o << (i ? ", " : "") << "\"" << r->intervals[i].mcus << "\": " << r->intervals[i].images;
    o << "}},\n";
  }
  o << "  \"sections\": [";
  auto ext = ds.view().Extents();
  for (size_t i = 0; i < ext.size(); ++i)
    o << (i ? ", " : "") << "\n    {\"name\": \"" << ext[i].name << "\", \"offset\": " << ext[i].offset
      << ", \"size\": " << ext[i].size << ", \"content\": " << ext[i].content << "}";
  o << "\n  ]\n}\n";
  return o.str();
}


}  // namespace dsc
