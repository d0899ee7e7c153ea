// A timeline of the loader's work in Chrome's trace-event JSON (open it in Perfetto or
// chrome://tracing): one track per worker thread with read / decode / augment spans per sample, and a
// consumer track with its waits. Each track is written by one thread only, so recording takes no lock;
// each stops at a fixed event budget so memory stays bounded.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dsc {

class Tracer {
 public:
  static constexpr uint32_t kMaxWorkerTracks = 256;
  static constexpr uint32_t kConsumerTrack = kMaxWorkerTracks;  // the last track
  explicit Tracer(size_t max_events_per_track = 500000);
  // `track` 0..kMaxWorkerTracks-1 are workers (one thread each); the consumer uses kConsumerTrack.
  void Add(uint32_t track, const char* name, uint64_t start_ns, uint64_t end_ns);
  // Call once the loader is gone. Returns false when the file cannot be written.
  bool Write(const std::string& path) const;
  size_t size() const;

 private:
  struct Event {
    const char* name;
    uint64_t start_ns, end_ns;
  };
  std::vector<std::vector<Event>> tracks_;
  size_t max_per_track_;
};

}  // namespace dsc
