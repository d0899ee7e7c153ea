#include "reader/file_source.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "format/error.h"

namespace dsc {

namespace {

int OpenFile(const std::string& path, uint64_t* size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + ": not a regular file");
  }
  *size = uint64_t(st.st_size);
  return fd;
}

class MmapSource : public format::ByteSource {
 public:
  explicit MmapSource(const std::string& path) : name_(path) {
    int fd = OpenFile(path, &size_);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) {
        int e = errno;
        ::close(fd);
        throw Error(path + ": mmap failed: " + std::strerror(e));
      }
      data_ = static_cast<const uint8_t*>(p);
    }
    ::close(fd);
  }
  ~MmapSource() override {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  const std::string& name() const override { return name_; }
  uint64_t size() const override { return size_; }
  const uint8_t* Read(uint64_t off, size_t, std::vector<uint8_t>*) const override { return data_ + off; }
  const uint8_t* mapped() const override { return data_; }

 private:
  std::string name_;
  uint64_t size_ = 0;
  const uint8_t* data_ = nullptr;
};

class PreadSource : public format::ByteSource {
 public:
  explicit PreadSource(const std::string& path) : name_(path) { fd_ = OpenFile(path, &size_); }
  ~PreadSource() override { ::close(fd_); }
  const std::string& name() const override { return name_; }
  uint64_t size() const override { return size_; }
  const uint8_t* Read(uint64_t off, size_t n, std::vector<uint8_t>* scratch) const override {
    if (scratch->size() < n) scratch->resize(n);
    size_t got = 0;
    while (got < n) {
      ssize_t r = ::pread(fd_, scratch->data() + got, n - got, off_t(off + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0)
        throw Error(name_ + ": read failed at byte " + std::to_string(off + got) + ": " +
                    (r == 0 ? "unexpected end of file" : std::strerror(errno)));
      got += size_t(r);
    }
    return scratch->data();
  }

 private:
  std::string name_;
  uint64_t size_ = 0;
  int fd_ = -1;
};

}  // namespace

std::unique_ptr<format::ByteSource> OpenMmapSource(const std::string& path) { return std::make_unique<MmapSource>(path); }
std::unique_ptr<format::ByteSource> OpenPreadSource(const std::string& path) { return std::make_unique<PreadSource>(path); }

}  // namespace dsc
