#include "reader/order.h"

#include <algorithm>
#include <numeric>

#include "format/error.h"
#include "kernels/random.h"

namespace dsc {

namespace {

template <typename T>
void Shuffle(std::vector<T>* v, size_t from, size_t to, kernels::Rng* rng) {
  for (size_t i = to - from; i > 1; --i) std::swap((*v)[from + i - 1], (*v)[from + rng->Below(i)]);
}

}  // namespace

uint32_t EpochPlan::batch_length(uint64_t k) const {
  const uint64_t start = k * batch_size;
  return uint32_t(std::min<uint64_t>(batch_size, samples.size() - start));
}

std::vector<uint32_t> GlobalOrder(const format::FileView& file, const OrderOptions& o, uint64_t epoch) {
  std::vector<uint32_t> order;
  std::vector<uint8_t> member;  // subset membership, for quasi-random
  if (o.subset.empty()) {
    order.resize(file.sample_count());
    std::iota(order.begin(), order.end(), 0u);
  } else {
    member.assign(file.sample_count(), 0);
    for (uint32_t s : o.subset) {
      if (s >= file.sample_count()) throw Error("subset sample " + std::to_string(s) + " out of range");
      if (member[s]) throw Error("subset lists sample " + std::to_string(s) + " twice");
      member[s] = 1;
    }
    order = o.subset;
  }
  const uint64_t n = order.size();
  kernels::Rng rng(o.seed, epoch, 0, kernels::kStreamOrder);
  if (o.order == Order::kRandom) {
    Shuffle(&order, 0, n, &rng);
  } else if (o.order == Order::kQuasiRandom) {
    std::vector<uint32_t> blocks(file.block_count());
    std::iota(blocks.begin(), blocks.end(), 0u);
    Shuffle(&blocks, 0, blocks.size(), &rng);
    const uint64_t window = o.quasi_window ? o.quasi_window : 4ull * o.batch_size * o.world_size;
    size_t pos = 0, window_start = 0;
    for (uint32_t b : blocks) {
      const auto& be = file.block(b);
      for (uint32_t i = 0; i < be.sample_count; ++i)
        if (member.empty() || member[be.first_sample + i]) order[pos++] = be.first_sample + i;
      if (pos - window_start >= window) {
        Shuffle(&order, window_start, pos, &rng);
        window_start = pos;
      }
    }
    Shuffle(&order, window_start, pos, &rng);
  }
  return order;
}

EpochPlan PlanEpoch(const format::FileView& file, const OrderOptions& o, uint64_t epoch) {
  if (o.world_size == 0 || o.rank >= o.world_size) throw Error("rank must be below world_size");
  if (o.batch_size == 0) throw Error("batch_size must be at least 1");
  std::vector<uint32_t> order = GlobalOrder(file, o, epoch);
  const uint64_t n = order.size(), w = o.world_size, b = o.batch_size;
  EpochPlan plan;
  plan.batch_size = o.batch_size;
  if (n == 0) return plan;
  if (o.drop_last) {
    plan.batches = n / (w * b);
    for (uint64_t j = 0; j < plan.batches * b; ++j) plan.samples.push_back(order[j * w + o.rank]);
    plan.padding.assign(plan.samples.size(), 0);
    return plan;
  }
  if (o.order == Order::kSequential && w == 1) {
    plan.batches = (n + b - 1) / b;
    plan.samples = std::move(order);
    plan.padding.assign(n, 0);
    return plan;
  }
  const uint64_t per_rank = (n + w - 1) / w;
  plan.batches = (per_rank + b - 1) / b;
  for (uint64_t j = 0; j < plan.batches * b; ++j) {
    const uint64_t p = j * w + o.rank;
    plan.samples.push_back(order[p % n]);
    plan.padding.push_back(p >= n ? 1 : 0);
  }
  return plan;
}

}  // namespace dsc
