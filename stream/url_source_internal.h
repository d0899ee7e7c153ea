// The URL source's class (stream/url_source.h is its contract), shared by the files that implement it:
// url_source.cc (opening a dsc file, the cache, fetching) and url_source_ffcv.cc (opening FFCV's).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "format/byte_source.h"
#include "format/layout.h"
#include "stream/http.h"
#include "stream/url_source.h"

namespace dsc::stream::internal {

std::string Hex(uint64_t v);
std::string DefaultCacheRoot();
bool AllZero(const uint8_t* p, size_t n);
int WriteAll(int fd, const uint8_t* p, size_t n);          // at the start of fd; errno, 0 on success
bool ReadAll(int fd, uint8_t* p, size_t n, uint64_t off);  // exactly n bytes from off

class UrlSource : public format::ByteSource {
 public:
  UrlSource(const std::string& url, const StreamOptions& o);
  ~UrlSource() override;
  const std::string& name() const override { return name_; }
  uint64_t size() const override { return size_; }
  const uint8_t* Read(uint64_t off, size_t n, std::vector<uint8_t>* scratch) const override;
  const uint8_t* ReadHeld(uint64_t off, size_t n, format::ReadBuffer* buf) const override;
  bool remote() const override { return true; }
  void WillNeed(uint64_t off, uint64_t n) const override;
  void DontNeed(uint64_t off, uint64_t n) const override;
  bool Resident(uint64_t off, uint64_t n) const override;

  StreamCounters counters() const;

 private:
  // A block's copy in the cache directory, mapped: a read is a memcpy, not a system call (pread per
  // sample cost 40% of a CIFAR epoch's CPU). Cache files are written whole and renamed into place;
  // an evicted one is unlinked, and the mapping stays valid while a reader holds it. Each BlockFile
  // holds a shared flock on its file: an evicted file that no reader of this process holds and that
  // no other process has open (the lock can be made exclusive) is recycled instead, renamed to a
  // temporary name and overwritten by the next block. Writing into new page-cache pages cost half a
  // cold epoch's CPU (copy_folio_from_iter_atomic); the recycled file's pages, and its mapping, are
  // already there, and the next block is copied into that mapping: no write() per piece, whose page
  // cache bookkeeping cost a tenth of the epoch.
  struct BlockFile {
    int fd = -1;
    const uint8_t* map = nullptr;
    uint8_t* writable = nullptr;  // the same mapping, writable where blocks are written through it (mapped_writes_)
    size_t len = 0;
    bool ours = false;  // written by this process, open for writing: may be recycled
    void Map(size_t n, bool write = false) {
      len = n;
      void* p = n ? ::mmap(nullptr, n, PROT_READ | (write ? PROT_WRITE : 0), MAP_SHARED, fd, 0) : MAP_FAILED;
      if (p == MAP_FAILED) return;  // read with pread, written with pwrite
      map = static_cast<const uint8_t*>(p);
      if (write) writable = static_cast<uint8_t*>(p);
    }
    ~BlockFile() {
      if (map) ::munmap(const_cast<uint8_t*>(map), len);
      if (fd >= 0) ::close(fd);
    }
  };
  struct Fetch {
    bool started = false, done = false;
    std::shared_ptr<BlockFile> file;
    std::string error;
  };
  struct Unit {
    uint64_t off = 0, len = 0, content = 0, checksum = 0;
    std::shared_ptr<BlockFile> file;  // present in the cache directory
    bool verified = false;            // its bytes checked in this process
    std::shared_ptr<Fetch> fetch;     // queued, in flight, or done (waiters read its file)
    uint64_t last_use = 0, hint = 0, released = 0;
  };

  std::string BlockPath(size_t u) const { return dir_ + "/block-" + std::to_string(u); }
  // FFCV calls its units pages (docs/ffcv-format.md).
  std::string What(size_t u) const {
    if (!ffcv_) return "block " + std::to_string(u);
    return u < first_page_ ? "the padding before the first page" : "page " + std::to_string(u - first_page_);
  }
  void OpenDsc(HttpClient* client);
  void MakeCacheDir(const std::string& key);
  void OpenTail(HttpClient* client);
  void OpenFfcv(HttpClient* client);
  // [off, off + len) of the file into *out, from the cache directory's copy `file` when it holds
  // exactly that many bytes (and `reuse_`) and passes `check`, else fetched, checked (an error when
  // `check` fails: `mismatch` says why) and copied there (`what` names it); `known`: the range's
  // first bytes, already fetched.
  void CachedRange(HttpClient* client, const std::string& file, uint64_t off, uint64_t len, const std::string& what,
                   std::vector<uint8_t>* out, const std::function<bool(const std::vector<uint8_t>&)>& check = {},
                   const std::string& mismatch = "", const std::vector<uint8_t>& known = {});
  void BuildUnits();
  void AdoptCachedBlocks();
  std::shared_ptr<BlockFile> Acquire(size_t u) const;
  std::string CheckBytes(size_t u, const uint8_t* p) const;  // "" when the unit's bytes are right
  void FetchLoop(int id);
  // mu_ held. With `spare`, an evicted file of `len` bytes that can be recycled is renamed to
  // `spare_name` and handed over instead of unlinked.
  // `hinted_too`: blocks the plan still wants may go too (for a block a reader waits for).
  void EvictFor(uint64_t len, size_t except, std::shared_ptr<BlockFile>* spare = nullptr, const std::string& spare_name = "",
                bool hinted_too = true) const;
  bool RoomForPrefetch(uint64_t len) const;  // mu_ held
  void Evict(size_t u, std::shared_ptr<BlockFile>* spare = nullptr, const std::string& spare_name = "") const;
  size_t UnitAt(uint64_t off) const;

  std::string url_, name_, dir_, etag_;
  StreamOptions opt_;
  uint64_t size_ = 0, tail_off_ = 0;
  uint64_t head_len_ = format::kPageSize;  // bytes before the first unit: dsc's header page, or FFCV's header, descriptors and metadata
  bool ffcv_ = false;              // an FFCV file: no checksums, its ETag keys the cache
  size_t first_page_ = 0;          // FFCV: units before the first data page (its padding)
  bool reuse_ = true;              // cached copies from earlier runs may be used (an FFCV file without ETag: no)
  format::Header header_;
  std::vector<uint8_t> head_page_, tail_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;       // a fetch finished
  mutable std::condition_variable work_cv_;  // a fetch queued
  mutable std::vector<Unit> units_;
  mutable std::deque<size_t> urgent_, ahead_;
  mutable uint64_t used_ = 0, tick_ = 0, hint_seq_ = 0, release_seq_ = 0;
  bool stop_ = false;
  std::vector<std::thread> fetchers_;
  uint64_t open_requests_ = 0, open_bytes_ = 0;
  bool mapped_writes_ = false;
  mutable std::atomic<uint64_t> requests_{0}, bytes_{0}, fetched_{0}, from_cache_{0}, evicted_{0}, recycled_{0};
};

}  // namespace dsc::stream::internal
