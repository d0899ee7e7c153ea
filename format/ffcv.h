// FFCV's .beton files (docs/ffcv-format.md is the layout): every built-in field type parsed, the
// allocation table read once, streamed, into a per-sample, per-field index. Opening costs the metadata
// and allocation tables (O(samples), never the data pages), so a file of hundreds of GB opens in
// seconds. Every check names the file, sample and field; hostile sizes and pointers are refused
// before anything is allocated from them.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "format/byte_source.h"
#include "format/file_view.h"
#include "format/meta.h"

namespace dsc::format::ffcv {

constexpr size_t kHeaderSize = 24;
constexpr size_t kDescriptorSize = 1041;  // u8 type id, 16-byte name, 1024 bytes of arguments
constexpr size_t kNameSize = 16;
constexpr size_t kArgumentsSize = 1024;
constexpr size_t kAllocEntrySize = 24;  // u64 sample id, u64 pointer, u64 size
constexpr size_t kMaxDims = 32;

enum TypeId : uint8_t {
  kFloat = 0, kInt = 1, kRgbImage = 2, kBytes = 3, kNdArray = 4, kJson = 5, kTorchTensor = 6, kCustom = 255
};
// FFCV's class name for a type id ("RGBImageField"), or "unknown".
const char* TypeName(uint8_t type);

// Whether a file's first 24 bytes read as an FFCV header (FFCV has no magic: a plausible version,
// field count, power-of-two page size and allocation table position). A table past the end of the file
// still reads as FFCV's: File::Open then names the file truncated, not "not a dsc file".
bool LooksLikeFfcv(const uint8_t* first24);

// Why a file of `file_size` bytes with this header is cut short ("truncated: …"), or "" when its
// allocation table starts within it.
std::string Truncation(const uint8_t* first24, uint64_t file_size);

// LooksLikeFfcv of a file that does not start with dsc's magic: how every front end tells the two
// .beton formats apart.
bool IsFfcv(const ByteSource& src);

struct Field {
  uint8_t type = 0;
  std::string name;        // as FFCV stored it (up to 16 ASCII bytes)
  uint64_t offset = 0;     // of its metadata in a sample's record
  uint64_t meta_size = 0;  // bytes of metadata
  // Arrays (4, 6): the shape, NumPy's type string ("<f4") and the bytes of one value.
  std::vector<uint64_t> shape;
  std::string dtype;
  uint64_t array_bytes = 0;
  int slot = -1;  // index among the variable-size fields (image, bytes, array, JSON); -1 for scalars
  bool variable() const { return slot >= 0; }
};

struct Image {
  uint8_t mode = 0;  // 0 JPEG, 1 raw HWC RGB
  uint16_t width = 0, height = 0;
  uint64_t ptr = 0;
};

struct Span {
  uint64_t ptr = 0, size = 0;
};

// Where a file's parts lie (docs/ffcv-format.md): [0, metadata_end) header, descriptors and metadata
// table; padding up to `data_start`; `pages` data pages of `page_size` bytes; the allocation table
// from `alloc_table` to the end.
struct Layout {
  uint64_t metadata_end = 0;
  uint64_t data_start = 0;
  uint64_t page_size = 0;
  uint64_t pages = 0;
  uint64_t alloc_table = 0;
};

class File {
 public:
  // Throws dsc::Error naming the file, and the sample and field where one is at fault. `src` must
  // outlive the File.
  static std::unique_ptr<File> Open(const ByteSource* src);

  const std::string& name() const { return src_->name(); }
  const ByteSource& source() const { return *src_; }
  uint16_t version() const { return version_; }
  uint32_t page_size() const { return page_size_; }
  uint64_t sample_count() const { return samples_; }
  const std::vector<Field>& fields() const { return fields_; }
  uint64_t metadata_offset() const { return kHeaderSize + kDescriptorSize * fields_.size(); }
  uint64_t record_size() const { return record_size_; }
  uint64_t data_offset() const { return data_start_; }       // the first page
  uint64_t page_count() const { return pages_; }
  uint64_t alloc_table_offset() const { return alloc_table_; }
  uint64_t alloc_entry_count() const { return alloc_entries_; }
  // A digest of the header, descriptors, metadata and allocation tables: identifies the file's
  // structure (a run's fingerprint, remote workers) the way a dsc file's header checksum does.
  uint64_t digest() const { return digest_; }

  const uint8_t* record(uint64_t i) const { return records_.data() + i * record_size_; }
  Image image(uint64_t i, size_t f) const;
  int64_t int_value(uint64_t i, size_t f) const;
  double float_value(uint64_t i, size_t f) const;
  // A variable-size field's bytes: pointer from the metadata, size from the allocation table.
  Span span(uint64_t i, size_t f) const;

  // The layout from the header and field descriptors alone (bytes [0, 24 + 1041 x fields)), checked as
  // Open checks it: what a URL source needs before it fetches the metadata table.
  static Layout ReadLayout(const ByteSource* src);

  // "sample 12: field 'image'": how messages locate a value.
  static std::string Where(uint64_t sample, const Field& f);

 private:
  File() = default;
  void ReadHeaderAndFields();
  void PlaceSections();
  void ReadMetadata();
  void ReadAllocations();
  void CheckSample(uint64_t i) const;
  [[noreturn]] void Fail(const std::string& what) const;

  const ByteSource* src_ = nullptr;
  uint16_t version_ = 0;
  uint32_t page_size_ = 0;
  uint64_t samples_ = 0;
  uint64_t alloc_table_ = 0, alloc_entries_ = 0;
  uint64_t record_size_ = 0, data_start_ = 0, pages_ = 0;
  uint64_t digest_ = 0;
  std::vector<Field> fields_;
  size_t variable_fields_ = 0;
  std::vector<uint8_t> records_;
  std::vector<uint64_t> sizes_;  // samples x variable fields; kUnallocated until the table names it
};

// For a source that fetches from far away (a URL, ByteSource::remote): as a reader goes through the
// samples about in file order (FFCV's writer fills pages with chunks of consecutive samples), the
// pages after the one it reads are asked for ahead and those well behind released, so that pages
// arrive on several connections while it works. Thread-safe; a local source: nothing.
class PagesAhead {
 public:
  PagesAhead(const File& f, const ByteSource& src) : f_(f), src_(src) {}
  void At(uint64_t ptr) const;  // a value at byte `ptr` is being read

 private:
  static constexpr uint64_t kAhead = 4;
  const File& f_;
  const ByteSource& src_;
  mutable std::atomic<uint64_t> hinted_{0};  // pages up to this one are asked for
};

// Everything Open checks, then what needs the data pages: no two allocations overlap, JSON values end
// with their NUL, JPEG headers parse and give the metadata's dimensions. Damage never throws; the
// first `limit` problems are returned in full, and one more line counts the rest. after_samples(n),
// when given, runs once samples 0 .. n - 1 are checked, while the pages of sample n - 1 are still
// asked for (a caller reading that sample there reads a URL's pages once), as long as no problem is found.
std::vector<Problem> Verify(const ByteSource& src, size_t limit = 100,
                            const std::function<void(uint64_t n)>& after_samples = {});

// The SOF dimensions and component count of a JPEG stream; false (with *why) when the markers up to
// the frame header do not parse.
bool JpegFrame(const uint8_t* p, size_t n, int* width, int* height, int* components, std::string* why);

// The file's parts in file order, named as docs/ffcv-format.md names them.
std::vector<SectionExtent> Extents(const File& f);

// Whether every value of IntField f fits dsc's int32 labels.
bool FitsInt32(const File& file, size_t f);

// A dsc view of the file for the loader, `dsc export` and `dsc verify`: every field as `dsc convert`
// maps it (PlanConversion, lenient: a field it cannot map is left out), read in place through
// FileView's typed-field accessors; one block per run of consecutive samples whose images share a
// page. Throws dsc::Error when the file has no image field.
std::unique_ptr<FileView> OpenView(const ByteSource* src);

// The dsc fields an FFCV file's fields become, for `dsc convert` and the loader alike
// (docs/ffcv-format.md "How dsc maps an FFCV file"). Without typed fields (an RGBImageField and up to
// two IntFields that fit int32: the file written as before typed fields existed) the image is named
// "image"; with them every field keeps FFCV's name: the image first, IntFields that fit a label
// (0 .. 2^31 - 1, the first two as above) as labels, then the rest in FFCV's order: IntField int64,
// FloatField float64, NDArrayField / TorchTensorField a fixed array of its dtype and shape, JSONField
// text, BytesField bytes.
struct Conversion {
  bool typed = false;
  std::vector<format::Field> fields;
  std::vector<size_t> from;           // fields[k] holds FFCV field from[k]
  std::vector<std::string> left_out;  // lenient: "'name' (Type): why" for each field not mapped
};
// Throws dsc::Error naming the file and the FFCV field dsc cannot store: no RGBImageField, a second
// one, an array dtype (big-endian, complex, strings, ...) or rank dsc lacks. `lenient` (the loader)
// leaves such a field out instead, saying why in left_out; a file without an image still throws.
Conversion PlanConversion(const File& file, bool lenient = false);
// Where sample i's value of FFCV field k lies as its dsc field holds it: an array's or bytes'
// allocation, JSON's text (the allocation less its terminating NUL).
Span ValueSpan(const File& file, uint64_t i, size_t k);
// Why `p` (n bytes: ValueSpan's) is not sample i's value of FFCV field k as dsc field df (row width
// `width`) holds it: JSON ends with its NUL and has none before it (FFCV's unpack reads up to the
// first), then df's rules (format::ValueProblem: UTF-8, bool bytes). "" when it is. What `dsc convert`
// and the loader check as they read a value (File::Open cannot: it never reads the data pages).
std::string ValueProblem(const File& file, uint64_t i, size_t k, const format::Field& df, uint64_t width, const uint8_t* p, uint64_t n);
// The dsc dtype of NumPy's type string ("<f4", "|u1"); false for one dsc lacks.
bool DTypeOfNumpy(const std::string& typestr, format::DType* out);
// How a field of a Conversion reads: "image", "label", "int64", "float32[16]", "uint8[8,8]", "text",
// "bytes" (dsc build's --schema words).
std::string DescribeField(const format::Field& f);

}  // namespace dsc::format::ffcv
