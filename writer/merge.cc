#include "writer/merge.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "format/byte_source.h"
#include "format/checksum.h"
#include "format/error.h"
#include "format/file_view.h"
#include "format/optional.h"
#include "kernels/jpeg_codec.h"
#include "writer/atomic_file.h"
#include "writer/build.h"
#include "writer/file_builder.h"

namespace dsc::writer {

namespace {

// A part, mapped read-only: merge reads each byte once, and payloads go from the page cache straight
// into the builder's block with no copy in between (and file-backed faults map pages in batches).
class PartSource : public format::ByteSource {
 public:
  explicit PartSource(const std::string& path) : name_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw Error(path + ": not a regular file");
    }
    size_ = uint64_t(st.st_size);
    if (size_ > 0) {
      void* m = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
      const int e = errno;
      ::close(fd);
      if (m == MAP_FAILED) throw Error(path + ": cannot map: " + std::strerror(e));
      data_ = static_cast<const uint8_t*>(m);
      ::madvise(m, size_, MADV_SEQUENTIAL);
    } else {
      ::close(fd);
    }
  }
  ~PartSource() override {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  const std::string& name() const override { return name_; }
  uint64_t size() const override { return size_; }
  // A part truncated while merging faults (SIGBUS) rather than returning an error: the parts are the
  // user's finished files, not files being written.
  const uint8_t* Read(uint64_t off, size_t n, std::vector<uint8_t>*) const override {
    CheckRange(off, n);
    return data_ + off;
  }
  const uint8_t* mapped() const override { return data_; }

 private:
  std::string name_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

struct Part {
  std::unique_ptr<PartSource> src;
  std::unique_ptr<format::FileView> view;
  uint32_t index = 0, count = 0;
  uint64_t source_samples = 0;
  std::string options;  // build_options without the shard line
};

// Splits build_options into the shard line's values and the rest.
void ReadShard(Part* p) {
  const std::string& all = p->view->meta().build_options;
  const std::string key = std::string(kShardKey) + "=";
  size_t start = 0;
  bool found = false;
  for (size_t nl; (nl = all.find('\n', start)) != std::string::npos; start = nl + 1) {
    const std::string line = all.substr(start, nl - start);
    if (line.compare(0, key.size(), key) != 0) {
      p->options += line + "\n";
      continue;
    }
    unsigned long long i = 0, n = 0, s = 0;
    char tail = 0;
    if (std::sscanf(line.c_str() + key.size(), "%llu/%llu of %llu%c", &i, &n, &s, &tail) != 3 || n == 0 || i >= n ||
        n > UINT32_MAX)
      throw Error(p->src->name() + ": meta: malformed shard line '" + line + "'");
    p->index = uint32_t(i);
    p->count = uint32_t(n);
    p->source_samples = s;
    found = true;
  }
  if (!found) throw Error(p->src->name() + ": not a part of a sharded build (built without --shard)");
}

bool SameFields(const format::Meta& a, const format::Meta& b) {
  if (a.fields.size() != b.fields.size()) return false;
  for (size_t i = 0; i < a.fields.size(); ++i)
    if (a.fields[i].type != b.fields[i].type || a.fields[i].name != b.fields[i].name ||
        a.fields[i].classes != b.fields[i].classes || a.fields[i].dtype != b.fields[i].dtype ||
        a.fields[i].dims != b.fields[i].dims)
      return false;
  return true;
}

// Sample s's typed-field values as the writer gave them to the builder: the fixed fields' row in
// schema order, then each variable field's bytes (read from the block the caller checked).
void ReadRow(const format::FileView& v, const format::FieldLayout& layout, uint64_t s, TypedRow* row) {
  row->fixed.clear();
  std::vector<uint8_t> scratch;
  for (int f : layout.fixed) {
    const uint8_t* p = v.FixedValue(size_t(f), s, &scratch);
    row->fixed.insert(row->fixed.end(), p, p + layout.width[size_t(f)]);
  }
  row->var.resize(layout.var.size());
  for (size_t k = 0; k < layout.var.size(); ++k) {
    const format::FileView::VarRef r = v.VarValue(size_t(layout.var[k]), s);
    const uint8_t* p = r.size ? v.source().Read(r.offset, r.size, &scratch) : nullptr;
    row->var[k].assign(p, p + r.size);
  }
}

// Sums the parts' restart sections into the one a whole build writes (mode, target and min_mcus come
// from the options, equal in every part).
void AddRestart(const format::RestartStats& r, format::RestartStats* total, bool* any) {
  if (!*any) {
    total->mode = r.mode;
    total->target = r.target;
    total->min_mcus = r.min_mcus;
    *any = true;
  }
  total->images += r.images;
  total->transcoded += r.transcoded;
  total->reencoded += r.reencoded;
  total->whole_row += r.whole_row;
  total->untouched += r.untouched;
  for (const auto& iv : r.intervals) {
    auto& v = total->intervals;
    auto it = std::lower_bound(v.begin(), v.end(), iv.mcus,
                               [](const format::RestartStats::Interval& a, uint32_t m) { return a.mcus < m; });
    if (it == v.end() || it->mcus != iv.mcus) it = v.insert(it, {iv.mcus, 0});
    it->images += iv.images;
  }
}

}  // namespace

MergeReport Merge(const std::vector<std::string>& paths, const std::string& out, const MergeOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (paths.empty()) throw OptionError("no parts to merge");
  std::vector<Part> parts(paths.size());
  for (size_t k = 0; k < paths.size(); ++k) {
    std::error_code ec;
    if (std::filesystem::exists(out, ec) && std::filesystem::equivalent(paths[k], out, ec))
      throw Error(out + ": is one of the parts; name another output file");
    parts[k].src = std::make_unique<PartSource>(paths[k]);
    parts[k].view = format::FileView::Open(parts[k].src.get());
    ReadShard(&parts[k]);
  }
  std::sort(parts.begin(), parts.end(), [](const Part& a, const Part& b) { return a.index < b.index; });
  const Part& first = parts.front();
  for (size_t k = 0; k < parts.size(); ++k) {
    const Part& p = parts[k];
    const std::string& name = p.src->name();
    if (p.count != first.count || p.source_samples != first.source_samples)
      throw Error(name + ": is part " + std::to_string(p.index) + " of " + std::to_string(p.count) + " of a source of " +
                  std::to_string(p.source_samples) + " samples, " + first.src->name() + " part of " +
                  std::to_string(first.count) + " of " + std::to_string(first.source_samples));
    if (k > 0 && p.index == parts[k - 1].index)
      throw Error(name + ": part " + std::to_string(p.index) + " is given twice (also " + parts[k - 1].src->name() + ")");
    if (p.options != first.options)
      throw Error(name + ": was built with other options than " + first.src->name() + " (dsc info shows them)");
    if (!SameFields(p.view->meta(), first.view->meta()))
      throw Error(name + ": its fields or class names differ from " + first.src->name() + "'s");
    if (p.view->header().block_size != first.view->header().block_size)
      throw Error(name + ": block size differs from " + first.src->name() + "'s");
  }
  if (parts.size() != first.count) {
    std::string missing;
    for (uint32_t i = 0, k = 0; i < first.count; ++i) {
      if (k < parts.size() && parts[k].index == i) {
        ++k;
        continue;
      }
      missing += (missing.empty() ? "" : ", ") + std::to_string(i);
      if (missing.size() > 60) {
        missing += ", ...";
        break;
      }
    }
    throw Error("merge needs all " + std::to_string(first.count) + " parts; missing part " + missing);
  }

  const bool share = first.options.find("jpeg_tables=shared\n") != std::string::npos;
  AtomicFile file(out);
  FileBuilder builder(&file, first.view->header().block_size, share);
  MergeReport rep;
  rep.parts = parts.size();
  format::RestartStats restart;
  bool any_restart = false;
  uint64_t skipped = 0, total = 0, done = 0;
  for (const Part& p : parts) total += p.view->sample_count();
  builder.Reserve(total);
  // Typed parts (format 1.2): each sample's columns row and variable values go back through the
  // builder with its payload, which lays them out as a one-machine build does.
  const bool typed = first.view->typed();
  const format::FieldLayout layout = format::FieldLayout::Of(first.view->meta());
  if (typed) builder.SetTyped(layout);
  TypedRow row;
  std::vector<uint8_t> block_bytes;
  Encoded enc;
  for (const Part& p : parts) {
    const format::FileView& v = *p.view;
    skipped += v.meta().skipped_count;
    if (v.restart()) AddRestart(*v.restart(), &restart, &any_restart);
    for (size_t b = 0; b < v.block_count(); ++b) {
      const format::BlockEntry& be = v.block(b);
      const uint8_t* data = v.source().Read(be.offset, be.size, &block_bytes);
      if (Checksum(data, be.size) != be.checksum)
        throw Error(p.src->name() + ": data: block " + std::to_string(b) + " checksum mismatch (offset " +
                    std::to_string(be.offset) + ")");
      for (uint32_t s = be.first_sample; s < be.first_sample + be.sample_count; ++s) {
        const format::IndexEntry e = v.entry(s);
        enc.payload.clear();
        // The payload as the encoder made it: shared table sets are put back, so that the builder shares
        // them again exactly where a one-machine build would.
        if (e.jpeg_table > 0) {
          const std::string& t = v.jpeg_table(e.jpeg_table);
          enc.payload.assign(t.begin(), t.end());
        }
        const uint8_t* at = data + (e.offset - be.offset);
        enc.payload.insert(enc.payload.end(), at, at + e.size);
        enc.width = e.width;
        enc.height = e.height;
        enc.encoding = e.encoding;
        enc.channels = e.channels;
        enc.jpeg_prefix = e.encoding == uint8_t(format::Encoding::kJpeg)
                              ? kernels::JpegPrefixLength(enc.payload.data(), enc.payload.size())
                              : 0;
        if (typed) ReadRow(v, layout, s, &row);
        builder.Add(enc, e.label, typed ? &row : nullptr);
        rep.payload_bytes += enc.payload.size();
        ++done;
      }
      if (o.progress)
        std::fprintf(stderr, "\rmerging: %llu/%llu samples", (unsigned long long)done, (unsigned long long)total);
    }
  }
  if (o.progress) std::fputc('\n', stderr);
  format::Meta meta = first.view->meta();
  meta.build_options = first.options;
  meta.skipped_count = skipped;
  meta.jpeg_tables.clear();  // the builder's own
  if (any_restart && restart.images > 0) builder.AddOptional(format::kRestartSection, format::EncodeRestartStats(restart));
  rep.file_size = builder.Finish(meta);
  file.Commit();
  rep.samples = builder.samples();
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace dsc::writer
