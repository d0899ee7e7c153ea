// RunIdentity and LoaderState's byte form and merging.
#include "reader/fingerprint.h"

#include <algorithm>
#include <string>

#include "format/bytes.h"
#include "format/checksum.h"
#include "format/error.h"
#include "reader/dataset.h"
#include "reader/loader.h"

namespace dsc {

namespace {

const char* OrderName(uint64_t o) {
  switch (o) {
    case uint64_t(Order::kSequential): return "sequential";
    case uint64_t(Order::kRandom): return "random";
    case uint64_t(Order::kQuasiRandom): return "quasi_random";
  }
  return "unknown";
}

constexpr char kMagic[8] = {'D', 'S', 'C', 'S', 'T', 'A', 'T', 'E'};

class Writer {
 public:
  void u32(uint32_t v) {
    uint8_t b[4];
    le::put32(b, v);
    s_.append(reinterpret_cast<const char*>(b), 4);
  }
  void u64(uint64_t v) {
    uint8_t b[8];
    le::put64(b, v);
    s_.append(reinterpret_cast<const char*>(b), 8);
  }
  void bytes(const std::vector<uint8_t>& v) {
    u64(v.size());
    s_.append(reinterpret_cast<const char*>(v.data()), v.size());
  }
  std::string& str() { return s_; }

 private:
  std::string s_;
};

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  uint32_t u32() { return le::get32(Take(4)); }
  uint64_t u64() { return le::get64(Take(8)); }
  std::vector<uint8_t> bytes(const char* what) {
    const size_t at = pos_;
    const uint64_t n = u64();
    if (n > s_.size() - pos_)
      throw Error("loader state: byte offset " + std::to_string(at) + ": " + what + " says " + std::to_string(n) +
                  " bytes, only " + std::to_string(s_.size() - pos_) + " remain");
    const uint8_t* p = Take(size_t(n));
    return std::vector<uint8_t>(p, p + n);
  }
  size_t pos() const { return pos_; }

 private:
  const uint8_t* Take(size_t n) {
    if (n > s_.size() - pos_)
      throw Error("loader state: truncated at byte offset " + std::to_string(pos_) + " (" + std::to_string(s_.size()) +
                  " bytes)");
    const uint8_t* p = reinterpret_cast<const uint8_t*>(s_.data()) + pos_;
    pos_ += n;
    return p;
  }
  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

RunIdentity RunIdentity::Of(const Dataset& ds, const LoaderOptions& o) {
  RunIdentity id;
  id.file_size = ds.view().header().file_size;
  id.header_checksum = ds.view().header().header_checksum;
  id.plan_version = kOrderPlanVersion;
  id.order = uint32_t(o.order);
  id.seed = o.seed;
  id.global_batch_size = uint64_t(o.batch_size) * o.world_size;
  id.drop_last = o.drop_last ? 1 : 0;
  id.quasi_window = o.order == Order::kQuasiRandom ? o.quasi_window : 0;  // meaningless for the others
  id.subset_size = o.subset.size();
  id.subset_hash = o.subset.empty() ? 0 : Checksum(o.subset.data(), o.subset.size() * sizeof(uint32_t));
  return id;
}

uint64_t RunIdentity::Fingerprint() const {
  const uint64_t v[] = {file_size, header_checksum, plan_version, order, seed, global_batch_size, drop_last,
                        quasi_window, subset_size, subset_hash};
  uint8_t b[sizeof(v)];
  for (size_t i = 0; i < std::size(v); ++i) le::put64(b + 8 * i, v[i]);  // fixed byte order
  return Checksum(b, sizeof(b));
}

std::string RunIdentity::Difference(const RunIdentity& o) const {
  std::string d;
  auto add = [&](const char* name, const std::string& a, const std::string& b) {
    if (a == b) return;
    d += std::string(d.empty() ? "" : "; ") + name + " " + a + " vs " + b;
  };
  auto num = [](uint64_t v) { return std::to_string(v); };
  add("file size", num(file_size), num(o.file_size));
  add("file header checksum", num(header_checksum), num(o.header_checksum));
  add("order plan version", num(plan_version), num(o.plan_version));
  add("order", OrderName(order), OrderName(o.order));
  add("seed", num(seed), num(o.seed));
  add("global batch size", num(global_batch_size), num(o.global_batch_size));
  add("drop_last", drop_last ? "true" : "false", o.drop_last ? "true" : "false");
  add("quasi_window", num(quasi_window), num(o.quasi_window));
  add("subset size", num(subset_size), num(o.subset_size));
  if (subset_size == o.subset_size) add("subset (hash)", num(subset_hash), num(o.subset_hash));
  return d;
}

uint64_t RunFingerprint(const Dataset& ds, const LoaderOptions& options) { return RunIdentity::Of(ds, options).Fingerprint(); }

std::string LoaderState::Serialize() const {
  Writer w;
  w.str().append(kMagic, sizeof(kMagic));
  w.u32(kVersion);
  w.u32(0);
  w.u64(run.file_size);
  w.u64(run.header_checksum);
  w.u32(run.plan_version);
  w.u32(run.order);
  w.u64(run.seed);
  w.u64(run.global_batch_size);
  w.u32(run.drop_last);
  w.u32(0);
  w.u64(run.quasi_window);
  w.u64(run.subset_size);
  w.u64(run.subset_hash);
  w.u64(epoch);
  w.u64(next_batch);
  w.u32(world_size);
  w.u32(rank);
  w.u32(ranks);
  w.u32(0);
  w.bytes(excluded);
  w.bytes(consumed);
  w.u64(Checksum(w.str().data(), w.str().size()));
  return std::move(w.str());
}

LoaderState LoaderState::Deserialize(std::string_view bytes) {
  if (bytes.size() < sizeof(kMagic) + 4 || !std::equal(kMagic, kMagic + sizeof(kMagic), bytes.data()))
    throw Error("loader state: bad magic at byte offset 0 (not a dsc loader state, " + std::to_string(bytes.size()) +
                " bytes)");
  Reader r(bytes.substr(sizeof(kMagic)));
  const uint32_t version = r.u32();
  if (version != kVersion)
    throw Error("loader state: version " + std::to_string(version) + " at byte offset 8 is not supported (this build reads " +
                std::to_string(kVersion) + ")");
  if (bytes.size() < sizeof(kMagic) + 12)
    throw Error("loader state: truncated (" + std::to_string(bytes.size()) + " bytes)");
  const size_t body = bytes.size() - 8;
  const uint64_t want = le::get64(reinterpret_cast<const uint8_t*>(bytes.data()) + body);
  if (Checksum(bytes.data(), body) != want)
    throw Error("loader state: checksum mismatch (bytes 0.." + std::to_string(body) + " damaged or truncated)");
  Reader in(bytes.substr(0, body));
  in.u64();  // magic
  in.u64();  // version, reserved
  LoaderState s;
  s.run.file_size = in.u64();
  s.run.header_checksum = in.u64();
  s.run.plan_version = in.u32();
  s.run.order = in.u32();
  s.run.seed = in.u64();
  s.run.global_batch_size = in.u64();
  s.run.drop_last = in.u32();
  in.u32();
  s.run.quasi_window = in.u64();
  s.run.subset_size = in.u64();
  s.run.subset_hash = in.u64();
  s.epoch = in.u64();
  s.next_batch = in.u64();
  s.world_size = in.u32();
  s.rank = in.u32();
  s.ranks = in.u32();
  in.u32();
  s.excluded = in.bytes("excluded bitmap");
  s.consumed = in.bytes("consumed bitmap");
  if (in.pos() != body) throw Error("loader state: " + std::to_string(body - in.pos()) + " unexpected bytes at byte offset " +
                                    std::to_string(in.pos()));
  // ranks: 1 (one rank's state) or all of them (Merge); world_size 0 only from a Merge of 2 or more.
  if (s.run.order > uint32_t(Order::kQuasiRandom) || s.run.drop_last > 1 || s.rank >= std::max(1u, s.world_size) ||
      s.ranks == 0 || (s.world_size && s.ranks != 1 && s.ranks != s.world_size) || (!s.world_size && s.ranks < 2))
    throw Error("loader state: inconsistent fields (order " + std::to_string(s.run.order) + ", rank " + std::to_string(s.rank) +
                " of " + std::to_string(s.world_size) + ", ranks " + std::to_string(s.ranks) + ")");
  if (!s.excluded.empty() && s.consumed.size() != s.excluded.size())
    throw Error("loader state: excluded and consumed bitmaps differ in size");
  return s;
}

LoaderState LoaderState::Merge(const std::vector<LoaderState>& states) {
  if (states.empty()) throw Error("LoaderState::Merge: no states");
  const LoaderState& a = states[0];
  const uint32_t w = a.world_size;
  if (w == 0 || a.ranks != 1) throw Error("LoaderState::Merge: expects one state per rank, as each rank's loader took it");
  if (states.size() != w)
    throw Error("LoaderState::Merge: " + std::to_string(states.size()) + " states for a world size of " + std::to_string(w));
  LoaderState m = a;
  m.rank = 0;
  m.ranks = w;
  std::vector<uint8_t> seen(w, 0);
  for (const LoaderState& s : states) {
    const std::string diff = a.run.Difference(s.run);
    if (!diff.empty()) throw Error("LoaderState::Merge: states of different runs (rank " + std::to_string(a.rank) + " vs rank " +
                                   std::to_string(s.rank) + ": " + diff + ")");
    if (s.world_size != w || s.ranks != 1 || s.rank >= w || seen[s.rank]++)
      throw Error("LoaderState::Merge: need ranks 0.." + std::to_string(w - 1) + " once each; got rank " + std::to_string(s.rank) +
                  " of " + std::to_string(s.world_size) + (s.ranks != 1 ? " (already merged)" : ""));
    if (s.epoch != a.epoch)
      throw Error("LoaderState::Merge: rank " + std::to_string(s.rank) + " is at epoch " + std::to_string(s.epoch) + ", rank " +
                  std::to_string(a.rank) + " at epoch " + std::to_string(a.epoch));
    if (s.excluded != a.excluded) throw Error("LoaderState::Merge: ranks' plans exclude different samples");
    if (s.consumed.size() != a.consumed.size()) throw Error("LoaderState::Merge: consumed bitmaps differ in size");
    for (size_t i = 0; i < s.consumed.size(); ++i) m.consumed[i] |= s.consumed[i];
    if (s.next_batch != a.next_batch) {
      // quasi_random finishes the epoch from the united consumption; the others count global batches,
      // which every rank must agree on.
      if (a.run.order != uint32_t(Order::kQuasiRandom))
        throw Error("LoaderState::Merge: rank " + std::to_string(s.rank) + " is at batch " + std::to_string(s.next_batch) +
                    ", rank " + std::to_string(a.rank) + " at batch " + std::to_string(a.next_batch) +
                    " (take every rank's state at the same step)");
      m.world_size = 0;
      m.next_batch = std::min(m.next_batch, s.next_batch);
    }
  }
  return m;
}

}  // namespace dsc
