// Byte layout of a dsc file, version 1. docs/format.md is the specification; this header mirrors it
// field by field. Encoding and decoding are explicit (no struct memcpy) so the layout does not depend
// on the compiler's padding or the host's byte order.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dsc::format {

constexpr uint16_t kVersionMajor = 1;
// The highest minor version this build writes: 1.1 adds optional sections. A file without optional
// sections is written as 1.0 (byte for byte what a 1.0 writer produced).
constexpr uint16_t kVersionMinor = 1;
constexpr uint32_t kPageSize = 4096;
constexpr uint64_t kDefaultBlockSize = 4u << 20;  // 4 MiB
constexpr size_t kHeaderUsed = 160;               // the fixed fields; the optional-section table follows
// The optional-section table (version 1.1) in the header page: u64 checksum at 160, u32 count at 168,
// u32 zero at 172, then `count` 32-byte entries from 176; the rest of the page is zero.
constexpr size_t kOptionalTableAt = 160;
constexpr size_t kOptionalEntriesAt = 176;
constexpr size_t kOptionalEntrySize = 32;
constexpr uint32_t kMaxOptionalSections = (kPageSize - kOptionalEntriesAt) / kOptionalEntrySize;  // 122
constexpr size_t kFooterSize = 64;
constexpr size_t kIndexEntrySize = 32;
constexpr size_t kBlockEntrySize = 32;
constexpr size_t kMaxLabelFields = 2;
constexpr size_t kMaxJpegTables = 65535;

extern const std::array<uint8_t, 8> kHeaderMagic;
extern const std::array<uint8_t, 8> kFooterMagic;

enum class Encoding : uint8_t { kJpeg = 1, kRaw = 2, kRawZstd = 3 };
const char* EncodingName(Encoding e);  // "jpeg", "raw", "raw-zstd", or "unknown"
bool IsKnownEncoding(uint8_t e);

// The four sections the header locates, in file order. Header and footer are sections too when the
// file is described (dsc info), but they locate themselves.
enum SectionId { kData = 0, kIndex = 1, kMeta = 2, kBlocks = 3, kSectionCount = 4 };
const char* SectionName(int id);  // "data", "index", "meta", "blocks"

struct SectionRef {
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t checksum = 0;
};

// One entry of the optional-section table: a page-aligned section after the block table that a reader
// of 1.1 or later checks (checksum) and otherwise ignores when it does not know the id.
struct OptionalRef {
  uint32_t id = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t checksum = 0;  // XXH3 of the section's `size` content bytes
};

struct Header {
  uint16_t version_major = kVersionMajor;
  uint16_t version_minor = 0;
  uint32_t page_size = kPageSize;
  uint64_t sample_count = 0;
  uint32_t field_count = 0;
  uint32_t incompat_flags = 0;
  uint64_t block_size = kDefaultBlockSize;
  uint64_t block_count = 0;
  uint64_t file_size = 0;
  SectionRef sections[kSectionCount];
  uint64_t header_checksum = 0;  // filled by EncodeHeader, checked by DecodeHeader's caller
  // Optional sections in file order. DecodeHeader reads at most kMaxOptionalSections entries and keeps
  // the stored count and table checksum for the caller to check.
  std::vector<OptionalRef> optional;
  uint32_t optional_count = 0;      // as stored (may exceed kMaxOptionalSections in a damaged file)
  uint64_t optional_checksum = 0;   // as stored; EncodeHeader computes it
};

struct Footer {
  uint64_t file_size = 0;
  uint64_t sample_count = 0;
  uint64_t header_checksum = 0;
  uint16_t version_major = kVersionMajor;
  uint16_t version_minor = 0;
};

struct BlockEntry {
  uint64_t offset = 0;
  uint32_t size = 0;
  uint32_t first_sample = 0;
  uint32_t sample_count = 0;
  uint64_t checksum = 0;
};

struct IndexEntry {
  uint64_t offset = 0;
  uint32_t size = 0;
  uint32_t block = 0;
  uint16_t width = 0;
  uint16_t height = 0;
  uint8_t encoding = 0;
  uint8_t channels = 0;
  uint16_t jpeg_table = 0;
  int32_t label[kMaxLabelFields] = {0, 0};
};

// Writes kPageSize bytes (fixed fields, optional-section table, zero tail), computing header_checksum
// and the table's checksum; returns header_checksum. At most kMaxOptionalSections optional entries.
uint64_t EncodeHeader(const Header& h, uint8_t* page);
// Decodes the fixed fields and the optional-section table of a header page. Magic/version/checksum
// checks are the caller's (FileView), which knows the file name for the message.
Header DecodeHeader(const uint8_t* p);
uint64_t HeaderChecksum(const uint8_t* p);  // XXH3 over the checksummed part
// XXH3 of the table's count word and its first `count` entries (count <= kMaxOptionalSections); what
// the table checksum at kOptionalTableAt must hold when count > 0.
uint64_t OptionalTableChecksum(const uint8_t* page, uint32_t count);
// Entry i's reserved word is zero.
bool OptionalEntryZeroOk(const uint8_t* page, uint32_t i);

void EncodeFooter(const Footer& f, uint8_t* out64);
Footer DecodeFooter(const uint8_t* p);
uint64_t FooterChecksum(const uint8_t* p);
uint64_t StoredFooterChecksum(const uint8_t* p);

void EncodeBlockEntry(const BlockEntry& b, uint8_t* out32);
BlockEntry DecodeBlockEntry(const uint8_t* p);
bool BlockEntryZeroOk(const uint8_t* p);

void EncodeIndexEntry(const IndexEntry& e, uint8_t* out32);
IndexEntry DecodeIndexEntry(const uint8_t* p);

inline uint64_t RoundUpToPage(uint64_t v, uint64_t page = kPageSize) {
  return (v + page - 1) / page * page;
}

}  // namespace dsc::format
