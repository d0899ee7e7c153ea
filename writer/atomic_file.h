// Writes a file so that the target path only ever holds the old file or the complete new one.
// The data goes to an unnamed O_TMPFILE inode in the target's directory, flock()ed by its writer for
// its whole life. Commit() fsyncs it, links it under a hidden random name (".NAME.dsc-tmp-RANDOM"),
// renames that over the target and fsyncs the directory. Only a kill between the link and the rename
// leaves that name behind; every new AtomicFile for the target removes such leftovers that nobody
// locks (a locked one belongs to a live writer and is never touched). Filesystems without O_TMPFILE
// get a named, locked temporary from the start, which the destructor removes (so do systems without
// /proc, through which the unnamed inode is linked). A symlinked target is written through: the link
// stays and the file it points to is replaced.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace dsc::writer {

class AtomicFile {
 public:
  explicit AtomicFile(const std::string& target);  // throws dsc::Error naming the target
  ~AtomicFile();                                   // not committed: the data is discarded
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Positioned writes; throw dsc::Error naming the target and the offset (e.g. disk full).
  void WriteAt(uint64_t offset, const void* data, size_t size);
  void Commit();
  const std::string& target() const { return target_; }

 private:
  std::string target_, dir_, base_, temp_name_;  // dir_/base_: the target with symlinks followed
  int fd_ = -1;
  int dir_fd_ = -1;
  bool anonymous_ = false;
  bool committed_ = false;
  int keep_mode_ = -1;  // the replaced file's permission bits, given to the new one
};

}  // namespace dsc::writer
