// The environment seam between the format and storage: everything in format/ reads a file through
// this interface, so tests can hand it bytes in memory and the reader can pick mmap or pread.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dsc::format {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual const std::string& name() const = 0;
  virtual uint64_t size() const = 0;
  // Returns a pointer to bytes [off, off+n). A mapped source returns a pointer into the mapping; any
  // other source reads into *scratch and returns scratch->data(). The range must lie inside size();
  // throws dsc::Error naming the file and offset on an I/O failure.
  virtual const uint8_t* Read(uint64_t off, size_t n, std::vector<uint8_t>* scratch) const = 0;
  // Non-null when the whole file is addressable in memory (lets readers skip copies).
  virtual const uint8_t* mapped() const { return nullptr; }
};

// Bytes owned by the caller, e.g. a test's buffer. The caller keeps them alive.
class MemorySource : public ByteSource {
 public:
  MemorySource(std::string name, const uint8_t* data, size_t size)
      : name_(std::move(name)), data_(data), size_(size) {}
  const std::string& name() const override { return name_; }
  uint64_t size() const override { return size_; }
  const uint8_t* Read(uint64_t off, size_t, std::vector<uint8_t>*) const override { return data_ + off; }
  const uint8_t* mapped() const override { return data_; }

 private:
  std::string name_;
  const uint8_t* data_;
  size_t size_;
};

}  // namespace dsc::format
