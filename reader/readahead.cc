#include "reader/readahead.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <system_error>

#include "format/error.h"
#include "format/layout.h"

namespace dsc {

namespace {

const uint64_t kPage = uint64_t(::sysconf(_SC_PAGESIZE));

int OpenForAdvice(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    throw Error(path + ": cannot open: " + std::strerror(e));
  }
  return fd;
}

// A block's pages leave this process's mapping, then the page cache. Blocks start on format pages
// (format/layout.h), so a block's last partial page holds only its own bytes and padding, and goes too
// (kept, it would leave a page per block behind: a share of the file, not of the budget). With larger
// system pages, those shared with a neighbouring block stay: it may still be in use.
void Drop(const uint8_t* mapped, int fd, uint64_t off, uint64_t len) {
  const bool own_tail = format::kPageSize % kPage == 0;
  const uint64_t begin = (off + kPage - 1) / kPage * kPage;
  const uint64_t end = own_tail ? (off + len + kPage - 1) / kPage * kPage : (off + len) / kPage * kPage;
  if (end <= begin) return;
  if (mapped) ::madvise(const_cast<uint8_t*>(mapped) + begin, end - begin, MADV_DONTNEED);
  ::posix_fadvise(fd, off_t(begin), off_t(end - begin), POSIX_FADV_DONTNEED);
}

// The file's mapping, where MADV_DONTNEED may drop pages. Sanitizer builds hold the file in a heap
// block instead (reader/file_source.h), where DONTNEED would zero the data: no page dropping there.
const uint8_t* Mapping(const Dataset& ds) {
#ifdef DSC_EXACT_HEAP_SOURCE
  (void)ds;
  return nullptr;
#else
  return ds.mapped();
#endif
}

}  // namespace

BlockReadahead::BlockReadahead(const Dataset& ds, uint64_t budget_bytes, uint64_t ahead_bytes, uint64_t lead_batches)
    : ds_(ds), budget_(budget_bytes), ahead_(ahead_bytes && ahead_bytes < budget_bytes ? ahead_bytes : budget_bytes),
      lead_(lead_batches) {
  // A streamed file (stream/url_source.h) takes the same plan-order hints through its source.
  const off_t size = ds.streamed() ? 0 : ::lseek(fd_ = OpenForAdvice(ds.path()), 0, SEEK_END);
  if (ds.streamed()) {
  } else if (const uint8_t* m = Mapping(ds)) {
    view_ = m;  // the file's own mapping: a second one doubled the address space quasi_random needed
  } else if (size > 0) {
    void* v = ::mmap(nullptr, size_t(size), PROT_READ, MAP_SHARED, fd_, 0);
    if (v != MAP_FAILED) view_ = static_cast<const uint8_t*>(v), view_size_ = size_t(size);
  }
  try {
    thread_ = std::thread([this] { Loop(); });
  } catch (const std::system_error& e) {
    Release();
    throw Error(ds.path() + ": cannot start the readahead thread (" + e.what() +
                "): raise the process or address-space limit, or set cache_budget 0 (no readahead)");
  }
}

void BlockReadahead::Release() {
  if (view_size_) ::munmap(const_cast<uint8_t*>(view_), view_size_);
  view_ = nullptr;
  view_size_ = 0;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

BlockReadahead::~BlockReadahead() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  covered_cv_.notify_all();
  thread_.join();
  Release();
}

std::vector<BlockReadahead::Use> BlockReadahead::PlanUses(const Dataset& ds, const EpochPlan& plan, uint64_t first) {
  // A block is read by the batches of one shuffle window, and again only by the padding that ends the
  // epoch, which repeats the first window's samples. One span from the first window to the last batch
  // would hold those blocks all epoch and fill the read-ahead window with them; a use more than a
  // window's batches after the last starts a new span instead.
  const uint64_t b = std::max<uint32_t>(1, plan.batch_size);
  uint64_t gap = 1;
  for (size_t w = 0; w < plan.window_starts.size(); ++w) {
    const uint64_t end = w + 1 < plan.window_starts.size() ? plan.window_starts[w + 1] : plan.samples.size();
    if (end > plan.window_starts[w]) gap = std::max(gap, (end - plan.window_starts[w] + b - 1) / b + 1);
  }
  const uint64_t none = ~uint64_t(0);
  std::vector<uint64_t> span_first(ds.view().block_count(), none), span_last(ds.view().block_count(), 0);
  std::vector<Use> uses;
  for (uint64_t pos = first * b; pos < plan.samples.size(); ++pos) {
    const uint32_t block = ds.entry(plan.samples[pos]).block;
    const uint64_t k = pos / b;
    if (span_first[block] != none && k > span_last[block] + gap) {
      uses.push_back({block, span_first[block], span_last[block]});
      span_first[block] = none;
    }
    if (span_first[block] == none) span_first[block] = k;
    span_last[block] = k;
  }
  for (uint32_t i = 0; i < span_first.size(); ++i)
    if (span_first[i] != none) uses.push_back({i, span_first[i], span_last[i]});
  std::sort(uses.begin(), uses.end(),
            [](const Use& x, const Use& y) { return x.first != y.first ? x.first < y.first : x.block < y.block; });
  return uses;
}

void BlockReadahead::Start(const EpochPlan& plan, uint64_t first) {
  std::vector<Use> uses = PlanUses(ds_, plan, first);
  {
    std::lock_guard<std::mutex> l(mu_);
    uses_ = std::move(uses);
    released_ = first;
    wanted_ = first;
    covered_.store(0);
    ++generation_;
  }
  cv_.notify_all();
}

void BlockReadahead::Released(uint64_t k) {
  {
    std::lock_guard<std::mutex> l(mu_);
    released_ = k;
  }
  cv_.notify_all();
}

void BlockReadahead::Need(uint64_t k) {
  if (k < covered_.load(std::memory_order_acquire)) return;
  std::unique_lock<std::mutex> l(mu_);
  if (k > wanted_) {
    wanted_ = k;
    cv_.notify_all();
  }
  const uint64_t gen = generation_, wakes = wakes_;
  covered_cv_.wait(l, [&] { return stop_ || generation_ != gen || wakes_ != wakes || k < covered_.load(); });
}

void BlockReadahead::Wake() {
  {
    std::lock_guard<std::mutex> l(mu_);
    ++wakes_;
  }
  covered_cv_.notify_all();
}

// Whether every page of [off, off + len) of the file is in the page cache (mincore on our own view).
bool BlockReadahead::Cached(uint64_t off, uint64_t len) {
  if (ds_.streamed()) return ds_.source().Resident(off, len);
  if (!view_ || len == 0) return false;
  const uint64_t begin = off / kPage * kPage, end = (off + len + kPage - 1) / kPage * kPage;
  residency_.resize((end - begin) / kPage);
  if (::mincore(const_cast<uint8_t*>(view_) + begin, end - begin, residency_.data()) != 0) return false;
  for (unsigned char c : residency_)
    if (!(c & 1)) return false;
  return true;
}

// Blocks are dropped lazily: a released block stays in the page cache until the budget needs its room,
// oldest release first. A file (or a rank's share) that fits in the budget is then read from storage
// once, not once per epoch, and pages stay bounded by the budget either way.
void BlockReadahead::Loop() {
  const uint8_t* mapped = Mapping(ds_);
  const uint32_t blocks = uint32_t(ds_.view().block_count());
  enum : uint8_t { kAbsent = 0, kNeeded = 1, kDroppable = 2 };
  std::vector<uint8_t> state(blocks, kAbsent);
  std::vector<Use> uses;
  std::vector<Use> held;             // resident and still needed by the plan (copies: a new plan replaces `uses`)
  std::deque<uint32_t> droppable;    // released blocks, oldest first (entries whose state changed are skipped)
  std::vector<uint32_t> holds(blocks, 0);  // held spans of each block (a block may have two: PlanUses)
  size_t next = 0;
  uint64_t resident = 0, gen = 0, released = 0, wanted = 0;
  uint64_t held_bytes = 0;  // of the held blocks: the read-ahead window, bounded by ahead_
  // What a block takes in the cache: its whole pages (a URL's cache file holds its padding too;
  // counted by content alone, 16 blocks of 15 KiB passed as fitting in 16 files of 16 KiB).
  const uint64_t page = ds_.view().header().page_size ? ds_.view().header().page_size : format::kPageSize;
  auto size_of = [&](uint32_t block) {
    const auto& blk = ds_.view().block(block);
    return format::RoundUpToPage(blk.offset + blk.size, page) - blk.offset / page * page;
  };
  auto hold = [&](const Use& u) {
    state[u.block] = kNeeded;
    if (holds[u.block]++ == 0) held_bytes += size_of(u.block);
    held.push_back(u);
    ++next;
  };
  auto release = [&](const Use& u) {
    if (--holds[u.block] > 0) return;  // another span still needs it
    state[u.block] = kDroppable;
    held_bytes -= size_of(u.block);
    droppable.push_back(u.block);
    // A URL's cache is told at once (it keeps released blocks until it needs their room, oldest
    // first): its prefetches wait for room it may take without dropping a block still wanted.
    if (ds_.streamed()) ds_.source().DontNeed(ds_.view().block(u.block).offset, ds_.view().block(u.block).size);
  };
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    cv_.wait(l, [&] { return stop_ || generation_ != gen || released_ != released || wanted_ != wanted; });
    if (stop_) return;
    const bool new_plan = generation_ != gen;
    std::vector<Use> new_uses;
    if (new_plan) {
      gen = generation_;
      new_uses = uses_;
    }
    released = released_;
    wanted = wanted_;
    l.unlock();
    if (new_plan) {
      // The old plan needs nothing any more. Blocks whose pages went meanwhile (dsc bench --cold,
      // memory pressure) are no longer counted; the queue is rebuilt without stale entries.
      for (const Use& u : held) release(u);
      held.clear();
      uses.swap(new_uses);
      next = 0;
      std::deque<uint32_t> kept;
      for (uint32_t b : droppable) {
        if (state[b] != kDroppable) continue;
        state[b] = kAbsent;
        resident -= size_of(b);
        const auto& blk = ds_.view().block(b);
        if (Cached(blk.offset, blk.size)) {
          state[b] = kDroppable + 1;  // marks it kept once
          resident += size_of(b);
          kept.push_back(b);
        }
      }
      for (uint32_t b : kept) state[b] = kDroppable;
      droppable.swap(kept);
    }
    size_t keep = 0;
    for (const Use& u : held) {
      if (u.last < released) release(u);
      else held[keep++] = u;
    }
    held.resize(keep);
    // Ahead in plan order, as far as the window and the budget allow (always at least the next block),
    // and, the window and the budget notwithstanding, the ring's batches and whatever a worker is about
    // to read (Need): paced by the consumer alone, the window fell behind the workers, who then waited.
    const uint64_t must = std::max(wanted, lead_ ? released + lead_ - 1 : 0);
    while (next < uses.size()) {
      const uint32_t b = uses[next].block;
      if (state[b] != kAbsent) {  // still cached from earlier: needed again, nothing to read
        if (ds_.streamed() && state[b] == kDroppable) ds_.source().WillNeed(ds_.view().block(b).offset, ds_.view().block(b).size);  // wanted again
        hold(uses[next]);
        continue;
      }
      const uint64_t size = size_of(b);
      const bool needed_now = uses[next].first <= must;
      if (!held.empty() && held_bytes + size > ahead_ && !needed_now) break;
      while (resident + size > budget_ && !droppable.empty()) {
        const uint32_t d = droppable.front();
        droppable.pop_front();
        if (state[d] != kDroppable) continue;
        const auto& blk = ds_.view().block(d);
        if (ds_.streamed()) ds_.source().DontNeed(blk.offset, blk.size);
        else Drop(mapped, fd_, blk.offset, blk.size);
        state[d] = kAbsent;
        resident -= blk.size;
      }
      // A URL's blocks past its cache budget would evict blocks fetched for the ring's other batches
      // before their use, and fetch them twice: there only the batch the consumer waits for goes past
      // the budget; workers ahead of it wait.
      const bool past_budget_ok = ds_.streamed() ? uses[next].first <= released : needed_now;
      if (!held.empty() && resident + size > budget_ && !past_budget_ok) break;
      const auto& blk = ds_.view().block(b);
      if (ds_.streamed()) ds_.source().WillNeed(blk.offset, blk.size);
      else ::posix_fadvise(fd_, off_t(blk.offset), off_t(blk.size), POSIX_FADV_WILLNEED);
      advised_.fetch_add(blk.size, std::memory_order_relaxed);
      resident += size;
      hold(uses[next]);
    }
    l.lock();
    if (generation_ == gen) {
      covered_.store(next < uses.size() ? uses[next].first : ~uint64_t(0), std::memory_order_release);
      covered_cv_.notify_all();
    }
  }
}

void DropCachedPages(const Dataset& ds) {
  if (ds.streamed()) return;  // a URL: its cache directory is the cache (docs/streaming.md)
  const int fd = OpenForAdvice(ds.path());
  const off_t size = ::lseek(fd, 0, SEEK_END);
  if (Mapping(ds) && size > 0) ::madvise(const_cast<uint8_t*>(Mapping(ds)), size_t(size), MADV_DONTNEED);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

double SequentialReadRate(const std::string& path) {
  const int fd = OpenForAdvice(path);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  std::vector<uint8_t> buf(16u << 20);
  uint64_t total = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (true) {
    const ssize_t r = ::pread(fd, buf.data(), buf.size(), off_t(total));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw Error(path + ": read failed at byte " + std::to_string(total) + ": " + why);
    }
    if (r == 0) break;
    total += uint64_t(r);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);  // leave the cache as cold as we found it
  ::close(fd);
  return s > 0 ? double(total) / s : 0;
}

uint64_t StorageReadBytes() {
  std::ifstream in("/proc/self/io");
  std::string key;
  uint64_t v = 0;
  while (in >> key >> v)
    if (key == "read_bytes:") return v;
  return 0;
}

}  // namespace dsc
