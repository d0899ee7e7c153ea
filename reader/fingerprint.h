// The identity of "the same run": what a checkpoint must agree on with the loader it is restored
// into, so that the restored loader yields the batches the interrupted run would have produced.
//
// Covers the file (size and header checksum, which covers every section's location), the order-plan
// version (kOrderPlanVersion), and the options that decide which samples form each global batch:
// order, seed, global batch size, drop_last, quasi_window (quasi_random only) and the subset. Not
// covered, on purpose: rank and world size (a run may resume on another rank count), threads,
// prefetch, output format and augmentation settings (they change how a batch looks, not which
// samples it holds; augmentation randomness is a function of seed, epoch and sample index).
#pragma once
#include <cstdint>
#include <string>

namespace dsc {

class Dataset;
struct LoaderOptions;

struct RunIdentity {
  uint64_t file_size = 0;
  uint64_t header_checksum = 0;
  uint32_t plan_version = 0;
  uint32_t order = 0;  // dsc::Order
  uint64_t seed = 0;
  uint64_t global_batch_size = 0;
  uint32_t drop_last = 0;
  uint64_t quasi_window = 0;  // 0 unless the order is quasi_random
  uint64_t subset_size = 0;
  uint64_t subset_hash = 0;  // XXH3 of the subset's indices in order; 0 without a subset

  // `options` as the loader normalised them (batch_size per rank, world_size).
  static RunIdentity Of(const Dataset& ds, const LoaderOptions& options);
  uint64_t Fingerprint() const;  // one number for logs and quick comparisons
  // "" when equal; otherwise names every component that differs, with both values.
  std::string Difference(const RunIdentity& other) const;
  bool operator==(const RunIdentity& o) const { return Difference(o).empty(); }
};

uint64_t RunFingerprint(const Dataset& ds, const LoaderOptions& options);

}  // namespace dsc
