#include <cstdio>
#include <cxxopts.hpp>
#include <map>
#include <sstream>

#include "format/error.h"
#include "reader/dataset.h"
#include "tools/commands.h"

namespace dsc::tools {

namespace {

struct Stats {
  std::vector<std::vector<uint64_t>> label_counts;  // per label field, per value
  std::map<std::string, std::pair<uint64_t, uint64_t>> encodings;  // name -> (samples, bytes)
  uint64_t payload_bytes = 0;
  uint32_t min_w = UINT32_MAX, max_w = 0, min_h = UINT32_MAX, max_h = 0;
};

Stats Gather(const Dataset& ds) {
  Stats s;
  const auto& m = ds.meta();
  s.label_counts.resize(m.label_field_count());
  for (size_t f = 0; f < s.label_counts.size(); ++f) s.label_counts[f].resize(m.fields[f + 1].classes.size());
  for (uint64_t i = 0; i < ds.size(); ++i) {
    auto e = ds.entry(i);
    for (size_t f = 0; f < s.label_counts.size(); ++f) {
      auto& c = s.label_counts[f];
      if (size_t(e.label[f]) >= c.size()) c.resize(size_t(e.label[f]) + 1);
      ++c[size_t(e.label[f])];
    }
    auto& enc = s.encodings[format::EncodingName(format::Encoding(e.encoding))];
    ++enc.first;
    enc.second += e.size;
    s.payload_bytes += e.size;
    s.min_w = std::min<uint32_t>(s.min_w, e.width);
    s.max_w = std::max<uint32_t>(s.max_w, e.width);
    s.min_h = std::min<uint32_t>(s.min_h, e.height);
    s.max_h = std::max<uint32_t>(s.max_h, e.height);
  }
  return s;
}

std::string Counts(const std::vector<uint64_t>& c) {
  std::string o = "[";
  for (size_t i = 0; i < c.size(); ++i) o += (i ? ", " : "") + std::to_string(c[i]);
  return o + "]";
}

std::string Strings(const std::vector<std::string>& v) {
  std::string o = "[";
  for (size_t i = 0; i < v.size(); ++i) o += (i ? ", " : "") + JsonString(v[i]);
  return o + "]";
}

void PrintJson(const Dataset& ds, const Stats& s) {
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
  o << "  \"label_counts\": " << Counts(s.label_counts.empty() ? std::vector<uint64_t>{} : s.label_counts[0]) << ",\n";
  o << "  \"fields\": [";
  for (size_t f = 0; f < m.fields.size(); ++f) {
    o << (f ? ", " : "") << "{\"name\": " << JsonString(m.fields[f].name) << ", \"type\": \""
      << (f == 0 ? "image" : "label") << "\"";
    if (f > 0) o << ", \"classes\": " << Strings(m.fields[f].classes) << ", \"label_counts\": " << Counts(s.label_counts[f - 1]);
    o << "}";
  }
  o << "],\n  \"encodings\": {";
  bool first = true;
  for (const auto& [name, v] : s.encodings) {
    o << (first ? "" : ", ") << JsonString(name) << ": {\"samples\": " << v.first << ", \"bytes\": " << v.second << "}";
    first = false;
  }
  o << "},\n  \"image_size\": {\"min_width\": " << s.min_w << ", \"max_width\": " << s.max_w
    << ", \"min_height\": " << s.min_h << ", \"max_height\": " << s.max_h << "},\n";
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
  std::fputs(o.str().c_str(), stdout);
}

void PrintText(const Dataset& ds, const Stats& s) {
  const auto& h = ds.view().header();
  const auto& m = ds.meta();
  std::printf("%s: dsc format %u.%u, %.2f MiB\n", ds.path().c_str(), h.version_major, h.version_minor, h.file_size / 1048576.0);
  std::printf("samples: %llu", (unsigned long long)ds.size());
  if (m.skipped_count) std::printf(" (%llu skipped at build time)", (unsigned long long)m.skipped_count);
  std::printf("\nimage size: %ux%u .. %ux%u (w x h)\n", s.min_w, s.min_h, s.max_w, s.max_h);
  std::printf("encodings:\n");
  for (const auto& [name, v] : s.encodings)
    std::printf("  %-9s %8llu samples (%5.1f%%)  %10.2f MiB  %7.0f bytes/sample\n", name.c_str(), (unsigned long long)v.first,
                100.0 * v.first / std::max<uint64_t>(1, ds.size()), v.second / 1048576.0, double(v.second) / std::max<uint64_t>(1, v.first));
  if (!m.jpeg_tables.empty()) std::printf("shared JPEG table sets: %zu\n", m.jpeg_tables.size());
  for (size_t f = 1; f < m.fields.size(); ++f) {
    std::printf("field '%s' (int32 label):\n", m.fields[f].name.c_str());
    const auto& counts = s.label_counts[f - 1];
    for (size_t v = 0; v < counts.size(); ++v)
      std::printf("  %4zu %-20s %8llu\n", v, v < m.fields[f].classes.size() ? m.fields[f].classes[v].c_str() : "",
                  (unsigned long long)counts[v]);
  }
  if (const auto& r = ds.view().restart()) {
    std::printf("restart markers: %llu JPEGs (%llu transcoded losslessly, %llu re-encoded), %llu of them with whole-row "
                "intervals; %llu JPEGs of <= %llu MCUs without; %s",
                (unsigned long long)r->images, (unsigned long long)r->transcoded, (unsigned long long)r->reencoded,
                (unsigned long long)r->whole_row, (unsigned long long)r->untouched, (unsigned long long)r->min_mcus,
                r->mode == format::RestartStats::kFixed ? "fixed interval " : "auto, target ");
    std::printf("%u MCUs\n  intervals (MCUs: JPEGs):", r->target);
    for (const auto& i : r->intervals) std::printf(" %u: %llu", i.mcus, (unsigned long long)i.images);
    std::printf("\n");
  }
  std::printf("blocks: %zu of up to %.1f MiB\nsections:\n", ds.view().block_count(), h.block_size / 1048576.0);
  for (const auto& e : ds.view().Extents())
    std::printf("  %-7s offset %12llu  size %12llu\n", e.name.c_str(), (unsigned long long)e.offset, (unsigned long long)e.size);
  std::printf("build options:\n");
  std::istringstream lines(m.build_options);
  std::string line;
  while (std::getline(lines, line)) std::printf("  %s\n", line.c_str());
}

}  // namespace

int CmdInfo(int argc, char** argv) {
  cxxopts::Options opts("dsc info", "Describe a dsc file.");
  opts.positional_help("FILE");
  opts.add_options()("json", "machine-readable output")("h,help", "show this help")("file", "", cxxopts::value<std::string>());
  opts.parse_positional({"file"});
  std::string file;
  bool json = false;
  try {
    auto r = opts.parse(argc, argv);
    if (r.count("help")) { std::fputs(opts.help().c_str(), stdout); return kExitOk; }
    if (!r.count("file")) throw cxxopts::exceptions::exception("expected FILE");
    file = r["file"].as<std::string>();
    json = r.count("json") > 0;
  } catch (const cxxopts::exceptions::exception& e) {
    std::fprintf(stderr, "dsc info: %s\n\n%s", e.what(), opts.help().c_str());
    return kExitUsage;
  }
  try {
    Dataset ds(file);
    Stats s = Gather(ds);
    json ? PrintJson(ds, s) : PrintText(ds, s);
    return kExitOk;
  } catch (const Error& e) {
    std::fprintf(stderr, "dsc info: error: %s\n", e.what());
    return kExitBad;
  }
}

}  // namespace dsc::tools
