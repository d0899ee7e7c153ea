#include "reader/readahead.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>

#include "format/error.h"

namespace dsc {

namespace {

const uint64_t kPage = uint64_t(::sysconf(_SC_PAGESIZE));

int OpenForAdvice(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
  return fd;
}

// Pages wholly inside [off, off + len) leave this process's mapping, then the page cache (pages
// shared with a neighbouring block stay: it may still be in use).
void Drop(const uint8_t* mapped, int fd, uint64_t off, uint64_t len) {
  const uint64_t begin = (off + kPage - 1) / kPage * kPage, end = (off + len) / kPage * kPage;
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

BlockReadahead::BlockReadahead(const Dataset& ds, uint64_t budget_bytes) : ds_(ds), budget_(budget_bytes) {
  fd_ = OpenForAdvice(ds.path());
  thread_ = std::thread([this] { Loop(); });
}

BlockReadahead::~BlockReadahead() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  ::close(fd_);
}

void BlockReadahead::Start(const EpochPlan& plan, uint64_t first) {
  // Each block's first and last batch in the plan, from `first` on; blocks sorted by first use.
  const uint64_t none = ~uint64_t(0);
  std::vector<uint64_t> first_use(ds_.view().block_count(), none), last_use(ds_.view().block_count(), 0);
  const uint64_t b = std::max<uint32_t>(1, plan.batch_size);
  for (uint64_t pos = first * b; pos < plan.samples.size(); ++pos) {
    const uint32_t block = ds_.entry(plan.samples[pos]).block;
    const uint64_t k = pos / b;
    if (first_use[block] == none) first_use[block] = k;
    last_use[block] = k;
  }
  std::vector<Use> uses;
  for (uint32_t i = 0; i < first_use.size(); ++i)
    if (first_use[i] != none) uses.push_back({i, first_use[i], last_use[i]});
  std::stable_sort(uses.begin(), uses.end(), [](const Use& x, const Use& y) { return x.first < y.first; });
  {
    std::lock_guard<std::mutex> l(mu_);
    uses_ = std::move(uses);
    released_ = first;
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

void BlockReadahead::Loop() {
  const uint8_t* mapped = Mapping(ds_);
  std::vector<Use> uses;
  std::vector<size_t> held;  // indices into `uses` advised and not yet dropped
  size_t next = 0;
  uint64_t resident = 0, gen = 0, released = 0;
  auto bytes = [&](const Use& u) { return uint64_t(ds_.view().block(u.block).size); };
  auto drop_held = [&](bool all) {
    size_t keep = 0;
    for (size_t h : held) {
      if (all || uses[h].last < released) {
        const auto& blk = ds_.view().block(uses[h].block);
        Drop(mapped, fd_, blk.offset, blk.size);
        resident -= bytes(uses[h]);
      } else {
        held[keep++] = h;
      }
    }
    held.resize(keep);
  };
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    cv_.wait(l, [&] { return stop_ || generation_ != gen || released_ != released; });
    if (stop_) return;
    if (generation_ != gen) {  // a new plan: the old one's blocks go
      l.unlock();
      drop_held(true);
      l.lock();
      gen = generation_;
      uses = uses_;
      next = 0;
    }
    released = released_;
    l.unlock();
    drop_held(false);
    // Ahead in plan order, as far as the budget allows (always at least the next block).
    while (next < uses.size() && (held.empty() || resident + bytes(uses[next]) <= budget_)) {
      const auto& blk = ds_.view().block(uses[next].block);
      ::posix_fadvise(fd_, off_t(blk.offset), off_t(blk.size), POSIX_FADV_WILLNEED);
      advised_.fetch_add(blk.size, std::memory_order_relaxed);
      resident += blk.size;
      held.push_back(next++);
    }
    l.lock();
  }
}

void DropCachedPages(const Dataset& ds) {
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
