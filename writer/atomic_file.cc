#include "writer/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "format/error.h"

namespace dsc::writer {

namespace fs = std::filesystem;

namespace {
// Read errno before the message is built: the string's allocations may change it.
std::string ErrnoText(int e) { return std::strerror(e); }

// ".NAME.dsc-tmp-" (built with append: GCC 12 misreports operator+ chains here, -Wrestrict).
std::string HiddenPrefix(const std::string& base) {
  std::string s(1, '.');
  s.append(base).append(".dsc-tmp-");
  return s;
}

// 16 hex digits nobody can predict, so no other writer can aim at (or collide with) this name.
std::string RandomSuffix() {
  uint64_t v = 0;
  if (::getrandom(&v, sizeof v, GRND_NONBLOCK) != ssize_t(sizeof v)) {
    // No entropy yet (early boot): still unique within this machine and hard to guess in advance.
    static std::atomic<uint64_t> counter{0};
    v = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) ^ (uint64_t(::getpid()) << 40) ^
        (counter.fetch_add(1) * 0x9e3779b97f4a7c15ull);
  }
  static const char* kHex = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 0; i < 16; ++i) s[size_t(i)] = kHex[(v >> (4 * i)) & 15];
  return s;
}

bool SameFile(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

// Removes the leftovers of `base` (".BASE.dsc-tmp-*") whose writer is gone: a live writer holds an
// flock on its temporary, so one we can lock without waiting is dead. Best effort, never throws.
void RemoveUnlockedLeftovers(int dir_fd, const std::string& base) {
  const std::string prefix = HiddenPrefix(base);
  int scan_fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (scan_fd < 0) return;
  DIR* d = ::fdopendir(scan_fd);
  if (!d) {
    ::close(scan_fd);
    return;
  }
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d))
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) names.emplace_back(e->d_name);
  ::closedir(d);
  for (const auto& name : names) {
    // O_NONBLOCK: a FIFO under such a name must not block the build; only regular files are removed.
    int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat locked, named;
    if (::fstat(fd, &locked) == 0 && S_ISREG(locked.st_mode) && ::flock(fd, LOCK_EX | LOCK_NB) == 0 &&
        ::fstatat(dir_fd, name.c_str(), &named, AT_SYMLINK_NOFOLLOW) == 0 && SameFile(locked, named))
      ::unlinkat(dir_fd, name.c_str(), 0);  // still under our lock: no writer can own it now
    ::close(fd);
  }
}
// A symlinked target followed to its end, as writing through the link would: the finished file
// replaces what the link points to (out.beton -> /fast/disk/out.beton stays a link, and the data goes
// to the disk it names), not the link itself. A dangling link's target is created.
fs::path FollowLinks(const std::string& target) {
  fs::path p(target);
  for (int hops = 0; hops < 40; ++hops) {
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(p, ec))) return p;
    const fs::path to = fs::read_symlink(p, ec);
    if (ec) return p;
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  throw Error(target + ": too many levels of symbolic links");
}

}  // namespace

AtomicFile::AtomicFile(const std::string& target) : target_(target) {
  const fs::path t = FollowLinks(target);
  if (t.filename().empty()) throw Error(target + ": output path names a directory");
  base_ = t.filename().string();
  dir_ = t.parent_path().empty() ? "." : t.parent_path().string();
  dir_fd_ = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd_ < 0) {
    const int e = errno;
    throw Error(target + ": cannot open output directory " + dir_ + ": " + ErrnoText(e));
  }
  struct stat st;
  const bool exists = ::stat(t.c_str(), &st) == 0;
  if (exists && S_ISREG(st.st_mode)) keep_mode_ = int(st.st_mode & 07777);  // a private 0600 file stays private
  if (exists && !S_ISREG(st.st_mode)) {
    ::close(dir_fd_);
    // The finished file is renamed over the target: over a device (/dev/null as a dry run) or a
    // FIFO, that would replace the node itself.
    throw Error(target + (S_ISDIR(st.st_mode) ? ": is a directory"
                                              : ": exists and is not a regular file (a device, FIFO or socket); write to another path"));
  }
  const std::string& base = base_;
  RemoveUnlockedLeftovers(dir_fd_, base);
  // The unnamed inode is given its name through /proc/self/fd at Commit(): without /proc (a bare
  // chroot or container) it could never be named, so a named temporary is used from the start.
  fd_ = ::access("/proc/self/fd", X_OK) == 0 ? ::openat(dir_fd_, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0644) : -1;
  if (fd_ >= 0) {
    anonymous_ = true;
    // Locked before it has a name, so no other writer's clean-up can ever take it for a leftover.
    ::flock(fd_, LOCK_EX);
    return;
  }
  // Named from the start: lock it, then check the name is still ours (another writer's clean-up may
  // have found it unlocked in between and removed it; then take a new name).
  for (int attempt = 0;; ++attempt) {
    temp_name_ = HiddenPrefix(base) + RandomSuffix();
    fd_ = ::openat(dir_fd_, temp_name_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0 && errno == EEXIST && attempt < 100) continue;
    if (fd_ < 0) {
      int e = errno;
      ::close(dir_fd_);
      throw Error(target + ": cannot create a file in " + dir_ + ": " + std::strerror(e));
    }
    struct stat mine, named;
    if (::flock(fd_, LOCK_EX) == 0 && ::fstat(fd_, &mine) == 0 &&
        ::fstatat(dir_fd_, temp_name_.c_str(), &named, AT_SYMLINK_NOFOLLOW) == 0 && SameFile(mine, named))
      return;
    ::close(fd_);
    fd_ = -1;
    if (attempt >= 100) {
      ::close(dir_fd_);
      throw Error(target + ": cannot keep a temporary file in " + dir_);
    }
  }
}

AtomicFile::~AtomicFile() {
  // Unlinked before the close releases the lock, so no one else ever sees it unlocked.
  if (!committed_ && !anonymous_ && !temp_name_.empty()) ::unlinkat(dir_fd_, temp_name_.c_str(), 0);
  if (fd_ >= 0) ::close(fd_);
  if (dir_fd_ >= 0) ::close(dir_fd_);
}

void AtomicFile::WriteAt(uint64_t offset, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t w = ::pwrite(fd_, p, size, off_t(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int e = errno;
      throw Error(target_ + ": write failed at byte " + std::to_string(offset) + ": " + (w == 0 ? "no progress" : ErrnoText(e)));
    }
    p += w;
    offset += uint64_t(w);
    size -= size_t(w);
  }
}

void AtomicFile::Commit() {
  if (keep_mode_ >= 0 && ::fchmod(fd_, mode_t(keep_mode_)) != 0) {
    const int e = errno;
    throw Error(target_ + ": cannot keep its permissions: " + ErrnoText(e));
  }
  if (::fsync(fd_) != 0) {
    const int e = errno;
    throw Error(target_ + ": fsync failed: " + ErrnoText(e));
  }
  const std::string& base = base_;
  if (anonymous_) {
    // Give the unnamed (locked) inode a fresh random name, then rename it over the target (linkat
    // cannot replace). An existing name is never removed: it may be another writer's.
    const std::string proc = "/proc/self/fd/" + std::to_string(fd_);
    for (int attempt = 0;; ++attempt) {
      temp_name_ = HiddenPrefix(base) + RandomSuffix();
      if (::linkat(AT_FDCWD, proc.c_str(), dir_fd_, temp_name_.c_str(), AT_SYMLINK_FOLLOW) == 0) break;
      if (errno != EEXIST || attempt >= 100) {
        int e = errno;
        temp_name_.clear();
        throw Error(target_ + ": cannot link the finished file: " + std::strerror(e));
      }
    }
    anonymous_ = false;  // named now: a failure below must remove the name
  }
  // Test hook: stop inside the window between the temporary name and the rename, so a test can
  // kill -9 the writer there (or let another writer run) and check what is left.
  if (std::getenv("DSC_TEST_STOP_BEFORE_RENAME")) ::raise(SIGSTOP);
  if (::renameat(dir_fd_, temp_name_.c_str(), dir_fd_, base.c_str()) != 0) {
    int e = errno;
    ::unlinkat(dir_fd_, temp_name_.c_str(), 0);
    temp_name_.clear();
    throw Error(target_ + ": cannot rename into place: " + std::strerror(e));
  }
  committed_ = true;
  ::fsync(dir_fd_);
}

}  // namespace dsc::writer
