// A loader's position in a run, for checkpoints (Loader::state() / restore()). Part of the loader's
// API: reader/loader.h includes it.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "reader/fingerprint.h"

namespace dsc {

// Where a run is; save it with your checkpoint (Serialize) and hand it to restore(). Batches are
// counted in global batches, so a state taken on W ranks restores on W' ranks (docs/determinism.md).
struct LoaderState {
  static constexpr uint32_t kVersion = 1;  // of Serialize's byte layout
  RunIdentity run;          // restore() refuses a loader whose identity differs (naming the component)
  uint64_t epoch = 0;
  uint64_t next_batch = 0;  // the first global batch of the epoch's plan not yet handed out
  uint32_t world_size = 1;  // ranks of the plan next_batch counts in; 0 = ranks were at different batches
  uint32_t rank = 0;        // the rank that took it (0 after Merge)
  uint32_t ranks = 1;       // ranks whose consumption `consumed` covers: 1, or world_size after Merge
  // quasi_random only (empty otherwise); bitmaps over the file's samples, bit i % 8 of byte i / 8.
  std::vector<uint8_t> excluded;  // samples this epoch's plan left out (consumed before a resume on other ranks)
  std::vector<uint8_t> consumed;  // samples handed out this epoch by `ranks` ranks, `excluded` included

  // Versioned little-endian bytes with a checksum: for checkpoints, Python's state_dict and remote workers.
  std::string Serialize() const;
  // Throws dsc::Error naming the byte offset and the problem for damaged, truncated or foreign bytes.
  static LoaderState Deserialize(std::string_view bytes);
  // One state from every rank of one run (each rank knows only its own consumption): consumption is
  // united, so quasi_random can finish the epoch exactly once on another rank count. Throws when the
  // states are not one run's W ranks at one epoch (or, for random/sequential, at one batch).
  static LoaderState Merge(const std::vector<LoaderState>& ranks);
};

}  // namespace dsc
