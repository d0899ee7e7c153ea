#include "writer/build.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>

#include "format/error.h"
#include "format/layout.h"
#include "format/optional.h"
#include "kernels/cpu.h"
#include "writer/atomic_file.h"
#include "writer/file_builder.h"
#include "writer/source.h"

namespace dsc::writer {

namespace {

// Samples are encoded in windows: every thread works on one window, then the packer appends the window
// in sample order. Output order is therefore the source order whatever the thread count.
struct Slot {
  Encoded enc;
  int32_t labels[2] = {0, 0};
  std::string error;    // non-empty: the sample failed
  bool machine = false;  // ... because of the machine (EnvironmentError, out of memory): never skipped
};

class WindowPool {
 public:
  WindowPool(const Source& src, const EncodeOptions& opt, int threads) : src_(src) {
    for (int t = 0; t < threads; ++t) encoders_.emplace_back(std::make_unique<Encoder>(opt));
    try {
      for (int t = 1; t < threads; ++t) workers_.emplace_back([this, t] { Loop(t); });
    } catch (const std::system_error& e) {  // the threads started must stop before the members go
      Stop();
      throw Error("cannot start " + std::to_string(threads) + " encoder threads (" + e.what() +
                  "): use --threads with fewer; the output does not depend on it");
    }
  }
  ~WindowPool() { Stop(); }

  // Encodes samples [first, first + slots.size()) into slots, using every thread including this one.
  void Run(size_t first, std::vector<Slot>* slots) {
    {
      std::lock_guard<std::mutex> l(mu_);
      first_ = first;
      slots_ = slots;
      next_.store(0);
      busy_ = int(workers_.size());
      ++generation_;
    }
    cv_.notify_all();
    Work(0);
    std::unique_lock<std::mutex> l(mu_);
    done_cv_.wait(l, [this] { return busy_ == 0; });
  }

 private:
  void Stop() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
  }

  void Loop(int t) {
    uint64_t seen = 0;
    while (true) {
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
      }
      Work(t);
      std::lock_guard<std::mutex> l(mu_);
      if (--busy_ == 0) done_cv_.notify_one();
    }
  }

  void Work(int t) {
    SourceItem item;
    for (size_t i; (i = next_.fetch_add(1)) < slots_->size();) {
      Slot& s = (*slots_)[i];
      s.error.clear();
      s.machine = false;
      item.where.clear();
      try {
        src_.Load(first_ + i, &item);
        encoders_[size_t(t)]->Encode(item, &s.enc);
        s.labels[0] = item.label[0];
        s.labels[1] = item.label[1];
      } catch (const EnvironmentError& e) {
        s.error = e.what();
        s.machine = true;
      } catch (const std::bad_alloc&) {
        s.error = (item.where.empty() ? "sample " + std::to_string(first_ + i) : item.where) + ": out of memory";
        s.machine = true;
      } catch (const std::exception& e) {
        s.error = e.what();
      }
    }
  }

  const Source& src_;
  std::vector<std::unique_ptr<Encoder>> encoders_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  bool stop_ = false;
  uint64_t generation_ = 0;
  int busy_ = 0;
  size_t first_ = 0;
  std::vector<Slot>* slots_ = nullptr;
  std::atomic<size_t> next_{0};
};

void DrawProgress(size_t done, size_t total, double seconds) {
  const int width = 30;
  int filled = total ? int(width * done / total) : width;
  std::fprintf(stderr, "\r[%.*s%*s] %zu/%zu  %.0f images/s ", filled, "##############################",
               width - filled, "", done, total, seconds > 0 ? done / seconds : 0.0);
  if (done == total) std::fputc('\n', stderr);
  std::fflush(stderr);
}

void CountRestart(const Encoded& e, format::RestartStats* s) {
  if (e.encoding != uint8_t(format::Encoding::kJpeg)) return;
  if (e.restart == Encoded::kNoRestart) {
    ++s->untouched;
    return;
  }
  ++s->images;
  ++(e.restart == Encoded::kTranscoded ? s->transcoded : s->reencoded);
  if (e.restart_interval == e.mcus_per_row) ++s->whole_row;
  auto& v = s->intervals;
  auto it = std::lower_bound(v.begin(), v.end(), uint32_t(e.restart_interval),
                             [](const format::RestartStats::Interval& i, uint32_t m) { return i.mcus < m; });
  if (it == v.end() || it->mcus != uint32_t(e.restart_interval)) it = v.insert(it, {uint32_t(e.restart_interval), 0});
  ++it->images;
}

// The file records options as "key=value" lines sorted by key (docs/format.md).
std::string SortedLines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) lines.push_back(text.substr(start, nl + 1 - start));
  // By key, as the format orders them (a key's own '-' or digits would sort before '=' by whole line).
  std::sort(lines.begin(), lines.end(), [](const std::string& a, const std::string& b) {
    return a.substr(0, a.find('=')) < b.substr(0, b.find('='));
  });
  std::string out;
  for (const auto& l : lines) out += l;
  return out;
}

}  // namespace

BuildReport Build(const std::string& source, const std::string& out, const BuildOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  auto log = o.log ? o.log : [](const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); };
  o.encode.Validate();
  if (o.jpeg_tables != "shared" && o.jpeg_tables != "inline") throw OptionError("--jpeg-tables must be 'shared' or 'inline'");
  if (o.block_size < format::kPageSize || (o.block_size & (o.block_size - 1)) || o.block_size > (1ull << 31))
    throw OptionError("--block-size must be a power of two between 4096 and 2^31");
  // Each thread has an encoder and 512 samples in the window: a typo must not become a million threads.
  if (o.threads < 0 || o.threads > 1024) throw OptionError("--threads must be 0 (all cores) to 1024, not " + std::to_string(o.threads));
  auto src = IsWebDataset(source, o.format) ? OpenWebDataset(source, o.wds_image, o.wds_label, o.max_file_size)
                                            : OpenSource(source, o.format, o.split, o.max_file_size);
  const auto ignored = src->ignored();
  if (!ignored.empty()) {
    log("warning: " + std::to_string(ignored.size()) + " entr" + (ignored.size() == 1 ? "y" : "ies") + " of the source not included:");
    for (size_t i = 0; i < ignored.size(); ++i) log("  ignored: " + ignored[i]);
  }
  for (const auto& n : src->notes()) log("note: " + n);
  const int threads = o.threads > 0 ? o.threads : kernels::UsableCores();
  {  // the finished file replaces `out`: it must not be what the build reads
    std::error_code ec;
    if (std::filesystem::exists(out, ec) && std::filesystem::equivalent(source, out, ec))
      throw Error(out + ": is the source itself; name another output file");
    if (const std::string s = src->SampleFileAt(out); !s.empty())
      throw Error(out + ": is the source's sample " + s + "; name another output file");
  }

  AtomicFile file(out);
  FileBuilder builder(&file, o.block_size, o.jpeg_tables == "shared");
  BuildReport rep;
  rep.format = src->format();
  if (o.shard_count > 0 && o.shard_index >= o.shard_count)
    throw OptionError("--shard I/N needs 0 <= I < N, not " + std::to_string(o.shard_index) + "/" + std::to_string(o.shard_count));
  // A part is a contiguous slice of the source's order: the merged parts are the source in order.
  const bool part = o.shard_count > 0;
  const size_t begin = part ? size_t(uint64_t(src->size()) * o.shard_index / o.shard_count) : 0;
  const size_t total = part ? size_t(uint64_t(src->size()) * (o.shard_index + 1) / o.shard_count) : src->size();
  // A window's encoded payloads are all held until it is packed, so the window is sized in bytes: as
  // many samples as kWindowBytes holds at the mean payload size seen so far (4 to 512 per thread;
  // the first window is small, to measure). 512 per thread alone held 18 GB of raw photos on 64
  // cores. The windows do not change the output: samples are packed in source order.
  constexpr double kWindowBytes = 256 << 20;
  const size_t min_window = 4 * size_t(threads), max_window = 512 * size_t(threads);
  size_t window = 16 * size_t(threads);
  double seen_bytes = 0;
  uint64_t seen = 0;
  std::vector<Slot> slots;
  format::RestartStats restart;
  if (o.encode.restart_enabled()) {
    const auto p = o.encode.restart_policy();
    restart.mode = p.fixed ? format::RestartStats::kFixed : format::RestartStats::kAuto;
    restart.target = uint32_t(p.fixed ? p.fixed : p.target);
    restart.min_mcus = uint64_t(p.min_mcus);
  }
  {
    WindowPool pool(*src, o.encode, threads);
    for (size_t first = begin; first < total; first += slots.size()) {
      slots.clear();  // no payload buffer of the last window outlives it
      slots.resize(std::min(window, total - first));
      pool.Run(first, &slots);
      for (size_t i = 0; i < slots.size(); ++i) {
        seen_bytes += double(slots[i].enc.payload.size());
        ++seen;
        if (!slots[i].error.empty()) {
          if (slots[i].machine) throw Error(slots[i].error);
          if (!o.skip_invalid) throw Error(slots[i].error + " (use --skip-invalid to skip such samples)");
          log("skipped: " + slots[i].error);
          ++rep.skipped;
          continue;
        }
        builder.Add(slots[i].enc, slots[i].labels);
        CountRestart(slots[i].enc, &restart);
        rep.payload_bytes += slots[i].enc.payload.size();
        ++rep.encodings[format::EncodingName(format::Encoding(slots[i].enc.encoding))];
      }
      if (o.progress) DrawProgress(first - begin + slots.size(), total - begin, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      window = std::clamp(size_t(kWindowBytes / std::max(1.0, seen_bytes / double(seen))), min_window, max_window);
    }
  }
  if (builder.samples() == 0 && !part) throw Error(source + ": no samples to write (all were skipped)");

  format::Meta meta;
  meta.fields.push_back({format::FieldType::kImage, "image", {}});
  for (const auto& f : src->label_fields()) meta.fields.push_back({format::FieldType::kLabel, f.name, f.classes});
  meta.build_options = SortedLines("block_size=" + std::to_string(o.block_size) + "\n" + o.encode.Describe() +
                                   "format=" + src->format() + "\n" + "jpeg_tables=" + o.jpeg_tables + "\n" +
                                   "skip_invalid=" + (o.skip_invalid ? "1" : "0") + "\n" + "split=" + o.split + "\n" +
                                   (part ? "shard=" + std::to_string(o.shard_index) + "/" + std::to_string(o.shard_count) + "\n" : ""));
  meta.skipped_count = rep.skipped;
  // Format 1.1's restart section, only when some payload got markers: a build that changed nothing
  // (CIFAR's 32x32 images, --restart-interval none) stays a 1.0 file.
  // A part records it whenever restart markers were on, so that dsc merge can sum every part's counts.
  if (restart.images > 0 || (part && o.encode.restart_enabled())) builder.AddOptional(format::kRestartSection, format::EncodeRestartStats(restart));
  rep.restart_images = restart.images;
  rep.restart_whole_row = restart.whole_row;
  rep.file_size = builder.Finish(meta);
  file.Commit();
  rep.samples = builder.samples();
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace dsc::writer
