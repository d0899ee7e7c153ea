// Byte layout of a dsc file, version 1. docs/format.md is the specification; this header mirrors it
// field by field. Encoding and decoding are explicit (no struct memcpy) so the layout does not depend
// on the compiler's padding or the host's byte order.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace dsc::format {

constexpr uint16_t kVersionMajor = 1;
constexpr uint16_t kVersionMinor = 0;
constexpr uint32_t kPageSize = 4096;
constexpr uint64_t kDefaultBlockSize = 4u << 20;  // 4 MiB
constexpr size_t kHeaderUsed = 160;               // bytes [160, PAGE) of the header page are zero
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

struct Header {
  uint16_t version_major = kVersionMajor;
  uint16_t version_minor = kVersionMinor;
  uint32_t page_size = kPageSize;
  uint64_t sample_count = 0;
  uint32_t field_count = 0;
  uint32_t incompat_flags = 0;
  uint64_t block_size = kDefaultBlockSize;
  uint64_t block_count = 0;
  uint64_t file_size = 0;
  SectionRef sections[kSectionCount];
  uint64_t header_checksum = 0;  // filled by EncodeHeader, checked by DecodeHeader's caller
};

struct Footer {
  uint64_t file_size = 0;
  uint64_t sample_count = 0;
  uint64_t header_checksum = 0;
  uint16_t version_major = kVersionMajor;
  uint16_t version_minor = kVersionMinor;
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

// Writes kPageSize bytes (content + zero tail), computing header_checksum; returns it.
uint64_t EncodeHeader(const Header& h, uint8_t* page);
// Decodes the fixed fields of the first kHeaderUsed bytes. Magic/version/checksum checks are the
// caller's (FileView), which knows the file name for the message.
Header DecodeHeader(const uint8_t* p);
uint64_t HeaderChecksum(const uint8_t* p);  // XXH3 over the checksummed part

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
