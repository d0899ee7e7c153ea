#include "reader/gpu_ring.h"

#include <string>

namespace dsc::gpu {

BufferRing::BufferRing(StreamOps* ops, std::vector<SlotEvents> slots, size_t max_leases)
    : ops_(ops), max_leases_(max_leases) {
  if (slots.empty() || max_leases == 0) throw Error("gpu::BufferRing needs at least one slot and one lease");
  slots_.resize(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) slots_[i].ev = slots[i];
}

size_t BufferRing::leases_held() const {
  size_t n = 0;
  for (const Slot& s : slots_) n += bool(s.lease);
  return n;
}

void BufferRing::RecordAutoReturns() {
  // The consumer enqueued every use of these batches before asking for the next one.
  for (Slot& s : slots_)
    if (s.state == State::kHeld && s.auto_return) {
      ops_->Record(s.ev.consumed, s.auto_stream);
      s.state = State::kReturned;
    }
}

void BufferRing::DropCopiedLeases(size_t keep) {
  for (Slot& s : slots_)
    if (s.lease && ops_->Done(s.ev.copied)) s.lease.release();
  // Over the bound: wait for the oldest copies (the ones most likely done by now).
  while (leases_held() > keep) {
    Slot* oldest = nullptr;
    for (Slot& s : slots_)
      if (s.lease && (!oldest || s.ticket < oldest->ticket)) oldest = &s;
    ops_->Wait(oldest->ev.copied);
    oldest->lease.release();
  }
}

size_t BufferRing::Acquire() {
  RecordAutoReturns();
  // The caller holds the lease it is about to hand: room for it within the bound.
  DropCopiedLeases(max_leases_ - 1);
  Slot* pick = nullptr;
  for (Slot& s : slots_)  // a free slot, or a returned one whose consumer is done
    if (s.state == State::kFree || (s.state == State::kReturned && ops_->Done(s.ev.consumed))) {
      if (!pick || s.ticket < pick->ticket) pick = &s;
    }
  if (!pick) {
    for (Slot& s : slots_)
      if (s.state == State::kReturned && (!pick || s.ticket < pick->ticket)) pick = &s;
    if (!pick)
      throw Error("gpu::Augmenter: all " + std::to_string(slots_.size()) +
                  " device buffers are still held by the consumer; Release() each DeviceBatch once its last use is "
                  "enqueued (or use ProcessFor)");
    ops_->Wait(pick->ev.consumed);
  }
  // Its previous batch's copy finished before the consumer could read the output; wait anyway, as
  // the slot's input buffer is about to be overwritten.
  if (pick->lease) {
    ops_->Wait(pick->ev.copied);
    pick->lease.release();
  }
  pick->state = State::kFree;
  return size_t(pick - slots_.data());
}

uint64_t BufferRing::Hand(size_t slot, BatchLease lease, bool auto_return, void* auto_stream) {
  Slot& s = slots_.at(slot);
  if (s.state != State::kFree) throw Error("gpu::BufferRing: slot " + std::to_string(slot) + " was not acquired");
  s.state = State::kHeld;
  s.auto_return = auto_return;
  s.auto_stream = auto_stream;
  s.lease = std::move(lease);
  s.ticket = next_ticket_++;
  return s.ticket;
}

void BufferRing::Return(size_t slot, uint64_t ticket, void* stream) {
  if (slot >= slots_.size() || slots_[slot].ticket != ticket || slots_[slot].state != State::kHeld ||
      slots_[slot].auto_return)
    throw Error("gpu::Augmenter::Release: this DeviceBatch is not held (released twice, returned automatically, or "
                "from another Augmenter)");
  ops_->Record(slots_[slot].ev.consumed, stream);
  slots_[slot].state = State::kReturned;
}

void BufferRing::Drain() {
  RecordAutoReturns();
  for (Slot& s : slots_) {
    if (s.state == State::kReturned) ops_->Wait(s.ev.consumed);
    if (s.lease) ops_->Wait(s.ev.copied);
    s.lease.release();
  }
}

}  // namespace dsc::gpu
