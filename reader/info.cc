// dsc info's summary and JSON (reader/info.h).
#include "reader/info.h"

#include <algorithm>
#include <sstream>

#include "format/meta.h"

namespace dsc {

namespace {

void Strings(JsonWriter& j, const std::vector<std::string>& v) {
  j.Array();
  for (const auto& x : v) j.String(x);
  j.End();
}

// "label_counts": dense counts as a list, else null and "label_values": {"value": samples}.
void LabelCounts(JsonWriter& j, const DatasetSummary& s, size_t f) {
  j.Key("label_counts");
  if (f < s.label_counts.size() && s.label_counts[f].empty() && !s.label_values[f].empty()) {
    j.Null().Key("label_values").Object();
    for (const auto& [v, n] : s.label_values[f]) j.Field(std::to_string(v), n);
    j.End();
    return;
  }
  j.Array();
  if (f < s.label_counts.size())
    for (uint64_t n : s.label_counts[f]) j.Uint(n);
  j.End();
}

}  // namespace

namespace {

void TypedStats(const format::FileView& v, DatasetSummary* s) {
  const auto& m = v.meta();
  const auto& l = v.layout();
  s->fields.resize(m.fields.size());
  for (size_t f = 0; f < m.fields.size(); ++f) {
    auto& st = s->fields[f];
    const format::Field& fd = m.fields[f];
    if (format::IsFurtherImage(m, f)) {  // from its descriptors and payload lengths
      for (uint64_t i = 0; i < v.sample_count(); ++i) {
        const format::ImageDescriptor d = format::DecodeImageDescriptor(v.FixedValue(f, i));
        st.bytes += v.VarValue(f, i).size;
        st.min_w = i == 0 ? d.width : std::min<uint32_t>(st.min_w, d.width);
        st.max_w = std::max<uint32_t>(st.max_w, d.width);
        st.min_h = i == 0 ? d.height : std::min<uint32_t>(st.min_h, d.height);
        st.max_h = std::max<uint32_t>(st.max_h, d.height);
      }
    } else if (format::IsFixedField(fd.type)) {
      const size_t es = format::DTypeSize(fd.dtype), w = size_t(l.width[f]);
      bool first = true;
      std::vector<uint8_t> scratch;
      for (uint64_t i = 0; i < v.sample_count(); ++i) {
        const uint8_t* p = v.FixedValue(f, i, &scratch);
        for (size_t k = 0; k < w; k += es) {
          const double x = format::ElementAsDouble(fd.dtype, p + k);
          if (x != x) continue;
          st.min = first ? x : std::min(st.min, x);
          st.max = first ? x : std::max(st.max, x);
          first = false;
        }
      }
      st.bytes = v.sample_count() * w;
    } else if (format::IsVarField(fd.type)) {
      for (uint64_t i = 0; i < v.sample_count(); ++i) {
        const uint64_t len = v.VarValue(f, i).size / l.width[f];
        st.bytes += len * l.width[f];
        st.min_len = i == 0 ? len : std::min(st.min_len, len);
        st.max_len = std::max(st.max_len, len);
      }
    }
  }
}

}  // namespace

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
  if (ds.view().typed()) TypedStats(ds.view(), &s);
  for (size_t f = 0; f < fields; ++f) {
    const auto& seen = s.label_values[f];
    const size_t classes = m.fields[f + 1].classes.size();
    const int32_t top = seen.empty() ? -1 : seen.rbegin()->first;
    const bool nonnegative = seen.empty() || seen.begin()->first >= 0;  // dense counts index by value
    if (nonnegative && (top < DatasetSummary::kDenseLabels || size_t(top) < classes)) {
      s.label_counts[f].assign(std::max(classes, size_t(top + 1)), 0);
      for (const auto& [v, n] : seen) s.label_counts[f][size_t(v)] = n;
    }
  }
  return s;
}

std::string InfoJson(const Dataset& ds, const DatasetSummary& s) {
  const auto& h = ds.view().header();
  const auto& m = ds.meta();
  JsonWriter j;
  j.Object(JsonWriter::kLines);
  j.Field("file", ds.path());
  j.Field("format_version", std::to_string(h.version_major) + "." + std::to_string(h.version_minor));
  j.Field("samples", ds.size()).Field("file_size", h.file_size).Field("block_size", h.block_size);
  j.Field("blocks", ds.view().block_count()).Field("payload_bytes", s.payload_bytes);
  j.Field("jpeg_table_sets", m.jpeg_tables.size()).Field("skipped", m.skipped_count);
  Strings(j.Key("classes"), m.label_field_count() ? m.fields[1].classes : std::vector<std::string>{});
  LabelCounts(j, s, 0);
  j.Key("fields").Array();
  for (size_t f = 0; f < m.fields.size(); ++f) {
    const format::Field& fd = m.fields[f];
    j.Object().Field("name", fd.name).Field("type", format::FieldTypeName(fd.type));
    if (fd.type == format::FieldType::kLabel) {
      Strings(j.Key("classes"), fd.classes);
      LabelCounts(j, s, f - 1);
    } else if (format::IsFurtherImage(m, f)) {  // format 1.3
      if (f < s.fields.size()) {
        const auto& st = s.fields[f];
        j.Field("bytes", st.bytes);
        j.Key("image_size").Object().Field("min_width", st.min_w).Field("max_width", st.max_w).Field("min_height", st.min_h)
            .Field("max_height", st.max_h).End();
      }
    } else if (fd.type != format::FieldType::kImage) {  // typed fields (format 1.2)
      if (fd.dtype != format::DType::kNone) j.Field("dtype", format::DTypeName(fd.dtype));
      j.Key("shape").Array();
      if (fd.type == format::FieldType::kVarArray) j.Int(-1);  // the variable first dimension
      for (uint32_t d : fd.dims) j.Uint(d);
      j.End();
      if (!fd.classes.empty()) Strings(j.Key("classes"), fd.classes);
      if (f < s.fields.size()) {
        const auto& st = s.fields[f];
        j.Field("bytes", st.bytes);
        if (format::IsFixedField(fd.type)) j.Field("min", st.min).Field("max", st.max);
        else j.Field("min_length", st.min_len).Field("max_length", st.max_len);
      }
    }
    j.End();
  }
  j.End().Key("encodings").Object();
  for (const auto& [name, v] : s.encodings) j.Key(name).Object().Field("samples", v.first).Field("bytes", v.second).End();
  j.End().Key("image_size");
  if (ds.size() == 0) {
    j.Null();  // no samples, no sizes
  } else {
    j.Object().Field("min_width", s.min_w).Field("max_width", s.max_w).Field("min_height", s.min_h).Field("max_height", s.max_h).End();
  }
  j.Key("build_options").Object();
  std::istringstream lines(m.build_options);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t eq = line.find('=');
    j.Field(line.substr(0, eq), eq == std::string::npos ? "" : line.substr(eq + 1));
  }
  j.End();
  if (const auto& r = ds.view().restart()) {
    j.Key("restart").Object().Field("mode", r->mode == format::RestartStats::kFixed ? "fixed" : "auto");
    j.Field("target_mcus", r->target).Field("min_mcus", r->min_mcus).Field("images", r->images).Field("transcoded", r->transcoded);
    j.Field("reencoded", r->reencoded).Field("whole_row", r->whole_row).Field("untouched", r->untouched);
    j.Key("intervals").Object();
    for (const auto& iv : r->intervals) j.Field(std::to_string(iv.mcus), iv.images);
    j.End().End();
  }
  j.Key("sections").Array(JsonWriter::kLines);
  for (const auto& e : ds.view().Extents())
    j.Object().Field("name", e.name).Field("offset", e.offset).Field("size", e.size).Field("content", e.content).End();
  j.End().End();
  return j.Finish();
}

}  // namespace dsc
