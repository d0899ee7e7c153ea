// Packs encoded samples into the block layout of docs/format.md (LevelDB-style builder: Add in sample
// order, then Finish). Payload blocks stream to disk as they fill, so memory stays at one block.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "format/fields.h"
#include "format/layout.h"
#include "format/meta.h"
#include "writer/atomic_file.h"
#include "writer/encoder.h"

namespace dsc::writer {

// A sample's typed-field values (format 1.2): the fixed fields' row (layout.row_bytes bytes, the
// fixed fields in schema order, each its width) and one byte string per variable field, in order.
struct TypedRow {
  std::vector<uint8_t> fixed;
  std::vector<std::vector<uint8_t>> var;
};

class FileBuilder {
 public:
  FileBuilder(AtomicFile* out, uint64_t block_size, bool share_jpeg_tables);
  // Makes the file a typed one (format 1.2): every Add then passes a row of this layout.
  void SetTyped(format::FieldLayout layout);
  void Add(const Encoded& e, const int32_t labels[2], const TypedRow* row = nullptr);
  // A hint: about this many samples will be added (the index is then allocated once).
  void Reserve(uint64_t samples) { index_.reserve(size_t(samples) * format::kIndexEntrySize); }
  // Adds an optional section (format 1.1) written after the block table; ids ascending, each once.
  // A file with any is written as version 1.1, without as 1.0.
  void AddOptional(uint32_t id, std::string content);
  // Writes index, meta (with the table sets gathered by Add), block table, optional sections, footer
  // and header.
  // Returns the file size. Does not commit the AtomicFile.
  uint64_t Finish(format::Meta meta);
  uint64_t samples() const { return index_.size() / format::kIndexEntrySize; }
  // As stored: payload bytes without the shared JPEG tables (dsc info's payload_bytes), and the table sets.
  uint64_t payload_bytes() const { return payload_bytes_; }
  size_t jpeg_table_sets() const { return tables_.size(); }

 private:
  void CloseBlock();
  uint64_t WriteSection(const std::string& bytes, format::SectionRef* ref);

  AtomicFile* out_;
  uint64_t block_size_;
  bool share_;
  uint64_t pos_ = format::kPageSize;  // next free, page-aligned offset
  std::vector<uint8_t> block_;        // the open block's content
  format::BlockEntry open_;
  std::vector<format::BlockEntry> blocks_;
  std::string index_;
  std::unordered_map<std::string, uint16_t> table_ids_;
  std::vector<std::string> tables_;
  uint64_t table_bytes_ = 0;
  uint64_t payload_bytes_ = 0;
  // Table sets seen once, by hash: a set is shared from its second occurrence on, so headers that
  // never repeat (transcodes' optimised Huffman tables, EXIF) stay inline instead of filling meta,
  // which every reader loads and checks. Bounded, as the tables are.
  std::unordered_set<uint64_t> seen_once_;
  std::vector<std::pair<uint32_t, std::string>> optional_;
  bool typed_ = false;
  format::FieldLayout layout_;
  std::vector<std::string> columns_;  // per fixed field, its column so far
  std::string varsizes_;
};

}  // namespace dsc::writer
