// WebDataset tar shards as a build source: members grouped by key into samples (docs: README,
// "WebDataset shards"), shards in name order, members in tar order.
#ifdef DSC_HAVE_LIBARCHIVE
#include <archive.h>
#include <archive_entry.h>
#endif

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>

#include "format/error.h"
#include "writer/source.h"

namespace dsc::writer {

namespace fs = std::filesystem;

bool IsWebDataset(const std::string& path, const std::string& format) {
  if (format == "wds") return true;
  if (format != "auto") return false;
  std::error_code ec;
  const std::string n = fs::path(path).filename().string();
  return fs::is_regular_file(path, ec) && n.size() > 4 && n.compare(n.size() - 4, 4, ".tar") == 0;
}

#ifndef DSC_HAVE_LIBARCHIVE
std::unique_ptr<Source> OpenWebDataset(const std::string& path, const std::string&, const std::string&, uint64_t) {
  throw Error(path + ": WebDataset shards need libarchive, and this dsc was built without it (install libarchive-dev and rebuild)");
}
#else
namespace {

struct ArchiveCloser {
  void operator()(archive* a) const { archive_read_free(a); }
};
using ArchivePtr = std::unique_ptr<archive, ArchiveCloser>;

ArchivePtr OpenTar(const std::string& path) {
  ArchivePtr a(archive_read_new());
  archive_read_support_format_tar(a.get());
  archive_read_support_filter_all(a.get());  // .tar.gz, .tar.zst, ... read front to back
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 20) != ARCHIVE_OK)
    throw Error(path + ": cannot open as a tar shard: " + archive_error_string(a.get()));
  return a;
}

// "dir/abc.seg.png" -> key "dir/abc", extension "seg.png" (WebDataset's rule: the first dot of the
// file name, not of the folders).
void SplitKey(const std::string& name, std::string* key, std::string* ext) {
  const size_t slash = name.rfind('/');
  const size_t dot = name.find('.', slash == std::string::npos ? 0 : slash + 1);
  *key = dot == std::string::npos ? name : name.substr(0, dot);
  *ext = dot == std::string::npos ? "" : name.substr(dot + 1);
  std::transform(ext->begin(), ext->end(), ext->begin(), [](unsigned char c) { return char(std::tolower(c)); });
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

struct WdsSample {
  uint32_t shard = 0;
  uint64_t member = 0;  // ordinal of the image member in its shard
  uint64_t size = 0;
  int32_t label = 0;
  std::string where;    // "SHARD: KEY.EXT"
};

// One reader per shard, moved forward member by member: builds ask for samples in increasing order,
// so each shard is read front to back once (a request behind the cursor reopens it).
struct Cursor {
  std::mutex mu;
  ArchivePtr a;
  uint64_t next = 0;
};

class WebDatasetSource : public Source {
 public:
  WebDatasetSource(std::vector<std::string> shards, std::vector<WdsSample> samples, std::vector<std::string> ignored,
                   uint64_t max_file_size)
      : shards_(std::move(shards)), samples_(std::move(samples)), ignored_(std::move(ignored)), max_(max_file_size),
        cursors_(shards_.size()) {}
  std::string format() const override { return "wds"; }
  const std::vector<LabelField>& label_fields() const override { return fields_; }
  size_t size() const override { return samples_.size(); }
  std::vector<std::string> ignored() const override { return ignored_; }

  void Load(size_t i, SourceItem* out) const override {
    const WdsSample& s = samples_[i];
    out->where = s.where;
    out->is_pixels = false;
    out->label[0] = s.label;
    out->label[1] = 0;
    Cursor& c = cursors_[s.shard];
    std::lock_guard<std::mutex> l(c.mu);
    if (!c.a || c.next > s.member) {
      c.a = OpenTar(shards_[s.shard]);
      c.next = 0;
    }
    archive_entry* e = nullptr;
    for (;; ++c.next) {
      const int r = archive_read_next_header(c.a.get(), &e);
      if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
        c.a.reset();
        throw Error(s.where + ": the shard ended or failed before the member (" + std::string(r == ARCHIVE_EOF ? "end of archive" : "read error") +
                    "): it changed during the build");
      }
      if (c.next == s.member) break;
      archive_read_data_skip(c.a.get());
    }
    ++c.next;
    if (uint64_t(archive_entry_size(e)) != s.size) {
      c.a.reset();
      throw Error(s.where + ": changed during the build (" + std::to_string(s.size) + " bytes when listed)");
    }
    out->bytes.resize(s.size);
    size_t got = 0;
    while (got < s.size) {
      const la_ssize_t n = archive_read_data(c.a.get(), out->bytes.data() + got, s.size - got);
      if (n <= 0) {
        const std::string why = n < 0 ? archive_error_string(c.a.get()) : "truncated";
        c.a.reset();
        throw Error(s.where + ": cannot read: " + why);
      }
      got += size_t(n);
    }
  }

 private:
  std::vector<std::string> shards_;
  std::vector<WdsSample> samples_;
  std::vector<std::string> ignored_;
  uint64_t max_;
  std::vector<LabelField> fields_{{"label", {}}};
  mutable std::vector<Cursor> cursors_;
};

}  // namespace

std::unique_ptr<Source> OpenWebDataset(const std::string& path, const std::string& image_exts, const std::string& label_ext,
                                       uint64_t max_file_size) {
  std::vector<std::string> shards;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::directory_iterator(path, ec)) {
      const std::string n = e.path().filename().string();
      if (n.find(".tar") != std::string::npos && n[0] != '.') shards.push_back(e.path().string());
    }
    std::sort(shards.begin(), shards.end());
    if (shards.empty()) throw Error(path + ": no .tar shards in the folder");
  } else if (fs::is_regular_file(path, ec)) {
    shards.push_back(path);
  } else {
    throw Error(path + ": no such file or directory");
  }
  const std::vector<std::string> images = SplitList(image_exts);
  if (images.empty() || label_ext.empty()) throw OptionError("--wds-image and --wds-label need extensions (e.g. jpg,png and cls)");
  std::vector<WdsSample> samples;
  std::map<std::string, uint64_t> other;  // extensions left out, with counts
  for (uint32_t sh = 0; sh < shards.size(); ++sh) {
    ArchivePtr a = OpenTar(shards[sh]);
    archive_entry* e = nullptr;
    std::string cur_key;
    int image_rank = -1;  // index in `images` of the member taken for the current key
    bool has_label = false;
    WdsSample cur;
    auto finish = [&] {
      if (cur_key.empty()) return;
      const std::string where = shards[sh] + ": " + cur_key;
      if (image_rank < 0) throw Error(where + ": no image member (." + image_exts + ")");
      if (!has_label) throw Error(where + ": no label member (." + label_ext + ")");
      samples.push_back(cur);
    };
    for (uint64_t m = 0;; ++m) {
      const int r = archive_read_next_header(a.get(), &e);
      if (r == ARCHIVE_EOF) break;
      if (r != ARCHIVE_OK && r != ARCHIVE_WARN) throw Error(shards[sh] + ": member " + std::to_string(m) + ": " + archive_error_string(a.get()));
      const std::string name = archive_entry_pathname(e) ? archive_entry_pathname(e) : "";
      if (archive_entry_filetype(e) != AE_IFREG) {
        archive_read_data_skip(a.get());
        continue;
      }
      std::string key, ext;
      SplitKey(name, &key, &ext);
      if (key != cur_key) {
        finish();
        cur_key = key;
        cur = WdsSample();
        cur.shard = sh;
        image_rank = -1;
        has_label = false;
      }
      const auto img = std::find(images.begin(), images.end(), ext);
      if (img != images.end() && (image_rank < 0 || int(img - images.begin()) < image_rank)) {
        const uint64_t size = uint64_t(archive_entry_size(e));
        if (size > max_file_size)
          throw Error(shards[sh] + ": " + name + ": " + std::to_string(size) + " bytes, more than --max-file-size " + std::to_string(max_file_size));
        image_rank = int(img - images.begin());
        cur.member = m;
        cur.size = size;
        cur.where = shards[sh] + ": " + name;
        archive_read_data_skip(a.get());
      } else if (ext == label_ext) {
        char buf[64] = {0};
        const la_ssize_t n = archive_read_data(a.get(), buf, sizeof buf - 1);
        std::string text(buf, n > 0 ? size_t(n) : 0);
        while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
        char* end = nullptr;
        const long v = std::strtol(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0' || v < 0 || v > INT32_MAX)
          throw Error(shards[sh] + ": " + name + ": label '" + text + "' is not a non-negative integer");
        cur.label = int32_t(v);
        has_label = true;
        archive_read_data_skip(a.get());
      } else {
        ++other[ext];
        archive_read_data_skip(a.get());
      }
    }
    finish();
  }
  std::vector<std::string> ignored;
  for (const auto& [ext, n] : other) ignored.push_back(std::to_string(n) + " member(s) ." + ext + " (no field takes them)");
  return std::make_unique<WebDatasetSource>(std::move(shards), std::move(samples), std::move(ignored), max_file_size);
}
#endif  // DSC_HAVE_LIBARCHIVE

}  // namespace dsc::writer
