#include "writer/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "format/error.h"

namespace dsc::writer {

namespace fs = std::filesystem;

namespace {
std::string Errno() { return std::strerror(errno); }

// ".NAME.dsc-tmp-SUFFIX" (built with append: GCC 12 misreports operator+ chains here, -Wrestrict).
std::string HiddenTemp(const std::string& base, const std::string& suffix) {
  std::string s(1, '.');
  s.append(base).append(".dsc-tmp-").append(suffix);
  return s;
}
}  // namespace

AtomicFile::AtomicFile(const std::string& target) : target_(target) {
  fs::path t(target);
  if (t.filename().empty()) throw Error(target + ": output path names a directory");
  dir_ = t.parent_path().empty() ? "." : t.parent_path().string();
  dir_fd_ = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd_ < 0) throw Error(target + ": cannot open output directory " + dir_ + ": " + Errno());
  struct stat st;
  if (::stat(target.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(dir_fd_);
    throw Error(target + ": is a directory");
  }
  fd_ = ::openat(dir_fd_, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);
  if (fd_ >= 0) {
    anonymous_ = true;
  } else {
    temp_name_ = HiddenTemp(t.filename().string(), "XXXXXX");
    std::string full = (fs::path(dir_) / temp_name_).string();
    fd_ = ::mkstemp(full.data());
    if (fd_ < 0) {
      int e = errno;
      ::close(dir_fd_);
      throw Error(target + ": cannot create a file in " + dir_ + ": " + std::strerror(e));
    }
    temp_name_ = fs::path(full).filename().string();
    ::fchmod(fd_, 0644);
  }
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !anonymous_ && !temp_name_.empty()) ::unlinkat(dir_fd_, temp_name_.c_str(), 0);
  if (dir_fd_ >= 0) ::close(dir_fd_);
}

void AtomicFile::WriteAt(uint64_t offset, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t w = ::pwrite(fd_, p, size, off_t(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw Error(target_ + ": write failed at byte " + std::to_string(offset) + ": " + (w == 0 ? "no progress" : Errno()));
    p += w;
    offset += uint64_t(w);
    size -= size_t(w);
  }
}

void AtomicFile::Commit() {
  if (::fsync(fd_) != 0) throw Error(target_ + ": fsync failed: " + Errno());
  const std::string base = fs::path(target_).filename().string();
  if (anonymous_) {
    // Give the unnamed inode a hidden name, then rename it over the target (linkat cannot replace).
    temp_name_ = HiddenTemp(base, std::to_string(::getpid()));
    ::unlinkat(dir_fd_, temp_name_.c_str(), 0);
    std::string proc = "/proc/self/fd/" + std::to_string(fd_);
    if (::linkat(AT_FDCWD, proc.c_str(), dir_fd_, temp_name_.c_str(), AT_SYMLINK_FOLLOW) != 0)
      throw Error(target_ + ": cannot link the finished file: " + Errno());
  }
  if (::renameat(dir_fd_, temp_name_.c_str(), dir_fd_, base.c_str()) != 0) {
    int e = errno;
    ::unlinkat(dir_fd_, temp_name_.c_str(), 0);
    throw Error(target_ + ": cannot rename into place: " + std::strerror(e));
  }
  committed_ = true;
  ::fsync(dir_fd_);
}

}  // namespace dsc::writer
