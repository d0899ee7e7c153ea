// WebDataset shards (tar files whose consecutive members sharing a key form a sample) as a build
// source, read with libarchive (plain or compressed tar). The shards are listed once at open (headers
// only); a sample is then read on demand by a per-thread reader that moves forward through its shard,
// so memory stays at one member and random order within a window costs at most a re-read. Shards
// whose samples carry KEY.json or further images (KEY.NAME.jpg) are written with typed fields
// (BuildWdsTyped): the JSON as text, each NAME an image field.
#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "format/error.h"
#include "format/fields.h"
#include "writer/source.h"
#include "writer/source_wds.h"
#include "writer/typed_build.h"
#include "writer/writer.h"

namespace dsc::writer {

namespace fs = std::filesystem;

namespace {

constexpr const char* kNotShards =
    "an archive, not a folder or a manifest, and not WebDataset shards (KEY.jpg beside KEY.cls): extract it "
    "(e.g. tar -xf) and pass the folder it holds";

struct ArchiveCloser {
  void operator()(archive* a) const { archive_read_free(a); }
};
using ArchivePtr = std::unique_ptr<archive, ArchiveCloser>;

ArchivePtr OpenArchive(const std::string& path) {
  ArchivePtr a(archive_read_new());
  if (!a) throw EnvironmentError(path + ": out of memory opening the archive");
  archive_read_support_filter_all(a.get());
  archive_read_support_format_tar(a.get());
  archive_read_support_format_gnutar(a.get());
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 16) != ARCHIVE_OK)
    throw Error(path + ": " + kNotShards + " (libarchive: " + archive_error_string(a.get()) + ")");
  return a;
}

// WebDataset's key rule: the member path up to the first '.' of its file name; the rest is the
// extension, lower-cased ("a/b/x.seg.PNG" -> key "a/b/x", extension "seg.png").
void SplitKey(const std::string& path, std::string* key, std::string* ext) {
  const size_t slash = path.rfind('/');
  const size_t dot = path.find('.', slash == std::string::npos ? 0 : slash + 1);
  *key = path.substr(0, dot);
  *ext = dot == std::string::npos ? "" : path.substr(dot + 1);
  std::transform(ext->begin(), ext->end(), ext->begin(), [](unsigned char c) { return char(std::tolower(c)); });
}

// "NAME.jpg", "NAME.jpeg", "NAME.png" (NAME not empty): a further image's member extension.
bool IsFurtherImageExt(const std::string& ext) {
  const size_t dot = ext.rfind('.');
  if (dot == std::string::npos || dot == 0) return false;
  const std::string last = ext.substr(dot + 1);
  return last == "jpg" || last == "jpeg" || last == "png";
}

struct WdsSample {
  uint32_t shard = 0;
  uint32_t image_member = 0, label_member = 0;  // member ordinals in the shard
  uint32_t text_member = UINT32_MAX;            // KEY.json, if any
  std::map<std::string, uint32_t> images;       // KEY.NAME.jpg/.jpeg/.png: further images by NAME
  std::string key;
};

class WdsSource;


// One thread's reader: an open shard and the ordinal of the member it will read next.
struct Cursor {
  const WdsSource* owner = nullptr;
  uint32_t shard = UINT32_MAX;
  uint32_t next_member = 0;
  ArchivePtr a;
};
thread_local Cursor t_cursor;

class WdsSource : public Source {
 public:
  WdsSource(std::vector<std::string> shards, uint64_t max_file_size)
      : shards_(std::move(shards)), max_(max_file_size) {
    for (uint32_t s = 0; s < shards_.size(); ++s) List(s);
    if (samples_.empty()) throw Error(shards_.front() + ": no samples (members with an image extension)");
    // A text field holds a value in every sample: once one sample has its .json, all must.
    if (has_text_)
      for (const WdsSample& x : samples_)
        if (x.text_member == UINT32_MAX)
          throw Error(shards_[x.shard] + ": " + x.key + ": no .json member, while other samples have one (their JSON is stored as "
                      "the text field 'json', which every sample needs)");
    // Further images (KEY.NAME.jpg): a field each, which every sample needs too.
    for (const WdsSample& x : samples_)
      for (const auto& kv : x.images) image_names_.insert(kv.first);
    for (const WdsSample& x : samples_)
      for (const std::string& n : image_names_)
        if (!x.images.count(n))
          throw Error(shards_[x.shard] + ": " + x.key + ": no ." + n + ".jpg/.jpeg/.png member, while other samples have one (stored "
                      "as the image field '" + n + "', which every sample needs)");
    labels_.push_back({"label", {}});
  }
  ~WdsSource() override {
    if (t_cursor.owner == this) t_cursor = Cursor();
  }

  std::string format() const override { return "webdataset"; }
  const std::vector<LabelField>& label_fields() const override { return labels_; }
  size_t size() const override { return samples_.size(); }
  std::vector<std::string> ignored() const override { return ignored_; }

  void Load(size_t i, SourceItem* out) const override { Read(i, out, nullptr); }
  bool has_text() const { return has_text_; }
  bool has_images() const { return !image_names_.empty(); }
  BuildReport BuildTyped(const std::string& out, const BuildOptions& o) const;

 private:
  // The sample's image and class, with `text` its .json member's bytes, with `images` its further
  // images' bytes (in image_names_ order).
  void Read(size_t i, SourceItem* out, std::string* text, std::vector<std::vector<uint8_t>>* images = nullptr) const {
    const WdsSample& s = samples_[i];
    out->where = shards_[s.shard] + ": " + s.key;
    out->is_pixels = false;
    Cursor& c = t_cursor;
    if (c.owner != this || c.shard != s.shard || c.next_member > s.image_member) {
      c.a.reset();  // before opening another: one open shard per thread
      c.a = OpenArchive(shards_[s.shard]);
      c.owner = this;
      c.shard = s.shard;
      c.next_member = 0;
    }
    std::string label_text;
    const bool want_text = text && s.text_member != UINT32_MAX;
    uint32_t last = std::max({s.image_member, s.label_member, want_text ? s.text_member : 0u});
    if (images) {
      images->assign(s.images.size(), {});
      for (const auto& kv : s.images) last = std::max(last, kv.second);
    }
    while (c.next_member <= last) {
      archive_entry* e = nullptr;
      const int r = archive_read_next_header(c.a.get(), &e);
      if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
        c.shard = UINT32_MAX;
        throw Error(out->where + ": the shard changed or is damaged since it was listed: " +
                    archive_error_string(c.a.get()));
      }
      const uint32_t m = c.next_member++;
      size_t further = SIZE_MAX;  // the further image this member is, if any (s.images is sorted by name)
      if (images) {
        size_t k = 0;
        for (auto it = s.images.begin(); it != s.images.end(); ++it, ++k)
          if (it->second == m) further = k;
      }
      if (m != s.image_member && m != s.label_member && !(want_text && m == s.text_member) && further == SIZE_MAX)
        continue;  // libarchive skips the data
      const int64_t n = archive_entry_size(e);
      if (n < 0 || uint64_t(n) > max_)
        throw Error(out->where + ": member " + archive_entry_pathname(e) + " has " + std::to_string(n) +
                    " bytes, more than --max-file-size " + std::to_string(max_));
      std::vector<uint8_t> buf(static_cast<size_t>(n));
      const la_ssize_t got = archive_read_data(c.a.get(), buf.data(), buf.size());
      if (got != la_ssize_t(n)) {
        c.shard = UINT32_MAX;
        throw Error(out->where + ": member " + archive_entry_pathname(e) + " is truncated");
      }
      if (m == s.image_member) out->bytes = std::move(buf);
      else if (m == s.label_member) label_text.assign(buf.begin(), buf.end());
      else if (further != SIZE_MAX) (*images)[further] = std::move(buf);
      else text->assign(buf.begin(), buf.end());
    }
    // A .cls member holds the class as decimal text (WebDataset's convention), maybe with a newline.
    while (!label_text.empty() && std::isspace(static_cast<unsigned char>(label_text.back()))) label_text.pop_back();
    char* end = nullptr;
    const long v = std::strtol(label_text.c_str(), &end, 10);
    if (label_text.empty() || *end != '\0' || v < 0 || v > INT32_MAX)
      throw Error(out->where + ".cls: '" + label_text.substr(0, 40) + "' is not a non-negative integer class");
    out->label[0] = int32_t(v);
    out->label[1] = 0;
  }

  void List(uint32_t s) {
    const std::string& path = shards_[s];
    ArchivePtr a = OpenArchive(path);
    archive_entry* e = nullptr;
    uint32_t member = 0;
    WdsSample cur;
    bool open = false, has_image = false, has_label = false;
    std::set<std::string> dropped_exts;
    auto flush = [&] {
      if (!open) return;
      if (!has_image) ignored_.push_back(path + ": " + cur.key + " (no .jpg/.jpeg/.png member)");
      else if (!has_label && samples_.empty()) throw Error(path + ": " + kNotShards + " (" + cur.key + " has no .cls member)");
      else if (!has_label) throw Error(path + ": " + cur.key + ": no .cls member (the class)");
      else samples_.push_back(cur);
      open = has_image = has_label = false;
    };
    for (int r; (r = archive_read_next_header(a.get(), &e)) != ARCHIVE_EOF; ++member) {
      if (r != ARCHIVE_OK && r != ARCHIVE_WARN && member == 0)
        throw Error(path + ": " + kNotShards + " (libarchive: " + archive_error_string(a.get()) + ")");
      if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
        throw Error(path + ": damaged after member " + std::to_string(member) + ": " + archive_error_string(a.get()));
      if (member == UINT32_MAX) throw Error(path + ": too many members");
      const char* name = archive_entry_pathname(e);
      const std::string pathname = name ? name : "";
      if (archive_entry_filetype(e) == AE_IFDIR) continue;
      if (archive_entry_filetype(e) != AE_IFREG) {
        ignored_.push_back(path + ": " + pathname + " (not a regular file)");
        continue;
      }
      std::string key, ext;
      SplitKey(pathname, &key, &ext);
      if (!open || key != cur.key) {
        flush();
        cur = WdsSample();
        cur.shard = s;
        cur.key = key;
        open = true;
      }
      if (ext == "jpg" || ext == "jpeg" || ext == "png") {
        if (has_image) throw Error(path + ": " + key + ": two image members; one image per sample");
        cur.image_member = member;
        has_image = true;
      } else if (ext == "cls") {
        cur.label_member = member;
        has_label = true;
      } else if (IsFurtherImageExt(ext)) {  // KEY.NAME.jpg: a further image named NAME
        const std::string n = ext.substr(0, ext.rfind('.'));
        if (!cur.images.emplace(n, member).second) throw Error(path + ": " + key + ": two ." + n + " image members; one per sample");
      } else if (ext == "json") {
        if (cur.text_member != UINT32_MAX) throw Error(path + ": " + key + ": two .json members; one per sample");
        cur.text_member = member;
        has_text_ = true;
      } else {
        // Other members need a mapping to typed fields, which this source does not take yet: listed.
        ignored_.push_back(path + ": " + pathname + " (." + ext + " is not stored)");
      }
    }
    flush();
  }

  std::vector<std::string> shards_;
  uint64_t max_;
  std::vector<WdsSample> samples_;
  std::vector<LabelField> labels_;
  std::vector<std::string> ignored_;
  bool has_text_ = false;
  std::set<std::string> image_names_;  // further images' names, sorted (each sample's map has them all)
};

BuildReport WdsSource::BuildTyped(const std::string& out, const BuildOptions& o) const {
  const auto t0 = std::chrono::steady_clock::now();
  const size_t all = samples_.size();
  const ShardRange range = ShardOf(o, all);
  const size_t begin = range.begin, end = range.end;  // the same split as Build's
  BuildReport rep;
  rep.format = format();
  WriterOptions wo = TypedWriterOptions(o, format());
  if (o.skip_invalid) {
    auto log = o.log ? o.log : [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
    wo.on_skip = [&rep, log](const std::string& why) {
      log("skipped: " + why);
      ++rep.skipped;
    };
  }
  Schema schema = {dsc::ImageField("image"), dsc::LabelField("label")};
  if (has_text_) schema.push_back(dsc::TextField("json"));
  for (const std::string& n : image_names_) {
    if (n == "image" || n == "label" || n == "json") throw Error(shards_.front() + ": further image members ." + n + ".* take a name the build uses");
    schema.push_back(dsc::ImageField(n));
  }
  Writer w(out, schema, wo);
  if (o.shard_count) w.set_shard(o.shard_index, o.shard_count, all);
  SourceItem item;
  std::string text;
  std::vector<std::vector<uint8_t>> images;
  for (size_t i = begin; i < end; ++i) {
    Read(i, &item, has_text_ ? &text : nullptr, &images);
    // Checked here, so that the message names the shard and key (Add would name the output's sample).
    if (has_text_)
      if (const std::string why = format::ValueProblem(schema[2], 0, reinterpret_cast<const uint8_t*>(text.data()), text.size());
          !why.empty())
        throw Error(item.where + ".json: field 'json': " + why);
    Sample s;
    s.set_where(item.where);
    s.SetImage("image", std::move(item.bytes));
    s.SetLabel("label", item.label[0]);
    if (has_text_) s.SetText("json", std::move(text));
    size_t k = 0;
    for (const std::string& n : image_names_) s.SetImage(n, std::move(images[k++]));
    text.clear();
    w.Add(std::move(s));
    if (o.progress && ((i - begin) % 1024 == 0 || i + 1 == end))
      std::fprintf(stderr, "\r%zu/%zu samples", i + 1 - begin, end - begin);
  }
  if (o.progress) std::fputc('\n', stderr);
  CloseTypedBuild(&w, t0, &rep);
  return rep;
}

// "{000..123}" in a shard pattern, WebDataset's brace notation, zero padding kept.
std::vector<std::string> ExpandBraces(const std::string& spec) {
  const size_t open = spec.find('{');
  if (open == std::string::npos) return {spec};
  const size_t close = spec.find('}', open);
  const size_t dots = spec.find("..", open);
  if (close == std::string::npos || dots == std::string::npos || dots > close)
    throw OptionError(spec + ": a shard pattern's braces must read {FIRST..LAST}");
  const std::string a = spec.substr(open + 1, dots - open - 1), b = spec.substr(dots + 2, close - dots - 2);
  if (a.empty() || b.empty() || a.find_first_not_of("0123456789") != std::string::npos ||
      b.find_first_not_of("0123456789") != std::string::npos || a.size() > 9 || b.size() > 9)
    throw OptionError(spec + ": a shard pattern's braces must hold two numbers, {FIRST..LAST}");
  const long lo = std::stol(a), hi = std::stol(b);
  if (hi < lo || hi - lo > 1000000) throw OptionError(spec + ": a shard range must be ascending, at most 1000001 shards");
  std::vector<std::string> out;
  for (long v = lo; v <= hi; ++v) {
    std::string n = std::to_string(v);
    if (n.size() < a.size()) n.insert(0, a.size() - n.size(), '0');
    for (auto& rest : ExpandBraces(spec.substr(close + 1))) out.push_back(spec.substr(0, open) + n + rest);
  }
  return out;
}

}  // namespace

bool LooksLikeWebDataset(const std::string& path) {
  std::string n = fs::path(path).filename().string();
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  for (const char* ext : {".tar", ".tar.gz", ".tgz", ".tar.zst", ".tar.xz", ".tar.bz2"})
    if (n.size() > std::strlen(ext) && n.compare(n.size() - std::strlen(ext), std::string::npos, ext) == 0) return true;
  return path.find('{') != std::string::npos && path.find("..") != std::string::npos;
}

bool WdsNeedsTypedFields(const Source& src) {
  const auto* w = dynamic_cast<const WdsSource*>(&src);
  return w && (w->has_text() || w->has_images());
}

BuildReport BuildWdsTyped(const Source& src, const std::string& out, const BuildOptions& options) {
  return dynamic_cast<const WdsSource&>(src).BuildTyped(out, options);
}

std::unique_ptr<Source> OpenWebDataset(const std::string& spec, uint64_t max_file_size) {
  std::vector<std::string> shards;
  std::error_code ec;
  if (fs::is_directory(spec, ec)) {  // every tar shard in the folder, by name
    for (const auto& e : fs::directory_iterator(spec, ec))
      if (e.is_regular_file() && LooksLikeWebDataset(e.path().string())) shards.push_back(e.path().string());
    std::sort(shards.begin(), shards.end());
    if (shards.empty()) throw Error(spec + ": no .tar shards in the folder");
  } else {
    shards = ExpandBraces(spec);
  }
  for (const auto& s : shards)
    if (!fs::is_regular_file(s, ec)) throw Error(s + ": no such shard");
  return std::make_unique<WdsSource>(std::move(shards), max_file_size);
}

}  // namespace dsc::writer
