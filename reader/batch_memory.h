// Internal to the loader (not for users; see reader/loader.h and reader/batch.h): the memory batches
// are made in, and how leased batches keep theirs.
//
// A batch buffer is in one of three places: a slot of the pipeline's ring, the pool's free list, or a
// lease (owned by a LeaseBlock). The pool bounds the buffers alive to ring slots + max_leases; a ring
// slot whose buffer was leased gets a free one, a new one while under that bound, or else waits in
// the pool's `needy` queue for the first lease to come back (backpressure).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "kernels/augment.h"
#include "reader/batch.h"

namespace dsc {

struct LoaderOptions;

// Batch images: 64-byte aligned; a large batch (photos: 38 MB of float32 for 64 images) in huge pages
// (reader/huge_pages.h). Freed with std::free.
void* AllocateBatchImages(size_t bytes);

// One batch's memory: in a ring slot, in the pool's free list, or leased (owned by a LeaseBlock).
struct BatchBuffer {
  ~BatchBuffer() {
    if (images) release(images);
  }
  // Makes room for `need` bytes of images (set_output_size grew the output). On an allocation
  // failure images is null and the batch written to it fails with an error.
  void Ensure(size_t need, const std::function<void*(size_t)>& allocate);
  uint8_t* images = nullptr;
  size_t bytes = 0;  // images' capacity
  std::function<void(void*)> release;
  std::vector<kernels::SampleParams> params;
  std::vector<kernels::TransformStep> steps;  // Batch::steps
  std::vector<uint8_t> fallback;  // Decoder::kGpu: Batch::fallback
  size_t staged_bytes = 0;        // Decoder::kGpu: Batch::staged_bytes
  std::vector<int32_t> labels[2];
  std::vector<uint32_t> indices;
  std::vector<uint8_t> padding;
  // Typed fields (reader/batch_fields.h): per selected field its values and, when variable, offsets.
  std::vector<std::vector<uint8_t>> field_data;
  std::vector<std::vector<uint64_t>> field_offsets;
  std::vector<FieldColumn> field_columns;
  std::vector<std::vector<uint32_t>> field_shapes;  // masks: the batch's [H, W(, C)]
  // Masks: their stored values, decoded into field_data (whose capacity the ring slot keeps, so that
  // a batch's masks fault no fresh pages in).
  std::vector<std::vector<uint8_t>> field_stored;
  std::vector<uint8_t> mask_pixels;  // one mask decoded at its stored size, before its geometry
  Batch batch;
};

// The buffers outside the ring and the counts that bound them. Shared with every lease, so that a
// lease released after the loader is gone frees its buffer instead of touching a dead pipeline.
struct BufferPool {
  // For a ring of `slots` batches: at most slots + o.max_leases buffers of `buffer_bytes` (images,
  // then with `staging` the staging area of Decoder::kGpu), made with o's allocate and release hooks,
  // and as many more as o.lease_memory holds while leases need them.
  BufferPool(const LoaderOptions& o, size_t slots, size_t buffer_bytes, bool staging);

  // A new buffer of `bytes` (throws when it cannot be allocated). The caller counts it in `allocated`.
  std::unique_ptr<BatchBuffer> NewBuffer() const;
  // Gives a ring slot whose batch was leased a buffer, in batch order (the consumer calls it as it
  // moves on): a released one, a new one while under the bound, or else the first lease to come back.
  void Refill(std::atomic<BatchBuffer*>* slot);
  // Waits until a released lease's buffer fills the slot (backpressure). nullptr when cancelled.
  BatchBuffer* WaitFor(std::atomic<BatchBuffer*>* slot, const std::atomic<bool>& cancel);
  // Wakes the workers waiting in WaitFor (to see a cancellation), with no lost wake-up.
  void Wake();
  // A lease's buffer comes back: to the first needy slot, to the free list, or freed once closed.
  void Return(std::unique_ptr<BatchBuffer> b);
  // The pipeline is going: spares are freed, and so are leased buffers as they come back.
  void Close();

  std::mutex mu;
  std::condition_variable cv;  // a leased buffer came back
  std::vector<std::unique_ptr<BatchBuffer>> free;
  // Ring slots given back empty (their buffer leased) with no spare to fill them, in batch order:
  // a returned buffer goes to the first, so the batch the consumer needs next is served first.
  std::deque<std::atomic<BatchBuffer*>*> needy;
  size_t allocated = 0;  // live buffers: ring + free + leased
  size_t leased = 0;
  size_t limit = 0;      // ring slots + max_leases + the buffers lease_memory pays for
  size_t base = 0;       // ring slots + max_leases: buffers past it are freed when they come back
  bool closed = false;   // the pipeline is gone: returned buffers are freed
  size_t bytes = 0;      // what a buffer's images need now (Loader::set_output_size)
  std::function<void*(size_t)> allocate;
  std::function<void(void*)> release;
  uint32_t batch_size = 0;
  bool staged = false;   // Decoder::kGpu: buffers hold per-sample fallback reasons
};

// What a BatchLease shares: the leased buffer, given back to the pool with the last reference.
struct LeaseBlock {
  ~LeaseBlock() { pool->Return(std::move(buf)); }
  std::unique_ptr<BatchBuffer> buf;
  std::shared_ptr<BufferPool> pool;
};

}  // namespace dsc
