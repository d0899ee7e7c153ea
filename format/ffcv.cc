#include "format/ffcv.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "format/bytes.h"
#include "format/checksum.h"
#include "format/error.h"
#include "format/layout.h"

namespace dsc::format::ffcv {

namespace {

constexpr uint64_t kUnallocated = std::numeric_limits<uint64_t>::max();
// Read in pieces of this many entries: the table of a 600 GB file is never held whole.
constexpr uint64_t kAllocChunk = 1 << 16;
// FFCV writes version 2; its page sizes are powers of two from 2 MiB below 4 GiB. dsc also reads the
// smaller pages that tests (and hand-written files) use.
constexpr uint32_t kMinPage = 4096;

std::string Num(uint64_t v) { return std::to_string(v); }

bool Mul(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// NumPy's type string of an FFCV array descriptor: `[["", "<f4"]]` (dtype.descr of a plain dtype).
// Returns false for anything else (structured or object dtypes FFCV could not store either).
bool ParseDescr(const std::string& json, std::string* typestr, uint64_t* itemsize) {
  size_t q[4], at = 0;
  for (int k = 0; k < 4; ++k) {
    at = json.find('"', at);
    if (at == std::string::npos) return false;
    q[k] = at++;
  }
  if (json.find('"', at) != std::string::npos) return false;  // more than one member
  if (q[1] != q[0] + 1) return false;                         // the member is unnamed
  std::string s = json.substr(q[2] + 1, q[3] - q[2] - 1);
  if (s.size() < 3 || std::string("<>|=").find(s[0]) == std::string::npos) return false;
  if (std::string("biufcmMSUV").find(s[1]) == std::string::npos) return false;
  uint64_t n = 0;
  for (size_t i = 2; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9' || n > 1'000'000) return false;
    n = n * 10 + uint64_t(s[i] - '0');
  }
  if (n == 0) return false;
  *typestr = s;
  *itemsize = n;
  return true;
}

}  // namespace

const char* TypeName(uint8_t type) {
  switch (type) {
    case kFloat: return "FloatField";
    case kInt: return "IntField";
    case kRgbImage: return "RGBImageField";
    case kBytes: return "BytesField";
    case kNdArray: return "NDArrayField";
    case kJson: return "JSONField";
    case kTorchTensor: return "TorchTensorField";
    case kCustom: return "custom field";
  }
  return "unknown";
}

bool LooksLikeFfcv(const uint8_t* h) {
  const uint16_t version = le::get16(h), fields = le::get16(h + 2);
  const uint32_t page = le::get32(h + 4);
  const uint64_t table = le::get64(h + 16);
  return version >= 1 && version <= 16 && fields >= 1 && page >= kMinPage && (page & (page - 1)) == 0 &&
         table >= kHeaderSize + kDescriptorSize;
}

std::string Truncation(const uint8_t* h, uint64_t file_size) {
  const uint64_t table = le::get64(h + 16);
  if (table <= file_size) return "";
  return "truncated: the file is " + Num(file_size) + " bytes, but its header puts the allocation table (written last) at byte " +
         Num(table) + " (an incomplete copy or download, or a damaged header)";
}

bool IsFfcv(const ByteSource& src) {
  std::vector<uint8_t> scratch;
  const uint64_t size = src.size();
  if (size < kHeaderSize) return false;
  if (std::memcmp(src.Read(0, 8, &scratch), kHeaderMagic.data(), 8) == 0) return false;
  return LooksLikeFfcv(src.Read(0, kHeaderSize, &scratch));
}

std::string File::Where(uint64_t sample, const Field& f) {
  return "sample " + Num(sample) + ": field '" + f.name + "'";
}

void File::Fail(const std::string& what) const { throw Error(name() + ": FFCV file: " + what); }

std::unique_ptr<File> File::Open(const ByteSource* src) {
  std::unique_ptr<File> f(new File());
  f->src_ = src;
  f->ReadHeaderAndFields();
  f->ReadMetadata();
  f->ReadAllocations();
  for (uint64_t i = 0; i < f->samples_; ++i) f->CheckSample(i);
  return f;
}

void File::ReadHeaderAndFields() {
  const uint64_t size = src_->size();
  std::vector<uint8_t> scratch;
  if (size < kHeaderSize) Fail("truncated: " + Num(size) + " bytes, smaller than the 24-byte header");
  const uint8_t* h = src_->Read(0, kHeaderSize, &scratch);
  version_ = le::get16(h);
  const uint16_t nf = le::get16(h + 2);
  page_size_ = le::get32(h + 4);
  samples_ = le::get64(h + 8);
  alloc_table_ = le::get64(h + 16);
  if (const std::string cut = Truncation(h, size); !cut.empty()) Fail(cut);
  if (version_ != 2) Fail("header: version " + Num(version_) + " (dsc reads version 2, what FFCV 1.0 writes)");
  if (nf == 0) Fail("header: no fields");
  if (page_size_ < kMinPage || (page_size_ & (page_size_ - 1)))
    Fail("header: page size " + Num(page_size_) + " is not a power of two of at least " + Num(kMinPage));
  if (kHeaderSize + kDescriptorSize * nf > size)
    Fail("header: " + Num(nf) + " field descriptors (" + Num(kDescriptorSize * nf) + " bytes) run past the end of the file (" +
         Num(size) + " bytes)");
  digest_ = Checksum(h, kHeaderSize);
  const uint8_t* d = src_->Read(kHeaderSize, kDescriptorSize * nf, &scratch);  // h is stale from here
  digest_ = digest_ * 0x9E3779B97F4A7C15ull ^ Checksum(d, kDescriptorSize * nf);
  uint64_t offset = 0, align_max = 1;
  for (uint16_t k = 0; k < nf; ++k) {
    const uint8_t* p = d + kDescriptorSize * k;
    Field fd;
    fd.type = p[0];
    const uint8_t* nm = p + 1;
    size_t len = 0;
    while (len < kNameSize && nm[len]) ++len;
    fd.name.assign(reinterpret_cast<const char*>(nm), len);
    for (char c : fd.name)
      if (uint8_t(c) < 0x20 || uint8_t(c) > 0x7e) Fail("field " + Num(k) + ": name is not printable ASCII");
    const std::string who = "field " + Num(k) + " '" + fd.name + "'";
    const uint8_t* args = p + 1 + kNameSize;
    uint64_t align = 1;
    switch (fd.type) {
      case kFloat:
      case kInt: fd.meta_size = 8, align = 8; break;
      case kRgbImage: fd.meta_size = 13; break;
      case kBytes:
      case kJson: fd.meta_size = 16; break;
      case kNdArray:
      case kTorchTensor: {
        fd.meta_size = 8, align = 8;
        size_t dims = 0;
        while (dims < kMaxDims && le::get64(args + 8 * dims)) ++dims;
        for (size_t j = dims; j < kMaxDims; ++j)
          if (le::get64(args + 8 * j)) Fail(who + ": array shape has a zero dimension before dimension " + Num(j));
        if (dims == 0) Fail(who + ": array shape has no dimensions");
        const uint64_t tlen = le::get64(args + 8 * kMaxDims);
        if (tlen == 0 || tlen > kArgumentsSize - 8 * (kMaxDims + 1))
          Fail(who + ": array type description of " + Num(tlen) + " bytes");
        const std::string descr(reinterpret_cast<const char*>(args + 8 * (kMaxDims + 1)), tlen);
        uint64_t bytes = 0;
        if (!ParseDescr(descr, &fd.dtype, &bytes)) Fail(who + ": unsupported array type " + descr);
        for (size_t j = 0; j < dims; ++j) {
          fd.shape.push_back(le::get64(args + 8 * j));
          if (!Mul(bytes, fd.shape.back(), &bytes) || bytes > page_size_)
            Fail(who + ": one array value is larger than a page (" + Num(page_size_) + " bytes)");
        }
        fd.array_bytes = bytes;
        break;
      }
      case kCustom:
        Fail(who + " is a custom field (type 255): its layout is known only to its Python class, so the file cannot be read");
      default: Fail(who + ": unknown type id " + Num(fd.type));
    }
    if (fd.type == kRgbImage || fd.type == kBytes || fd.type == kJson || fd.type == kNdArray || fd.type == kTorchTensor)
      fd.slot = int(variable_fields_++);
    offset = AlignUp(offset, align);
    fd.offset = offset;
    offset += fd.meta_size;
    align_max = std::max(align_max, align);
    fields_.push_back(std::move(fd));
  }
  record_size_ = AlignUp(offset, align_max);
}

Layout File::ReadLayout(const ByteSource* src) {
  File f;
  f.src_ = src;
  f.ReadHeaderAndFields();
  f.PlaceSections();
  return {f.metadata_offset() + f.samples_ * f.record_size_, f.data_offset(), f.page_size_, f.pages_, f.alloc_table_};
}

// Where the metadata table, data pages and allocation table lie, from the header and descriptors.
void File::PlaceSections() {
  const uint64_t size = src_->size(), start = metadata_offset();
  if (samples_ > (size - start) / record_size_)
    Fail("metadata table: " + Num(samples_) + " records of " + Num(record_size_) + " bytes run past the end of the file (" +
         Num(size) + " bytes)");
  const uint64_t bytes = samples_ * record_size_, end = start + bytes;
  if (alloc_table_ < end)
    Fail("header: allocation table at byte " + Num(alloc_table_) + " is inside the metadata table (which ends at " + Num(end) + ")");
  if (alloc_table_ > size) Fail("header: allocation table at byte " + Num(alloc_table_) + " is past the end of the file");
  data_start_ = AlignUp(end, page_size_);
  if (alloc_table_ > end) {
    if (alloc_table_ < data_start_ || (alloc_table_ - data_start_) % page_size_)
      Fail("header: allocation table at byte " + Num(alloc_table_) + " is not at a page boundary after the data pages (first page at " +
           Num(data_start_) + ", pages of " + Num(page_size_) + ")");
    pages_ = (alloc_table_ - data_start_) / page_size_;
  }
  if ((size - alloc_table_) % kAllocEntrySize)
    Fail("allocation table: " + Num(size - alloc_table_) + " bytes from byte " + Num(alloc_table_) +
         " to the end of the file are not whole 24-byte entries");
  alloc_entries_ = (size - alloc_table_) / kAllocEntrySize;
}

void File::ReadMetadata() {
  PlaceSections();
  const uint64_t start = metadata_offset(), bytes = samples_ * record_size_;
  records_.resize(bytes);  // bounded by the file's size, checked by PlaceSections
  std::vector<uint8_t> scratch;
  for (uint64_t at = 0; at < bytes;) {
    const uint64_t n = std::min<uint64_t>(bytes - at, 64u << 20);
    std::memcpy(records_.data() + at, src_->Read(start + at, n, &scratch), n);
    at += n;
  }
  digest_ = digest_ * 0x9E3779B97F4A7C15ull ^ Checksum(records_.data(), records_.size());
  // An all-scalar file allocates nothing; a variable field needs one entry per sample.
  uint64_t needed = 0;
  if (!Mul(samples_, variable_fields_, &needed) || needed > alloc_entries_)
    Fail("allocation table: " + Num(alloc_entries_) + " entries for " + Num(samples_) + " samples x " + Num(variable_fields_) +
         " variable-size fields");
  sizes_.assign(needed, kUnallocated);
  // Every value's pointer inside the data pages before any allocation entry is matched to it, so a
  // wild pointer is named by its sample and field.
  const uint64_t data_end = data_start_ + pages_ * page_size_;
  for (uint64_t i = 0; i < samples_; ++i) {
    for (const Field& fd : fields_) {
      if (!fd.variable()) continue;
      const uint8_t* r = record(i) + fd.offset;
      const uint64_t ptr = le::get64(fd.type == kRgbImage ? r + 5 : r);
      if (ptr < data_start_ || ptr > data_end)
        Fail(Where(i, fd) + ": pointer " + Num(ptr) + " is outside the data pages (bytes " + Num(data_start_) + " to " +
             Num(data_end) + ")");
    }
  }
}

Image File::image(uint64_t i, size_t f) const {
  const uint8_t* r = record(i) + fields_[f].offset;
  return {r[0], le::get16(r + 1), le::get16(r + 3), le::get64(r + 5)};
}

int64_t File::int_value(uint64_t i, size_t f) const { return int64_t(le::get64(record(i) + fields_[f].offset)); }

double File::float_value(uint64_t i, size_t f) const {
  const uint64_t bits = le::get64(record(i) + fields_[f].offset);
  double v;
  std::memcpy(&v, &bits, 8);
  return v;
}

Span File::span(uint64_t i, size_t f) const {
  const Field& fd = fields_[f];
  const uint8_t* r = record(i) + fd.offset;
  const uint64_t ptr = fd.type == kRgbImage ? le::get64(r + 5) : le::get64(r);
  return {ptr, sizes_[i * variable_fields_ + size_t(fd.slot)]};
}

void File::ReadAllocations() {
  std::vector<uint8_t> scratch;
  const uint64_t data_end = data_start_ + pages_ * page_size_;
  for (uint64_t first = 0; first < alloc_entries_; first += kAllocChunk) {
    const uint64_t n = std::min(kAllocChunk, alloc_entries_ - first);
    const uint8_t* t = src_->Read(alloc_table_ + first * kAllocEntrySize, n * kAllocEntrySize, &scratch);
    digest_ = digest_ * 0x9E3779B97F4A7C15ull ^ Checksum(t, n * kAllocEntrySize);
    for (uint64_t k = 0; k < n; ++k) {
      const uint8_t* e = t + k * kAllocEntrySize;
      const uint64_t sample = le::get64(e), ptr = le::get64(e + 8), size = le::get64(e + 16);
      auto entry = [&] {  // built only for a message: the table may have millions of entries
        return "allocation entry " + Num(first + k) + " (sample " + Num(sample) + ", pointer " + Num(ptr) + ", size " + Num(size) + ")";
      };
      if (sample >= samples_) Fail(entry() + ": sample out of range (" + Num(samples_) + " samples)");
      // Which of the sample's fields it is: the one at this pointer, still unallocated; a field that
      // knows its size must have it (an empty BytesField value shares its pointer with what follows).
      int match = -1;
      for (int pass = 0; pass < 2 && match < 0; ++pass) {
        for (size_t f = 0; f < fields_.size(); ++f) {
          const Field& fd = fields_[f];
          if (!fd.variable()) continue;
          if (sizes_[sample * variable_fields_ + size_t(fd.slot)] != kUnallocated) continue;
          const uint8_t* r = record(sample) + fd.offset;
          uint64_t known = kUnallocated, fptr;
          if (fd.type == kRgbImage) fptr = le::get64(r + 5);
          else if (fd.type == kBytes || fd.type == kJson) fptr = le::get64(r), known = le::get64(r + 8);
          else fptr = le::get64(r), known = fd.array_bytes;
          if (fptr != ptr) continue;
          if (pass == 0 ? known == size : known == kUnallocated) {
            match = int(f);
            break;
          }
        }
      }
      if (match < 0) {
        bool twice = false;
        for (const Field& fd : fields_)
          if (fd.variable() && span(sample, size_t(&fd - fields_.data())).ptr == ptr) twice = true;
        Fail(entry() + (twice ? ": a second allocation for a value already allocated (or of the wrong size)"
                            : ": no field of the sample points there"));
      }
      const Field& fd = fields_[size_t(match)];
      if (size > 0) {
        if (ptr < data_start_ || ptr >= data_end)
          Fail(Where(sample, fd) + ": pointer " + Num(ptr) + " is outside the data pages (bytes " + Num(data_start_) + " to " +
               Num(data_end) + ")");
        const uint64_t in_page = (ptr - data_start_) % page_size_;
        if (size > page_size_ - in_page)
          Fail(Where(sample, fd) + ": " + Num(size) + " bytes at " + Num(ptr) + " cross the end of page " +
               Num((ptr - data_start_) / page_size_));
      } else if (ptr < data_start_ || ptr > data_end) {
        Fail(Where(sample, fd) + ": pointer " + Num(ptr) + " is outside the data pages");
      }
      sizes_[sample * variable_fields_ + size_t(fd.slot)] = size;
    }
  }
}

void File::CheckSample(uint64_t i) const {
  for (size_t f = 0; f < fields_.size(); ++f) {
    const Field& fd = fields_[f];
    if (!fd.variable()) continue;
    const Span s = span(i, f);
    if (s.size == kUnallocated)
      Fail(Where(i, fd) + ": no allocation entry for its value at byte " + Num(s.ptr));
    if (fd.type == kRgbImage) {
      const Image im = image(i, f);
      if (im.mode > 1) Fail(Where(i, fd) + ": image mode " + Num(im.mode) + " (0 JPEG, 1 raw)");
      if (im.width == 0 || im.height == 0)
        Fail(Where(i, fd) + ": image of " + Num(im.width) + "x" + Num(im.height) + " pixels");
      if (im.mode == 1 && s.size != uint64_t(im.width) * im.height * 3)
        Fail(Where(i, fd) + ": raw image of " + Num(im.width) + "x" + Num(im.height) + " needs " +
             Num(uint64_t(im.width) * im.height * 3) + " bytes, its allocation has " + Num(s.size));
      if (im.mode == 0 && s.size < 4) Fail(Where(i, fd) + ": JPEG of " + Num(s.size) + " bytes");
    }
    if (fd.type == kJson && s.size == 0) Fail(Where(i, fd) + ": JSON value without its terminating NUL");
  }
}

bool JpegFrame(const uint8_t* p, size_t n, int* width, int* height, int* components, std::string* why) {
  if (n < 4 || p[0] != 0xFF || p[1] != 0xD8) return *why = "no JPEG start-of-image marker", false;
  size_t at = 2;
  while (at + 4 <= n) {
    if (p[at] != 0xFF) return *why = "no marker at byte " + Num(at), false;
    const uint8_t m = p[at + 1];
    if (m == 0xFF) { ++at; continue; }  // fill byte
    const size_t len = size_t(p[at + 2]) << 8 | p[at + 3];
    if (len < 2 || at + 2 + len > n) return *why = "marker segment at byte " + Num(at) + " runs past the end", false;
    if ((m >= 0xC0 && m <= 0xCF) && m != 0xC4 && m != 0xC8 && m != 0xCC) {
      if (len < 8) return *why = "short frame header", false;
      *height = int(size_t(p[at + 5]) << 8 | p[at + 6]);
      *width = int(size_t(p[at + 7]) << 8 | p[at + 8]);
      *components = p[at + 9];
      return true;
    }
    if (m == 0xDA || m == 0xD9) break;
    at += 2 + len;
  }
  *why = "no frame header before the scan";
  return false;
}

void PagesAhead::At(uint64_t ptr) const {
  if (!src_.remote() || f_.page_count() == 0 || ptr < f_.data_offset()) return;
  const uint64_t ps = f_.page_size(), start = f_.data_offset(), page = (ptr - start) / ps;
  const uint64_t seen = hinted_.load(std::memory_order_relaxed);
  if (page + 1 <= seen && seen <= page + kAhead) return;  // the pages ahead are asked for already
  hinted_.store(page + kAhead, std::memory_order_relaxed);  // a race only repeats a cheap hint
  const uint64_t last = std::min(f_.page_count(), page + 1 + kAhead);
  if (last > page + 1) src_.WillNeed(start + (page + 1) * ps, (last - page - 1) * ps);
  if (page >= 2) src_.DontNeed(start + (page - 2) * ps, ps);  // threads may still read the one before
}

std::vector<Problem> Verify(const ByteSource& src, size_t limit, const std::function<void(uint64_t n)>& after_samples) {
  std::vector<Problem> out;
  size_t more = 0;
  auto add = [&](int64_t sample, std::string msg) {
    if (out.size() < limit) out.push_back({"ffcv", -1, sample, std::move(msg)});
    else ++more;
  };
  std::unique_ptr<File> f;
  try {
    f = File::Open(&src);
  } catch (const Error& e) {
    std::string m = e.what();
    const std::string prefix = src.name() + ": FFCV file: ";
    if (m.rfind(prefix, 0) == 0) m.erase(0, prefix.size());
    add(-1, m);
    return out;
  }
  struct Use {
    uint64_t ptr, size, sample;
    size_t field;
  };
  std::vector<Use> uses;
  std::vector<uint8_t> scratch;
  const PagesAhead ahead(*f, src);
  for (uint64_t i = 0; i < f->sample_count(); ++i) {
    for (size_t k = 0; k < f->fields().size(); ++k) {
      const Field& fd = f->fields()[k];
      if (!fd.variable()) continue;
      const Span s = f->span(i, k);
      ahead.At(s.ptr);
      if (s.size) uses.push_back({s.ptr, s.size, i, k});
      try {
        if (fd.type == kJson) {  // as the loader and convert read it: its NUL, UTF-8 text
          const Span t = ValueSpan(*f, i, k);
          const std::string why =
              ValueProblem(*f, i, k, format::Field{FieldType::kText, fd.name}, 1, t.size ? src.Read(t.ptr, t.size, &scratch) : nullptr, t.size);
          if (!why.empty()) add(int64_t(i), "field '" + fd.name + "': " + why);
        }
        if (fd.type == kRgbImage && f->image(i, k).mode == 0) {
          const Image im = f->image(i, k);
          int w = 0, h = 0, c = 0;
          std::string why;
          if (!JpegFrame(src.Read(s.ptr, s.size, &scratch), s.size, &w, &h, &c, &why))
            add(int64_t(i), "field '" + fd.name + "': JPEG header: " + why);
          else if (w != im.width || h != im.height)
            add(int64_t(i), "field '" + fd.name + "': JPEG is " + Num(w) + "x" + Num(h) + ", the metadata says " +
                                Num(im.width) + "x" + Num(im.height));
          else if (c != 3 && c != 1)
            add(int64_t(i), "field '" + fd.name + "': JPEG with " + Num(c) + " components");
        }
      } catch (const Error& e) {
        add(int64_t(i), "field '" + fd.name + "': " + e.what());
      }
    }
    if (after_samples && out.empty()) after_samples(i + 1);
  }
  std::sort(uses.begin(), uses.end(), [](const Use& a, const Use& b) { return a.ptr < b.ptr; });
  for (size_t k = 1; k < uses.size(); ++k) {
    const Use& a = uses[k - 1];
    const Use& b = uses[k];
    if (b.ptr < a.ptr + a.size)
      add(int64_t(b.sample), "field '" + f->fields()[b.field].name + "': bytes " + Num(b.ptr) + ".." + Num(b.ptr + b.size) +
                                 " overlap sample " + Num(a.sample) + " field '" + f->fields()[a.field].name + "'");
  }
  if (more) out.push_back({"ffcv", -1, -1, Num(more) + " more problems"});
  return out;
}

}  // namespace dsc::format::ffcv
