#include "writer/writer.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <thread>

#include "format/error.h"
#include "format/layout.h"
#include "format/optional.h"
#include "kernels/cpu.h"
#include "writer/atomic_file.h"
#include "writer/build.h"
#include "writer/encode_pool.h"
#include "writer/file_builder.h"

namespace dsc {

using format::Field;
using format::DType;
using format::FieldType;

Field ImageField(std::string name) { return {FieldType::kImage, std::move(name), {}, DType::kNone, {}}; }
Field LabelField(std::string name, std::vector<std::string> classes) {
  return {FieldType::kLabel, std::move(name), std::move(classes), DType::kNone, {}};
}
Field ScalarField(std::string name, DType dtype, std::vector<std::string> classes) {
  return {FieldType::kScalar, std::move(name), std::move(classes), dtype, {}};
}
Field ArrayField(std::string name, DType dtype, std::vector<uint32_t> shape) {
  return {FieldType::kArray, std::move(name), {}, dtype, std::move(shape)};
}
Field VarArrayField(std::string name, DType dtype, std::vector<uint32_t> trailing_shape) {
  return {FieldType::kVarArray, std::move(name), {}, dtype, std::move(trailing_shape)};
}
Field BytesField(std::string name) { return {FieldType::kBytes, std::move(name), {}, DType::kNone, {}}; }
Field TextField(std::string name) { return {FieldType::kText, std::move(name), {}, DType::kNone, {}}; }
Field MaskField(std::string name, int channels) {
  return {FieldType::kMask, std::move(name), {}, DType::kUInt8, {uint32_t(channels)}};
}

void Sample::SetImage(const std::string& name, std::vector<uint8_t> encoded) {
  Value v;
  v.bytes = std::move(encoded);
  values_[name] = std::move(v);
}

void Sample::SetPixels(const std::string& name, std::vector<uint8_t> rgb, int width, int height) {
  Value v;
  v.pixels = true;
  v.width = width;
  v.height = height;
  v.channels = 3;
  v.bytes = std::move(rgb);
  values_[name] = std::move(v);
}

void Sample::SetMask(const std::string& name, std::vector<uint8_t> values, int width, int height, int channels) {
  Value v;
  v.pixels = true;
  v.width = width;
  v.height = height;
  v.channels = channels;
  v.bytes = std::move(values);
  values_[name] = std::move(v);
}

void Sample::SetRaw(const std::string& name, DType dtype, const void* data, size_t size) {
  Value v;
  v.dtype = dtype;
  v.bytes.assign(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + size);
  values_[name] = std::move(v);
}

void Sample::SetBytes(const std::string& name, std::vector<uint8_t> bytes) {
  Value v;
  v.bytes = std::move(bytes);
  values_[name] = std::move(v);
}

void Sample::SetFile(const std::string& name, std::string path) {
  Value v;
  v.file = std::move(path);
  values_[name] = std::move(v);
}

void Sample::SetText(const std::string& name, std::string text) {
  Value v;
  v.text = true;
  v.bytes.assign(text.begin(), text.end());
  values_[name] = std::move(v);
}

namespace {

// One window of samples: the images for the encoders, and the rest of each row for the packer.
struct Window {
  std::vector<writer::SourceItem> items;
  std::vector<std::string> files;  // non-empty: the image is this file, read on an encode thread
  std::vector<std::string> at;     // "OUT: sample N: field 'F'", for a file's read errors
  std::vector<writer::TypedRow> rows;
  void clear() { items.clear(), files.clear(), at.clear(), rows.clear(); }
};

// The window being encoded, handed to the encode pool as a source; Load moves each item out (once)
// and reads its file there, so files are read by every encode thread in parallel.
class WindowSource : public writer::Source {
 public:
  std::string format() const override { return "writer"; }
  const std::vector<writer::LabelField>& label_fields() const override { return labels_; }
  size_t size() const override { return w.items.size(); }
  void Load(size_t i, writer::SourceItem* out) const override {
    *out = std::move(w.items[i]);
    for (writer::ImageInput& img : out->images) {
      if (img.file.empty()) continue;
      try {
        img.bytes = writer::ReadWholeFile(img.file, max_file_size);
      } catch (const writer::EnvironmentError& e) {
        throw writer::EnvironmentError(img.where + ": " + e.what());
      } catch (const Error& e) {
        throw Error(img.where + ": " + e.what());
      }
    }
    if (w.files[i].empty()) return;
    try {
      out->bytes = writer::ReadWholeFile(w.files[i], max_file_size);
    } catch (const writer::EnvironmentError& e) {
      throw writer::EnvironmentError(w.at[i] + ": " + e.what());
    } catch (const Error& e) {
      throw Error(w.at[i] + ": " + e.what());
    }
  }
  mutable Window w;
  uint64_t max_file_size = writer::kDefaultMaxFileSize;

 private:
  std::vector<writer::LabelField> labels_;
};

}  // namespace

struct Writer::Impl {
  Impl(const std::string& p, Schema s, WriterOptions o)
      : path(p), options(std::move(o)), file(p), builder(&file, options.block_size, options.jpeg_tables == "shared") {
    meta.fields = std::move(s);
    typed = meta.typed();
    layout = format::FieldLayout::Of(meta);
    threads = options.threads > 0 ? options.threads : kernels::UsableCores();
    window = size_t(64) * size_t(threads);
    if (typed) builder.SetTyped(layout);
    uint64_t fixed_at = 0;
    for (size_t f = 0; f < meta.fields.size(); ++f) {
      if (meta.fields[f].type == FieldType::kMask) mask_slots.push_back(size_t(layout.slot[f]));
      if (format::IsFurtherImage(meta, f)) image_slots.push_back({size_t(layout.slot[f]), fixed_at});
      if (format::IsFixedField(meta.fields[f].type) || format::IsFurtherImage(meta, f)) fixed_at += layout.width[f];
    }
    if (options.encode.restart_enabled()) {
      const auto rp = options.encode.restart_policy();
      restart.mode = rp.fixed ? format::RestartStats::kFixed : format::RestartStats::kAuto;
      restart.target = uint32_t(rp.fixed ? rp.fixed : rp.target);
      restart.min_mcus = uint64_t(rp.min_mcus);
    }
    src.max_file_size = options.max_file_size;
    pool = std::make_unique<writer::WindowPool>(src, options.encode, threads);
  }
  ~Impl() {
    if (packer.joinable()) packer.join();  // it uses the pool, the builder and the window
  }

  // Refuses what the read on an encode thread would (the same checks as ReadWholeFile), so that a
  // missing file fails its own Add and leaves the writer usable.
  void CheckFile(const std::string& file, const std::string& at) const {
    struct stat st;
    if (::stat(file.c_str(), &st) != 0) {
      const int e = errno;
      writer::ThrowFileError(at + ": " + file + ": cannot open", e);
    }
    if (!S_ISREG(st.st_mode)) throw Error(at + ": " + file + ": not a regular file");
    if (uint64_t(st.st_size) > options.max_file_size)
      throw Error(at + ": " + file + ": " + std::to_string(st.st_size) + " bytes, more than max_file_size " +
                  std::to_string(options.max_file_size));
    if (st.st_size == 0) throw Error(at + ": " + file + ": an empty file");
  }

  std::string At(uint64_t i, const Field& f) const {
    return path + ": sample " + std::to_string(i) + ": field '" + f.name + "'";
  }

  // Checks a sample against the schema and turns it into the encoder's item (and the image's file,
  // left to read) and the packer's row.
  void Convert(Sample& s, uint64_t i, writer::SourceItem* item, std::string* image_file, writer::TypedRow* row) {
    auto& vals = s.values();
    for (const auto& kv : vals) {
      const std::string& name = kv.first;  // a named variable, not a binding: clang 14 cannot capture those
      if (std::none_of(meta.fields.begin(), meta.fields.end(), [&](const Field& f) { return f.name == name; }))
        throw Error(path + ": sample " + std::to_string(i) + ": no field named '" + name + "' in the schema");
    }
    row->fixed.assign(layout.row_bytes, 0);
    row->var.assign(layout.var.size(), {});
    size_t fixed_at = 0;
    for (size_t f = 0; f < meta.fields.size(); ++f) {
      const Field& fd = meta.fields[f];
      auto it = vals.find(fd.name);
      if (it == vals.end()) throw Error(At(i, fd) + ": missing");
      Sample::Value& v = it->second;
      const uint64_t width = layout.width[f];
      auto expect = [&](bool ok, const std::string& what) {
        if (!ok) throw Error(At(i, fd) + ": expected " + what);
      };
      if (!v.file.empty() && fd.type != FieldType::kImage) {
        expect(fd.type == FieldType::kBytes || fd.type == FieldType::kMask,
               std::string(format::FieldTypeName(fd.type)) + " values, got a file");
        if (v.where.empty()) v.where = v.file;  // a mask's errors name its file
        try {
          v.bytes = writer::ReadWholeFile(v.file, options.max_file_size);
        } catch (const writer::EnvironmentError& e) {
          throw writer::EnvironmentError(At(i, fd) + ": " + e.what());
        } catch (const Error& e) {
          throw Error(At(i, fd) + ": " + e.what());
        }
      }
      if (format::IsFurtherImage(meta, f)) {  // encoded by the encode threads; its descriptor is packed then
        writer::ImageInput img;
        img.where = At(i, fd);
        if (!v.file.empty()) {
          CheckFile(v.file, At(i, fd));
          img.file = v.file;
          img.where += " (" + v.file + ")";
        } else {
          expect(v.dtype == DType::kNone && !v.text && !v.bytes.empty(), "an image (encoded bytes or pixels)");
          if (v.pixels && (v.width < 1 || v.height < 1 || v.bytes.size() != size_t(v.width) * size_t(v.height) * 3))
            throw Error(At(i, fd) + ": " + std::to_string(v.bytes.size()) + " pixel bytes for " + std::to_string(v.width) +
                        "x" + std::to_string(v.height) + " RGB");
          img.is_pixels = v.pixels;
          img.width = v.width;
          img.height = v.height;
          img.bytes = std::move(v.bytes);
        }
        item->images.push_back(std::move(img));
        fixed_at += width;
        continue;
      }
      switch (fd.type) {
        case FieldType::kImage:
          if (!v.file.empty()) {
            CheckFile(v.file, At(i, fd));
            *image_file = v.file;
            item->is_pixels = false;
            item->where = s.where().empty() ? At(i, fd) + " (" + v.file + ")" : s.where();
            break;
          }
          expect(v.dtype == DType::kNone && !v.text && !v.bytes.empty(), "an image (encoded bytes or pixels)");
          if (v.pixels && (v.width < 1 || v.height < 1 || v.bytes.size() != size_t(v.width) * size_t(v.height) * 3))
            throw Error(At(i, fd) + ": " + std::to_string(v.bytes.size()) + " pixel bytes for " + std::to_string(v.width) +
                        "x" + std::to_string(v.height) + " RGB");
          item->is_pixels = v.pixels;
          item->width = v.width;
          item->height = v.height;
          item->bytes = std::move(v.bytes);
          item->where = s.where().empty() ? path + ": sample " + std::to_string(i) : s.where();
          break;
        case FieldType::kLabel: {
          expect(v.dtype == DType::kInt32 && v.bytes.size() == 4, "one int32 label");
          int32_t x;
          std::memcpy(&x, v.bytes.data(), 4);
          if (x < 0 || (!fd.classes.empty() && size_t(x) >= fd.classes.size()))
            throw Error(At(i, fd) + ": label " + std::to_string(x) + " out of range");
          item->label[f - 1] = x;
          break;
        }
        case FieldType::kScalar:
        case FieldType::kArray:
          expect(v.dtype == fd.dtype, std::string(format::DTypeName(fd.dtype)) + " values, got " + format::DTypeName(v.dtype));
          expect(v.bytes.size() == width, std::to_string(width / format::DTypeSize(fd.dtype)) + " elements, got " +
                                               std::to_string(v.bytes.size() / format::DTypeSize(fd.dtype)));
          std::memcpy(row->fixed.data() + fixed_at, v.bytes.data(), width);
          fixed_at += width;
          break;
        case FieldType::kMask: {
          expect(v.dtype == DType::kNone && !v.text && !v.bytes.empty(), "a mask (PNG bytes or values)");
          if (v.pixels && v.channels != int(fd.dims[0]))
            throw Error(At(i, fd) + ": " + std::to_string(v.channels) + "-channel values for a " + std::to_string(fd.dims[0]) +
                        "-channel mask");
          writer::MaskInput m;
          m.field = fd.name;
          m.channels = int(fd.dims[0]);
          m.is_pixels = v.pixels;
          m.width = v.width;
          m.height = v.height;
          m.bytes = std::move(v.bytes);
          m.where = v.where;
          item->masks.push_back(std::move(m));
          continue;  // checked and stored by the encode threads (writer/mask_store.h)
        }
        case FieldType::kVarArray:
          expect(v.dtype == fd.dtype, std::string(format::DTypeName(fd.dtype)) + " values, got " + format::DTypeName(v.dtype));
          [[fallthrough]];
        case FieldType::kBytes:
        case FieldType::kText:
          if (fd.type == FieldType::kBytes) expect(v.dtype == DType::kNone && !v.text, "bytes");
          if (fd.type == FieldType::kText) expect(v.text, "text");
          row->var[size_t(layout.slot[f])] = std::move(v.bytes);
          break;
      }
      const std::vector<uint8_t>& stored = format::IsFixedField(fd.type)
                                               ? row->fixed
                                               : format::IsVarField(fd.type) ? row->var[size_t(layout.slot[f])] : item->bytes;
      if (format::IsFixedField(fd.type) || format::IsVarField(fd.type)) {
        const uint8_t* p = format::IsFixedField(fd.type) ? stored.data() + fixed_at - width : stored.data();
        const uint64_t n = format::IsFixedField(fd.type) ? width : stored.size();
        if (const std::string why = format::ValueProblem(fd, width, p, n); !why.empty()) throw Error(At(i, fd) + ": " + why);
      }
    }
  }

  // Waits for the window in flight; reports its skipped samples (on the caller's thread) or its error.
  void Wait() {
    if (packer.joinable()) packer.join();
    for (const auto& why : skipped) options.on_skip(why);
    dropped += skipped.size();
    skipped.clear();
    if (packer_error) {
      std::exception_ptr e = packer_error;
      packer_error = nullptr;
      std::rethrow_exception(e);
    }
  }

  // Hands the filled window to the packer thread (after the one in flight), which encodes it with
  // the pool and packs it in sample order while the caller fills the next.
  void Launch() {
    Wait();
    if (filling.items.empty()) return;
    std::swap(src.w, filling);
    filling.clear();
    packer = std::thread([this] {
      try {
        Pack();
      } catch (...) {
        packer_error = std::current_exception();
      }
    });
  }

  void Pack() {
    Window& w = src.w;
    slots.clear();
    slots.resize(w.items.size());
    pool->Run(0, &slots);
    for (size_t i = 0; i < slots.size(); ++i) {
      if (!slots[i].error.empty()) {
        if (slots[i].machine || !options.on_skip) throw Error(slots[i].error);
        skipped.push_back(slots[i].error);
        continue;
      }
      for (size_t k = 0; k < mask_slots.size(); ++k) w.rows[i].var[mask_slots[k]] = std::move(slots[i].masks[k]);
      for (size_t k = 0; k < image_slots.size(); ++k) {
        writer::Encoded& e = slots[i].images[k];
        format::EncodeImageDescriptor({e.width, e.height, e.encoding, e.channels}, w.rows[i].fixed.data() + image_slots[k].fixed_at);
        w.rows[i].var[image_slots[k].var] = std::move(e.payload);
      }
      builder.Add(slots[i].enc, slots[i].labels, typed ? &w.rows[i] : nullptr);
      writer::CountRestart(slots[i].enc, &restart);
    }
    w.clear();
    slots.clear();
  }

  std::string path;
  WriterOptions options;
  writer::AtomicFile file;
  writer::FileBuilder builder;
  format::Meta meta;
  bool typed = false;
  format::FieldLayout layout;
  int threads = 1;
  size_t window = 64;
  WindowSource src;  // the window in flight (the packer's while it runs)
  Window filling;     // the window Add fills
  std::unique_ptr<writer::WindowPool> pool;
  std::vector<size_t> mask_slots;  // the var slot of each mask field, in field order
  struct ImageSlot {
    size_t var;         // its payload's var slot
    uint64_t fixed_at;  // its descriptor's offset in a fixed row
  };
  std::vector<ImageSlot> image_slots;  // each further image field, in field order
  std::vector<writer::Slot> slots;
  std::thread packer;
  std::exception_ptr packer_error;
  std::vector<std::string> skipped;  // by the packer, for on_skip
  format::RestartStats restart;
  uint64_t added = 0, dropped = 0;
  std::string shard_line;  // set_shard's build option, or empty
  bool failed = false, closed = false;
};

Writer::Writer(const std::string& path, Schema schema, WriterOptions options) {
  options.encode.Validate();
  if (options.jpeg_tables != "shared" && options.jpeg_tables != "inline") throw OptionError("jpeg_tables must be 'shared' or 'inline'");
  if (options.block_size < format::kPageSize || (options.block_size & (options.block_size - 1)) || options.block_size > (1ull << 31))
    throw OptionError("block_size must be a power of two between 4096 and 2^31");
  if (options.threads < 0 || options.threads > 1024) throw OptionError("threads must be 0 (all cores) to 1024");
  if (options.source_format.empty() || options.source_format.find_first_of("\n=") != std::string::npos)
    throw OptionError("source_format must be a word (it is recorded as a build option)");
  format::Meta m;
  m.fields = schema;
  if (const std::string why = format::SchemaProblem(m, m.typed(), m.further_images()); !why.empty()) throw Error(path + ": schema: " + why);
  impl_ = std::make_unique<Impl>(path, std::move(schema), std::move(options));
}

Writer::~Writer() = default;

void Writer::Add(Sample sample) {
  Impl& d = *impl_;
  if (d.failed || d.closed) throw Error(d.path + ": the writer is " + (d.closed ? "closed" : "failed (an earlier error)"));
  writer::SourceItem item;
  writer::TypedRow row;
  std::string file;
  d.Convert(sample, d.added, &item, &file, &row);  // a refused sample leaves the writer usable
  d.filling.items.push_back(std::move(item));
  d.filling.at.push_back(file.empty() ? std::string() : d.At(d.added, d.meta.fields[0]));
  d.filling.files.push_back(std::move(file));
  d.filling.rows.push_back(std::move(row));
  ++d.added;
  if (d.filling.items.size() < d.window) return;
  try {
    d.Launch();
  } catch (...) {  // an image that failed to encode: the window is lost, and so is the file
    d.failed = true;
    throw;
  }
}

uint64_t Writer::Close() {
  Impl& d = *impl_;
  if (d.failed || d.closed) throw Error(d.path + ": the writer is " + (d.closed ? "closed" : "failed (an earlier error)"));
  d.closed = true;
  d.Launch();  // on failure the target stays untouched: the AtomicFile is never committed
  d.Wait();
  d.pool.reset();
  d.meta.build_options = writer::SortedLines("block_size=" + std::to_string(d.options.block_size) + "\n" + d.options.encode.Describe() +
                                             "format=" + d.options.source_format + "\njpeg_tables=" + d.options.jpeg_tables + "\n" +
                                             d.shard_line);
  if (d.restart.images > 0) d.builder.AddOptional(format::kRestartSection, format::EncodeRestartStats(d.restart));
  d.meta.skipped_count += d.dropped;
  const uint64_t size = d.builder.Finish(d.meta);
  d.file.Commit();
  return size;
}

uint64_t Writer::samples() const { return impl_->added; }
uint64_t Writer::written() const { return impl_->added - impl_->dropped; }
bool Writer::failed() const { return impl_->failed; }
void Writer::set_skipped(uint64_t n) { impl_->meta.skipped_count = n; }

void Writer::set_shard(uint32_t index, uint32_t count, uint64_t source_samples) {
  impl_->shard_line = writer::ShardLine(index, count, source_samples);
}
const Schema& Writer::schema() const { return impl_->meta.fields; }

}  // namespace dsc
