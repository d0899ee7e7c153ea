#include "tests/fuzz/fixup_checksums.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "format/bytes.h"
#include "format/checksum.h"
#include "format/layout.h"

namespace dsc::fuzz {

using namespace dsc::format;

namespace {

// Header field offsets (docs/format.md, "Header").
constexpr size_t kFileSizeAt = 48;
constexpr size_t kHeaderChecksumAt = 152;
constexpr size_t kSectionsAt = 56;
constexpr size_t kSectionBytes = 24;
// Footer field offsets.
constexpr size_t kFooterFileSizeAt = 8;
constexpr size_t kFooterHeaderChecksumAt = 24;
constexpr size_t kFooterChecksumAt = 56;

bool Inside(uint64_t off, uint64_t n, size_t size) { return off <= size && n <= size - off; }

}  // namespace

void FixupChecksums(uint8_t* data, size_t size, bool fix_file_size) {
  if (size < kPageSize + kFooterSize) return;
  uint8_t* footer = data + size - kFooterSize;
  if (fix_file_size) {
    le::put64(data + kFileSizeAt, size);
    le::put64(footer + kFooterFileSizeAt, size);
  }
  const Header h = DecodeHeader(data);
  auto section_checksum_at = [&](int i) { return data + kSectionsAt + kSectionBytes * i + 16; };

  // Blocks first: each entry's checksum, then the block table's own, then the data section's, which is
  // XXH3 over the block checksums in table order (as the reader computes it).
  const SectionRef& bs = h.sections[kBlocks];
  if (Inside(bs.offset, bs.size, size)) {
    uint8_t* table = data + bs.offset;
    const uint64_t entries = std::min<uint64_t>(h.block_count, bs.size / kBlockEntrySize);
    std::string sums;
    for (uint64_t b = 0; b < entries; ++b) {
      uint8_t* e = table + b * kBlockEntrySize;
      BlockEntry be = DecodeBlockEntry(e);
      if (Inside(be.offset, be.size, size)) le::put64(e + 24, Checksum(data + be.offset, be.size));
      sums.append(reinterpret_cast<const char*>(e + 24), 8);
    }
    le::put64(section_checksum_at(kData), Checksum(sums.data(), sums.size()));
    le::put64(section_checksum_at(kBlocks), Checksum(table, bs.size));
  }
  for (int i : {kIndex, kMeta}) {
    const SectionRef& s = h.sections[i];
    if (Inside(s.offset, s.size, size)) le::put64(section_checksum_at(i), Checksum(data + s.offset, s.size));
  }
  // Optional sections (format 1.1): each entry's checksum, then the table's own, when the table has
  // entries (a 1.0 file's all-zero table stays zero).
  const uint32_t n = std::min(h.optional_count, kMaxOptionalSections);
  for (uint32_t k = 0; k < n; ++k) {
    const OptionalRef& s = h.optional[k];
    if (Inside(s.offset, s.size, size))
      le::put64(data + kOptionalEntriesAt + kOptionalEntrySize * k + 24, Checksum(data + s.offset, s.size));
  }
  if (n > 0) le::put64(data + kOptionalTableAt, OptionalTableChecksum(data, n));
  // The header's checksum covers the section checksums just written; the footer repeats it.
  const uint64_t hc = HeaderChecksum(data);
  le::put64(data + kHeaderChecksumAt, hc);
  le::put64(footer + kFooterHeaderChecksumAt, hc);
  le::put64(footer + kFooterChecksumAt, FooterChecksum(footer));
}

}  // namespace dsc::fuzz
