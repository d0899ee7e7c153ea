#include "reader/trace.h"

#include <cstdio>

namespace dsc {

Tracer::Tracer(size_t max_events_per_track) : tracks_(kMaxWorkerTracks + 1), max_per_track_(max_events_per_track) {}

void Tracer::Add(uint32_t track, const char* name, uint64_t start_ns, uint64_t end_ns) {
  if (track > kConsumerTrack) return;
  auto& t = tracks_[track];
  if (t.size() < max_per_track_) t.push_back({name, start_ns, end_ns});
}

size_t Tracer::size() const {
  size_t n = 0;
  for (const auto& t : tracks_) n += t.size();
  return n;
}

bool Tracer::Write(const std::string& path) const {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return false;
  uint64_t origin = UINT64_MAX;
  for (const auto& t : tracks_)
    for (const auto& e : t) origin = e.start_ns < origin ? e.start_ns : origin;
  std::fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
  std::fprintf(f, "{\"ph\": \"M\", \"pid\": 1, \"tid\": %u, \"name\": \"thread_name\", \"args\": {\"name\": \"consumer\"}}", kConsumerTrack);
  for (uint32_t k = 0; k < tracks_.size(); ++k) {
    if (tracks_[k].empty()) continue;
    if (k != kConsumerTrack)
      std::fprintf(f, ",\n{\"ph\": \"M\", \"pid\": 1, \"tid\": %u, \"name\": \"thread_name\", \"args\": {\"name\": \"worker %u\"}}", k, k);
    for (const auto& e : tracks_[k])
      std::fprintf(f, ",\n{\"ph\": \"X\", \"pid\": 1, \"tid\": %u, \"name\": \"%s\", \"ts\": %.3f, \"dur\": %.3f}", k, e.name,
                   (e.start_ns - origin) / 1000.0, (e.end_ns - e.start_ns) / 1000.0);
  }
  std::fprintf(f, "\n]}\n");
  return std::fclose(f) == 0;
}

}  // namespace dsc
