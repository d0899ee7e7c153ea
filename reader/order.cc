#include "reader/order.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <unordered_map>
#include <vector>

#include "format/error.h"
#include "kernels/random.h"

namespace dsc {

namespace {

template <typename T>
void Shuffle(std::vector<T>* v, size_t from, size_t to, kernels::Rng* rng) {
  for (size_t i = to - from; i > 1; --i) std::swap((*v)[from + i - 1], (*v)[from + rng->Below(i)]);
}

// Which samples the epoch covers: 1 per member (all of the file when no subset), less `exclude`.
// Also returns the members in subset order (or 0..N-1), which seeds the random shuffle.
std::vector<uint32_t> Members(const format::FileView& file, const OrderOptions& o, std::vector<uint8_t>* member) {
  const uint64_t n = file.sample_count();
  if (!o.exclude.empty() && o.exclude.size() != (n + 7) / 8)
    throw Error(file.name() + ": exclude bitmap has " + std::to_string(o.exclude.size()) + " bytes, the file's " +
                std::to_string(n) + " samples need " + std::to_string((n + 7) / 8));
  auto excluded = [&](uint32_t s) { return !o.exclude.empty() && (o.exclude[s / 8] >> (s % 8) & 1); };
  std::vector<uint32_t> list;
  member->assign(n, 0);
  if (o.subset.empty()) {
    list.reserve(n);
    for (uint32_t s = 0; s < n; ++s)
      if (!excluded(s)) list.push_back(s), (*member)[s] = 1;
    return list;
  }
  std::vector<uint8_t> seen(n, 0);
  for (uint32_t s : o.subset) {
    // Option errors (dsc.OptionError, a ValueError, in Python), as the other options' bad values.
    if (s >= n)
      throw OptionError("invalid loader option subset: sample " + std::to_string(s) + " is out of range (the file has " +
                        std::to_string(n) + " samples)");
    if (seen[s]) throw OptionError("invalid loader option subset: sample " + std::to_string(s) + " is listed twice");
    seen[s] = 1;
    if (!excluded(s)) list.push_back(s), (*member)[s] = 1;
  }
  return list;
}

// quasi_random: the block-shuffled stream, cut into world_size contiguous parts, each shuffled within
// windows of consecutive blocks. `starts` receives the parts' boundaries (world_size + 1 entries).
std::vector<uint32_t> QuasiStream(const format::FileView& file, const OrderOptions& o, uint64_t epoch,
                                  const std::vector<uint8_t>& member, uint64_t n, std::vector<uint64_t>* starts,
                                  std::vector<uint64_t>* windows = nullptr) {
  kernels::Rng rng(o.seed, epoch, 0, kernels::kStreamOrder);
  std::vector<uint32_t> blocks(file.block_count());
  std::iota(blocks.begin(), blocks.end(), 0u);
  Shuffle(&blocks, 0, blocks.size(), &rng);
  std::vector<uint32_t> stream;
  stream.reserve(n);
  std::vector<uint64_t> block_end;  // stream position after each shuffled block
  block_end.reserve(blocks.size());
  for (uint32_t b : blocks) {
    const auto& be = file.block(b);
    for (uint32_t i = 0; i < be.sample_count; ++i)
      if (member[be.first_sample + i]) stream.push_back(be.first_sample + i);
    block_end.push_back(stream.size());
  }
  const uint64_t w = o.world_size;
  const uint64_t window = o.quasi_window ? o.quasi_window : 4ull * o.batch_size;
  starts->assign(w + 1, 0);
  size_t next_block = 0;
  for (uint64_t r = 0; r < w; ++r) {
    const uint64_t from = r * n / w, to = (r + 1) * n / w;
    (*starts)[r] = from;
    (*starts)[r + 1] = to;
    // One rng per part: a rank's shuffle does not depend on how the other parts were shuffled.
    kernels::Rng part_rng(o.seed, epoch, r + 1, kernels::kStreamOrder);
    uint64_t window_start = from;
    if (windows && from < to) windows->push_back(from);
    while (next_block < block_end.size() && block_end[next_block] <= from) ++next_block;
    for (; next_block < block_end.size() && block_end[next_block] < to; ++next_block) {
      if (block_end[next_block] - window_start >= window) {
        Shuffle(&stream, window_start, block_end[next_block], &part_rng);
        window_start = block_end[next_block];
        if (windows) windows->push_back(window_start);
      }
    }
    Shuffle(&stream, window_start, to, &part_rng);
  }
  return stream;
}

}  // namespace

uint32_t EpochPlan::batch_length(uint64_t k) const {
  const uint64_t start = k * batch_size;
  if (start >= samples.size()) return 0;
  return uint32_t(std::min<uint64_t>(batch_size, samples.size() - start));
}

std::vector<uint32_t> GlobalOrder(const format::FileView& file, const OrderOptions& o, uint64_t epoch) {
  std::vector<uint8_t> member;
  std::vector<uint32_t> order = Members(file, o, &member);
  if (o.order == Order::kRandom) {
    kernels::Rng rng(o.seed, epoch, 0, kernels::kStreamOrder);
    Shuffle(&order, 0, order.size(), &rng);
  } else if (o.order == Order::kQuasiRandom) {
    std::vector<uint64_t> starts;
    order = QuasiStream(file, o, epoch, member, order.size(), &starts);
  }
  return order;
}

EpochPlan PlanEpoch(const format::FileView& file, const OrderOptions& o, uint64_t epoch) {
  if (o.world_size == 0 || o.rank >= o.world_size)
    throw Error("rank " + std::to_string(o.rank) + " must be below world_size " + std::to_string(o.world_size));
  if (o.batch_size == 0) throw Error("batch_size must be at least 1");
  EpochPlan plan;
  plan.batch_size = o.batch_size;
  const uint64_t w = o.world_size, b = o.batch_size, r = o.rank;
  if (o.order == Order::kQuasiRandom) {
    std::vector<uint8_t> member;
    const uint64_t n = Members(file, o, &member).size();
    if (n == 0) return plan;
    std::vector<uint64_t> starts, windows;
    const std::vector<uint32_t> stream = QuasiStream(file, o, epoch, member, n, &starts, &windows);
    const uint64_t from = starts[r], mine = starts[r + 1] - from;
    for (uint64_t w : windows)
      if (w >= from && w < from + mine) plan.window_starts.push_back(w - from);
    plan.batches = o.drop_last ? n / w / b : ((n + w - 1) / w + b - 1) / b;
    for (uint64_t j = 0; j < plan.batches * b; ++j) {
      const bool pad = j >= mine;
      plan.samples.push_back(mine ? stream[from + j % mine] : stream[(j - mine) % n]);
      plan.padding.push_back(pad ? 1 : 0);
    }
    return plan;
  }
  const std::vector<uint32_t> order = GlobalOrder(file, o, epoch);
  const uint64_t n = order.size(), g = w * b;
  if (n == 0) return plan;
  plan.batches = o.drop_last ? n / g : (n + g - 1) / g;
  for (uint64_t k = 0; k < plan.batches; ++k) {
    for (uint64_t j = 0; j < b; ++j) {
      const uint64_t p = k * g + r * b + j;  // position in the epoch order
      if (p < n) {
        plan.samples.push_back(order[p]);
        plan.padding.push_back(0);
      } else if (o.order == Order::kSequential) {
        break;  // the short last global batch, clipped (only the last batch can get here)
      } else {
        plan.samples.push_back(order[(p - n) % n]);
        plan.padding.push_back(1);
      }
    }
  }
  return plan;
}

std::vector<uint32_t> RandomSubset(uint64_t total, uint64_t n, uint64_t seed) {
  if (total > (uint64_t(1) << 32))
    throw OptionError("random subset of " + std::to_string(total) + " samples: sample indices are 32-bit (at most 2^32 samples)");
  if (n == 0 || n >= total) return {};
  kernels::Rng rng(seed, 0, 0, kernels::kStreamSubset);
  if (total <= (uint64_t(1) << 22) || n > total / 8) {
    std::vector<uint32_t> all(total);
    for (uint64_t i = 0; i < total; ++i) all[i] = uint32_t(i);
    for (uint64_t i = 0; i < n; ++i) std::swap(all[i], all[i + rng.Below(total - i)]);
    all.resize(n);
    return all;
  }
  // A few of very many: the same swaps on a sparse array (entries not yet swapped hold their own
  // index), so memory follows n, not total, and the subset is the one the dense array gives.
  std::unordered_map<uint64_t, uint32_t> moved;
  auto at = [&](uint64_t i) {
    auto it = moved.find(i);
    return it == moved.end() ? uint32_t(i) : it->second;
  };
  std::vector<uint32_t> out(n);
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t j = i + rng.Below(total - i);
    const uint32_t vi = at(i), vj = at(j);
    out[i] = vj;
    moved[j] = vi;  // position i is never read again
  }
  return out;
}

}  // namespace dsc
