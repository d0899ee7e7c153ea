#include "writer/merge.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>

#include "format/error.h"
#include "format/file_view.h"
#include "format/optional.h"
#include "kernels/jpeg_codec.h"
#include "writer/atomic_file.h"
#include "writer/file_builder.h"

namespace dsc::writer {

namespace {

// A part, mapped read-only (the writer has no reader to borrow one from).
class MappedPart : public format::ByteSource {
 public:
  explicit MappedPart(const std::string& path) : name_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw Error(path + ": not a regular file");
    }
    size_ = uint64_t(st.st_size);
    if (size_) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) {
        const int e = errno;
        ::close(fd);
        throw Error(path + ": mmap failed: " + std::strerror(e));
      }
      data_ = static_cast<const uint8_t*>(p);
      ::madvise(const_cast<uint8_t*>(data_), size_, MADV_SEQUENTIAL);
    }
    ::close(fd);
  }
  ~MappedPart() override {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
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

struct Part {
  std::string path;
  std::unique_ptr<MappedPart> src;
  std::unique_ptr<format::FileView> view;
  uint32_t index = 0, count = 0;
  std::string options;  // build options without the shard line
};

// "shard=I/N" out of the build options; the rest returned in *rest.
bool TakeShard(const std::string& options, uint32_t* index, uint32_t* count, std::string* rest) {
  bool found = false;
  rest->clear();
  size_t start = 0;
  for (size_t nl; (nl = options.find('\n', start)) != std::string::npos; start = nl + 1) {
    const std::string line = options.substr(start, nl + 1 - start);
    if (line.rfind("shard=", 0) == 0) {
      unsigned long i = 0, n = 0;
      if (std::sscanf(line.c_str(), "shard=%lu/%lu", &i, &n) == 2 && n > 0 && i < n) {
        *index = uint32_t(i);
        *count = uint32_t(n);
        found = true;
      }
      continue;
    }
    *rest += line;
  }
  return found;
}

bool SameFields(const format::Meta& a, const format::Meta& b) {
  if (a.fields.size() != b.fields.size()) return false;
  for (size_t i = 0; i < a.fields.size(); ++i)
    if (a.fields[i].type != b.fields[i].type || a.fields[i].name != b.fields[i].name || a.fields[i].classes != b.fields[i].classes)
      return false;
  return true;
}

void AddRestart(const format::RestartStats& p, std::optional<format::RestartStats>* sum) {
  if (!*sum) {
    *sum = p;
    return;
  }
  format::RestartStats& s = **sum;
  s.images += p.images;
  s.transcoded += p.transcoded;
  s.reencoded += p.reencoded;
  s.whole_row += p.whole_row;
  s.untouched += p.untouched;
  for (const auto& iv : p.intervals) {
    auto it = std::lower_bound(s.intervals.begin(), s.intervals.end(), iv.mcus,
                               [](const format::RestartStats::Interval& x, uint32_t m) { return x.mcus < m; });
    if (it == s.intervals.end() || it->mcus != iv.mcus) it = s.intervals.insert(it, {iv.mcus, 0});
    it->images += iv.images;
  }
}

}  // namespace

MergeReport Merge(const std::vector<std::string>& paths, const std::string& out) {
  const auto t0 = std::chrono::steady_clock::now();
  if (paths.empty()) throw OptionError("dsc merge needs the parts to join");
  std::vector<Part> parts(paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    Part& p = parts[i];
    p.path = paths[i];
    p.src = std::make_unique<MappedPart>(p.path);
    p.view = format::FileView::Open(p.src.get());
    if (!TakeShard(p.view->meta().build_options, &p.index, &p.count, &p.options))
      throw Error(p.path + ": not a part of a split build (its build options have no shard=I/N: build it with dsc build --shard I/N)");
  }
  std::sort(parts.begin(), parts.end(), [](const Part& a, const Part& b) { return a.index < b.index; });
  const Part& first = parts[0];
  for (size_t i = 0; i < parts.size(); ++i) {
    const Part& p = parts[i];
    if (p.count != first.count)
      throw Error(p.path + ": part " + std::to_string(p.index) + " of " + std::to_string(p.count) + ", but " + first.path + " is of " +
                  std::to_string(first.count));
    if (i > 0 && p.index == parts[i - 1].index)
      throw Error(p.path + ": part " + std::to_string(p.index) + " given twice (also " + parts[i - 1].path + ")");
    if (p.options != first.options || p.view->header().block_size != first.view->header().block_size)
      throw Error(p.path + ": built with other options than " + first.path + "; parts must come from one build command");
    if (!SameFields(p.view->meta(), first.view->meta()))
      throw Error(p.path + ": its fields or class names differ from " + first.path + "'s: parts of different sources");
  }
  for (uint32_t k = 0; k < first.count; ++k)
    if (k >= parts.size() || parts[k].index != k)
      throw Error("part " + std::to_string(k) + " of " + std::to_string(first.count) + " is missing (given: " +
                  std::to_string(parts.size()) + " parts)");

  const bool share = first.options.find("jpeg_tables=shared\n") != std::string::npos;
  AtomicFile file(out);
  FileBuilder builder(&file, first.view->header().block_size, share);
  Encoded enc;
  std::vector<uint8_t> scratch;
  std::optional<format::RestartStats> restart;
  uint64_t skipped = 0;
  for (const Part& p : parts) {
    const format::FileView& v = *p.view;
    for (size_t b = 0; b < v.block_count(); ++b) v.CheckBlock(b);  // a damaged part never reaches the output
    for (uint64_t i = 0; i < v.sample_count(); ++i) {
      const format::IndexEntry e = v.entry(i);
      const uint8_t* body = p.src->Read(e.offset, e.size, &scratch);
      enc.payload.clear();
      if (e.jpeg_table) {
        const std::string& t = v.jpeg_table(e.jpeg_table);
        enc.payload.insert(enc.payload.end(), t.begin(), t.end());
      }
      enc.payload.insert(enc.payload.end(), body, body + e.size);
      enc.width = e.width;
      enc.height = e.height;
      enc.encoding = e.encoding;
      enc.channels = e.channels;
      // What the encoder computed for this payload: the builder shares table sets by it.
      enc.jpeg_prefix = e.encoding == uint8_t(format::Encoding::kJpeg) ? kernels::JpegPrefixLength(enc.payload.data(), enc.payload.size()) : 0;
      builder.Add(enc, e.label);
    }
    skipped += v.meta().skipped_count;
    if (v.restart()) AddRestart(*v.restart(), &restart);
  }
  format::Meta meta = first.view->meta();
  meta.build_options = first.options;
  meta.skipped_count = skipped;
  meta.jpeg_tables.clear();  // the builder's, gathered as one build gathers them
  if (restart && restart->images > 0) builder.AddOptional(format::kRestartSection, format::EncodeRestartStats(*restart));
  MergeReport rep;
  rep.file_size = builder.Finish(meta);
  file.Commit();
  rep.samples = builder.samples();
  rep.parts = parts.size();
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace dsc::writer
