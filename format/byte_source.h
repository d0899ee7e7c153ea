// The environment seam between the format and storage: everything in format/ reads a file through
// this interface, so tests can hand it bytes in memory and the reader can pick mmap or pread.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format/error.h"

namespace dsc::format {

// A reader's buffer for ByteSource::ReadHeld: `scratch` takes the bytes when they must be copied;
// `hold` keeps a source's local copy alive when it hands bytes out in place from a copy it could
// otherwise drop or reuse (a URL's cached block). Either way the bytes stay valid until the buffer's
// next read or its end.
struct ReadBuffer {
  std::vector<uint8_t> scratch;
  std::shared_ptr<const void> hold;
};

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual const std::string& name() const = 0;
  virtual uint64_t size() const = 0;
  // Returns a pointer to bytes [off, off+n). A mapped source returns a pointer into the mapping; any
  // other source reads into *scratch and returns scratch->data(). Every implementation checks the
  // range itself (CheckRange), so no index, however wrong, makes it read outside the file; throws
  // dsc::Error naming the file and offset for a range outside size() or an I/O failure.
  virtual const uint8_t* Read(uint64_t off, size_t n, std::vector<uint8_t>* scratch) const = 0;
  // The same bytes, handed out in place where the source can keep them valid through `buf`
  // (ReadBuffer): a URL's cached block is not copied. Others read into buf->scratch as Read does.
  virtual const uint8_t* ReadHeld(uint64_t off, size_t n, ReadBuffer* buf) const {
    buf->hold.reset();
    return Read(off, n, &buf->scratch);
  }
  // Non-null when the whole file is addressable in memory. Prefer Read(), which checks the range.
  virtual const uint8_t* mapped() const { return nullptr; }

  // Sources that fetch bytes from far away (stream/url_source.h) keep a bounded local copy; the
  // reader's plan-order readahead (reader/readahead.h) steers it through these hints. Local files
  // ignore them. WillNeed: start fetching [off, off+n) in the background; DontNeed: the range may
  // leave the local copy; Resident: the whole range is held locally now.
  virtual bool remote() const { return false; }
  virtual void WillNeed(uint64_t /*off*/, uint64_t /*n*/) const {}
  virtual void DontNeed(uint64_t /*off*/, uint64_t /*n*/) const {}
  virtual bool Resident(uint64_t /*off*/, uint64_t /*n*/) const { return false; }

 protected:
  // Throws unless [off, off + n) lies inside the file; written so that no sum can wrap past 2^64.
  void CheckRange(uint64_t off, uint64_t n) const {
    const uint64_t total = size();
    if (off > total || n > total - off)
      throw Error(name() + ": read of " + std::to_string(n) + " bytes at byte " + std::to_string(off) +
                  " is outside the file (" + std::to_string(total) + " bytes)");
  }
};

// Bytes owned by the caller, e.g. a test's buffer. The caller keeps them alive.
class MemorySource : public ByteSource {
 public:
  MemorySource(std::string name, const uint8_t* data, size_t size)
      : name_(std::move(name)), data_(data), size_(size) {}
  const std::string& name() const override { return name_; }
  uint64_t size() const override { return size_; }
  const uint8_t* Read(uint64_t off, size_t n, std::vector<uint8_t>*) const override {
    CheckRange(off, n);
    return data_ + off;
  }
  const uint8_t* mapped() const override { return data_; }

 private:
  std::string name_;
  const uint8_t* data_;
  size_t size_;
};

}  // namespace dsc::format
