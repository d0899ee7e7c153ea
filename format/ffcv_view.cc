// An FFCV file presented as a dsc FileView, so that every order, resume, transform and remote worker
// runs on it unchanged: index entries and blocks are synthesised from ffcv::File, and its other fields
// are typed fields read in place. And the dsc fields its fields become (for convert and the loader).
#include <algorithm>
#include <cstring>
#include <limits>

#include "format/error.h"
#include "format/ffcv.h"
#include "format/fields.h"
#include "format/layout.h"

namespace dsc::format::ffcv {

std::vector<SectionExtent> Extents(const File& f) {
  const uint64_t meta = f.metadata_offset(), meta_bytes = f.sample_count() * f.record_size();
  const uint64_t table_bytes = f.alloc_entry_count() * kAllocEntrySize;
  const uint64_t pages = f.page_count() * f.page_size();
  std::vector<SectionExtent> out;
  out.push_back({"header", 0, kHeaderSize, kHeaderSize});
  out.push_back({"fields", kHeaderSize, meta - kHeaderSize, meta - kHeaderSize});
  // The metadata extent runs to the first page (zero padding), or to the table when there is no page.
  out.push_back({"metadata", meta, (pages ? f.data_offset() : f.alloc_table_offset()) - meta, meta_bytes});
  if (pages) out.push_back({"pages", f.data_offset(), pages, pages});
  out.push_back({"allocations", f.alloc_table_offset(), table_bytes, table_bytes});
  return out;
}

bool FitsInt32(const File& file, size_t f) {
  for (uint64_t i = 0; i < file.sample_count(); ++i) {
    const int64_t v = file.int_value(i, f);
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) return false;
  }
  return true;
}

std::unique_ptr<FileView> OpenView(const ByteSource* src) {
  std::shared_ptr<const File> file = File::Open(src);
  const File& f = *file;
  const auto& fields = f.fields();
  if (std::none_of(fields.begin(), fields.end(), [](const Field& fd) { return fd.type == kRgbImage; }))
    throw Error(src->name() + ": FFCV file: no RGBImageField; dsc's loader reads an image per sample (`dsc info` lists the fields)");
  if (f.sample_count() > std::numeric_limits<uint32_t>::max())
    throw Error(src->name() + ": FFCV file: " + std::to_string(f.sample_count()) + " samples, more than dsc's 2^32 - 1");
  // The fields as `dsc convert` writes them (one mapping for both), the image under FFCV's name.
  const Conversion c = PlanConversion(f, /*lenient=*/true);
  const size_t image = c.from[0];
  std::vector<size_t> labels;
  for (size_t k = 1; k < c.fields.size() && c.fields[k].type == FieldType::kLabel; ++k) labels.push_back(c.from[k]);

  std::unique_ptr<FileView> v(new FileView());
  v->src_ = src;
  v->meta_.fields = c.fields;
  v->meta_.fields[0].name = fields[image].name;
  v->ffcv_from_ = c.from;
  if (c.typed) {
    v->header_.incompat_flags |= kTypedFieldsFlag | (v->meta_.further_images() ? kFurtherImagesFlag : 0);
    v->header_.version_minor = v->meta_.further_images() ? kImagesMinor : kTypedMinor;
    v->layout_ = FieldLayout::Of(v->meta_);
    // Fixed fields read in place from the metadata table (sample i's record at i * record_size): a
    // scalar is its value (<i8, <f8: dsc's int64, float64), an array's is a u64 pointer to it.
    v->fixed_.assign(c.fields.size(), {});
    for (int k : v->layout_.fixed) {
      const Field& fd = fields[c.from[size_t(k)]];
      if (fd.type == kRgbImage) {
        // A further image's descriptor (format 1.3) is not in FFCV's record (mode, width, height,
        // pointer): made here, 8 bytes a sample, as the index entries are for the first image.
        std::vector<uint8_t>& col = v->descriptors_.emplace_back(f.sample_count() * kImageDescriptorSize);
        for (uint64_t i = 0; i < f.sample_count(); ++i) {
          const Image im = f.image(i, c.from[size_t(k)]);
          EncodeImageDescriptor({im.width, im.height, uint8_t(im.mode == 0 ? Encoding::kJpeg : Encoding::kRaw), 3},
                                col.data() + i * kImageDescriptorSize);
        }
        v->fixed_[size_t(k)] = {col.data(), kImageDescriptorSize, false};
        continue;
      }
      v->fixed_[size_t(k)] = {f.record(0) + fd.offset, f.record_size(), fd.type == kNdArray || fd.type == kTorchTensor};
    }
  }
  const uint64_t n = f.sample_count();
  v->index_copy_.resize(n * kIndexEntrySize);
  uint64_t run_page = std::numeric_limits<uint64_t>::max();
  for (uint64_t i = 0; i < n; ++i) {
    const Image im = f.image(i, image);
    const Span s = f.span(i, image);
    IndexEntry e;
    e.offset = s.ptr;
    e.size = uint32_t(s.size);  // at most a page, below 2^32 (checked by File::Open)
    e.width = im.width;
    e.height = im.height;
    e.encoding = uint8_t(im.mode == 0 ? Encoding::kJpeg : Encoding::kRaw);
    e.channels = 3;
    for (size_t l = 0; l < labels.size(); ++l) e.label[l] = int32_t(f.int_value(i, labels[l]));  // FitsInt32
    // A block is a run of consecutive samples whose images lie in one page: quasi-random then reads
    // the file run after run, though FFCV's pages are not in sample order.
    const uint64_t page = (s.ptr - std::min(s.ptr, f.data_offset())) / f.page_size();
    if (page != run_page || v->blocks_.empty()) {
      BlockEntry b;
      b.offset = s.ptr;
      b.first_sample = uint32_t(i);
      v->blocks_.push_back(b);
      run_page = page;
    }
    BlockEntry& b = v->blocks_.back();
    const uint64_t lo = std::min<uint64_t>(b.offset, s.ptr);
    const uint64_t hi = std::max<uint64_t>(b.offset + b.size, s.ptr + s.size);
    b.offset = lo;
    b.size = uint32_t(hi - lo);  // inside one page
    ++b.sample_count;
    e.block = uint32_t(v->blocks_.size() - 1);
    EncodeIndexEntry(e, v->index_copy_.data() + i * kIndexEntrySize);
  }
  v->index_ = v->index_copy_.data();
  Header& h = v->header_;
  h.sample_count = n;
  h.field_count = uint32_t(v->meta_.fields.size());
  h.block_size = f.page_size();
  h.block_count = v->blocks_.size();
  h.file_size = src->size();
  h.header_checksum = f.digest();
  v->ffcv_ = std::move(file);
  return v;
}

Span ValueSpan(const File& file, uint64_t i, size_t k) {
  Span s = file.span(i, k);
  if (file.fields()[k].type == kJson) --s.size;  // File::Open: a JSON allocation is at least its NUL
  return s;
}

std::string ValueProblem(const File& file, uint64_t i, size_t k, const format::Field& df, uint64_t width, const uint8_t* p, uint64_t n) {
  if (file.fields()[k].type == kJson) {
    // FFCV writes json.dumps(value) and a NUL, and its unpack reads up to the first NUL: a NUL before
    // the end would make FFCV's value shorter than the allocation says.
    const Span s = file.span(i, k);
    std::vector<uint8_t> scratch;
    if (file.source().Read(s.ptr + s.size - 1, 1, &scratch)[0] != 0)
      return "JSON value of " + std::to_string(s.size) + " bytes without its terminating NUL";
    if (const void* nul = n ? std::memchr(p, 0, size_t(n)) : nullptr)
      return "JSON value with a NUL at byte " + std::to_string(static_cast<const uint8_t*>(nul) - p) + " of " + std::to_string(s.size);
  }
  return format::ValueProblem(df, width, p, n);
}

}  // namespace dsc::format::ffcv

namespace dsc::format {

FileView::VarRef FileView::FfcvVarValue(size_t f, uint64_t i) const {
  const ffcv::Span s = ffcv::ValueSpan(*ffcv_, i, ffcv_from_[f]);
  return {s.ptr, uint32_t(s.size)};  // inside one page (File::Open), below 2^32
}

std::string FileView::FfcvValueProblem(size_t f, uint64_t i, const uint8_t* p, uint64_t n) const {
  return ffcv::ValueProblem(*ffcv_, i, ffcv_from_[f], meta_.fields[f], layout_.width[f], p, n);
}

}  // namespace dsc::format

namespace dsc::format::ffcv {

bool DTypeOfNumpy(const std::string& typestr, DType* out) {
  if (typestr.size() < 3) return false;
  const char order = typestr[0];
  const std::string kind = typestr.substr(1);
  static const std::pair<const char*, DType> kTypes[] = {
      {"b1", DType::kBool},   {"i1", DType::kInt8},    {"i2", DType::kInt16},   {"i4", DType::kInt32},
      {"i8", DType::kInt64},  {"u1", DType::kUInt8},   {"u2", DType::kUInt16},  {"u4", DType::kUInt32},
      {"u8", DType::kUInt64}, {"f2", DType::kFloat16}, {"f4", DType::kFloat32}, {"f8", DType::kFloat64}};
  for (const auto& [name, t] : kTypes) {
    if (kind != name) continue;
    // dsc's elements are little-endian: a big-endian dtype wider than a byte is another type.
    if (order == '>' && DTypeSize(t) > 1) return false;
    *out = t;
    return true;
  }
  return false;
}

std::string DescribeField(const format::Field& f) {
  switch (f.type) {
    case FieldType::kImage: return "image";
    case FieldType::kLabel: return "label";
    case FieldType::kBytes: return "bytes";
    case FieldType::kText: return "text";
    default: break;
  }
  std::string s = DTypeName(f.dtype);
  if (f.type == FieldType::kScalar) return s;
  s += f.type == FieldType::kVarArray ? "[*" : "[";
  for (size_t k = 0; k < f.dims.size(); ++k) {
    if (k || f.type == FieldType::kVarArray) s += ',';
    s += std::to_string(f.dims[k]);  // (appended: GCC 12 warns falsely on a "," + string temporary)
  }
  s += ']';
  return s;
}

Conversion PlanConversion(const File& file, bool lenient) {
  const auto& fields = file.fields();
  int image = -1;
  std::vector<size_t> labels, others;
  for (size_t k = 0; k < fields.size(); ++k) {
    if (fields[k].type == kRgbImage && image < 0) image = int(k);
    else if (fields[k].type == kInt && labels.size() < kMaxLabelFields && FitsInt32(file, k)) labels.push_back(k);
    else others.push_back(k);
  }
  if (image < 0) throw Error(file.name() + ": FFCV file without an RGBImageField: a dsc file holds an image per sample");
  Conversion c;
  // Why FFCV field f has no dsc field; "" when it has one.
  auto unmapped = [&](const ffcv::Field& f) -> std::string {
    switch (f.type) {
      case kInt:
      case kFloat:
      case kBytes:
      case kJson: return "";
      case kNdArray:
      case kTorchTensor: {
        DType t = DType::kNone;
        if (!DTypeOfNumpy(f.dtype, &t)) return "dsc has no element type for NumPy's " + f.dtype;
        if (f.shape.size() > kMaxFixedDims)
          return std::to_string(f.shape.size()) + " dimensions; dsc's arrays have at most " + std::to_string(kMaxFixedDims);
        if (f.array_bytes > kMaxRowWidth)
          return std::to_string(f.array_bytes) + " bytes per value; dsc's arrays hold at most " + std::to_string(kMaxRowWidth);
        return "";
      }
      case kRgbImage: return "";  // a further image (format 1.3)
      default: return "not a field type dsc converts";
    }
  };
  std::vector<size_t> mapped;
  for (size_t k : others) {
    const std::string why = unmapped(fields[k]);
    if (why.empty()) {
      mapped.push_back(k);
      continue;
    }
    const std::string what = "'" + fields[k].name + "' (" + TypeName(fields[k].type) + "): " + why;
    if (!lenient) throw Error(file.name() + ": FFCV field " + what);
    c.left_out.push_back(what);
  }
  others = mapped;
  c.typed = !others.empty();
  c.fields.push_back({FieldType::kImage, c.typed ? fields[size_t(image)].name : "image"});
  c.from.push_back(size_t(image));
  for (size_t k : labels) {
    // dsc::Writer's labels are 0 .. 2^31 - 1; a typed file keeps other IntFields as int64 scalars.
    bool label = true;
    for (uint64_t i = 0; c.typed && label && i < file.sample_count(); ++i) label = file.int_value(i, k) >= 0;
    if (!label) {
      others.push_back(k);
      continue;
    }
    c.fields.push_back({FieldType::kLabel, fields[k].name});
    c.from.push_back(k);
  }
  std::sort(others.begin(), others.end());
  for (size_t k : others) {
    const ffcv::Field& f = fields[k];
    switch (f.type) {
      case kInt: c.fields.push_back({FieldType::kScalar, f.name, {}, DType::kInt64}); break;
      case kFloat: c.fields.push_back({FieldType::kScalar, f.name, {}, DType::kFloat64}); break;
      case kBytes: c.fields.push_back({FieldType::kBytes, f.name}); break;
      case kJson: c.fields.push_back({FieldType::kText, f.name}); break;
      case kRgbImage: c.fields.push_back({FieldType::kImage, f.name}); break;
      default: {  // an array `unmapped` accepted: each dimension is at most array_bytes, so it fits uint32
        DType t = DType::kNone;
        DTypeOfNumpy(f.dtype, &t);
        c.fields.push_back({FieldType::kArray, f.name, {}, t, std::vector<uint32_t>(f.shape.begin(), f.shape.end())});
      }
    }
    c.from.push_back(k);
  }
  if (c.typed) {  // (a file without typed fields is written as before, by Build's own checks)
    Meta m;
    m.fields = c.fields;
    if (const std::string why = SchemaProblem(m, true, m.further_images()); !why.empty())
      throw Error(file.name() + ": FFCV fields as dsc fields: " + why);
  }
  return c;
}

}  // namespace dsc::format::ffcv
