// Reading a mapped dsc file that does not fit in memory: block readahead in plan order, pages dropped
// behind, and the page-cache controls `dsc bench --cold` uses.
//
// quasi_random visits a rank's blocks window by window, so the blocks a batch needs are known ahead:
// a background thread asks the kernel for them (POSIX_FADV_WILLNEED) as soon as they fit in the cache
// budget. A block whose last batch is released may be dropped (MADV_DONTNEED on the mapping, then
// POSIX_FADV_DONTNEED), oldest first, when a coming block needs its room: page-cache use for the file
// stays near the budget whatever the file size, and a file (or a rank's share) that fits in the budget
// stays cached across epochs. The read stage's page faults find the pages in memory or in flight:
// a worker waits for its batch's blocks to be asked for first (Need), since a fault on a page not
// asked for makes the kernel read around it, outside the budget and into other ranks' blocks.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "reader/dataset.h"
#include "reader/order.h"

namespace dsc {

class BlockReadahead {
 public:
  // `ds` must be mapped (not the pread backend) and outlive this object. At most `ahead_bytes` of
  // blocks not yet released are asked for at a time (0: as many as the budget holds; at least one),
  // except that the blocks of the `lead_batches` batches from the first not released (those the
  // loader's workers may be reading: its ring) are always asked for, past the window and the budget.
  BlockReadahead(const Dataset& ds, uint64_t budget_bytes, uint64_t ahead_bytes = 0, uint64_t lead_batches = 0);
  ~BlockReadahead();
  BlockReadahead(const BlockReadahead&) = delete;
  BlockReadahead& operator=(const BlockReadahead&) = delete;

  // A new epoch plan (batches of `batch_size` samples), starting at batch `first`.
  void Start(const EpochPlan& plan, uint64_t first);
  // Batches before `k` are released (their samples read): their blocks may go, later ones come in.
  void Released(uint64_t k);
  // A worker is about to read batch `k`: returns once every block the batch reads has been asked for
  // (or is cached), past the read-ahead window and the budget if need be (for a URL, past the budget
  // only for the batch the consumer waits for: a worker further ahead waits for room). Workers run up to the ring's
  // size ahead of the consumer that paces the window; a page they faulted before its block was asked
  // for would bring in the kernel's read-around (up to read_ahead_kb, often 8 MiB: other blocks, other
  // ranks' blocks), outside the budget, much of it dropped unread and read again later.
  void Need(uint64_t k);
  // Every Need() waiting now returns (the loader is cancelling its job: an error, or a new epoch):
  // the batch a worker waits for may never be covered once the consumer stops releasing batches.
  void Wake();
  // Bytes asked of the kernel ahead of use since the loader was made.
  uint64_t advised_bytes() const { return advised_.load(std::memory_order_relaxed); }

  struct Use {
    uint32_t block;
    uint64_t first, last;  // the first and last batch of a span of batches that read it
  };
  // The spans in which the plan's batches from `first` on read each block, by first batch (a block
  // has two when the epoch's padding reads it again at the end). Exposed for tests.
  static std::vector<Use> PlanUses(const Dataset& ds, const EpochPlan& plan, uint64_t first);

 private:
  void Loop();
  void Release();  // the descriptor, and the mapping when it is ours
  bool Cached(uint64_t off, uint64_t len);

  const Dataset& ds_;
  const uint64_t budget_, ahead_, lead_;
  int fd_ = -1;
  const uint8_t* view_ = nullptr;  // the file's mapping, for mincore: the Dataset's, or ours where it holds a heap copy
  size_t view_size_ = 0;           // non-zero: view_ is ours to unmap
  std::vector<unsigned char> residency_;
  std::atomic<uint64_t> advised_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  uint64_t generation_ = 0;  // bumped by Start: the thread begins the new plan
  uint64_t wakes_ = 0;       // bumped by Wake: waiting Need() calls return
  std::vector<Use> uses_;    // blocks in order of first use
  uint64_t released_ = 0;
  uint64_t wanted_ = 0;                  // the latest batch a worker waits for (Need)
  std::atomic<uint64_t> covered_{0};     // batches before it have all their blocks asked for
  std::condition_variable covered_cv_;   // Need waits here
  std::thread thread_;
};

// Drops the file's pages from this process's mapping and, where no other mapping holds them, from
// the page cache, so the next reads come from storage.
void DropCachedPages(const Dataset& ds);
// Reads the whole file with large preads after dropping its cached pages: bytes per second.
double SequentialReadRate(const std::string& path);
// This process's bytes read from storage so far (/proc/self/io read_bytes; 0 where unavailable).
uint64_t StorageReadBytes();

}  // namespace dsc
