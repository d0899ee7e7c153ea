// Memory for the images of the worker's replies. Each reply writes megabytes afresh, so the large
// buffers are huge pages (reader/huge_pages.h), recycled between replies; a transport may send a
// reply after the call returned, so a buffer goes back to its pool whenever the transport lets go.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace dsc::remote {

// A reply's image bytes, owned until it is destroyed or Detach()ed (move-only).
class ReplyMemory {
 public:
  using Free = void (*)(void* user);
  ReplyMemory() = default;
  ReplyMemory(uint8_t* data, size_t size, Free free, void* user) : data_(data), size_(size), free_(free), user_(user) {}
  // Uninitialised heap memory.
  static ReplyMemory Heap(size_t bytes);
  ReplyMemory(ReplyMemory&& o) noexcept { *this = std::move(o); }
  ReplyMemory& operator=(ReplyMemory&& o) noexcept;
  ReplyMemory(const ReplyMemory&) = delete;
  ReplyMemory& operator=(const ReplyMemory&) = delete;
  ~ReplyMemory() { Reset(); }

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  explicit operator bool() const { return data_ != nullptr; }
  void Shrink(size_t n) { size_ = n < size_ ? n : size_; }  // the bytes to send; the memory stays
  // For a transport that frees the memory once it has sent it: call free_fn() on what Detach()
  // returns, after which this handle is empty.
  Free free_fn() const { return free_; }
  void* Detach() {
    void* u = user_;
    data_ = nullptr, size_ = 0, free_ = nullptr, user_ = nullptr;
    return u;
  }

 private:
  void Reset();
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  Free free_ = nullptr;
  void* user_ = nullptr;
};

// Recycles the large buffers: at most kIdleBytes wait for reuse. Mapped, not from the heap, so that an
// idle worker can give them back (DropIdle). Each buffer out holds the pool alive.
class ReplyBuffers : public std::enable_shared_from_this<ReplyBuffers> {
 public:
  // `bytes` of uninitialised memory; throws std::bad_alloc when none can be had.
  ReplyMemory Get(size_t bytes);
  ~ReplyBuffers() { DropIdle(); }
  // Frees the buffers waiting for reuse (an idle worker gives its memory back).
  void DropIdle();

 private:
  static constexpr size_t kIdleBytes = size_t(64) << 20;
  struct Buf {
    std::shared_ptr<ReplyBuffers> owner;
    void* p = nullptr;
    size_t cap = 0;
  };
  static void Return(void* user);
  std::mutex mu_;
  std::vector<Buf*> idle_;
  size_t idle_bytes_ = 0;
};

}  // namespace dsc::remote
