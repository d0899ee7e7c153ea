// dsc::Writer: writes any sample, not only an image and a class (format 1.2's typed fields,
// docs/format.md). A schema names the fields; Add takes one sample's values in order; Close packs
// the file. Images are encoded by all threads in windows and packed in sample order, so the file is
// byte-identical for any thread count; it appears atomically (writer/atomic_file.h) on Close, and a
// Writer destroyed without Close, or one whose Add threw, leaves the target untouched.
//
//   dsc::Writer w("out.beton", {dsc::ImageField("image"), dsc::VarArrayField("boxes", dsc::format::DType::kFloat32, {4}),
//                               dsc::TextField("caption")});
//   dsc::Sample s;
//   s.SetImage("image", jpeg_bytes);
//   s.SetArray<float>("boxes", boxes.data(), boxes.size());
//   s.SetText("caption", "a cat");
//   w.Add(std::move(s));
//   w.Close();
#pragma once
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "format/fields.h"
#include "format/meta.h"
#include "writer/encoder.h"
#include "writer/source.h"

namespace dsc {

// (format::DType, not dsc::DType: that one is the loader's image element type, reader/batch.h.)
using Schema = std::vector<format::Field>;

// The schema's fields. Field 0 must be the image; labels (at most two, int32 in the index) follow it.
format::Field ImageField(std::string name);
format::Field LabelField(std::string name, std::vector<std::string> classes = {});
format::Field ScalarField(std::string name, format::DType dtype, std::vector<std::string> classes = {});
format::Field ArrayField(std::string name, format::DType dtype, std::vector<uint32_t> shape);
format::Field VarArrayField(std::string name, format::DType dtype, std::vector<uint32_t> trailing_shape = {});
format::Field BytesField(std::string name);
format::Field TextField(std::string name);
// A mask of the image's size (1 or 3 channels, stored as PNG) that follows the image's geometry when loaded.
format::Field MaskField(std::string name, int channels = 1);

// The C++ element type of each dtype (float16 is passed as its uint16_t bits, through SetRaw).
template <class T> constexpr format::DType DTypeOf();
template <> constexpr format::DType DTypeOf<int8_t>() { return format::DType::kInt8; }
template <> constexpr format::DType DTypeOf<int16_t>() { return format::DType::kInt16; }
template <> constexpr format::DType DTypeOf<int32_t>() { return format::DType::kInt32; }
template <> constexpr format::DType DTypeOf<int64_t>() { return format::DType::kInt64; }
template <> constexpr format::DType DTypeOf<uint8_t>() { return format::DType::kUInt8; }
template <> constexpr format::DType DTypeOf<uint16_t>() { return format::DType::kUInt16; }
template <> constexpr format::DType DTypeOf<uint32_t>() { return format::DType::kUInt32; }
template <> constexpr format::DType DTypeOf<uint64_t>() { return format::DType::kUInt64; }
template <> constexpr format::DType DTypeOf<float>() { return format::DType::kFloat32; }
template <> constexpr format::DType DTypeOf<double>() { return format::DType::kFloat64; }
template <> constexpr format::DType DTypeOf<bool>() { return format::DType::kBool; }

// One sample's values by field name. Every field of the schema must be set; Writer::Add checks each
// value against its field (dtype, size, UTF-8, class range) and names field and sample when it fails.
class Sample {
 public:
  struct Value {
    format::DType dtype = format::DType::kNone;  // kNone: bytes, text or an image
    bool text = false;
    bool pixels = false;         // image or mask: raw HWC uint8 pixels of width × height × channels
    int width = 0, height = 0, channels = 0;
    std::vector<uint8_t> bytes;  // little-endian elements, an encoded image, or UTF-8
    std::string where;           // the file the value came from, when it did (named in errors)
    std::string file;            // non-empty: `bytes` are this file's contents, read by the writer
  };

  // An encoded image (JPEG, PNG, ...; what `dsc build` accepts; a mask: PNG only), or 3-channel pixels.
  void SetImage(const std::string& name, std::vector<uint8_t> encoded);
  void SetPixels(const std::string& name, std::vector<uint8_t> rgb, int width, int height);
  // A mask's values: width × height × channels bytes (the field's channel count), rows packed.
  void SetMask(const std::string& name, std::vector<uint8_t> values, int width, int height, int channels = 1);
  void SetLabel(const std::string& name, int32_t value) { SetScalar<int32_t>(name, value); }
  template <class T>
  void SetScalar(const std::string& name, T value) { SetArray<T>(name, &value, 1); }
  // `count` elements (a var array's first dimension × its trailing shape).
  template <class T>
  void SetArray(const std::string& name, const T* data, size_t count) {
    SetRaw(name, DTypeOf<T>(), data, count * sizeof(T));
  }
  // Elements of `dtype` as their little-endian bytes (this host is little-endian: the format's order).
  void SetRaw(const std::string& name, format::DType dtype, const void* data, size_t size);
  void SetBytes(const std::string& name, std::vector<uint8_t> bytes);
  void SetText(const std::string& name, std::string text);
  // The contents of the file at `path`, for an image or bytes field. An image's file is read on the
  // encode threads (checked with stat in Add, so a missing file fails that Add); a bytes field's in Add.
  void SetFile(const std::string& name, std::string path);

  const std::map<std::string, Value>& values() const { return values_; }
  std::map<std::string, Value>& values() { return values_; }
  // Names the sample in messages about its image ("FILE:ROW: column 'image' (PATH)"); the writer's
  // own "OUT: sample N" when empty.
  void set_where(std::string where) { where_ = std::move(where); }
  const std::string& where() const { return where_; }

 private:
  std::map<std::string, Value> values_;
  std::string where_;
};

struct WriterOptions {
  writer::EncodeOptions encode;      // as `dsc build`'s (--encoding, --quality, ...)
  std::string jpeg_tables = "shared";
  uint64_t block_size = 4u << 20;
  int threads = 0;                   // 0 = all cores; the file does not depend on it
  uint64_t max_file_size = writer::kDefaultMaxFileSize;  // for SetFile's files (`--max-file-size`)
  std::string source_format = "writer";  // recorded as the build option `format` (dsc build: jsonl, csv, tsv)
  // When set, a sample whose image cannot be decoded or encoded is left out and reported here
  // (`--skip-invalid`) instead of failing the writer; the file still depends only on the inputs.
  std::function<void(const std::string&)> on_skip;
};

class Writer {
 public:
  // Throws dsc::Error for a schema the format refuses (format::SchemaProblem) or an unusable target.
  Writer(const std::string& path, Schema schema, WriterOptions options = {});
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Throws dsc::Error naming the sample (its number) and the field when a value is missing, of
  // another dtype or size, or cannot be encoded. Nothing is written to the target until Close.
  // A full window is encoded and packed in the background while the caller adds the next one, so an
  // image that fails to encode (or a file that fails to read) is reported by a later Add, or Close,
  // still naming its own sample; the writer has failed then.
  void Add(Sample sample);
  // Encodes what is left, writes the file and renames it over the target. Returns the file size.
  uint64_t Close();
  uint64_t samples() const;  // samples added (less any on_skip reported: written())
  uint64_t written() const;
  // An image failed to encode without on_skip: the writer refuses everything from then on.
  bool failed() const;
  const Schema& schema() const;
  // Records how many source samples the caller skipped as invalid (the meta section's skipped_count).
  void set_skipped(uint64_t n);
  // Marks the file as part `index` of `count` of a source of `source_samples` samples (dsc build
  // --shard: the build option `shard`, which dsc merge reads and drops).
  void set_shard(uint32_t index, uint32_t count, uint64_t source_samples);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dsc
