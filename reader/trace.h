// A timeline of the loader's work in Chrome's trace-event JSON (open it in Perfetto or
// chrome://tracing): one track per worker thread with read / decode / augment spans per sample, and a
// consumer track with its waits. Recording stops at a fixed event budget so memory stays bounded.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace dsc {

class Tracer {
 public:
  explicit Tracer(size_t max_events = 2000000) : max_events_(max_events) {}
  // Thread-safe. `track` 0..N-1 are workers; the consumer uses kConsumerTrack.
  void Add(uint32_t track, const char* name, uint64_t start_ns, uint64_t end_ns);
  // Writes the JSON; returns false when the file cannot be written.
  bool Write(const std::string& path, int worker_tracks) const;
  size_t size() const;
  static constexpr uint32_t kConsumerTrack = 1000;

 private:
  struct Event {
    const char* name;
    uint32_t track;
    uint64_t start_ns, end_ns;
  };
  mutable std::mutex mu_;
  std::vector<Event> events_;
  size_t max_events_;
};

}  // namespace dsc
