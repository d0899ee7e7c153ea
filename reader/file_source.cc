#include "reader/file_source.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "format/error.h"
#include "reader/dataset.h"
#include "reader/mmap_guard.h"
#ifdef DSC_HAVE_CURL
#include "stream/open.h"
#endif

namespace dsc {

namespace {

int OpenFile(const std::string& path, uint64_t* size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    throw Error(path + ": cannot open: " + std::strerror(e));
  }
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
      mmap_guard::Register(data_, size_);  // a fault here becomes an error in guarded readers
    }
    ::close(fd);
  }
  ~MmapSource() override {
    if (data_) {
      mmap_guard::Unregister(data_);
      ::munmap(const_cast<uint8_t*>(data_), size_);
    }
  }
  const std::string& name() const override { return name_; }
  uint64_t size() const override { return size_; }
  const uint8_t* Read(uint64_t off, size_t n, std::vector<uint8_t>*) const override {
    CheckRange(off, n);
    return data_ + off;
  }
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
    CheckRange(off, n);
    if (scratch->size() < n) scratch->resize(n);
    size_t got = 0;
    while (got < n) {
      ssize_t r = ::pread(fd_, scratch->data() + got, n - got, off_t(off + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        const int e = errno;
        throw Error(name_ + ": read failed at byte " + std::to_string(off + got) + ": " +
                    (r == 0 ? "unexpected end of file" : std::strerror(e)));
      }
      got += size_t(r);
    }
    return scratch->data();
  }

 private:
  std::string name_;
  uint64_t size_ = 0;
  int fd_ = -1;
};

#ifdef DSC_EXACT_HEAP_SOURCE
// Sanitizer and fuzz builds: the whole file in a heap block of exactly its size (not page-rounded
// like a mapping), so that any read past the end hits an ASan redzone instead of mapped zeros.
class HeapSource : public format::ByteSource {
 public:
  explicit HeapSource(const std::string& path) {
    PreadSource file(path);
    size_ = file.size();
    data_.reset(new uint8_t[size_]);
    std::vector<uint8_t> scratch;
    if (size_) std::memcpy(data_.get(), file.Read(0, size_, &scratch), size_);
    name_ = path;
  }
  const std::string& name() const override { return name_; }
  uint64_t size() const override { return size_; }
  const uint8_t* Read(uint64_t off, size_t n, std::vector<uint8_t>*) const override {
    CheckRange(off, n);
    return data_.get() + off;
  }
  const uint8_t* mapped() const override { return data_.get(); }

 private:
  std::string name_;
  uint64_t size_ = 0;
  std::unique_ptr<uint8_t[]> data_;
};
#endif

}  // namespace

std::unique_ptr<format::ByteSource> OpenMmapSource(const std::string& path) {
#ifdef DSC_EXACT_HEAP_SOURCE
  return std::make_unique<HeapSource>(path);
#else
  return std::make_unique<MmapSource>(path);
#endif
}
std::unique_ptr<format::ByteSource> OpenPreadSource(const std::string& path) { return std::make_unique<PreadSource>(path); }

bool IsUrl(const std::string& path) {
  return path.rfind("http://", 0) == 0 || path.rfind("https://", 0) == 0 || path.rfind("s3://", 0) == 0;
}

std::unique_ptr<format::ByteSource> OpenSource(const std::string& path, const DatasetOptions& options) {
  if (IsUrl(path)) {
#ifdef DSC_HAVE_CURL
    return stream::OpenUrl(path, options.cache_dir, options.cache_budget);
#else
    throw Error(path + ": this dsc was built without libcurl, so it cannot read URLs (install libcurl4-openssl-dev and "
                "rebuild; docs/streaming.md)");
#endif
  }
  return options.use_pread ? OpenPreadSource(path) : OpenMmapSource(path);
}

}  // namespace dsc
