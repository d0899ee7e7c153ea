// `dsc info` of an FFCV file: what it is, its fields as FFCV named them, what dsc's loader reads.
#include "reader/ffcv_info.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "format/error.h"
#include "format/ffcv.h"
#include "reader/json.h"

namespace dsc {

namespace {

namespace ffcv = format::ffcv;

std::string Shape(const ffcv::Field& f) {
  std::string s = "(";
  for (size_t k = 0; k < f.shape.size(); ++k) s += (k ? ", " : "") + std::to_string(f.shape[k]);
  return s + (f.shape.size() == 1 ? ",)" : ")");
}

struct ImageStats {
  uint64_t jpeg = 0, raw = 0, jpeg_bytes = 0, raw_bytes = 0;
  uint32_t min_w = 0, max_w = 0, min_h = 0, max_h = 0;
};

ImageStats Images(const ffcv::File& f, size_t k) {
  ImageStats s;
  for (uint64_t i = 0; i < f.sample_count(); ++i) {
    const ffcv::Image im = f.image(i, k);
    const uint64_t n = f.span(i, k).size;
    (im.mode == 0 ? s.jpeg : s.raw)++;
    (im.mode == 0 ? s.jpeg_bytes : s.raw_bytes) += n;
    s.min_w = i ? std::min<uint32_t>(s.min_w, im.width) : im.width;
    s.min_h = i ? std::min<uint32_t>(s.min_h, im.height) : im.height;
    s.max_w = std::max<uint32_t>(s.max_w, im.width);
    s.max_h = std::max<uint32_t>(s.max_h, im.height);
  }
  return s;
}

// What the loader presents: every field as `dsc convert` maps it (format/ffcv.h OpenView, one
// mapping for both), and the fields it leaves out.
std::string LoaderLine(const ffcv::File& f) {
  ffcv::Conversion c;
  try {
    c = ffcv::PlanConversion(f, /*lenient=*/true);
  } catch (const Error& e) {
    return std::string("nothing: ") + e.what();
  }
  std::string labels, typed;
  for (size_t k = 1; k < c.fields.size(); ++k) {
    const std::string name = "'" + f.fields()[c.from[k]].name + "'";
    if (c.fields[k].type == format::FieldType::kLabel) labels += (labels.empty() ? "" : ", ") + name;
    else typed += (typed.empty() ? "" : ", ") + name + " " + ffcv::DescribeField(c.fields[k]);
  }
  std::string s = "image '" + f.fields()[c.from[0]].name + "'";
  if (!labels.empty()) s += ", labels " + labels;
  if (!typed.empty()) s += ", typed fields " + typed;
  for (size_t k = 0; k < c.left_out.size(); ++k) s += (k ? ", " : "; left out: ") + c.left_out[k];
  return s;
}

// The dsc field `dsc convert` writes for each FFCV field ("" for none), or why it refuses the file.
std::vector<std::string> ConvertedAs(const ffcv::File& f, std::string* refusal) {
  std::vector<std::string> out(f.fields().size());
  try {
    const ffcv::Conversion c = ffcv::PlanConversion(f);
    for (size_t k = 0; k < c.fields.size(); ++k) out[c.from[k]] = ffcv::DescribeField(c.fields[k]);
  } catch (const Error& e) {
    *refusal = e.what();
  }
  return out;
}

}  // namespace

void PrintFfcvInfo(const ffcv::File& f) {
  const uint64_t size = f.source().size();
  std::printf("%s: FFCV .beton file (FFCV format version %u, not dsc's), %.2f MiB\n", f.name().c_str(), f.version(),
              size / 1048576.0);
  std::printf("samples: %llu\n", (unsigned long long)f.sample_count());
  std::printf("pages: %llu of %.1f MiB, from byte %llu; %llu allocation entries\n", (unsigned long long)f.page_count(),
              f.page_size() / 1048576.0, (unsigned long long)f.data_offset(), (unsigned long long)f.alloc_entry_count());
  std::printf("fields (as FFCV named them; metadata record of %llu bytes):\n", (unsigned long long)f.record_size());
  bool has_jpeg = false;
  std::string refusal;
  const std::vector<std::string> dsc = ConvertedAs(f, &refusal);
  for (size_t k = 0; k < f.fields().size(); ++k) {
    const ffcv::Field& fd = f.fields()[k];
    std::printf("  %-16s %-16s", fd.name.c_str(), ffcv::TypeName(fd.type));
    if (fd.type == ffcv::kRgbImage) {
      const ImageStats s = Images(f, k);
      has_jpeg = has_jpeg || s.jpeg;
      std::printf(" %llu JPEG (%.2f MiB), %llu raw (%.2f MiB); %ux%u .. %ux%u (w x h)", (unsigned long long)s.jpeg,
                  s.jpeg_bytes / 1048576.0, (unsigned long long)s.raw, s.raw_bytes / 1048576.0, s.min_w, s.min_h, s.max_w, s.max_h);
    } else if (fd.type == ffcv::kNdArray || fd.type == ffcv::kTorchTensor) {
      std::printf(" %s %s", fd.dtype.c_str(), Shape(fd).c_str());
    }
    if (!dsc[k].empty()) std::printf("  -> dsc %s", dsc[k].c_str());  // what `dsc convert` writes
    std::printf("\n");
  }
  if (!refusal.empty()) std::printf("dsc convert refuses it: %s\n", refusal.c_str());
  std::printf("dsc's loader reads: %s\n", LoaderLine(f).c_str());
  if (has_jpeg)
    std::printf("JPEGs have no restart markers: an image's first crop decodes every row down to it, later ones start "
                "from entry points kept within jpeg_index_budget; `dsc convert` writes a dsc file with markers (no "
                "re-encoding), which needs neither. `idct=fast` decodes FFCV's pixels exactly.\n");
  std::printf("sections:\n");
  for (const auto& e : ffcv::Extents(f))
    std::printf("  %-11s offset %12llu  size %12llu\n", e.name.c_str(), (unsigned long long)e.offset, (unsigned long long)e.size);
}

std::string FfcvInfoJson(const ffcv::File& f) {
  JsonWriter j;
  j.Object(JsonWriter::kLines);
  j.Field("file", f.name()).Field("format", "ffcv").Field("ffcv_version", uint64_t(f.version()));
  j.Field("samples", f.sample_count()).Field("file_size", f.source().size()).Field("page_size", uint64_t(f.page_size()));
  j.Field("pages", f.page_count()).Field("allocations", f.alloc_entry_count()).Field("record_size", f.record_size());
  std::string refusal;
  const std::vector<std::string> dsc = ConvertedAs(f, &refusal);
  j.Key("fields").Array();
  for (size_t k = 0; k < f.fields().size(); ++k) {
    const ffcv::Field& fd = f.fields()[k];
    j.Object().Field("name", fd.name).Field("type", ffcv::TypeName(fd.type)).Field("type_id", uint64_t(fd.type));
    if (!dsc[k].empty()) j.Field("dsc_type", dsc[k]);  // what `dsc convert` writes it as
    j.Field("metadata_offset", fd.offset);
    if (fd.type == ffcv::kNdArray || fd.type == ffcv::kTorchTensor) {
      j.Field("dtype", fd.dtype);
      j.Key("shape").Array();
      for (uint64_t d : fd.shape) j.Value(d);
      j.End();
    }
    if (fd.type == ffcv::kRgbImage) {
      const ImageStats s = Images(f, k);
      j.Field("jpeg", s.jpeg).Field("raw", s.raw);
    }
    j.End();
  }
  j.End();
  j.Field("loader", LoaderLine(f));
  if (!refusal.empty()) j.Field("convert_refused", refusal);
  j.End();
  return j.Finish();
}

}  // namespace dsc
