#include "stream/url_source.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>

#include "format/checksum.h"
#include "format/error.h"
#include "format/ffcv.h"
#include "format/layout.h"
#include "stream/url_source_internal.h"

namespace dsc::stream {

namespace internal {

namespace fs = std::filesystem;
using format::kPageSize;

std::string Hex(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

std::string DefaultCacheRoot() {
  if (const char* d = std::getenv("DSC_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/dsc";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/dsc";
  return "/tmp/dsc-cache";
}

bool AllZero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i]) return false;
  return true;
}

// Writes all of [p, p+n) at the start of fd; returns errno, 0 on success.
int WriteAll(int fd, const uint8_t* p, size_t n) {
  size_t done = 0;
  while (done < n) {
    const ssize_t w = ::pwrite(fd, p + done, n - done, off_t(done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? errno : EIO;
    done += size_t(w);
  }
  return 0;
}

bool ReadAll(int fd, uint8_t* p, size_t n, uint64_t off) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd, p + done, n - done, off_t(off + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    done += size_t(r);
  }
  return true;
}


UrlSource::UrlSource(const std::string& url, const StreamOptions& o)
    : url_(url), name_(o.display_name.empty() ? Redact(url) : o.display_name), opt_(o) {
  HttpClient client(opt_.http);
  // The first page, or the whole file when shorter (an FFCV file without data pages can be).
  HttpReply r = client.GetPrefix(url_, kPageSize, "header", &head_page_, opt_.sign, name_);
  etag_ = r.etag;
  size_ = r.total_size;
  const size_t got = head_page_.size();
  const bool dsc = got >= 8 && std::memcmp(head_page_.data(), format::kHeaderMagic.data(), 8) == 0;
  const bool ffcv = !dsc && got >= format::ffcv::kHeaderSize && format::ffcv::LooksLikeFfcv(head_page_.data());
  if (got < kPageSize && !ffcv)
    throw Error(name_ + ": header: the server's file is " + std::to_string(got) + " bytes, fewer than the " + std::to_string(kPageSize) +
                " asked for: too short for a dsc file (truncated, or not one)");
  if (dsc) {
    OpenDsc(&client);
  } else if (ffcv && size_) {
    OpenFfcv(&client);
  } else {
    throw Error(name_ + ": not a dsc file (bad magic in its first bytes)" +
                (size_ ? std::string(" nor an FFCV file (no plausible FFCV header)")
                       : std::string(", and the server gave no file size (Content-Range) to read it as an FFCV file")));
  }
  open_requests_ = client.requests();
  open_bytes_ = client.bytes();
  uint64_t largest = 0;
  for (const Unit& u : units_) largest = std::max(largest, u.len);
  if (largest && opt_.budget < 2 * largest)
    throw Error(name_ + ": cache_budget " + std::to_string(opt_.budget) + " bytes is below two " + (ffcv_ ? "pages" : "blocks") + " (" +
                std::to_string(2 * largest) + " bytes): streaming needs room for the " + (ffcv_ ? "page" : "block") +
                " being read and the next");
  AdoptCachedBlocks();
  // Fetches in flight each hold a block's room in the budget: no more than leaves one block's room
  // for what is already cached, so the budget always holds.
  const int n = int(std::clamp<uint64_t>(largest ? opt_.budget / largest - 1 : 1, 1, uint64_t(std::max(1, opt_.connections))));
  for (int i = 0; i < n; ++i) fetchers_.emplace_back([this, i] { FetchLoop(i); });
}

void UrlSource::OpenDsc(HttpClient* client) {
  const uint8_t* h = head_page_.data();
  if (format::HeaderChecksum(h) != format::DecodeHeader(h).header_checksum)
    throw Error(name_ + ": header checksum mismatch (damaged file, or a server that altered the bytes)");
  header_ = format::DecodeHeader(h);
  if (size_ == 0) size_ = header_.file_size;  // a server that sent no Content-Range
  if (header_.file_size != size_)
    throw Error(name_ + ": the header says " + std::to_string(header_.file_size) + " bytes but the server has " +
                std::to_string(size_) + " (file truncated or being replaced)");
  tail_off_ = header_.sections[format::kIndex].offset;
  if (tail_off_ < kPageSize || tail_off_ > size_ || tail_off_ % kPageSize)
    throw Error(name_ + ": header: index section at byte " + std::to_string(tail_off_) + " is not page-aligned inside the file");
  // The key: the header's checksum, which covers every section's checksum and the file size: a
  // different file under the same URL gets a different directory.
  MakeCacheDir(Hex(header_.header_checksum));
  OpenTail(client);
  BuildUnits();
}

void UrlSource::MakeCacheDir(const std::string& key) {
  const std::string root = opt_.cache_dir.empty() ? DefaultCacheRoot() : opt_.cache_dir;
  dir_ = root + "/" + Hex(Checksum(name_.data(), name_.size())) + "-" + key;  // the URL without credentials, and the file's key
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || ::access(dir_.c_str(), W_OK) != 0)
    throw Error(name_ + ": cache directory " + dir_ + " cannot be created or written (" + (ec ? ec.message() : std::strerror(errno)) +
                "); set cache_dir (--cache-dir) to a writable folder");
  // A recycled block is written through its mapping only where overwriting a file's pages can never
  // need new space (a full disk would raise SIGBUS at the store, not an error from write()): ext2/3/4,
  // XFS and tmpfs; copy-on-write file systems (btrfs, ZFS) and the rest keep pwrite.
  struct statfs fsinfo {};
  if (::statfs(dir_.c_str(), &fsinfo) == 0)
    mapped_writes_ = fsinfo.f_type == 0xEF53 || fsinfo.f_type == 0x58465342 || fsinfo.f_type == 0x01021994;
}

UrlSource::~UrlSource() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : fetchers_) t.join();
}

// The index, meta, block table, optional sections and footer: one range, cached whole.
void UrlSource::OpenTail(HttpClient* client) {
  auto check = [&](const std::vector<uint8_t>& t) {
    for (int s : {format::kIndex, format::kMeta, format::kBlocks}) {
      const format::SectionRef& ref = header_.sections[s];
      if (ref.offset < tail_off_ || ref.offset > size_ || ref.size > size_ - ref.offset) return false;
      if (Checksum(t.data() + (ref.offset - tail_off_), ref.size) != ref.checksum) return false;
    }
    return true;
  };
  CachedRange(client, "tail", tail_off_, size_ - tail_off_, "index, meta and block table", &tail_, check,
              "index, meta or block table do not match the header's checksums (the file changed on the server while being opened, "
              "or is damaged)");
}

void UrlSource::CachedRange(HttpClient* client, const std::string& file, uint64_t off, uint64_t len, const std::string& what,
                            std::vector<uint8_t>* out, const std::function<bool(const std::vector<uint8_t>&)>& check,
                            const std::string& mismatch, const std::vector<uint8_t>& known) {
  const std::string path = dir_ + "/" + file;
  const int fd = reuse_ ? ::open(path.c_str(), O_RDONLY | O_CLOEXEC) : -1;
  if (fd >= 0) {
    struct stat st;
    out->resize(len);
    const bool ok = ::fstat(fd, &st) == 0 && uint64_t(st.st_size) == len && ReadAll(fd, out->data(), len, 0) && (!check || check(*out));
    ::close(fd);
    if (ok) return;
  }
  if (known.size() >= len) {
    out->assign(known.begin(), known.begin() + len);
  } else if (!known.empty()) {
    std::vector<uint8_t> rest;
    client->Get(url_, off + known.size(), len - known.size(), etag_, what, &rest, opt_.sign, name_);
    *out = known;
    out->insert(out->end(), rest.begin(), rest.end());
  } else {
    client->Get(url_, off, len, etag_, what, out, opt_.sign, name_);
  }
  if (check && !check(*out)) throw Error(name_ + ": " + mismatch);  // never kept in the cache
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int w = ::open(tmp.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  const int e = w < 0 ? errno : WriteAll(w, out->data(), len);
  if (w >= 0) ::close(w);
  if (e != 0 || std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    throw Error(name_ + ": cache directory " + dir_ + ": cannot write the copy of the " + what + " (" + std::strerror(e ? e : errno) +
                "): free space there or set cache_dir elsewhere");
  }
}

void UrlSource::BuildUnits() {
  const format::SectionRef& bs = header_.sections[format::kBlocks];
  if (header_.block_count > bs.size / format::kBlockEntrySize)
    throw Error(name_ + ": header: " + std::to_string(header_.block_count) + " blocks but the block table holds fewer");
  const uint8_t* table = tail_.data() + (bs.offset - tail_off_);
  units_.resize(header_.block_count);
  uint64_t expect = kPageSize;
  for (uint64_t b = 0; b < header_.block_count; ++b) {
    const format::BlockEntry e = format::DecodeBlockEntry(table + b * format::kBlockEntrySize);
    if (e.offset != expect || e.offset >= tail_off_ || e.size > tail_off_ - e.offset)
      throw Error(name_ + ": blocks: block " + std::to_string(b) + " at byte " + std::to_string(e.offset) +
                  " does not follow the previous block inside the data section");
    units_[b].off = e.offset;
    units_[b].content = e.size;
    units_[b].checksum = e.checksum;
    expect = format::RoundUpToPage(e.offset + e.size, header_.page_size ? header_.page_size : kPageSize);
  }
  for (size_t b = 0; b < units_.size(); ++b) units_[b].len = (b + 1 < units_.size() ? units_[b + 1].off : tail_off_) - units_[b].off;
  if (!units_.empty() ? units_[0].off != kPageSize : tail_off_ != kPageSize)
    throw Error(name_ + ": the data section does not start after the header page");
}

// Block files left by an earlier run on the same file: counted now, checked when first read.
void UrlSource::AdoptCachedBlocks() {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string f = entry.path().filename().string();
    if (f.find(".tmp.") != std::string::npos) {  // an interrupted write
      fs::remove(entry.path(), ec);
      continue;
    }
    if (f.rfind("block-", 0) != 0) continue;
    if (!reuse_) {  // nothing tells whether an earlier run's copy is of this version of the file
      fs::remove(entry.path(), ec);
      continue;
    }
    const size_t u = std::strtoull(f.c_str() + 6, nullptr, 10);
    if (u >= units_.size() || std::to_string(u) != f.substr(6) || entry.file_size(ec) != units_[u].len) {
      fs::remove(entry.path(), ec);
      continue;
    }
    auto file = std::make_shared<BlockFile>();
    file->fd = ::open(entry.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (file->fd < 0) continue;
    if (::flock(file->fd, LOCK_SH | LOCK_NB) != 0) continue;  // another process is recycling it
    file->Map(units_[u].len);
    units_[u].file = file;
    units_[u].last_use = ++tick_;
    used_ += units_[u].len;
  }
  std::lock_guard<std::mutex> l(mu_);
  EvictFor(0, units_.size());  // a smaller budget than last time
}

size_t UrlSource::UnitAt(uint64_t off) const {
  auto it = std::upper_bound(units_.begin(), units_.end(), off, [](uint64_t o, const Unit& u) { return o < u.off; });
  return size_t(it - units_.begin()) - 1;
}

std::string UrlSource::CheckBytes(size_t u, const uint8_t* p) const {
  const Unit& unit = units_[u];
  if (ffcv_) return "";  // no checksums: the cache directory's key (the ETag) vouches for its pages
  if (Checksum(p, unit.content) != unit.checksum) return "checksum mismatch";
  if (!AllZero(p + unit.content, unit.len - unit.content)) return "padding after the block is not zero";
  return "";
}

void UrlSource::Evict(size_t u, std::shared_ptr<BlockFile>* spare, const std::string& spare_name) const {
  Unit& unit = units_[u];
  // Recyclable: no reader here holds the file (or can reach it through a finished fetch it waited
  // for), no other process has it open (the lock becomes exclusive), and the name still is this file.
  bool recycled = false;
  if (spare && !*spare && unit.file->ours && unit.file->map &&
      unit.file.use_count() == 1 + (unit.fetch && unit.fetch->file == unit.file) && (!unit.fetch || unit.fetch.use_count() == 1) &&
      ::flock(unit.file->fd, LOCK_EX | LOCK_NB) == 0) {
    struct stat a, b;
    if (::fstat(unit.file->fd, &a) == 0 && ::stat(BlockPath(u).c_str(), &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev &&
        std::rename(BlockPath(u).c_str(), spare_name.c_str()) == 0) {
      *spare = unit.file;
      unit.fetch.reset();
      recycled = true;
    }
  }  // a failed attempt may leave the file unlocked (flock drops the old lock first): it is dropped anyway
  if (!recycled) ::unlink(BlockPath(u).c_str());  // readers holding the file keep its descriptor
  unit.file.reset();
  unit.verified = false;
  unit.released = 0;
  used_ -= unit.len;
  evicted_.fetch_add(1, std::memory_order_relaxed);
}

void UrlSource::EvictFor(uint64_t len, size_t except, std::shared_ptr<BlockFile>* spare, const std::string& spare_name,
                         bool hinted_too) const {
  while (used_ + len > opt_.budget) {
    // Released by the plan first (oldest release), then read and not hinted again (least recent),
    // then fetched ahead and not yet read (the furthest in the plan).
    size_t best = units_.size();
    auto rank = [&](const Unit& x) -> std::pair<int, uint64_t> {
      if (x.released) return {0, x.released};
      if (!x.hint) return {1, x.last_use};
      return {2, ~x.hint};
    };
    for (size_t i = 0; i < units_.size(); ++i) {
      if (!units_[i].file || i == except || (!hinted_too && rank(units_[i]).first == 2)) continue;
      if (best == units_.size() || rank(units_[i]) < rank(units_[best])) best = i;
    }
    if (best == units_.size()) return;  // only fetches in flight hold room (bounded by their count)
    Evict(best, units_[best].len == len ? spare : nullptr, spare_name);
  }
}

std::shared_ptr<UrlSource::BlockFile> UrlSource::Acquire(size_t u) const {
  std::unique_lock<std::mutex> l(mu_);
  Unit& unit = units_[u];
  while (true) {
    if (unit.file) {
      std::shared_ptr<BlockFile> file = unit.file;
      unit.last_use = ++tick_;
      // A hinted block stays hinted until the plan releases it (DontNeed): quasi_random reads a block
      // across a window of batches, and evicting it after its first read fetched it again.
      unit.released = 0;
      if (unit.verified) return file;
      l.unlock();
      // A block file from an earlier run: checked once before use, like a downloaded one.
      std::vector<uint8_t> bytes(unit.len);
      const bool ok = ReadAll(file->fd, bytes.data(), unit.len, 0) && CheckBytes(u, bytes.data()).empty();
      l.lock();
      if (ok) {
        if (unit.file == file) unit.verified = true;
        from_cache_.fetch_add(1, std::memory_order_relaxed);
        return file;
      }
      if (unit.file == file) Evict(u);  // damaged in the cache: fetch it again
      continue;
    }
    if (!unit.fetch || (unit.fetch->done && unit.fetch->error.empty())) unit.fetch = std::make_shared<Fetch>();
    std::shared_ptr<Fetch> f = unit.fetch;
    if (!f->started && !f->done) {
      urgent_.push_back(u);
      work_cv_.notify_one();
    }
    cv_.wait(l, [&] { return f->done; });
    if (!f->error.empty()) {
      if (unit.fetch == f) unit.fetch.reset();  // a later read tries afresh
      throw Error(f->error);
    }
    unit.last_use = ++tick_;
    return f->file;  // even if evicted meanwhile: the descriptor stays valid
  }
}

const uint8_t* UrlSource::Read(uint64_t off, size_t n, std::vector<uint8_t>* scratch) const {
  CheckRange(off, n);
  if (off + n <= head_len_) return head_page_.data() + off;
  if (off >= tail_off_) return tail_.data() + (off - tail_off_);
  scratch->resize(n);  // exactly n: callers may take the vector as the bytes read
  uint8_t* out = scratch->data();
  uint64_t pos = off;
  const uint64_t end = off + n;
  while (pos < end) {
    if (pos < head_len_) {
      const uint64_t k = std::min(end, head_len_) - pos;
      std::memcpy(out + (pos - off), head_page_.data() + pos, k);
      pos += k;
    } else if (pos >= tail_off_) {
      std::memcpy(out + (pos - off), tail_.data() + (pos - tail_off_), end - pos);
      pos = end;
    } else {
      const size_t u = UnitAt(pos);
      const Unit& unit = units_[u];
      const uint64_t k = std::min(end, unit.off + unit.len) - pos;
      std::shared_ptr<BlockFile> file = Acquire(u);
      if (file->map) std::memcpy(out + (pos - off), file->map + (pos - unit.off), k);
      else if (!ReadAll(file->fd, out + (pos - off), k, pos - unit.off))
        throw Error(name_ + ": " + What(u) + ": cannot read its copy in the cache directory " + dir_ + " (" + std::strerror(errno) + ")");
      pos += k;
    }
  }
  return out;
}

const uint8_t* UrlSource::ReadHeld(uint64_t off, size_t n, format::ReadBuffer* buf) const {
  CheckRange(off, n);
  buf->hold.reset();  // before Acquire: the block it held may be recycled again
  if (n && off >= head_len_ && off < tail_off_) {
    const size_t u = UnitAt(off);
    const Unit& unit = units_[u];
    if (off + n <= unit.off + unit.len) {
      std::shared_ptr<BlockFile> file = Acquire(u);
      if (file->map) {
        // In place: the hold keeps the file's mapping, and keeps it from being recycled (Evict).
        const uint8_t* p = file->map + (off - unit.off);
        buf->hold = std::move(file);
        return p;
      }
    }
  }
  return Read(off, n, &buf->scratch);
}

void UrlSource::WillNeed(uint64_t off, uint64_t n) const {
  if (n == 0 || off + n <= head_len_ || off >= tail_off_) return;
  std::lock_guard<std::mutex> l(mu_);
  for (size_t u = UnitAt(std::max<uint64_t>(off, head_len_)); u < units_.size() && units_[u].off < off + n; ++u) {
    Unit& unit = units_[u];
    unit.hint = ++hint_seq_;
    unit.released = 0;
    if (unit.file || (unit.fetch && !unit.fetch->done)) continue;
    unit.fetch = std::make_shared<Fetch>();
    ahead_.push_back(u);
  }
  work_cv_.notify_all();
}

void UrlSource::DontNeed(uint64_t off, uint64_t n) const {
  if (n == 0 || off + n <= head_len_ || off >= tail_off_) return;
  std::lock_guard<std::mutex> l(mu_);
  for (size_t u = UnitAt(std::max<uint64_t>(off, head_len_)); u < units_.size() && units_[u].off < off + n; ++u) {
    units_[u].hint = 0;
    if (units_[u].file && !units_[u].released) units_[u].released = ++release_seq_;  // the first release is its age
  }
  work_cv_.notify_all();  // room for a prefetch that waits
}

bool UrlSource::Resident(uint64_t off, uint64_t n) const {
  if (off + n <= head_len_ || off >= tail_off_) return true;
  std::lock_guard<std::mutex> l(mu_);
  for (size_t u = UnitAt(std::max<uint64_t>(off, head_len_)); u < units_.size() && units_[u].off < off + n; ++u)
    if (!units_[u].file) return false;
  return true;
}

namespace {

// A block's bytes written to its cache file as they arrive, hashed on the way (the piece is still in
// the processor's cache) and its padding checked for zeros: no copy of the block in memory.
class BlockSink : public Sink {
 public:
  // `map`: the file's writable mapping of `len` bytes, or null (pwrite). `hash`: false where the
  // block has no checksum (FFCV's pages).
  BlockSink(int fd, uint64_t content, uint8_t* map, uint64_t len, bool hash) : fd_(fd), content_(content), map_(map), hash_on_(hash) {
    // Every page made writable in one call, which reports a failure (a full disk on a file system
    // that allocates on write) as an error where a store would raise SIGBUS.
    if (map_ && ::madvise(map_, len, MADV_POPULATE_WRITE) != 0) map_ = nullptr;
  }
  void Begin() override {
    hash_.Reset();
    padding_zero_ = true;
    error_ = 0;
  }
  bool Write(uint64_t at, const uint8_t* p, size_t n) override {
    const size_t hashed = at < content_ ? size_t(std::min<uint64_t>(n, content_ - at)) : 0;
    if (hash_on_) hash_.Update(p, hashed);
    if (hashed < n && !AllZero(p + hashed, n - hashed)) padding_zero_ = false;
    if (map_) {
      std::memcpy(map_ + at, p, n);  // the transfer never passes the block's length (HttpClient stops it)
      return true;
    }
    for (size_t done = 0; done < n;) {
      const ssize_t w = ::pwrite(fd_, p + done, n - done, off_t(at + done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        error_ = w < 0 ? errno : EIO;
        return false;
      }
      done += size_t(w);
    }
    return true;
  }
  uint64_t checksum() const { return hash_.Digest(); }
  bool padding_zero() const { return padding_zero_; }
  int error() const { return error_; }

 private:
  int fd_;
  uint64_t content_;
  uint8_t* map_;
  bool hash_on_;
  ChecksumStream hash_;
  bool padding_zero_ = true;
  int error_ = 0;
};

}  // namespace

// Bytes the cache folder could free for a prefetch without dropping a block the plan still wants:
// released blocks and blocks never hinted. mu_ held.
bool UrlSource::RoomForPrefetch(uint64_t len) const {
  if (used_ + len <= opt_.budget) return true;
  uint64_t free = opt_.budget >= used_ ? opt_.budget - used_ : 0;
  for (const Unit& x : units_)
    if (x.file && (x.released || !x.hint) && (free += x.len) >= len) return true;
  return false;
}

void UrlSource::FetchLoop(int id) {
  HttpClient client(opt_.http);
  uint64_t seen_requests = 0, seen_bytes = 0;
  std::unique_lock<std::mutex> l(mu_);
  // A prefetch waits until the cache folder has room for it without evicting a block the plan still
  // wants: evicting one (fetched ahead, not yet read) for another fetches it twice when the budget is
  // below the ring's blocks. A block a reader waits for takes room from any.
  auto ahead_ready = [&] {
    while (!ahead_.empty()) {
      const Unit& x = units_[ahead_.front()];
      if (x.fetch && !x.fetch->started && !x.fetch->done && !x.file) return RoomForPrefetch(x.len);
      ahead_.pop_front();  // fetched meanwhile, or taken as urgent
    }
    return false;
  };
  while (true) {
    work_cv_.wait(l, [&] { return stop_ || !urgent_.empty() || ahead_ready(); });
    if (stop_) return;
    const bool urgent = !urgent_.empty();
    std::deque<size_t>& q = urgent ? urgent_ : ahead_;
    const size_t u = q.front();
    q.pop_front();
    std::shared_ptr<Fetch> f = units_[u].fetch;
    if (!f || f->started || f->done || units_[u].file) continue;
    f->started = true;
    const Unit unit = units_[u];  // its geometry; the fields this thread uses do not change
    const std::string path = BlockPath(u), tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(id);
    // Its room in the cache folder is taken before the bytes arrive (they go straight to the file);
    // the number of fetchers leaves room for one block beside theirs.
    std::shared_ptr<BlockFile> file;
    EvictFor(unit.len, u, &file, tmp, urgent);
    used_ += unit.len;
    l.unlock();
    std::string error;
    try {
      const bool recycled = file != nullptr;
      if (!recycled) {
        file = std::make_shared<BlockFile>();
        file->fd = ::open(tmp.c_str(), O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0644);
      }
      auto cannot_write = [&](int why) {
        ::unlink(tmp.c_str());
        return Error(name_ + ": " + What(u) + ": cannot write it to the cache directory " + dir_ + " (" + std::strerror(why) +
                     (why == ENOSPC || why == EDQUOT ? "): the disk is full: free space there, lower cache_budget or set cache_dir elsewhere"
                                                     : ")"));
      };
      if (file->fd < 0) throw cannot_write(errno);
      BlockSink sink(file->fd, unit.content, recycled ? file->writable : nullptr, unit.len, !ffcv_);
      HttpReply r;
      try {
        r = client.Get(url_, unit.off, unit.len, etag_, What(u), &sink, opt_.sign, name_);
      } catch (const Error&) {
        if (sink.error()) throw cannot_write(sink.error());
        ::unlink(tmp.c_str());
        throw;
      }
      // Checked before the file takes the block's name: no reader sees a byte of a wrong block.
      std::string why;
      if (!etag_.empty() && !r.etag.empty() && r.etag != etag_)
        why = "the file changed on the server (ETag " + etag_ + " when opened, now " + r.etag + ")";
      else if (!ffcv_ && sink.checksum() != unit.checksum)
        why = "checksum mismatch after download (the file changed on the server, or the bytes were damaged on the way); its bytes are not used";
      else if (!sink.padding_zero())
        why = "padding after the block is not zero after download (the file changed on the server, or the bytes were damaged on the way); "
              "its bytes are not used";
      if (!why.empty()) {
        ::unlink(tmp.c_str());
        throw Error(name_ + ": " + What(u) + ": " + why);
      }
      // Shared from here on: another process that finds the file may lock it too.
      if (::flock(file->fd, LOCK_SH) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0) throw cannot_write(errno);
      file->ours = true;
      if (!recycled) file->Map(unit.len, /*write=*/mapped_writes_);
      if (recycled) recycled_.fetch_add(1, std::memory_order_relaxed);
      fetched_.fetch_add(1, std::memory_order_relaxed);
    } catch (const std::exception& e) {
      error = e.what();
    }
    requests_.fetch_add(client.requests() - seen_requests, std::memory_order_relaxed);
    bytes_.fetch_add(client.bytes() - seen_bytes, std::memory_order_relaxed);
    seen_requests = client.requests();
    seen_bytes = client.bytes();
    l.lock();
    if (error.empty()) {
      units_[u].file = file;
      units_[u].verified = true;
      units_[u].last_use = ++tick_;
      f->file = file;
    } else {
      used_ -= unit.len;
      f->error = error;
    }
    f->done = true;
    cv_.notify_all();
    work_cv_.notify_all();  // room may have come free for a waiting prefetch
  }
}

StreamCounters UrlSource::counters() const {
  StreamCounters c;
  c.requests = open_requests_ + requests_.load();
  c.bytes_fetched = open_bytes_ + bytes_.load();
  c.blocks_fetched = fetched_.load();
  c.blocks_from_cache = from_cache_.load();
  c.evicted = evicted_.load();
  c.recycled = recycled_.load();
  return c;
}

}  // namespace internal

using internal::UrlSource;

std::unique_ptr<format::ByteSource> OpenUrlSource(const std::string& url, const StreamOptions& options) {
  return std::make_unique<UrlSource>(url, options);
}

StreamCounters CountersOf(const format::ByteSource& src) {
  if (auto* u = dynamic_cast<const UrlSource*>(&src)) return u->counters();
  return {};
}

}  // namespace dsc::stream
