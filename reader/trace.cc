#include "reader/trace.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>

#include "format/error.h"
#include "reader/info.h"  // JsonString

namespace dsc {

Tracer::Tracer(size_t max_events_per_track) : tracks_(new Track[kMaxTracks]), max_per_track_(max_events_per_track) {}

Tracer::~Tracer() = default;

uint64_t Tracer::Now() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

uint32_t Tracer::NewTrack(const std::string& name, const std::string& group, bool counter, bool reuse) {
  std::lock_guard<std::mutex> l(mu_);
  const uint32_t id = count_.load(std::memory_order_relaxed);
  if (reuse)  // names and groups are written under mu_, so reading them here is safe
    for (uint32_t i = 0; i < id; ++i)
      if (tracks_[i].counter == counter && tracks_[i].name == name && tracks_[i].group == group) return i;
  if (id >= kMaxTracks) throw Error("a trace holds at most " + std::to_string(kMaxTracks) + " tracks");
  Track& t = tracks_[id];
  {
    std::lock_guard<std::mutex> tl(t.mu);  // Write reads these under the row's lock
    t.name = name;
    t.group = group;
    t.counter = counter;
  }
  count_.store(id + 1, std::memory_order_release);
  return id;
}

uint32_t Tracer::AddTrack(const std::string& name, const std::string& group) { return NewTrack(name, group, false); }
uint32_t Tracer::AddCounter(const std::string& name, const std::string& group) { return NewTrack(name, group, true); }
uint32_t Tracer::Counter(const std::string& name, const std::string& group) { return NewTrack(name, group, true, true); }

void Tracer::Record(uint32_t track, const Event& e) {
  if (track >= count_.load(std::memory_order_acquire)) return;
  Track& t = tracks_[track];
  std::lock_guard<std::mutex> l(t.mu);
  if (t.events.size() < max_per_track_) t.events.push_back(e);
}

void Tracer::Add(uint32_t track, const char* name, uint64_t start_ns, uint64_t end_ns, int64_t arg) {
  if (!enabled()) return;
  Record(track, {name, start_ns, end_ns < start_ns ? start_ns : end_ns, arg, 0});
}

void Tracer::Count(uint32_t counter, double value) {
  if (enabled()) Count(counter, Now(), value);
}

void Tracer::Count(uint32_t counter, uint64_t t_ns, double value) {
  if (!enabled()) return;
  Record(counter, {nullptr, t_ns, t_ns, -1, value});
}

const char* Tracer::Intern(std::string_view name) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = names_.find(name);
  if (it == names_.end()) it = names_.emplace(name).first;
  return it->c_str();  // set nodes never move
}

size_t Tracer::size() const {
  size_t n = 0;
  const uint32_t count = count_.load(std::memory_order_acquire);
  for (uint32_t k = 0; k < count; ++k) {
    std::lock_guard<std::mutex> l(tracks_[k].mu);
    n += tracks_[k].events.size();
  }
  return n;
}

bool Tracer::Write(const std::string& path) const {
  // A snapshot first, so no row stays locked while the file is written.
  struct Row {
    std::string name, group;
    bool counter;
    std::vector<Event> events;
  };
  std::vector<Row> rows;
  const uint32_t count = count_.load(std::memory_order_acquire);
  for (uint32_t k = 0; k < count; ++k) {
    std::lock_guard<std::mutex> l(tracks_[k].mu);
    rows.push_back({tracks_[k].name, tracks_[k].group, tracks_[k].counter, tracks_[k].events});
  }
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return false;
  uint64_t origin = UINT64_MAX;
  for (const auto& r : rows)
    for (const auto& e : r.events) origin = e.start_ns < origin ? e.start_ns : origin;
  std::map<std::string, int> pids;  // group -> pid, in order of first appearance
  std::fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [");
  const char* sep = "\n";
  for (uint32_t k = 0; k < rows.size(); ++k) {
    const Row& r = rows[k];
    auto [it, added] = pids.emplace(r.group, int(pids.size()) + 1);
    const int pid = it->second;
    if (added) {
      std::fprintf(f, "%s{\"ph\": \"M\", \"pid\": %d, \"name\": \"process_name\", \"args\": {\"name\": %s}}", sep, pid,
                   JsonString(r.group).c_str());
      sep = ",\n";
      std::fprintf(f, "%s{\"ph\": \"M\", \"pid\": %d, \"name\": \"process_sort_index\", \"args\": {\"sort_index\": %d}}", sep,
                   pid, pid);
    }
    const std::string name = JsonString(r.name);
    if (r.counter) {
      for (const auto& e : r.events) {
        // JSON has no NaN or infinity (a diverging loss made the whole file unreadable): null, and
        // what it was as a string.
        char value[64];
        if (std::isfinite(e.value))
          std::snprintf(value, sizeof value, "%.17g", e.value);
        else
          std::snprintf(value, sizeof value, "null, \"non_finite\": \"%s\"",
                        std::isnan(e.value) ? "nan" : e.value > 0 ? "inf" : "-inf");
        std::fprintf(f, ",\n{\"ph\": \"C\", \"pid\": %d, \"name\": %s, \"ts\": %.3f, \"args\": {\"value\": %s}}", pid,
                     name.c_str(), double(e.start_ns - origin) / 1000.0, value);
      }
      continue;
    }
    const uint32_t tid = k + 1;
    std::fprintf(f, ",\n{\"ph\": \"M\", \"pid\": %d, \"tid\": %u, \"name\": \"thread_name\", \"args\": {\"name\": %s}}", pid, tid,
                 name.c_str());
    std::fprintf(f, ",\n{\"ph\": \"M\", \"pid\": %d, \"tid\": %u, \"name\": \"thread_sort_index\", \"args\": {\"sort_index\": %u}}",
                 pid, tid, tid);
    for (const auto& e : r.events) {
      std::fprintf(f, ",\n{\"ph\": \"X\", \"pid\": %d, \"tid\": %u, \"name\": %s, \"ts\": %.3f, \"dur\": %.3f", pid, tid,
                   JsonString(e.name).c_str(), double(e.start_ns - origin) / 1000.0, double(e.end_ns - e.start_ns) / 1000.0);
      if (e.arg >= 0) std::fprintf(f, ", \"args\": {\"n\": %lld}", (long long)e.arg);
      std::fputc('}', f);
    }
  }
  std::fprintf(f, "\n]}\n");
  const bool ok = !std::ferror(f);
  return std::fclose(f) == 0 && ok;
}

}  // namespace dsc
