#include "format/layout.h"

#include <algorithm>
#include <cstring>

#include "format/bytes.h"
#include "format/checksum.h"

namespace dsc::format {

const std::array<uint8_t, 8> kHeaderMagic = {0x89, 'D', 'S', 'C', '\r', '\n', 0x1a, '\n'};
const std::array<uint8_t, 8> kFooterMagic = {0x89, 'D', 'S', 'C', 'E', 'N', 'D', '\n'};

const char* EncodingName(Encoding e) {
  switch (e) {
    case Encoding::kJpeg: return "jpeg";
    case Encoding::kRaw: return "raw";
    case Encoding::kRawZstd: return "raw-zstd";
  }
  return "unknown";
}

bool IsKnownEncoding(uint8_t e) { return e >= 1 && e <= 3; }

const char* SectionName(int id) {
  static const char* names[] = {"data", "index", "meta", "blocks"};
  return id >= 0 && id < kSectionCount ? names[id] : "unknown";
}

namespace {
constexpr size_t kHeaderChecksummed = 152;
constexpr size_t kFooterChecksummed = 56;
}  // namespace

uint64_t HeaderChecksum(const uint8_t* p) { return Checksum(p, kHeaderChecksummed); }

uint64_t EncodeHeader(const Header& h, uint8_t* p) {
  std::memset(p, 0, kPageSize);
  std::memcpy(p, kHeaderMagic.data(), 8);
  le::put16(p + 8, h.version_major);
  le::put16(p + 10, h.version_minor);
  le::put32(p + 12, h.page_size);
  le::put64(p + 16, h.sample_count);
  le::put32(p + 24, h.field_count);
  le::put32(p + 28, h.incompat_flags);
  le::put64(p + 32, h.block_size);
  le::put64(p + 40, h.block_count);
  le::put64(p + 48, h.file_size);
  for (int i = 0; i < kSectionCount; ++i) {
    uint8_t* s = p + 56 + 24 * i;
    le::put64(s, h.sections[i].offset);
    le::put64(s + 8, h.sections[i].size);
    le::put64(s + 16, h.sections[i].checksum);
  }
  uint64_t c = HeaderChecksum(p);
  le::put64(p + kHeaderChecksummed, c);
  const uint32_t n = uint32_t(std::min<size_t>(h.optional.size(), kMaxOptionalSections));
  if (n > 0) {  // a 1.0 file keeps an all-zero table: count 0, checksum 0
    le::put32(p + kOptionalTableAt + 8, n);
    for (uint32_t i = 0; i < n; ++i) {
      uint8_t* e = p + kOptionalEntriesAt + kOptionalEntrySize * i;
      le::put32(e, h.optional[i].id);
      le::put64(e + 8, h.optional[i].offset);
      le::put64(e + 16, h.optional[i].size);
      le::put64(e + 24, h.optional[i].checksum);
    }
    le::put64(p + kOptionalTableAt, OptionalTableChecksum(p, n));
  }
  return c;
}

uint64_t OptionalTableChecksum(const uint8_t* p, uint32_t count) {
  return Checksum(p + kOptionalTableAt + 8, 8 + kOptionalEntrySize * std::min(count, kMaxOptionalSections));
}

bool OptionalEntryZeroOk(const uint8_t* p, uint32_t i) {
  return le::get32(p + kOptionalEntriesAt + kOptionalEntrySize * i + 4) == 0;
}

Header DecodeHeader(const uint8_t* p) {
  Header h;
  h.version_major = le::get16(p + 8);
  h.version_minor = le::get16(p + 10);
  h.page_size = le::get32(p + 12);
  h.sample_count = le::get64(p + 16);
  h.field_count = le::get32(p + 24);
  h.incompat_flags = le::get32(p + 28);
  h.block_size = le::get64(p + 32);
  h.block_count = le::get64(p + 40);
  h.file_size = le::get64(p + 48);
  for (int i = 0; i < kSectionCount; ++i) {
    const uint8_t* s = p + 56 + 24 * i;
    h.sections[i] = {le::get64(s), le::get64(s + 8), le::get64(s + 16)};
  }
  h.header_checksum = le::get64(p + kHeaderChecksummed);
  h.optional_checksum = le::get64(p + kOptionalTableAt);
  h.optional_count = le::get32(p + kOptionalTableAt + 8);
  for (uint32_t i = 0; i < std::min(h.optional_count, kMaxOptionalSections); ++i) {
    const uint8_t* e = p + kOptionalEntriesAt + kOptionalEntrySize * i;
    h.optional.push_back({le::get32(e), le::get64(e + 8), le::get64(e + 16), le::get64(e + 24)});
  }
  return h;
}

void EncodeFooter(const Footer& f, uint8_t* p) {
  std::memset(p, 0, kFooterSize);
  std::memcpy(p, kFooterMagic.data(), 8);
  le::put64(p + 8, f.file_size);
  le::put64(p + 16, f.sample_count);
  le::put64(p + 24, f.header_checksum);
  le::put16(p + 32, f.version_major);
  le::put16(p + 34, f.version_minor);
  le::put64(p + kFooterChecksummed, FooterChecksum(p));
}

Footer DecodeFooter(const uint8_t* p) {
  Footer f;
  f.file_size = le::get64(p + 8);
  f.sample_count = le::get64(p + 16);
  f.header_checksum = le::get64(p + 24);
  f.version_major = le::get16(p + 32);
  f.version_minor = le::get16(p + 34);
  return f;
}

uint64_t FooterChecksum(const uint8_t* p) { return Checksum(p, kFooterChecksummed); }
uint64_t StoredFooterChecksum(const uint8_t* p) { return le::get64(p + kFooterChecksummed); }

void EncodeBlockEntry(const BlockEntry& b, uint8_t* p) {
  le::put64(p, b.offset);
  le::put32(p + 8, b.size);
  le::put32(p + 12, b.first_sample);
  le::put32(p + 16, b.sample_count);
  le::put32(p + 20, 0);
  le::put64(p + 24, b.checksum);
}

BlockEntry DecodeBlockEntry(const uint8_t* p) {
  BlockEntry b;
  b.offset = le::get64(p);
  b.size = le::get32(p + 8);
  b.first_sample = le::get32(p + 12);
  b.sample_count = le::get32(p + 16);
  b.checksum = le::get64(p + 24);
  return b;
}

bool BlockEntryZeroOk(const uint8_t* p) { return le::get32(p + 20) == 0; }

void EncodeIndexEntry(const IndexEntry& e, uint8_t* p) {
  le::put64(p, e.offset);
  le::put32(p + 8, e.size);
  le::put32(p + 12, e.block);
  le::put16(p + 16, e.width);
  le::put16(p + 18, e.height);
  p[20] = e.encoding;
  p[21] = e.channels;
  le::put16(p + 22, e.jpeg_table);
  le::put32(p + 24, uint32_t(e.label[0]));
  le::put32(p + 28, uint32_t(e.label[1]));
}

IndexEntry DecodeIndexEntry(const uint8_t* p) {
  IndexEntry e;
  e.offset = le::get64(p);
  e.size = le::get32(p + 8);
  e.block = le::get32(p + 12);
  e.width = le::get16(p + 16);
  e.height = le::get16(p + 18);
  e.encoding = p[20];
  e.channels = p[21];
  e.jpeg_table = le::get16(p + 22);
  e.label[0] = int32_t(le::get32(p + 24));
  e.label[1] = int32_t(le::get32(p + 28));
  return e;
}

}  // namespace dsc::format
