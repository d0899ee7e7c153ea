#include <cstdio>
#include <map>
#include <sstream>

#include "format/error.h"
#include "format/ffcv.h"
#include "reader/file_source.h"
#include "reader/info.h"
#include "reader/ffcv_info.h"
#include "tools/loader_flags.h"
#include "tools/commands.h"

namespace dsc::tools {

namespace {

constexpr size_t kMaxLabelLines = 1000;  // a field's values printed as text

// Typed fields (format 1.2): one line per field with its type, and what the columns and varsizes
// sections say about it (value range, lengths, bytes).
void PrintTypedFields(const Dataset& ds, const DatasetSummary& s) {
  const auto& m = ds.meta();
  for (size_t f = 1 + m.label_field_count(); f < m.fields.size() && f < s.fields.size(); ++f) {
    const format::Field& fd = m.fields[f];
    std::string type = format::FieldTypeName(fd.type);
    if (fd.type == format::FieldType::kMask) {
      type += fd.dims.size() == 1 && fd.dims[0] == 3 ? ", 3 channels" : ", 1 channel";
    } else if (fd.dtype != format::DType::kNone) {
      type += std::string(" ") + format::DTypeName(fd.dtype);
      if (fd.type == format::FieldType::kArray || fd.type == format::FieldType::kVarArray) {
        type += "[";
        if (fd.type == format::FieldType::kVarArray) type += fd.dims.empty() ? "*" : "*,";
        for (size_t d = 0; d < fd.dims.size(); ++d) {
          if (d) type += ',';
          type += std::to_string(fd.dims[d]);
        }
        type += "]";
      }
    }
    const auto& st = s.fields[f];
    std::printf("field '%s' (%s): %.2f MiB", fd.name.c_str(), type.c_str(), st.bytes / 1048576.0);
    if (fd.type == format::FieldType::kImage) std::printf(", %ux%u .. %ux%u", st.min_w, st.min_h, st.max_w, st.max_h);
    else if (format::IsFixedField(fd.type)) std::printf(", values %g .. %g", st.min, st.max);
    else std::printf(", %s %llu .. %llu per sample", fd.type == format::FieldType::kVarArray ? "rows" : "bytes",
                     (unsigned long long)st.min_len, (unsigned long long)st.max_len);
    if (!fd.classes.empty()) std::printf(", %zu classes", fd.classes.size());
    std::printf("\n");
  }
}

void PrintText(const Dataset& ds, const DatasetSummary& s) {
  const auto& h = ds.view().header();
  const auto& m = ds.meta();
  std::printf("%s: dsc format %u.%u, %.2f MiB\n", ds.path().c_str(), h.version_major, h.version_minor, h.file_size / 1048576.0);
  std::printf("samples: %llu", (unsigned long long)ds.size());
  if (m.skipped_count) std::printf(" (%llu skipped at build time)", (unsigned long long)m.skipped_count);
  if (ds.size() == 0)
    std::printf("\nimage size: none (no samples)\n");
  else
    std::printf("\nimage size: %ux%u .. %ux%u (w x h)\n", s.min_w, s.min_h, s.max_w, s.max_h);
  std::printf("encodings:\n");
  for (const auto& [name, v] : s.encodings)
    std::printf("  %-9s %8llu samples (%5.1f%%)  %10.2f MiB  %7.0f bytes/sample\n", name.c_str(), (unsigned long long)v.first,
                100.0 * v.first / std::max<uint64_t>(1, ds.size()), v.second / 1048576.0, double(v.second) / std::max<uint64_t>(1, v.first));
  if (!m.jpeg_tables.empty()) std::printf("shared JPEG table sets: %zu\n", m.jpeg_tables.size());
  for (size_t f = 1; f < 1 + m.label_field_count(); ++f) {  // labels follow the image
    std::printf("field '%s' (int32 label):\n", m.fields[f].name.c_str());
    const auto& counts = s.label_counts[f - 1];
    const auto& seen = s.label_values[f - 1];
    size_t lines = 0;
    const size_t total = counts.empty() ? seen.size() : counts.size();
    auto line = [&](size_t v, uint64_t n) {
      if (lines++ < kMaxLabelLines)
        std::printf("  %4zu %-20s %8llu\n", v, v < m.fields[f].classes.size() ? m.fields[f].classes[v].c_str() : "", (unsigned long long)n);
    };
    if (!counts.empty()) {
      for (size_t v = 0; v < counts.size(); ++v) line(v, counts[v]);
    } else {
      for (const auto& [v, n] : seen) line(size_t(v), n);
    }
    if (total > kMaxLabelLines)
      std::printf("  ... %zu more label values (dsc info --json lists them all)\n", total - kMaxLabelLines);
  }
  PrintTypedFields(ds, s);
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
  cli::Options opts("dsc info", "Describe a dsc file.");
  opts.positional_help("FILE");
  opts.add_options()("json", "machine-readable output")("h,help", "show this help")("file", "", cli::value<std::string>());
  const LoaderFlagSet source_flags = SourceFlags(false);  // a URL: only its index copy is fetched
  DeclareLoaderFlags(opts, source_flags, nullptr);
  opts.parse_positional({"file"});
  std::string file;
  bool json = false;
  DatasetOptions source;
  try {
    auto r = Parse(opts, argc, argv);
    RejectUnmatched(r);
    if (r.count("help")) { std::fputs(opts.help().c_str(), stdout); return kExitOk; }
    if (!r.count("file")) throw cli::UsageError("expected FILE");
    file = r["file"].as<std::string>();
    json = r.count("json") > 0;
    source = SourceOptions(r, source_flags);
  } catch (const cli::UsageError& e) {
    std::fprintf(stderr, "dsc info: %s\n\n%s", e.what(), opts.help().c_str());
    return kExitUsage;
  }
  try {
    // An FFCV file is described as FFCV laid it out (all its fields), not as the loader's view of it.
    auto src = OpenSource(file, source);  // a path or a URL (stream/)
    if (format::ffcv::IsFfcv(*src)) {
      auto f = format::ffcv::File::Open(src.get());
      if (json) std::fputs(FfcvInfoJson(*f).c_str(), stdout);
      else PrintFfcvInfo(*f);
      return kExitOk;
    }
    Dataset ds(std::move(src), {});
    const DatasetSummary s = Summarize(ds);
    if (json) std::fputs(InfoJson(ds, s).c_str(), stdout);
    else PrintText(ds, s);
    return kExitOk;
  } catch (const Error& e) {
    std::fprintf(stderr, "dsc info: error: %s\n", e.what());
    return kExitBad;
  }
}

}  // namespace dsc::tools
