// Parallel encoding shared by `dsc build` (writer/build.cc) and dsc::Writer (writer/writer.h):
// samples are encoded in windows by every thread, then packed in sample order, so the output never
// depends on the thread count.
#pragma once
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "format/error.h"
#include "format/layout.h"
#include "format/optional.h"
#include "writer/encoder.h"
#include "writer/mask_store.h"
#include "writer/source.h"

namespace dsc::writer {

// Samples are encoded in windows: every thread works on one window, then the packer appends the window
// in sample order. Output order is therefore the source order whatever the thread count.
struct Slot {
  Encoded enc;
  std::vector<std::vector<uint8_t>> masks;  // the item's masks as stored (writer/mask_store.h)
  std::vector<Encoded> images;              // the item's further images as stored
  int32_t labels[2] = {0, 0};
  std::string error;    // non-empty: the sample failed
  bool machine = false;  // ... because of the machine (EnvironmentError, out of memory): never skipped
};

class WindowPool {
 public:
  WindowPool(const Source& src, const EncodeOptions& opt, int threads) : src_(src), opt_(opt) {
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
        if (!item.masks.empty()) StoreMasks(item, s.enc, opt_, &s.masks);
        s.images.resize(item.images.size());
        for (size_t k = 0; k < item.images.size(); ++k) {
          ImageInput& in = item.images[k];
          SourceItem one;
          one.is_pixels = in.is_pixels;
          one.width = in.width;
          one.height = in.height;
          one.bytes = std::move(in.bytes);
          one.where = std::move(in.where);
          encoders_[size_t(t)]->Encode(one, &s.images[k]);
        }
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
  const EncodeOptions opt_;  // masks follow the images' crop and resize
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

// Counts a packed payload into the restart section's statistics.
inline void CountRestart(const Encoded& e, format::RestartStats* s) {
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
inline std::string SortedLines(const std::string& text) {
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

}  // namespace dsc::writer
