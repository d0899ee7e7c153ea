#include "writer/table_build.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "format/error.h"
#include "format/fields.h"
#include "writer/source.h"
#include "writer/typed_build.h"
#include "writer/writer.h"

namespace dsc::writer {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;  // keeps the columns in file order
using format::Field;
using format::FieldType;
using format::DType;

namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool EndsWith(const std::string& s, const std::string& end) {
  return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
}

bool IsImagePath(const std::string& s) {
  const std::string l = Lower(s);
  return EndsWith(l, ".jpg") || EndsWith(l, ".jpeg") || EndsWith(l, ".png");
}

struct Row {
  size_t line = 0;
  Json value;  // an object: column -> value
};

// One CSV/TSV line into cells (RFC 4180 quotes for CSV: "a,""b""" is a,"b"; TSV has none).
std::vector<std::string> SplitCells(const std::string& line, char sep, const std::string& where) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (sep == ',' && c == '"') {
      if (quoted && i + 1 < line.size() && line[i + 1] == '"') cells.back() += '"', ++i;
      else quoted = !quoted;
    } else if (c == sep && !quoted) {
      cells.emplace_back();
    } else {
      cells.back() += c;
    }
  }
  if (quoted) throw Error(where + ": unterminated quote");
  return cells;
}

// A CSV cell as the value JSON would have given: a number, true/false, a [list], else the text.
Json CellValue(const std::string& cell) {
  if (cell.empty()) return Json(cell);
  const char c = cell[0];
  if (c == '[' || c == '-' || (c >= '0' && c <= '9') || cell == "true" || cell == "false") {
    Json j = Json::parse(cell, nullptr, false);
    if (!j.is_discarded() && (j.is_number() || j.is_boolean() || j.is_array())) return j;
  }
  return Json(cell);
}

std::vector<Row> ReadRows(const std::string& file, const std::string& kind) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(file + ": cannot open");
  constexpr size_t kMaxLine = 16 << 20;  // a file without newlines is not read whole
  std::vector<char> buf(kMaxLine + 1);
  std::vector<Row> rows;
  std::vector<std::string> header;
  const char sep = kind == "tsv" ? '\t' : ',';
  for (size_t n = 1;; ++n) {
    in.getline(buf.data(), std::streamsize(buf.size()));
    if (in.bad()) throw Error(file + ":" + std::to_string(n) + ": read error");
    if (in.fail() && !in.eof()) throw Error(file + ":" + std::to_string(n) + ": a line longer than 16 MiB");
    if (in.eof() && in.gcount() == 0) break;
    std::string line(buf.data(), size_t(in.gcount()) - (in.eof() ? 0 : 1));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string where = file + ":" + std::to_string(n);
    if (kind == "jsonl") {
      Json j;
      try {
        j = Json::parse(line);
      } catch (const Json::exception& e) {
        throw Error(where + ": not JSON: " + e.what());
      }
      if (!j.is_object()) throw Error(where + ": expected a JSON object per line");
      rows.push_back({n, std::move(j)});
    } else if (header.empty()) {
      header = SplitCells(line, sep, where);
      for (size_t k = 0; k < header.size(); ++k)
        for (size_t m = 0; m < k; ++m)
          if (header[k] == header[m]) throw Error(where + ": column '" + header[k] + "' twice in the header");
    } else {
      auto cells = SplitCells(line, sep, where);
      if (cells.size() != header.size())
        throw Error(where + ": " + std::to_string(cells.size()) + " cells, the header has " + std::to_string(header.size()));
      Json j = Json::object();
      for (size_t k = 0; k < cells.size(); ++k) j[header[k]] = CellValue(cells[k]);
      rows.push_back({n, std::move(j)});
    }
  }
  if (rows.empty()) throw Error(file + ": no rows");
  return rows;
}

// What a column's values look like, over all rows.
struct ColumnStats {
  bool any_string = false, all_image_paths = true, any_bool = false, any_float = false, any_int = false;
  bool any_array = false, any_scalar = false, bad = false;
  int64_t min_int = std::numeric_limits<int64_t>::max();
  int inner = -1;  // lists of lists: their common length; -2 when they differ or nest deeper
  bool list_float = false;
};

void Observe(const Json& v, ColumnStats* s) {
  if (v.is_string()) {
    s->any_string = true;
    s->all_image_paths &= IsImagePath(v.get<std::string>());
  } else if (v.is_boolean()) {
    s->any_bool = true;
  } else if (v.is_number_integer()) {
    s->any_int = true;
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) s->min_int = std::min<int64_t>(s->min_int, 0);
    else s->min_int = std::min(s->min_int, v.get<int64_t>());
  } else if (v.is_number_float()) {
    s->any_float = true;
  } else if (v.is_array()) {
    s->any_array = true;
    for (const Json& e : v) {
      if (e.is_array()) {
        if (s->inner == -1) s->inner = int(e.size());
        else if (s->inner != int(e.size())) s->inner = -2;
        for (const Json& x : e) {
          if (!x.is_number()) s->inner = -2;
          s->list_float |= x.is_number_float();
        }
      } else if (e.is_number()) {
        s->any_scalar = true;
        s->list_float |= e.is_number_float();
      } else {
        s->bad = true;
      }
    }
  } else {
    s->bad = true;
  }
}

Field ParseType(const std::string& name, const std::string& type) {
  if (type == "image") return ImageField(name);
  if (type == "label") return dsc::LabelField(name);
  if (type == "text") return TextField(name);
  DType dt;
  const size_t br = type.find('[');
  if (!format::ParseDType(type.substr(0, br), &dt))
    throw OptionError("--schema: column '" + name + "': unknown type '" + type + "' (image, label, text, a dtype, DTYPE[D,..] or DTYPE[*,D,..])");
  if (br == std::string::npos) return ScalarField(name, dt);
  if (type.back() != ']') throw OptionError("--schema: column '" + name + "': '" + type + "' lacks its closing ]");
  std::vector<uint32_t> dims;
  bool var = false;
  std::stringstream ss(type.substr(br + 1, type.size() - br - 2));
  std::string d;
  for (size_t k = 0; std::getline(ss, d, ','); ++k) {
    if (k == 0 && d == "*") {
      var = true;
      continue;
    }
    char* end = nullptr;
    const unsigned long v = std::strtoul(d.c_str(), &end, 10);
    if (d.empty() || *end || v == 0 || v > UINT32_MAX) throw OptionError("--schema: column '" + name + "': bad dimension '" + d + "'");
    dims.push_back(uint32_t(v));
  }
  return var ? VarArrayField(name, dt, dims) : ArrayField(name, dt, dims);
}

// Flattens `v` (nested lists) into `out` as `dt` elements, checking the shape: `dims` for a fixed array,
// any first dimension then `dims` for a variable one. Returns "" or why not.
std::string Flatten(const Json& v, DType dt, const std::vector<uint32_t>& dims, size_t depth, std::vector<uint8_t>* out);

std::string Scalar(const Json& v, DType dt, std::vector<uint8_t>* out) {
  auto put = [&](auto x) {
    const auto* p = reinterpret_cast<const uint8_t*>(&x);
    out->insert(out->end(), p, p + sizeof x);
  };
  if (dt == DType::kBool) {
    if (v.is_boolean()) return put(uint8_t(v.get<bool>())), "";
    if (v.is_number_integer() && (v.get<int64_t>() == 0 || v.get<int64_t>() == 1)) return put(uint8_t(v.get<int64_t>())), "";
    return "expected true or false, got " + v.dump();
  }
  if (!v.is_number()) return "expected a number, got " + v.dump();
  if (dt == DType::kFloat32) return put(v.get<float>()), "";
  if (dt == DType::kFloat64) return put(v.get<double>()), "";
  if (dt == DType::kFloat16) return "float16 columns are not supported in tables (use float32)";
  if (!v.is_number_integer()) return "expected an integer, got " + v.dump();
  const bool neg = !v.is_number_unsigned() && v.get<int64_t>() < 0;
  const int64_t s = neg ? v.get<int64_t>() : 0;
  const uint64_t u = neg ? 0 : v.get<uint64_t>();
  auto range = [&](int64_t lo, uint64_t hi) { return neg ? s >= lo : u <= hi; };
  switch (dt) {
    case DType::kInt8: if (!range(INT8_MIN, INT8_MAX)) break; return put(int8_t(neg ? s : int64_t(u))), "";
    case DType::kInt16: if (!range(INT16_MIN, INT16_MAX)) break; return put(int16_t(neg ? s : int64_t(u))), "";
    case DType::kInt32: if (!range(INT32_MIN, INT32_MAX)) break; return put(int32_t(neg ? s : int64_t(u))), "";
    case DType::kInt64: if (!range(INT64_MIN, INT64_MAX)) break; return put(int64_t(neg ? s : int64_t(u))), "";
    case DType::kUInt8: if (neg || u > UINT8_MAX) break; return put(uint8_t(u)), "";
    case DType::kUInt16: if (neg || u > UINT16_MAX) break; return put(uint16_t(u)), "";
    case DType::kUInt32: if (neg || u > UINT32_MAX) break; return put(uint32_t(u)), "";
    case DType::kUInt64: if (neg) break; return put(u), "";
    default: break;
  }
  return v.dump() + " is outside " + format::DTypeName(dt);
}

std::string Flatten(const Json& v, DType dt, const std::vector<uint32_t>& dims, size_t depth, std::vector<uint8_t>* out) {
  if (depth == dims.size()) return Scalar(v, dt, out);
  if (!v.is_array()) return "expected a list at depth " + std::to_string(depth) + ", got " + v.dump().substr(0, 40);
  if (v.size() != dims[depth])
    return "a list of " + std::to_string(v.size()) + " at depth " + std::to_string(depth) + ", the shape says " + std::to_string(dims[depth]);
  for (const Json& e : v)
    if (std::string why = Flatten(e, dt, dims, depth + 1, out); !why.empty()) return why;
  return "";
}

}  // namespace

bool IsTableSource(const std::string& source, const std::string& format) {
  if (format == "jsonl" || format == "csv" || format == "tsv") return true;
  if (format != "auto") return false;
  const std::string l = Lower(source);
  return EndsWith(l, ".jsonl") || EndsWith(l, ".ndjson") || EndsWith(l, ".csv");
}

BuildReport BuildTable(const std::string& source, const std::string& out, const BuildOptions& o, const TableOptions& t) {
  const auto t0 = std::chrono::steady_clock::now();
  auto log = o.log ? o.log : [](const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); };
  std::string kind = o.format;
  if (kind == "auto") kind = EndsWith(Lower(source), ".csv") ? "csv" : "jsonl";
  if (o.split != "train") throw OptionError(source + ": a table has no splits; list the test samples in a table of their own");
  const std::vector<Row> rows = ReadRows(source, kind);

  // Columns in the order they first appear; types from --schema, else from the values.
  std::vector<std::string> columns;
  std::map<std::string, ColumnStats> stats;
  for (const Row& r : rows)
    for (const auto& [k, v] : r.value.items()) {
      if (!stats.count(k)) columns.push_back(k);
      Observe(v, &stats[k]);
    }
  std::map<std::string, Field> given;
  {
    std::stringstream ss(t.schema);
    for (std::string item; ss >> item;) {
      const size_t colon = item.find(':');
      if (colon == std::string::npos || colon == 0) throw OptionError("--schema: '" + item + "' is not NAME:TYPE");
      const std::string name = item.substr(0, colon);
      if (!stats.count(name)) throw OptionError("--schema: no column '" + name + "' in " + source);
      given[name] = ParseType(name, item.substr(colon + 1));
    }
  }
  // The first image: --image-column, else the first column typed image by --schema, else "image", else
  // the first column of image paths. Other image columns become further images (format 1.3).
  std::string image = t.image_column;
  for (const auto& c : columns)
    if (image.empty() && given.count(c) && given[c].type == FieldType::kImage) image = c;
  if (image.empty() && stats.count("image")) image = "image";
  if (image.empty())
    for (const auto& c : columns)
      if (stats[c].any_string && stats[c].all_image_paths && !given.count(c)) {
        image = c;
        break;
      }
  if (image.empty() || !stats.count(image))
    throw OptionError(source + ": no image column (name one with --image-column, or --schema NAME:image)");
  Schema schema{ImageField(image)};
  std::vector<std::string> order{image};  // the schema's columns, in schema order
  auto add = [&](const std::string& c, Field f) {
    schema.push_back(std::move(f));
    order.push_back(c);
  };
  // Labels first (the format keeps them in the index, right after the image).
  for (const auto& c : columns) {
    const ColumnStats& s = stats[c];
    const bool label = given.count(c) ? given[c].type == FieldType::kLabel
                                      : c == "label" && s.any_int && !s.any_float && !s.any_string && !s.any_array && !s.any_bool && s.min_int >= 0;
    if (c != image && label) add(c, dsc::LabelField(c));
  }
  for (const auto& c : columns) {
    if (c == image || std::find(order.begin(), order.end(), c) != order.end()) continue;
    if (given.count(c)) {
      add(c, given[c]);
      continue;
    }
    const ColumnStats& s = stats[c];
    if (s.any_string && s.all_image_paths && !s.any_bool && !s.any_int && !s.any_float && !s.any_array && !s.bad) {
      add(c, ImageField(c));  // a further image
      continue;
    }
    const int kinds = int(s.any_string) + int(s.any_bool) + int(s.any_int || s.any_float) + int(s.any_array);
    if (s.bad || kinds != 1)
      throw Error(source + ": column '" + c + "' mixes kinds of values (or holds null/objects): give its type with --schema " + c + ":TYPE");
    if (s.any_string) add(c, TextField(c));
    else if (s.any_bool) add(c, ScalarField(c, DType::kBool));
    else if (s.any_int || s.any_float) add(c, ScalarField(c, s.any_float ? DType::kFloat32 : DType::kInt64));
    else if (s.inner == -2 || (s.inner >= 0 && s.any_scalar) || s.inner == 0)
      throw Error(source + ": column '" + c + "' holds lists of differing shapes: give its type with --schema " + c + ":DTYPE[*,D]");
    else add(c, VarArrayField(c, s.list_float ? DType::kFloat32 : DType::kInt64,
                              s.inner > 0 ? std::vector<uint32_t>{uint32_t(s.inner)} : std::vector<uint32_t>{}));
  }

  WriterOptions wo = TypedWriterOptions(o, kind);
  uint64_t dropped = 0;
  if (o.skip_invalid) wo.on_skip = [&](const std::string& why) { log("skipped: " + why), ++dropped; };
  {
    std::error_code ec;
    if (fs::exists(out, ec) && fs::equivalent(source, out, ec)) throw Error(out + ": is the source itself; name another output file");
  }
  Writer w(out, schema, wo);
  BuildReport rep;
  rep.format = kind;
  const fs::path base = fs::path(source).parent_path();
  // Types come from every row above, so that each part of a sharded build has the same schema.
  const ShardRange range = ShardOf(o, rows.size());
  const size_t begin = range.begin, end = range.end;
  if (o.shard_count) w.set_shard(o.shard_index, o.shard_count, rows.size());
  for (size_t i = begin; i < end; ++i) {
    const Row& r = rows[i];
    const std::string where = source + ":" + std::to_string(r.line);
    Sample s;
    std::string error;
    for (size_t f = 0; f < schema.size() && error.empty(); ++f) {
      const Field& fd = schema[f];
      const std::string at = where + ": column '" + order[f] + "'";
      if (!r.value.contains(order[f])) {
        error = at + ": missing";
        break;
      }
      const Json& v = r.value[order[f]];
      std::vector<uint8_t> bytes;
      std::string why;
      switch (fd.type) {
        case FieldType::kImage: {
          if (!v.is_string() || v.get<std::string>().empty()) {
            why = "expected an image path, got " + v.dump().substr(0, 40);
            break;
          }
          fs::path p = v.get<std::string>();
          if (p.is_relative()) p = base / p;
          try {
            s.SetImage(fd.name, ReadWholeFile(p.string(), o.max_file_size));
            if (f == 0) s.set_where(at + " (" + p.string() + ")");
          } catch (const EnvironmentError&) {
            throw;
          } catch (const Error& e) {
            why = e.what();
          }
          break;
        }
        case FieldType::kLabel:
          why = Scalar(v, DType::kInt32, &bytes);
          if (why.empty()) {
            int32_t x;
            std::memcpy(&x, bytes.data(), 4);
            if (x < 0) why = "label " + std::to_string(x) + " is negative";
            else s.SetLabel(fd.name, x);
          }
          break;
        case FieldType::kText:
          if (!v.is_string()) why = "expected a string, got " + v.dump().substr(0, 40);
          else s.SetText(fd.name, v.get<std::string>());
          break;
        case FieldType::kScalar:
        case FieldType::kArray:
          why = Flatten(v, fd.dtype, fd.dims, 0, &bytes);
          if (why.empty()) s.SetRaw(fd.name, fd.dtype, bytes.data(), bytes.size());
          break;
        case FieldType::kVarArray:
          if (!v.is_array()) {
            why = "expected a list, got " + v.dump().substr(0, 40);
            break;
          }
          for (const Json& e : v)
            if (why = Flatten(e, fd.dtype, fd.dims, 0, &bytes); !why.empty()) break;
          if (why.empty()) s.SetRaw(fd.name, fd.dtype, bytes.data(), bytes.size());
          break;
        default:
          why = "bytes columns are not read from tables";
      }
      if (!why.empty()) error = at + ": " + why;
    }
    if (error.empty()) {
      try {
        w.Add(std::move(s));
        continue;
      } catch (const Error& e) {
        if (w.failed()) throw;  // an encode failure of an earlier window: not this row's
        error = e.what();
      }
    }
    if (!o.skip_invalid) throw Error(error + " (use --skip-invalid to skip such rows)");
    log("skipped: " + error);
    ++rep.skipped;
  }
  if (w.samples() == 0) throw Error(source + ": no samples to write (all were skipped)");
  w.set_skipped(rep.skipped);  // rows refused before encoding; Close adds those whose image failed
  rep.file_size = w.Close();
  rep.skipped += dropped;
  rep.samples = w.written();
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace dsc::writer
