#include "reader/batch_memory.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "format/error.h"
#include "reader/huge_pages.h"
#include "reader/loader.h"

namespace dsc {

void* AllocateBatchImages(size_t bytes) {
  if (!HugePagesWanted() || bytes < 2 * kHugePageBytes) return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  return AllocateHugePages(bytes, nullptr);
}

void BatchBuffer::Ensure(size_t need, const std::function<void*(size_t)>& allocate) {
  if (bytes >= need && images) return;
  if (images) release(images);
  images = nullptr;
  bytes = 0;
  try {
    images = static_cast<uint8_t*>(allocate ? allocate(need) : AllocateBatchImages(need));
  } catch (...) {
  }
  if (images) bytes = need;
}

BufferPool::BufferPool(const LoaderOptions& o, size_t slots, size_t buffer_bytes, bool staging)
    : limit(slots + o.max_leases), base(limit), bytes(buffer_bytes), allocate(o.allocate), batch_size(o.batch_size), staged(staging) {
  // Bounded in count too: Return() must not allocate (the free list is reserved), and tiny buffers
  // would make a large budget a huge count.
  constexpr size_t kMaxGrown = 4096;
  const uint64_t per_buffer = std::max<uint64_t>(1, buffer_bytes + uint64_t(o.batch_size) * kBatchSampleOverhead);
  limit += size_t(std::min<uint64_t>(o.lease_memory / per_buffer, kMaxGrown));
  free.reserve(limit);  // Return() (in a lease's destructor) then never allocates
  release = o.release ? o.release : [](void* p) { std::free(p); };
}

std::unique_ptr<BatchBuffer> BufferPool::NewBuffer() const {
  auto b = std::make_unique<BatchBuffer>();
  b->release = release;
  b->images = static_cast<uint8_t*>(allocate ? allocate(bytes) : AllocateBatchImages(bytes));
  if (!b->images) throw Error("cannot allocate a batch buffer of " + std::to_string(bytes) + " bytes");
  b->bytes = bytes;
  b->params.resize(batch_size);
  if (staged) b->fallback.resize(batch_size);
  for (auto& l : b->labels) l.resize(batch_size);
  b->indices.resize(batch_size);
  b->padding.resize(batch_size);
  return b;
}

void BufferPool::Refill(std::atomic<BatchBuffer*>* slot) {
  std::lock_guard<std::mutex> l(mu);
  if (std::find(needy.begin(), needy.end(), slot) != needy.end()) return;
  if (!free.empty()) {
    free.back()->Ensure(bytes, allocate);  // it may predate set_output_size
    slot->store(free.back().release());
    free.pop_back();
  } else if (allocated < limit) {
    slot->store(NewBuffer().release());
    ++allocated;
  } else {
    needy.push_back(slot);
  }
}

BatchBuffer* BufferPool::WaitFor(std::atomic<BatchBuffer*>* slot, const std::atomic<bool>& cancel) {
  std::unique_lock<std::mutex> l(mu);
  cv.wait(l, [&] { return cancel.load() || slot->load(); });
  return cancel.load() ? nullptr : slot->load();
}

void BufferPool::Wake() {
  {
    std::lock_guard<std::mutex> l(mu);  // no lost wake-up for a worker waiting for a spare
  }
  cv.notify_all();
}

void BufferPool::Return(std::unique_ptr<BatchBuffer> b) {
  {
    std::lock_guard<std::mutex> l(mu);
    --leased;
    if (!closed) {
      if (!needy.empty()) {
        b->Ensure(bytes, allocate);
        needy.front()->store(b.release());
        needy.pop_front();
        cv.notify_all();
        return;
      }
      if (allocated <= base) {
        free.push_back(std::move(b));
        cv.notify_all();
        return;
      }
      // A buffer lease_memory paid for: its memory goes back as soon as no lease needs it.
    }
    --allocated;
  }
  b.reset();  // outside the lock: the user's release hook may be slow
}

void BufferPool::Close() {
  std::vector<std::unique_ptr<BatchBuffer>> spare;
  {
    std::lock_guard<std::mutex> l(mu);
    closed = true;  // leases still out free their buffers when released
    needy.clear();
    allocated -= free.size();
    spare.swap(free);
  }
}

}  // namespace dsc
