// A timeline in Chrome's trace-event JSON: open the file in https://ui.perfetto.dev or chrome://tracing.
//
//   dsc::Tracer tracer;
//   const uint32_t trainer = tracer.AddTrack("trainer", "dsc train");   // a row "trainer"
//   const uint32_t threads = tracer.AddCounter("loader threads", "loader");
//   opt.tracer = &tracer;                                                // the loader's own rows
//   {
//     dsc::TraceSpan span(&tracer, trainer, "forward");                  // recorded when it ends
//     model.forward(x);
//   }
//   tracer.Count(threads, loader.threads());
//   tracer.Write("trace.json");
//
// Tracks are rows of spans ("X" events); counters are value-over-time rows ("C" events). Each has a
// name and belongs to a named group, shown as a process (the loader's rows are "loader worker N" and
// "loader consumer" in group "loader"). A loader given a tracer records read / decode / augment /
// collate per sample on its workers' rows and its consumer's waits.
//
// Cost and bounds: set_enabled(false) turns recording off, so a long run traces a window only; while
// off, Add and Count return after one relaxed atomic load. Each row keeps at most
// `max_events_per_track` events (later ones are dropped), so memory is bounded whatever the run.
//
// Threads: every member is thread-safe. Rows take a lock per recorded event (uncontended when one
// thread writes a row, as the loader's workers do), so several threads may share a row, and Write may
// run while others still record. Spans on one row should nest (each within or after the previous),
// which is how Perfetto draws them.
//
// For bindings (a Python `with dsc.trace.phase("forward"):`): AddTrack(name) once per thread or per
// loop, Now() on entry, Add(track, Intern(name), start, Now()) on exit, all on one Tracer shared with
// the Loader through LoaderOptions::tracer, so the loop's phases and the loader's work land in one file.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace dsc {

class Tracer {
 public:
  static constexpr uint32_t kMaxTracks = 1024;  // rows and counters together
  explicit Tracer(size_t max_events_per_track = 500000);
  ~Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // The clock every timestamp is in (steady, nanoseconds).
  static uint64_t Now();

  // A new row of spans named `name` in group `group`; returns its id. Names need not be unique.
  // Throws dsc::Error past kMaxTracks.
  uint32_t AddTrack(const std::string& name, const std::string& group = "dsc");
  // A new counter row (one value over time).
  uint32_t AddCounter(const std::string& name, const std::string& group = "dsc");
  // The counter row named `name` in `group`: an existing one (the first), else a new one. Lets two
  // recorders share one row, e.g. the loader's autotuner and dsc train's "loader threads".
  uint32_t Counter(const std::string& name, const std::string& group = "dsc");

  // A span [start_ns, end_ns] named `name` on a row. `name` must outlive the tracer: a string
  // literal or Intern(). `arg` (>= 0) is shown as the span's "n" argument (a step or sample number).
  void Add(uint32_t track, const char* name, uint64_t start_ns, uint64_t end_ns, int64_t arg = -1);
  // A counter's value from time `t_ns` (Now() when left out) on.
  void Count(uint32_t counter, double value);
  void Count(uint32_t counter, uint64_t t_ns, double value);
  // A stable copy of `name` for Add (names built at run time, e.g. from Python).
  const char* Intern(std::string_view name);

  void set_enabled(bool on) { enabled_.store(on, std::memory_order_relaxed); }
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

  // Writes every row recorded so far. Returns false when the file cannot be written.
  bool Write(const std::string& path) const;
  size_t size() const;  // events recorded

 private:
  struct Event {
    const char* name;
    uint64_t start_ns, end_ns;
    int64_t arg;
    double value;
  };
  struct Track {
    std::string name, group;
    bool counter = false;
    mutable std::mutex mu;
    std::vector<Event> events;
  };
  uint32_t NewTrack(const std::string& name, const std::string& group, bool counter, bool reuse = false);
  void Record(uint32_t track, const Event& e);

  std::unique_ptr<Track[]> tracks_;  // fixed capacity: an id stays valid while others are added
  std::atomic<uint32_t> count_{0};
  size_t max_per_track_;
  std::atomic<bool> enabled_{true};
  mutable std::mutex mu_;  // track registration and names
  std::set<std::string, std::less<>> names_;
};

// Records a span on `track` from construction to destruction; nothing when `tracer` is null or was
// disabled at construction.
class TraceSpan {
 public:
  TraceSpan(Tracer* tracer, uint32_t track, const char* name, int64_t arg = -1)
      : tracer_(tracer && tracer->enabled() ? tracer : nullptr), track_(track), name_(name), arg_(arg),
        start_(tracer_ ? Tracer::Now() : 0) {}
  ~TraceSpan() {
    if (tracer_) tracer_->Add(track_, name_, start_, Tracer::Now(), arg_);
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  Tracer* tracer_;
  uint32_t track_;
  const char* name_;
  int64_t arg_;
  uint64_t start_;
};

}  // namespace dsc
