#include "reader/trace.h"

#include <cstdio>

namespace dsc {

void Tracer::Add(uint32_t track, const char* name, uint64_t start_ns, uint64_t end_ns) {
  std::lock_guard<std::mutex> l(mu_);
  if (events_.size() < max_events_) events_.push_back({name, track, start_ns, end_ns});
}

size_t Tracer::size() const {
  std::lock_guard<std::mutex> l(mu_);
  return events_.size();
}

bool Tracer::Write(const std::string& path, int worker_tracks) const {
  std::lock_guard<std::mutex> l(mu_);
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return false;
  uint64_t origin = events_.empty() ? 0 : events_.front().start_ns;
  for (const auto& e : events_) origin = e.start_ns < origin ? e.start_ns : origin;
  std::fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
  for (int t = 0; t < worker_tracks; ++t)
    std::fprintf(f, "{\"ph\": \"M\", \"pid\": 1, \"tid\": %d, \"name\": \"thread_name\", \"args\": {\"name\": \"worker %d\"}},\n", t, t);
  std::fprintf(f, "{\"ph\": \"M\", \"pid\": 1, \"tid\": %u, \"name\": \"thread_name\", \"args\": {\"name\": \"consumer\"}}", kConsumerTrack);
  for (const auto& e : events_)
    std::fprintf(f, ",\n{\"ph\": \"X\", \"pid\": 1, \"tid\": %u, \"name\": \"%s\", \"ts\": %.3f, \"dur\": %.3f}", e.track, e.name,
                 (e.start_ns - origin) / 1000.0, (e.end_ns - e.start_ns) / 1000.0);
  std::fprintf(f, "\n]}\n");
  return std::fclose(f) == 0;
}

}  // namespace dsc
