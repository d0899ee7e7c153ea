// UrlSource for FFCV's .beton files (stream/url_source.h's contract; docs/ffcv-format.md).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "format/bytes.h"
#include "format/checksum.h"
#include "format/error.h"
#include "format/ffcv.h"
#include "stream/url_source_internal.h"

namespace dsc::stream::internal {

// FFCV (docs/ffcv-format.md): the header, field descriptors and metadata table up to the first data
// page are one cached range, the allocation table to the end of the file another, and each data page a
// unit. FFCV has no checksums: the ETag keys the cache directory and every request carries If-Match,
// so a file replaced on the server is an error, never mixed with an old copy; without an ETag nothing
// cached by an earlier run is used.
void UrlSource::OpenFfcv(HttpClient* client) {
  namespace ffcv = format::ffcv;
  ffcv_ = true;
  reuse_ = !etag_.empty();
  // The key: the ETag (the server's version of the file) and the size, with the first page.
  const std::string key = etag_ + "/" + std::to_string(size_);
  MakeCacheDir("ffcv-" + Hex(Checksum(key.data(), key.size()) ^ Checksum(head_page_.data(), head_page_.size())));
  // The descriptors follow the 24-byte header (1041 bytes each): the first page holds those of 3 fields,
  // an earlier run's copy of the head all of them.
  if (const std::string cut = ffcv::Truncation(head_page_.data(), size_); !cut.empty()) throw Error(name_ + ": FFCV file: " + cut);
  const uint64_t fields = le::get16(head_page_.data() + 2);
  const uint64_t described = ffcv::kHeaderSize + ffcv::kDescriptorSize * fields;
  if (described > size_)
    throw Error(name_ + ": FFCV file: header: " + std::to_string(fields) + " field descriptors run past the end of the file (" +
                std::to_string(size_) + " bytes)");
  std::vector<uint8_t> head = head_page_;
  if (described > head.size()) {
    const int fd = reuse_ ? ::open((dir_ + "/head").c_str(), O_RDONLY | O_CLOEXEC) : -1;
    std::vector<uint8_t> cached(described);
    if (fd >= 0 && ReadAll(fd, cached.data(), described, 0) && std::memcmp(cached.data(), head.data(), head.size()) == 0) {
      head = std::move(cached);
    } else {
      std::vector<uint8_t> more;
      client->Get(url_, head.size(), described - head.size(), etag_, "field descriptors", &more, opt_.sign, name_);
      head.insert(head.end(), more.begin(), more.end());
    }
    if (fd >= 0) ::close(fd);
  }
  // The layout, from those bytes alone (checked as FFCV's reader checks it).
  class Prefix : public format::ByteSource {
   public:
    Prefix(const std::string& name, const std::vector<uint8_t>& b, uint64_t size) : name_(name), b_(b), size_(size) {}
    const std::string& name() const override { return name_; }
    uint64_t size() const override { return size_; }
    const uint8_t* Read(uint64_t off, size_t n, std::vector<uint8_t>*) const override {
      CheckRange(off, n);
      if (off + n > b_.size()) throw Error(name_ + ": FFCV file: read past its field descriptors while placing its sections");
      return b_.data() + off;
    }

   private:
    const std::string& name_;
    const std::vector<uint8_t>& b_;
    uint64_t size_;
  };
  const Prefix prefix(name_, head, size_);
  const ffcv::Layout lay = ffcv::File::ReadLayout(&prefix);
  tail_off_ = lay.alloc_table;
  // The first page fetched may reach into the allocation table (a file with few or no pages).
  head_len_ = std::min(std::max<uint64_t>(lay.metadata_end, head_page_.size()), tail_off_);
  if (head_len_ > head_page_.size()) {
    CachedRange(client, "head", 0, head_len_, "header, field descriptors and metadata table", &head_page_,
                [&](const std::vector<uint8_t>& h) { return std::memcmp(h.data(), head.data(), described) == 0; },
                "the FFCV file changed on the server while being opened (its header or field descriptors differ)", head);
  }
  if (size_ > tail_off_) {  // already fetched, in part or whole, when the first page reached into it
    const std::vector<uint8_t> known(head_page_.begin() + std::min<uint64_t>(tail_off_, head_page_.size()), head_page_.end());
    CachedRange(client, "tail", tail_off_, size_ - tail_off_, "allocation table", &tail_, {}, "", known);
  }
  // Units tile [head_len_, tail_off_): the padding before the first page (fetched only if read), then
  // the pages.
  const uint64_t first = lay.pages ? lay.data_start : tail_off_;
  if (head_len_ < first) {
    Unit pad;
    pad.off = head_len_;
    pad.len = pad.content = first - head_len_;
    units_.push_back(pad);
    first_page_ = 1;
  }
  for (uint64_t p = 0; p < lay.pages; ++p) {
    Unit page;
    page.off = lay.data_start + p * lay.page_size;
    page.len = page.content = lay.page_size;
    units_.push_back(page);
  }
}

}  // namespace dsc::stream::internal
