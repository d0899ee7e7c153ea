#include "remote/reply_buffers.h"

#include <new>

#include "reader/huge_pages.h"

namespace dsc::remote {

ReplyMemory ReplyMemory::Heap(size_t bytes) {
  uint8_t* p = new uint8_t[bytes ? bytes : 1];
  return ReplyMemory(p, bytes, [](void* u) { delete[] static_cast<uint8_t*>(u); }, p);
}

ReplyMemory& ReplyMemory::operator=(ReplyMemory&& o) noexcept {
  if (this != &o) {
    Reset();
    data_ = o.data_, size_ = o.size_, free_ = o.free_, user_ = o.user_;
    o.data_ = nullptr, o.size_ = 0, o.free_ = nullptr, o.user_ = nullptr;
  }
  return *this;
}

void ReplyMemory::Reset() {
  if (free_) free_(user_);
  data_ = nullptr, size_ = 0, free_ = nullptr, user_ = nullptr;
}

ReplyMemory ReplyBuffers::Get(size_t bytes) {
  if (bytes < kHugePageBytes) return ReplyMemory::Heap(bytes);  // no whole huge page for a small reply
  Buf* b = nullptr;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (size_t i = 0; i < idle_.size(); ++i)
      if (idle_[i]->cap >= bytes) {
        b = idle_[i];
        idle_bytes_ -= b->cap;
        idle_.erase(idle_.begin() + long(i));
        break;
      }
  }
  if (!b) {
    auto fresh = std::make_unique<Buf>();
    fresh->p = MapHugePages(bytes, &fresh->cap);
    if (!fresh->p) throw std::bad_alloc();
    b = fresh.release();
  }
  b->owner = shared_from_this();
  return ReplyMemory(static_cast<uint8_t*>(b->p), bytes, &ReplyBuffers::Return, b);
}

void ReplyBuffers::DropIdle() {
  std::lock_guard<std::mutex> l(mu_);
  for (Buf* b : idle_) UnmapHugePages(b->p, b->cap), delete b;
  idle_.clear();
  idle_bytes_ = 0;
}

void ReplyBuffers::Return(void* user) {
  Buf* b = static_cast<Buf*>(user);
  std::shared_ptr<ReplyBuffers> owner = std::move(b->owner);
  std::lock_guard<std::mutex> l(owner->mu_);
  if (owner->idle_bytes_ + b->cap > kIdleBytes) {
    UnmapHugePages(b->p, b->cap);
    delete b;
    return;
  }
  owner->idle_bytes_ += b->cap;
  owner->idle_.push_back(b);
}

}  // namespace dsc::remote
