// Sample order for one epoch on one rank: a pure function of (file, options, seed, epoch), so batch k
// of epoch e is the same in every run, at every thread count, and after a resume.
//
// Semantics, for N samples, batch size B and W ranks:
// - Every rank gets the same number of batches.
// - drop_last = false: each rank gets ceil(ceil(N / W) / B) full batches; the epoch's order is padded
//   by repeating its first samples, and those repeats are flagged as padding. Over all ranks, the
//   non-padding samples are the whole dataset, each exactly once. Exception: `sequential` on one rank
//   keeps a short last batch and has no padding (evaluation).
// - drop_last = true: each rank gets floor(N / (W * B)) batches; the samples left out are the tail of
//   the epoch's order (so, for shuffled orders, a function of seed and epoch); every other sample
//   appears exactly once.
// Ranks take interleaved positions of the epoch order (position p goes to rank p % W).
#pragma once
#include <cstdint>
#include <vector>

#include "format/file_view.h"

namespace dsc {

enum class Order { kSequential, kRandom, kQuasiRandom };

struct OrderOptions {
  Order order = Order::kRandom;
  uint64_t seed = 0;
  uint32_t rank = 0, world_size = 1;
  uint32_t batch_size = 512;
  bool drop_last = false;
  // quasi_random: blocks are shuffled, then samples are shuffled within windows of consecutive
  // (shuffled) blocks holding at least this many samples. 0 = 4 x batch_size x world_size.
  uint64_t quasi_window = 0;
  // When non-empty, the epoch covers only these samples (each at most once; e.g. a seeded random
  // subset for short runs). Orders and sharding apply to the subset as they would to the file.
  std::vector<uint32_t> subset;
};

struct EpochPlan {
  std::vector<uint32_t> samples;  // this rank's samples, batch after batch
  std::vector<uint8_t> padding;   // 1 where samples[i] is a padding repeat
  uint64_t batches = 0;
  uint32_t batch_size = 0;
  // Samples in batch k (the last batch may be short only for sequential, single-rank, keep-last).
  uint32_t batch_length(uint64_t k) const;
};

// Throws dsc::Error for invalid options (rank >= world_size, batch_size 0).
EpochPlan PlanEpoch(const format::FileView& file, const OrderOptions& options, uint64_t epoch);
// The epoch's global order of all samples (or of the subset) before sharding (exposed for tests).
std::vector<uint32_t> GlobalOrder(const format::FileView& file, const OrderOptions& options, uint64_t epoch);

}  // namespace dsc
