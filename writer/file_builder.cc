#include "writer/file_builder.h"

#include <cstring>

#include "format/bytes.h"
#include "format/checksum.h"
#include "format/error.h"

namespace dsc::writer {

using namespace dsc::format;

FileBuilder::FileBuilder(AtomicFile* out, uint64_t block_size, bool share_jpeg_tables)
    : out_(out), block_size_(block_size), share_(share_jpeg_tables) {
  open_.offset = pos_;
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

void FileBuilder::Add(const Encoded& e, const int32_t labels[2]) {
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
  if (size > UINT32_MAX) throw Error(out_->target() + ": a payload exceeds 4 GiB");
  if (block_.size() + size > block_size_ && open_.sample_count > 0) CloseBlock();
  ie.offset = open_.offset + block_.size();
  ie.size = uint32_t(size);
  ie.block = uint32_t(blocks_.size());
  block_.insert(block_.end(), payload, payload + size);
  payload_bytes_ += size;
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
  std::string padded = bytes;
  padded.resize(RoundUpToPage(bytes.size()), '\0');
  if (!padded.empty()) out_->WriteAt(pos_, padded.data(), padded.size());
  pos_ += padded.size();
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
  for (const auto& [id, content] : optional_) {
    SectionRef ref;
    WriteSection(content, &ref);
    h.optional.push_back({id, ref.offset, ref.size, ref.checksum});
  }
  h.version_minor = optional_.empty() ? 0 : 1;
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
