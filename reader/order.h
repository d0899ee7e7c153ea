// Sample order for one epoch on one rank: a pure function of (file, options, seed, epoch), so batch k
// of epoch e is the same in every run, at every thread count, and after a resume. This comment is
// the spec (docs/determinism.md explains it for users).
//
// Terms: N samples (the file, or the subset), W ranks, B = batch_size samples per rank and batch,
// G = B x W the global batch. Global batch k of an epoch is the union of every rank's batch k.
//
// random and sequential: W-independent. The epoch order O is a permutation of the N samples that
// depends on (seed, epoch) only (sequential: the identity). Global batch k is positions
// [kG, (k+1)G) of O, and rank r takes the fixed contiguous slice [rB, (r+1)B) of it. So for a fixed
// G, global batch k is the same list of samples whatever W is, and a run can resume on another W.
// - drop_last = true: floor(N / G) global batches; the N mod G samples left out are the tail of O.
// - drop_last = false: ceil(N / G) global batches, every sample exactly once.
//   random: the last global batch is filled up to G by repeating O from its start (O[0], O[1], ...),
//   and those repeats are flagged as padding.
//   sequential (evaluation): no padding; the last global batch is short and each rank gets its slice
//   of it clipped to the samples that exist, which may be short or empty. With W = 1 that is the
//   usual short last batch.
// Every rank gets the same number of batches (some may be short/empty as said).
//
// quasi_random: W-dependent on purpose, so that each rank reads only ~1/W of the file per epoch.
// Blocks are shuffled (seed, epoch); their samples, in that block order, form a stream S of N
// samples; rank r owns the contiguous part [rN/W, (r+1)N/W) of S (whole blocks but at most two), and
// shuffles it within windows of consecutive blocks holding at least `quasi_window` samples (0 = 4 x B).
// Rank r's batches are consecutive runs of B of its part.
// - drop_last = true: floor(floor(N / W) / B) batches per rank; each rank's tail is left out.
// - drop_last = false: ceil(ceil(N / W) / B) batches per rank; a rank's last batch is filled by
//   repeating its part from the start (flagged padding; a rank owning nothing repeats S).
// Over all ranks the non-padding samples are the whole dataset (or subset), each exactly once.
//
// `exclude` removes samples from the epoch before any of the above (the loader uses it to finish an
// epoch after a restore on another rank count: the samples already consumed are excluded).
#pragma once
#include <cstdint>
#include <vector>

#include "format/file_view.h"

namespace dsc {

enum class Order { kSequential, kRandom, kQuasiRandom };

// Bumped whenever PlanEpoch's output changes for the same options: part of the run fingerprint, so a
// checkpoint never resumes into a differently planned epoch. 2: global batches, quasi blocks per rank.
inline constexpr uint32_t kOrderPlanVersion = 2;

struct OrderOptions {
  Order order = Order::kRandom;
  uint64_t seed = 0;
  uint32_t rank = 0, world_size = 1;
  uint32_t batch_size = 512;  // per rank; the global batch is batch_size x world_size
  bool drop_last = false;
  // quasi_random: each rank shuffles its samples within windows of consecutive (shuffled) blocks
  // holding at least this many samples. 0 = 4 x batch_size.
  uint64_t quasi_window = 0;
  // When non-empty, the epoch covers only these samples (each at most once; e.g. a seeded random
  // subset for short runs). Orders and sharding apply to the subset as they would to the file.
  std::vector<uint32_t> subset;
  // When non-empty, a bitmap over the file's samples (bit i % 8 of byte i / 8, (N + 7) / 8 bytes):
  // set samples are left out of the epoch.
  std::vector<uint8_t> exclude;
};

struct EpochPlan {
  std::vector<uint32_t> samples;  // this rank's samples, batch after batch
  std::vector<uint8_t> padding;   // 1 where samples[i] is a padding repeat
  uint64_t batches = 0;
  uint32_t batch_size = 0;
  // quasi_random: where this rank's shuffle windows start, as positions in `samples` (ascending, the
  // first 0); the padding at the end belongs to the last. Empty for the other orders. Remote workers
  // are given whole windows (docs/remote.md).
  std::vector<uint64_t> window_starts;
  // Samples in batch k: batch_size, except that sequential's last batch may be short or empty.
  uint32_t batch_length(uint64_t k) const;
};

// Throws dsc::Error for invalid options (rank >= world_size, batch_size 0, bad subset or exclude).
EpochPlan PlanEpoch(const format::FileView& file, const OrderOptions& options, uint64_t epoch);
// The epoch's order of all samples (or of the subset, less `exclude`) before sharding: O for random
// and sequential (independent of rank and world_size), the ranks' parts one after the other for
// quasi_random (depends on world_size). Exposed for tests.
std::vector<uint32_t> GlobalOrder(const format::FileView& file, const OrderOptions& options, uint64_t epoch);

// A fixed, seeded random subset of n of `total` samples, for OrderOptions::subset (a class tree is
// stored sorted by class, so the first n would be one class); empty (all samples) when n is 0 or at
// least total. dsc train --limit and the Python examples pick their subsets with it.
std::vector<uint32_t> RandomSubset(uint64_t total, uint64_t n, uint64_t seed);

}  // namespace dsc
