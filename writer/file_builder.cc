#include "writer/file_builder.h"

#include <algorithm>
#include <cstring>

#include "format/bytes.h"
#include "format/checksum.h"
#include "format/error.h"
#include "format/optional.h"

namespace dsc::writer {

using namespace dsc::format;

FileBuilder::FileBuilder(AtomicFile* out, uint64_t block_size, bool share_jpeg_tables)
    : out_(out), block_size_(block_size), share_(share_jpeg_tables) {
  open_.offset = pos_;
  // The whole block up front (address space only: pages are touched as payloads arrive): growing by
  // doubling copied each block's bytes into fresh pages again, a fault per 4 KiB each time.
  block_.reserve(size_t(std::min<uint64_t>(block_size_, uint64_t(64) << 20)) + kPageSize);
}

void FileBuilder::CloseBlock() {
  if (open_.sample_count == 0) return;
  open_.size = uint32_t(block_.size());
  open_.checksum = Checksum(block_.data(), block_.size());
  const uint64_t padded = RoundUpToPage(block_.size());
  block_.resize(padded, 0);
  out_->WriteAt(open_.offset, block_.data(), block_.size());
  blocks_.push_back(open_);
  pos_ = open_.offset + padded;
  open_ = BlockEntry();
  open_.offset = pos_;
  open_.first_sample = uint32_t(samples());
  block_.clear();
}

namespace {
constexpr uint64_t kMaxSharedTableBytes = 64 << 20;  // of table sets in meta
constexpr size_t kMaxTableCandidates = 1 << 18;      // sets seen once, tracked for a second occurrence
}  // namespace

void FileBuilder::SetTyped(FieldLayout layout) {
  typed_ = true;
  layout_ = std::move(layout);
  columns_.assign(layout_.fixed.size(), std::string());
}

void FileBuilder::Add(const Encoded& e, const int32_t labels[2], const TypedRow* row) {
  if (typed_ != (row != nullptr)) throw Error(out_->target() + ": typed-field values given to a file without them, or missing");
  uint64_t extra = 0;
  if (row) {
    if (row->fixed.size() != layout_.row_bytes || row->var.size() != layout_.var.size())
      throw Error(out_->target() + ": sample " + std::to_string(samples()) + ": typed-field row does not match the schema");
    for (const auto& v : row->var) {
      if (v.size() > UINT32_MAX) throw Error(out_->target() + ": sample " + std::to_string(samples()) + ": a field value exceeds 4 GiB");
      extra += v.size();
    }
  }
  if (samples() >= UINT32_MAX) throw Error(out_->target() + ": too many samples for format version 1");
  IndexEntry ie;
  ie.width = e.width;
  ie.height = e.height;
  ie.encoding = e.encoding;
  ie.channels = e.channels;
  ie.label[0] = labels[0];
  ie.label[1] = labels[1];
  const uint8_t* payload = e.payload.data();
  size_t size = e.payload.size();
  if (share_ && e.encoding == uint8_t(Encoding::kJpeg) && e.jpeg_prefix > 0) {
    std::string prefix(reinterpret_cast<const char*>(payload), e.jpeg_prefix);
    auto it = table_ids_.find(prefix);
    if (it == table_ids_.end()) {
      // A hash collision only shares this sample's own prefix early: the bytes stored are exact.
      const uint64_t h = Checksum(prefix.data(), prefix.size());
      if (seen_once_.erase(h)) {
        if (tables_.size() < kMaxJpegTables && table_bytes_ + prefix.size() <= kMaxSharedTableBytes) {
          table_bytes_ += prefix.size();
          tables_.push_back(prefix);
          it = table_ids_.emplace(std::move(prefix), uint16_t(tables_.size())).first;
        }
      } else if (seen_once_.size() < kMaxTableCandidates) {
        seen_once_.insert(h);
      }
    }
    if (it != table_ids_.end()) {
      ie.jpeg_table = it->second;
      payload += e.jpeg_prefix;
      size -= e.jpeg_prefix;
    }
  }
  if (size > UINT32_MAX || size + extra > UINT32_MAX) throw Error(out_->target() + ": a payload exceeds 4 GiB");
  // The sample's extent (payload, then its variable values) never straddles blocks.
  if (block_.size() + size + extra > block_size_ && open_.sample_count > 0) CloseBlock();
  ie.offset = open_.offset + block_.size();
  ie.size = uint32_t(size);
  ie.block = uint32_t(blocks_.size());
  block_.insert(block_.end(), payload, payload + size);
  payload_bytes_ += size;
  if (row) {
    size_t o = 0;
    for (size_t k = 0; k < layout_.fixed.size(); ++k) {
      const size_t w = size_t(layout_.width[size_t(layout_.fixed[k])]);
      columns_[k].append(reinterpret_cast<const char*>(row->fixed.data()) + o, w);
      o += w;
    }
    for (const auto& v : row->var) {
      block_.insert(block_.end(), v.begin(), v.end());
      uint8_t b[4];
      le::put32(b, uint32_t(v.size()));
      varsizes_.append(reinterpret_cast<char*>(b), 4);
    }
  }
  ++open_.sample_count;
  uint8_t buf[kIndexEntrySize];
  EncodeIndexEntry(ie, buf);
  index_.append(reinterpret_cast<char*>(buf), sizeof buf);
  if (block_.size() >= block_size_) CloseBlock();  // oversized or exactly full
}

uint64_t FileBuilder::WriteSection(const std::string& bytes, SectionRef* ref) {
  ref->offset = pos_;
  ref->size = bytes.size();
  ref->checksum = Checksum(bytes.data(), bytes.size());
  // The content, then its zero padding: no padded copy of a section that may be megabytes (the index).
  if (!bytes.empty()) out_->WriteAt(pos_, bytes.data(), bytes.size());
  const size_t pad = size_t(RoundUpToPage(bytes.size()) - bytes.size());
  if (pad > 0) {
    const std::vector<uint8_t> zeros(pad, 0);
    out_->WriteAt(pos_ + bytes.size(), zeros.data(), pad);
  }
  pos_ += bytes.size() + pad;
  return pos_;
}

void FileBuilder::AddOptional(uint32_t id, std::string content) {
  if (id == 0 || (!optional_.empty() && id <= optional_.back().first) || optional_.size() >= kMaxOptionalSections)
    throw Error(out_->target() + ": optional section " + std::to_string(id) + " out of order");
  optional_.emplace_back(id, std::move(content));
}

uint64_t FileBuilder::Finish(Meta meta) {
  CloseBlock();
  Header h;
  h.sample_count = samples();
  h.field_count = uint32_t(meta.fields.size());
  h.block_size = block_size_;
  h.block_count = blocks_.size();
  std::string sums, table;
  for (const BlockEntry& b : blocks_) {
    uint8_t e[kBlockEntrySize], c[8];
    EncodeBlockEntry(b, e);
    table.append(reinterpret_cast<char*>(e), sizeof e);
    le::put64(c, b.checksum);
    sums.append(reinterpret_cast<char*>(c), 8);
  }
  h.sections[kData] = {kPageSize, blocks_.empty() ? 0 : blocks_.back().offset + blocks_.back().size - kPageSize,
                       Checksum(sums.data(), sums.size())};
  meta.jpeg_tables = tables_;
  WriteSection(index_, &h.sections[kIndex]);
  WriteSection(EncodeMeta(meta), &h.sections[kMeta]);
  WriteSection(table, &h.sections[kBlocks]);
  if (typed_) {  // format 1.2's sections join the optional ones, in id order
    std::string cols;
    for (auto& c : columns_) cols += c, c = std::string();
    optional_.emplace_back(kColumnsSectionId, std::move(cols));
    optional_.emplace_back(kVarSizesSectionId, std::move(varsizes_));
    std::stable_sort(optional_.begin(), optional_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    h.incompat_flags = kTypedFieldsFlag | (meta.further_images() ? kFurtherImagesFlag : 0);
  }
  for (const auto& [id, content] : optional_) {
    SectionRef ref;
    WriteSection(content, &ref);
    h.optional.push_back({id, ref.offset, ref.size, ref.checksum});
  }
  h.version_minor = typed_ ? (meta.further_images() ? kImagesMinor : kTypedMinor) : optional_.empty() ? 0 : 1;
  h.file_size = pos_ + kFooterSize;
  uint8_t page[kPageSize];
  Footer f;
  f.file_size = h.file_size;
  f.sample_count = h.sample_count;
  f.version_minor = h.version_minor;
  f.header_checksum = EncodeHeader(h, page);
  uint8_t foot[kFooterSize];
  EncodeFooter(f, foot);
  out_->WriteAt(pos_, foot, sizeof foot);
  out_->WriteAt(0, page, sizeof page);
  return h.file_size;
}

}  // namespace dsc::writer
