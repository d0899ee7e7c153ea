// Makes a mutated dsc file's checksums right again, so that fuzzing reaches the structural checks,
// index rules and decoders behind them instead of stopping at the first XXH3 comparison
// (docs/format.md: every structural byte is covered by a checksum). Used by the open/load fuzzers'
// custom mutator (dsc_mutator.cc) and by tests/fuzz_fixup_test.cc.
#pragma once
#include <cstddef>
#include <cstdint>

namespace dsc::fuzz {

// Recomputes, in place and in dependency order, every checksum the format defines that the bytes
// still locate: each data block's (block table), the index, meta and block-table sections', the data
// section's (over the block checksums), each optional section's (format 1.1) and the optional-section
// table's, the header's, the footer's copy of it and the footer's own.
// Fields that point outside the buffer are left alone; any bytes are accepted (never reads outside
// [data, data + size)). With fix_file_size, the header's and footer's file_size are set to `size`
// too, so that length-changing mutations get past the truncation check.
void FixupChecksums(uint8_t* data, size_t size, bool fix_file_size = false);

}  // namespace dsc::fuzz
