// The format's one checksum: xxHash XXH3_64bits, seed 0 (docs/format.md).
#pragma once
#include <cstddef>
#include <cstdint>

namespace dsc {

uint64_t Checksum(const void* data, size_t size);

// The same checksum over bytes that arrive in pieces: Digest() equals Checksum() of everything given
// to Update() since the last Reset() (or construction), in order.
class ChecksumStream {
 public:
  ChecksumStream();
  ~ChecksumStream();
  ChecksumStream(const ChecksumStream&) = delete;
  ChecksumStream& operator=(const ChecksumStream&) = delete;
  void Reset();
  void Update(const void* data, size_t size);
  uint64_t Digest() const;

 private:
  void* state_;
};

}  // namespace dsc
