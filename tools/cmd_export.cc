#include <png.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "format/bytes.h"
#include "format/error.h"
#include "format/mask_runs.h"
#include "kernels/limits.h"
#include "kernels/mask_codec.h"
#include "kernels/png_codec.h"
#include "reader/dataset.h"
#include "reader/decode_rgb.h"
#include "tools/commands.h"
#include "tools/loader_flags.h"

namespace dsc::tools {

namespace {

// One element as JSON: integers exactly (int64 and uint64 included), floats as doubles, bools.
nlohmann::ordered_json Element(format::DType t, const uint8_t* p) {
  switch (t) {
    case format::DType::kBool: return p[0] != 0;
    case format::DType::kInt64: return int64_t(le::get64(p));
    case format::DType::kUInt64: return le::get64(p);
    case format::DType::kFloat16: case format::DType::kFloat32: case format::DType::kFloat64:
      return format::ElementAsDouble(t, p);
    default: return int64_t(format::ElementAsDouble(t, p));  // 8..32-bit integers: exact in a double
  }
}

// Elements nested by `dims` (from `depth` on), as JSON lists.
nlohmann::ordered_json Nested(format::DType t, const std::vector<uint32_t>& dims, size_t depth, const uint8_t*& p) {
  if (depth == dims.size()) {
    auto v = Element(t, p);
    p += format::DTypeSize(t);
    return v;
  }
  auto a = nlohmann::ordered_json::array();
  for (uint32_t k = 0; k < dims[depth]; ++k) a.push_back(Nested(t, dims, depth + 1, p));
  return a;
}

std::string Base64(const uint8_t* p, size_t n) {
  static const char k[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t v = uint32_t(p[i]) << 16 | (i + 1 < n ? uint32_t(p[i + 1]) << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
    out += k[v >> 18];
    out += k[(v >> 12) & 63];
    out += i + 1 < n ? k[(v >> 6) & 63] : '=';
    out += i + 2 < n ? k[v & 63] : '=';
  }
  return out;
}

// The PNG of sample i's further image f (format 1.3), in the export's folder.
std::string FurtherImageName(uint64_t i, size_t f) {
  char name[64];
  std::snprintf(name, sizeof name, "%08llu.%zu.png", (unsigned long long)i, f);
  return name;
}

// Sample i's typed fields (format 1.2) as one JSON object: numbers and nested lists, text as a
// string, bytes as base64, a mask as the name of its PNG (written into `dir`).
std::string FieldsJson(const format::FileView& v, uint64_t i, const std::string& file, const std::filesystem::path& dir) {
  nlohmann::ordered_json j;
  j["file"] = file;
  j["index"] = i;
  std::vector<uint8_t> scratch;
  for (size_t f = 0; f < v.meta().fields.size(); ++f) {
    const format::Field& fd = v.meta().fields[f];
    // A value no open checked (an FFCV file's) is checked as it is read, as the loader checks it.
    auto check = [&](const uint8_t* p, uint64_t n) {
      if (const std::string why = v.ReadValueProblem(f, i, p, n); !why.empty())
        throw Error(v.name() + ": sample " + std::to_string(i) + ": field '" + fd.name + "': " + why);
    };
    if (format::IsFurtherImage(v.meta(), f)) {  // written beside the first image by the caller
      j[fd.name] = FurtherImageName(i, f);
    } else if (format::IsFixedField(fd.type)) {
      const uint8_t* p = v.FixedValue(f, i, &scratch);
      check(p, v.layout().width[f]);
      j[fd.name] = Nested(fd.dtype, fd.dims, 0, p);
    } else if (format::IsVarField(fd.type)) {
      const auto r = v.VarValue(f, i);
      const uint8_t* p = r.size ? v.source().Read(r.offset, r.size, &scratch) : nullptr;
      check(p, r.size);
      if (fd.type == format::FieldType::kMask) {
        char name[64];
        std::snprintf(name, sizeof name, "%08llu.%zu.png", (unsigned long long)i, f);
        // A PNG is written as stored; runs are decoded and written as a PNG of the same values.
        std::vector<uint8_t> encoded;
        if (format::IsMaskRuns(p, size_t(r.size))) {
          const std::string at = v.name() + ": sample " + std::to_string(i) + ": mask '" + fd.name + "': ";
          std::vector<uint8_t> px;
          int w = 0, h = 0;
          std::string err;
          const int ch = int(fd.dims[0]);
          if (!kernels::DecodeMask(p, size_t(r.size), ch, kernels::kDefaultMaxPixels, &px, &w, &h, &err) ||
              !kernels::EncodePng(px.data(), w, h, ch, size_t(w) * size_t(ch), &encoded, &err))
            throw Error(at + err);
        } else {
          encoded.assign(p, p + r.size);
        }
        std::ofstream png(dir / name, std::ios::binary);
        png.write(reinterpret_cast<const char*>(encoded.data()), std::streamsize(encoded.size()));
        if (!png) throw Error((dir / name).string() + ": write failed");
        j[fd.name] = name;
      } else if (fd.type == format::FieldType::kText) {
        j[fd.name] = std::string(reinterpret_cast<const char*>(p), r.size);
      } else if (fd.type == format::FieldType::kBytes) {
        j[fd.name] = Base64(p, r.size);
      } else {
        auto a = nlohmann::ordered_json::array();
        for (uint64_t row = 0, rows = r.size / v.layout().width[f]; row < rows; ++row) a.push_back(Nested(fd.dtype, fd.dims, 0, p));
        j[fd.name] = std::move(a);
      }
    }
  }
  return j.dump() + "\n";
}

void WritePng(const std::string& path, const uint8_t* rgb, int w, int h) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw Error(path + ": cannot create");
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    std::fclose(f);
    throw Error(path + ": PNG write failed");
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, png_uint_32(w), png_uint_32(h), 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < h; ++y) png_write_row(png, const_cast<uint8_t*>(rgb + size_t(y) * w * 3));
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  if (std::fclose(f) != 0) throw Error(path + ": write failed");
}

void WritePpm(const std::string& path, const uint8_t* rgb, int w, int h) {
  std::ofstream o(path, std::ios::binary);
  o << "P6\n" << w << " " << h << "\n255\n";
  o.write(reinterpret_cast<const char*>(rgb), std::streamsize(size_t(w) * h * 3));
  if (!o) throw Error(path + ": write failed");
}

// Export writes into a new or empty --out only (files of an earlier export would sit there unlisted in
// the new labels.tsv). Files are staged in a hidden folder inside --out, so every rename stays on one
// filesystem, and are moved out of it only once every sample has decoded. On any error (a sample that
// fails, a rename that fails half-way) the moved files, the staging folder and the folders export
// created go again: nothing partial is left.
class ExportDir {
 public:
  explicit ExportDir(const std::filesystem::path& out) : out_(out) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::exists(out, ec)) {
      if (!fs::is_directory(out)) throw Error(out.string() + ": exists and is not a folder");
      if (!fs::is_empty(out))
        throw Error(out.string() + ": exists and is not empty (export writes into a new or empty folder)");
    } else {
      // Remember the folders made here (deepest first) to remove them on failure.
      for (fs::path p = fs::absolute(out).lexically_normal(); !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
        if (p.filename().empty()) continue;  // a trailing '/'
        created_.push_back(p);
        if (p == p.parent_path()) break;
      }
      fs::create_directories(out);
    }
    char suffix[17];
    std::snprintf(suffix, sizeof suffix, "%016llx",
                  (unsigned long long)((uint64_t(std::random_device{}()) << 32) ^ std::random_device{}()));
    stage_ = out / (std::string(".dsc-export-") + suffix);
    fs::create_directory(stage_);
  }
  ~ExportDir() {
    if (committed_) return;
    std::error_code ec;
    for (const auto& p : moved_) std::filesystem::remove(p, ec);
    std::filesystem::remove_all(stage_, ec);
    for (const auto& d : created_) std::filesystem::remove(d, ec);  // only removes empty folders
  }
  ExportDir(const ExportDir&) = delete;
  ExportDir& operator=(const ExportDir&) = delete;
  const std::filesystem::path& path() const { return stage_; }
  void Commit() {
    for (const auto& e : std::filesystem::directory_iterator(stage_)) {
      const auto to = out_ / e.path().filename();
      std::filesystem::rename(e.path(), to);
      moved_.push_back(to);
    }
    std::filesystem::remove(stage_);
    committed_ = true;
  }

 private:
  std::filesystem::path out_, stage_;
  std::vector<std::filesystem::path> created_, moved_;
  bool committed_ = false;
};

// labels.tsv fields: class and field names come from folder names, which may hold tabs or newlines.
std::string TsvField(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '\\': o += "\\\\"; break;
      case '\t': o += "\\t"; break;
      case '\n': o += "\\n"; break;
      case '\r': o += "\\r"; break;
      default: o += c;
    }
  }
  return o;
}

}  // namespace

int CmdExport(int argc, char** argv) {
  cli::Options opts("dsc export", "Write stored samples as PNG (or PPM) images plus labels.tsv, to look at\n"
                    "what a file holds. --out must be a new or empty folder. In labels.tsv a backslash, tab,\n"
                    "newline or carriage return inside a name is written as \\\\, \\t, \\n or \\r.\n\n"
                    "  dsc export cifar10.beton --index 0 --count 16 --out /tmp/look\n");
  opts.positional_help("FILE");
  opts.add_options()
      ("index", "first sample", cli::value<uint64_t>()->default_value("0"))
      ("count", "number of samples", cli::value<uint64_t>()->default_value("1"))
      ("out", "output folder: new (created) or empty", cli::value<std::string>())
      ("ppm", "write PPM instead of PNG")
      ("upsampling", "JPEG chroma upsampling: box (the loader's default: what training sees) or fancy "
                     "(libjpeg's default, as PIL decodes)", cli::value<std::string>()->default_value("box"))
      ("idct", "JPEG inverse DCT: accurate (dsc's default) or fast (TurboJPEG's TJFLAG_FASTDCT with fancy upsampling: "
               "FFCV's pixels exactly)", cli::value<std::string>()->default_value("accurate"))
      ("max-pixels", "refuse images larger than this many pixels",
       cli::value<uint64_t>()->default_value(std::to_string(kernels::kDefaultMaxPixels)))
      ("h,help", "show this help")("file", "", cli::value<std::string>());
  const LoaderFlagSet source_flags = SourceFlags(true);  // a URL: the blocks of the samples exported, within the budget
  DeclareLoaderFlags(opts, source_flags, nullptr);
  opts.parse_positional({"file"});
  std::string file, out;
  DatasetOptions source;
  uint64_t first = 0, count = 1;
  bool ppm = false;
  DecodeOptions decode;
  try {
    auto r = Parse(opts, argc, argv);
    RejectUnmatched(r);
    if (r.count("help")) { std::fputs(opts.help().c_str(), stdout); return kExitOk; }
    if (!r.count("file") || !r.count("out")) throw cli::UsageError("expected FILE and --out DIR");
    file = r["file"].as<std::string>();
    out = r["out"].as<std::string>();
    first = r["index"].as<uint64_t>();
    count = r["count"].as<uint64_t>();
    if (count == 0) throw cli::UsageError("--count 0: nothing to export (at least 1)");
    ppm = r.count("ppm") > 0;
    decode.max_pixels = r["max-pixels"].as<uint64_t>();
    const std::string up = r["upsampling"].as<std::string>();
    if (up != "box" && up != "fancy") throw cli::UsageError("--upsampling must be box or fancy");
    decode.fancy_upsampling = up == "fancy";
    const std::string idct = r["idct"].as<std::string>();
    if (idct != "accurate" && idct != "fast") throw cli::UsageError("--idct must be accurate or fast");
    decode.fast_idct = idct == "fast";
    source = SourceOptions(r, source_flags);
  } catch (const cli::UsageError& e) {
    std::fprintf(stderr, "dsc export: %s\n\n%s", e.what(), opts.help().c_str());
    return kExitUsage;
  }
  try {
    source.verify = true;
    Dataset ds(file, source);
    if (first >= ds.size() || count > ds.size() - first)
      throw OptionError(file + ": --index " + std::to_string(first) + " --count " + std::to_string(count) +
                  " is out of range: the file has " + std::to_string(ds.size()) + " samples");
    // Over-limit images are refused before anything is written (the index is in memory: cheap).
    const auto& fields = ds.meta().fields;
    for (uint64_t i = first; i < first + count; ++i)
      for (size_t f = 0; f < fields.size(); ++f)
        if (f == 0 || format::IsFurtherImage(ds.meta(), f)) CheckPixelLimit(ds, i, ds.entry(i, uint32_t(f)), decode.max_pixels);
    ExportDir stage(out);
    std::ofstream labels(stage.path() / "labels.tsv");
    const auto& m = ds.meta();
    labels << "file\tindex";
    for (size_t f = 1; f < 1 + m.label_field_count(); ++f) labels << "\t" << TsvField(m.fields[f].name) << "\t" << TsvField(m.fields[f].name) << "_name";
    labels << "\n";
    SampleDecoder decoder(ds, decode);
    std::vector<uint8_t> rgb;
    const bool typed = ds.view().typed();  // format 1.2: the other fields go to fields.jsonl
    std::ofstream fields_out;
    if (typed) fields_out.open(stage.path() / "fields.jsonl");
    for (uint64_t i = first; i < first + count; ++i) {
      decoder.Decode(i, &rgb);
      auto e = ds.entry(i);
      char name[32];
      std::snprintf(name, sizeof name, "%08llu.%s", (unsigned long long)i, ppm ? "ppm" : "png");
      std::string path = (stage.path() / name).string();
      ppm ? WritePpm(path, rgb.data(), e.width, e.height) : WritePng(path, rgb.data(), e.width, e.height);
      labels << name << "\t" << i;
      for (size_t f = 1; f < 1 + m.label_field_count(); ++f) {
        const auto& cls = m.fields[f].classes;
        labels << "\t" << e.label[f - 1] << "\t" << (size_t(e.label[f - 1]) < cls.size() ? TsvField(cls[size_t(e.label[f - 1])]) : "");
      }
      labels << "\n";
      for (size_t f = 1; f < m.fields.size(); ++f) {  // further images (format 1.3): PNGs named in fields.jsonl
        if (!format::IsFurtherImage(m, f)) continue;
        decoder.Decode(i, &rgb, uint32_t(f));
        const auto fe = ds.entry(i, uint32_t(f));
        WritePng((stage.path() / FurtherImageName(i, f)).string(), rgb.data(), fe.width, fe.height);
      }
      if (typed) fields_out << FieldsJson(ds.view(), i, name, stage.path());
    }
    labels.close();
    if (!labels) throw Error(out + "/labels.tsv: write failed");
    if (typed) {
      fields_out.close();
      if (!fields_out) throw Error(out + "/fields.jsonl: write failed");
    }
    stage.Commit();
    std::printf("wrote %llu image(s) and labels.tsv%s to %s\n", (unsigned long long)count, typed ? " and fields.jsonl" : "", out.c_str());
    return kExitOk;
  } catch (const OptionError& e) {  // a range the file does not have: the flags' fault
    std::fprintf(stderr, "dsc export: %s\n", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsc export: error: %s\n", e.what());
    return kExitBad;
  }
}

}  // namespace dsc::tools
