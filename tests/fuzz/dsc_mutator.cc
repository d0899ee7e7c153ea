// libFuzzer custom mutator for the targets that take a whole dsc file (open, load): libFuzzer's own
// mutation, then every checksum recomputed, so that the mutated bytes themselves (what the target and
// any saved crash input get) pass the XXH3 checks and exercise the validation and decoding behind them.
// Linked only into the libFuzzer programs; replay programs run inputs as they are.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fixup_checksums.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  size = LLVMFuzzerMutate(data, size, max_size);
  // One mutation in eight keeps a stale file_size, so the truncation checks stay exercised too.
  dsc::fuzz::FixupChecksums(data, size, /*fix_file_size=*/seed % 8 != 0);
  return size;
}
