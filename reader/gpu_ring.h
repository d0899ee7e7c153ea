// The bookkeeping behind gpu::Augmenter's ring of device buffers, in plain C++ behind a small
// stream/event interface: CUDA implements it in reader/gpu_cuda.cc, tests with a fake stream
// (tests/gpu_host_test.cc), so the reuse rules are checked on the CPU.
//
// Each slot owns one batch's device buffers and two events: `copied` (recorded by the caller after
// the host-to-device copy of the slot's batch) and `consumed` (recorded on the consumer's stream
// after its last use of the slot's output). The rules:
// - Acquire() never returns a slot whose output a consumer still holds (handed out, not returned) or
//   whose consumer event is still pending: it takes a free slot, else waits for the oldest returned
//   slot's consumer event, and throws when every slot is held by the consumer (a wait that could
//   never end).
// - The leased host batch a slot was copied from is kept until its `copied` event completes (polled
//   at each Acquire, waited for only to keep at most `max_leases` leases), so the loader can refill
//   it only after the copy has read it, and the training thread does not wait for copies.
// Not thread-safe: one thread drives a ring.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "reader/loader.h"

namespace dsc::gpu {

// Opaque stream and event handles (cudaStream_t / cudaEvent_t for CUDA).
class StreamOps {
 public:
  virtual ~StreamOps() = default;
  // `event` completes once the work enqueued on `stream` so far has.
  virtual void Record(void* event, void* stream) = 0;
  // Whether `event` has completed (an event never recorded counts as completed, as in CUDA).
  virtual bool Done(void* event) = 0;
  // Blocks the calling thread until `event` completes.
  virtual void Wait(void* event) = 0;
};

class BufferRing {
 public:
  struct SlotEvents {
    void* copied = nullptr;
    void* consumed = nullptr;
  };
  // max_leases >= 1: leased host batches the ring may keep while their copies run (keep it at most
  // LoaderOptions::max_leases, or the loader waits for a lease that only the ring's next Acquire
  // would release).
  BufferRing(StreamOps* ops, std::vector<SlotEvents> slots, size_t max_leases);

  // A slot free for the next batch (see the rules above).
  size_t Acquire();
  // The caller has enqueued the copy of `lease` into `slot` and recorded the slot's `copied` event
  // after it; the slot's output now belongs to the consumer until Return. With `auto_stream` set
  // (auto_return), the next Acquire records the consumer event on that stream itself. Returns the
  // ticket Return checks.
  uint64_t Hand(size_t slot, BatchLease lease, bool auto_return, void* auto_stream);
  // The consumer is done with `slot` once the work enqueued on `stream` so far completes. Throws for
  // a ticket that is not the slot's current one (a batch returned twice, or a stale copy).
  void Return(size_t slot, uint64_t ticket, void* stream);
  // Records pending auto-returns and waits for every consumer event and copy (before the device
  // buffers are freed). Slots the consumer still holds are left alone.
  void Drain();

  size_t size() const { return slots_.size(); }
  size_t leases_held() const;
  bool holds_lease(size_t slot) const { return bool(slots_[slot].lease); }
  bool held_by_consumer(size_t slot) const { return slots_[slot].state == State::kHeld; }

 private:
  enum class State : uint8_t { kFree, kHeld, kReturned };
  struct Slot {
    SlotEvents ev;
    State state = State::kFree;
    bool auto_return = false;
    void* auto_stream = nullptr;
    uint64_t ticket = 0;  // 0: never handed out
    BatchLease lease;
  };
  void RecordAutoReturns();
  void DropCopiedLeases(size_t keep);

  StreamOps* ops_;
  std::vector<Slot> slots_;
  size_t max_leases_;
  uint64_t next_ticket_ = 1;
};

}  // namespace dsc::gpu
