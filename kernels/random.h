// Counter-based randomness: every random choice of dsc is a pure function of (seed, epoch, sample
// index, purpose), so results never depend on thread count, scheduling or how far a run got before it
// was resumed. SplitMix64 finalisers mix the counters; draws continue a SplitMix64 stream.
#pragma once
#include <cstdint>

#include "kernels/hd.h"

namespace dsc::kernels {

DSC_HD uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Purposes keep the streams of different decisions independent.
enum Stream : uint64_t { kStreamOrder = 1, kStreamAugment = 2, kStreamDrop = 3, kStreamSubset = 4 };

class Rng {
 public:
  DSC_HD Rng(uint64_t seed, uint64_t epoch, uint64_t index, uint64_t stream)
      : state_(Mix64((Mix64(Mix64(seed + 0x9E3779B97F4A7C15ull) ^ epoch) + stream * 0xD6E8FEB86659FD93ull) ^ Mix64(index))) {}
  DSC_HD uint64_t Next() {
    state_ += 0x9E3779B97F4A7C15ull;
    return Mix64(state_);
  }
  // Uniform integer in [0, n), unbiased (Lemire's multiply-and-reject).
  DSC_HD uint64_t Below(uint64_t n) {
    if (n <= 1) return 0;
    uint64_t threshold = (0 - n) % n;
    while (true) {
      uint64_t r = Next();
      unsigned __int128 m = (unsigned __int128)r * n;
      if (uint64_t(m) >= threshold) return uint64_t(m >> 64);
    }
  }
  // Uniform double in [0, 1) with 53 random bits.
  DSC_HD double Uniform() { return double(Next() >> 11) * (1.0 / 9007199254740992.0); }

 private:
  uint64_t state_;
};

}  // namespace dsc::kernels
