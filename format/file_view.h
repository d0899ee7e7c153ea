// A validated, read-only view of a dsc file's structure: header, footer, meta, block table and index.
// Opening checks everything that is cheap (all metadata checksums and every index entry's rules) and
// throws dsc::Error naming the file and the place; payload blocks are checked by the caller on first
// touch (CheckBlock) or all at once by VerifyFile.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "format/byte_source.h"
#include "format/bytes.h"
#include "format/fields.h"
#include "format/layout.h"
#include "format/meta.h"
#include "format/optional.h"

namespace dsc::format {

class FileView;
namespace ffcv {
class File;
std::unique_ptr<FileView> OpenView(const ByteSource* src);
}  // namespace ffcv

// One finding of a check, located the way `dsc info --json` names sections.
// VerifyFile's hook (below).
using AfterBlock = std::function<void(uint64_t end)>;

struct Problem {
  std::string section;  // "header", "data", "index", "meta", "blocks", "footer", or an optional section's name
  int64_t block = -1;   // data block, when the problem is inside one
  int64_t sample = -1;  // sample, when the problem is an index entry
  std::string message;
};
std::string Describe(const Problem& p);  // "data: block 3: checksum mismatch"

struct SectionExtent {
  std::string name;
  uint64_t offset = 0;
  uint64_t size = 0;     // the extent: content plus zero padding up to the next section
  uint64_t content = 0;  // bytes of content
};

class FileView {
 public:
  // `src` must outlive the view.
  static std::unique_ptr<FileView> Open(const ByteSource* src);

  const ByteSource& source() const { return *src_; }
  const std::string& name() const { return src_->name(); }
  const Header& header() const { return header_; }
  const Meta& meta() const { return meta_; }
  uint64_t sample_count() const { return header_.sample_count; }
  size_t block_count() const { return blocks_.size(); }
  const BlockEntry& block(size_t b) const { return blocks_[b]; }
  IndexEntry entry(uint64_t i) const { return DecodeIndexEntry(index_ + i * kIndexEntrySize); }
  // Starts loading entry i into the cache: a shuffled epoch reads the index at random, and an entry
  // fetched a few samples ahead no longer costs a cache (and TLB) miss when it is decoded.
  void PrefetchEntry(uint64_t i) const { __builtin_prefetch(index_ + i * kIndexEntrySize); }
  // The restart section's content (format 1.1), when the file has one.
  const std::optional<RestartStats>& restart() const { return restart_; }
  // The sections in file order, tiling the whole file (header, data, index, meta, blocks, the optional
  // sections by name, footer).
  std::vector<SectionExtent> Extents() const;
  // Throws dsc::Error when block b's content does not match its checksum.
  void CheckBlock(size_t b) const;
  // The exact bytes of JPEG table set k-1 for an entry's jpeg_table == k.
  const std::string& jpeg_table(uint16_t k) const { return meta_.jpeg_tables[k - 1]; }
  // Non-null when the file is FFCV's (docs/ffcv-format.md): the index and blocks were synthesised
  // from it, and there are no checksums to check.
  const ffcv::File* ffcv() const { return ffcv_.get(); }

  // Typed fields (format 1.2). typed(): the file has incompat bit 0; layout() says where each field
  // lives. Both accessors are O(1) in the sample (VarValue sums at most 64 lengths) and read nothing
  // from the file but an FFCV array's value: the columns and varsizes sections were validated and
  // copied at open. An FFCV file presents its fields the same way (ffcv::OpenView): its scalars are
  // read from its metadata table, its arrays, bytes and JSON where its allocation index says.
  bool typed() const { return (header_.incompat_flags & kTypedFieldsFlag) != 0; }
  const FieldLayout& layout() const { return layout_; }
  // Sample i's value of fixed field f (a scalar or array): layout().width[f] bytes. In memory (a dsc
  // file's columns, FFCV's metadata table), or for an FFCV array read from its data page, into
  // *scratch when the file is not mapped (scratch may be null only for a dsc file).
  const uint8_t* FixedValue(size_t f, uint64_t i, std::vector<uint8_t>* scratch = nullptr) const {
    const FixedColumn& c = fixed_[f];
    const uint8_t* p = c.base + i * c.stride;
    return c.in_file ? src_->Read(le::get64(p), size_t(layout_.width[f]), scratch) : p;
  }
  // Where sample i's value of variable field f lies in the file: inside the block of entry(i).block,
  // after the primary image payload (FFCV: where its allocation index says).
  struct VarRef {
    uint64_t offset = 0;
    uint32_t size = 0;
  };
  VarRef VarValue(size_t f, uint64_t i) const {
    if (ffcv_) return FfcvVarValue(f, i);
    const size_t k = size_t(layout_.slot[f]), v = layout_.var.size();
    const IndexEntry e = entry(i);
    uint64_t at = e.offset + e.size;
    const uint32_t* row = varsizes_.data() + i * v;
    for (size_t j = 0; j < k; ++j) at += row[j];
    return {at, row[k]};
  }
  // Why sample i's value `p` (n bytes, as FixedValue or VarValue give it) of field f breaks its
  // field's rules, where that could not be checked before: "" for a dsc file (its writer and open
  // checked), FFCV's checks as `dsc convert` makes them for an FFCV file (ffcv::ValueProblem).
  std::string ReadValueProblem(size_t f, uint64_t i, const uint8_t* p, uint64_t n) const {
    return ffcv_ ? FfcvValueProblem(f, i, p, n) : std::string();
  }

 private:
  friend class Inspector;
  friend std::vector<Problem> VerifyFile(const ByteSource& src, const AfterBlock& after_block,
                                         const std::function<void(uint64_t n)>& after_samples);
  friend std::unique_ptr<FileView> ffcv::OpenView(const ByteSource* src);
  FileView() = default;
  const ByteSource* src_ = nullptr;
  Header header_;
  Meta meta_;
  std::vector<BlockEntry> blocks_;
  std::vector<uint8_t> index_copy_;  // the validated index, copied out of the file
  const uint8_t* index_ = nullptr;
  std::optional<RestartStats> restart_;
  FieldLayout layout_;
  // Per field: where its fixed values lie (sample i's at base + i * stride), or in_file: there lies a
  // u64 pointer to it (FFCV's arrays). Unused for the other fields.
  struct FixedColumn {
    const uint8_t* base = nullptr;
    uint64_t stride = 0;
    bool in_file = false;
  };
  std::vector<FixedColumn> fixed_;
  std::vector<std::vector<uint8_t>> descriptors_;  // FFCV: further images' descriptor columns (ffcv::OpenView)
  VarRef FfcvVarValue(size_t f, uint64_t i) const;                                     // format/ffcv_view.cc
  std::string FfcvValueProblem(size_t f, uint64_t i, const uint8_t* p, uint64_t n) const;  // format/ffcv_view.cc
  std::vector<size_t> ffcv_from_;  // per field of an FFCV file: its FFCV field (ffcv::Conversion::from)
  std::vector<uint8_t> columns_;        // the validated columns section
  std::vector<uint32_t> varsizes_;      // the validated varsizes section, sample-major
  std::shared_ptr<const ffcv::File> ffcv_;
};

// Checks every byte: everything Open checks, every block checksum and every must-be-zero byte.
// Returns all problems found; empty means intact. Damage never throws.
// after_block(end), when given, runs after each data block's checks, in file order, with the end of
// the bytes checked so far, while the block is still asked for: a caller that reads there the samples
// lying before `end` reads a URL's blocks while they are cached (one fetch per block, not two). It
// runs only as long as no problem has been found. An FFCV file's check calls after_samples(n) instead,
// once samples 0 .. n - 1 are checked, while the pages of sample n - 1 are asked for (ffcv::Verify).
std::vector<Problem> VerifyFile(const ByteSource& src, const AfterBlock& after_block = {},
                                const std::function<void(uint64_t n)>& after_samples = {});

}  // namespace dsc::format
