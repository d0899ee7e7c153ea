#include "python/trace.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "format/error.h"
#include "python/gil.h"

namespace py = pybind11;

namespace dsc::python {

namespace {

constexpr const char* kGroup = "python";  // the process the Python rows are drawn under

// The Python name of the calling thread ("" when Python cannot say).
std::string PythonThreadName() {
  try {
    return py::str(py::module_::import("threading").attr("current_thread")().attr("name"));
  } catch (const py::error_already_set&) {
    return "";
  }
}

// `with tracer.phase(name):` — the span is recorded on exit, on the row of the thread that exits.
// Entries stack, so one Phase object may be re-entered (nested or in a loop) by one thread.
class Phase {
 public:
  Phase(std::shared_ptr<PyTracer> t, std::string name, int64_t n) : t_(std::move(t)), name_(std::move(name)), n_(n) {}

  void Enter() { starts_.push_back(t_->tracer().enabled() ? Tracer::Now() : 0); }  // 0: off at entry

  void Exit() {
    if (starts_.empty()) throw py::value_error("phase '" + name_ + "' exited more often than entered");
    const uint64_t start = starts_.back();
    starts_.pop_back();
    // Interned only for a span recorded: names of phases made while tracing is off (e.g. 'step %d'
    // outside the trace window) would otherwise accumulate for the process's life.
    if (start) t_->tracer().Add(t_->ThreadRow(), t_->tracer().Intern(name_), start, Tracer::Now(), n_);
  }

  // `@tracer.phase(name)`: dsc.trace._wrap, so the wrapper is a Python function functools.wraps can
  // name after fn; each call enters a Phase of its own, so threads and recursion nest correctly.
  py::object Wrap(py::function fn) {
    return py::module_::import("dsc.trace").attr("_wrap")(t_, py::str(name_), n_, fn);
  }

 private:
  std::shared_ptr<PyTracer> t_;
  std::string name_;
  int64_t n_;
  std::vector<uint64_t> starts_;
};

// dsc.trace.default(): made on first use, never destroyed (loaders hold their own reference).
const std::shared_ptr<PyTracer>& DefaultTracer() {
  static auto* t = new std::shared_ptr<PyTracer>(std::make_shared<PyTracer>(500000));
  return *t;
}

std::shared_ptr<Phase> MakePhase(const std::shared_ptr<PyTracer>& t, std::string_view name, int64_t n) {
  return std::make_shared<Phase>(t, std::string(name), n < 0 ? -1 : n);
}

}  // namespace

uint64_t PyTracer::NextSerial() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

uint32_t PyTracer::ThreadRow() {
  // The common case (one loop, one tracer) costs a compare: the last tracer this thread recorded into.
  thread_local uint64_t cached_serial = 0;
  thread_local uint32_t cached_row = 0;
  if (cached_serial == serial_) return cached_row;
  const std::thread::id me = std::this_thread::get_id();
  bool first;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (auto it = rows_.find(me); it != rows_.end()) {
      cached_serial = serial_;
      return cached_row = it->second;
    }
    first = rows_.empty();
  }
  // Outside the lock: asking Python for the name may let another thread run.
  std::string name = "trainer";
  if (!first) name += " (" + PythonThreadName() + ")";
  std::lock_guard<std::mutex> l(mu_);
  auto [it, added] = rows_.emplace(me, 0);
  if (added) it->second = tracer_.AddTrack(name, kGroup);
  cached_serial = serial_;
  return cached_row = it->second;
}

uint32_t PyTracer::CounterRow(const std::string& name) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = counters_.find(name);
  if (it == counters_.end()) it = counters_.emplace(name, tracer_.AddCounter(name, kGroup)).first;
  return it->second;
}

void PyTracer::Write(const std::string& path) {
  int err = 0;
  const bool ok = WithoutGil([&] {  // loader workers may hold a row's lock for a moment
    errno = 0;
    const bool written = tracer_.Write(path);
    err = errno;
    return written;
  });
  if (!ok) throw Error("cannot write the trace file '" + path + "'" + (err ? std::string(": ") + std::strerror(err) : ""));
}

void BindTrace(py::module_& m) {
  py::class_<Phase, std::shared_ptr<Phase>>(m, "Phase", "A span on the calling thread's row: `with` it, or decorate a function with it.")
      .def("__enter__", [](Phase& p) { p.Enter(); })
      .def("__exit__", [](Phase& p, py::handle, py::handle, py::handle) {
        p.Exit();
        return false;
      })
      .def("__call__", &Phase::Wrap, py::arg("fn"), "Decorates fn: each of its calls is a span (also one that raises).");

  py::class_<PyTracer, std::shared_ptr<PyTracer>>(m, "Tracer",
                                                  "A timeline of phases, counters and the work of the loaders given it "
                                                  "(dsc.Loader(..., tracer=t)), written as Chrome trace-event JSON. "
                                                  "Thread-safe; see dsc.trace.")
      .def(py::init([](py::handle n) {
             // Checked here: pybind11's own refusal of -1 or 2**70 is a bare "incompatible constructor arguments".
             if (PyBool_Check(n.ptr()) || !PyLong_Check(n.ptr()))
               throw py::type_error("max_events_per_row must be an int, got " +
                                    std::string(py::str(py::type::handle_of(n).attr("__name__"))));
             const py::int_ v = py::reinterpret_borrow<py::int_>(n);
             if (v < py::int_(0) || v > py::int_(SIZE_MAX))
               throw py::value_error("max_events_per_row = " + std::string(py::str(n)) + " is out of range [0, " +
                                     std::to_string(SIZE_MAX) + "]");
             return std::make_shared<PyTracer>(v.cast<size_t>());
           }),
           py::arg("max_events_per_row") = 500000,
           "Each row keeps at most max_events_per_row events; later ones are dropped.")
      .def(
          "phase",
          &MakePhase,
          py::arg("name"), py::arg("n") = -1,
          "A span named `name` on the calling thread's row ('trainer'): `with tracer.phase('forward'):` or "
          "`@tracer.phase('forward')`. n >= 0 is shown as the span's 'n' argument (a step number). Nothing is "
          "recorded when the tracer is disabled on entry.")
      .def(
          "counter", [](PyTracer& t, const std::string& name, double value) { t.tracer().Count(t.CounterRow(name), value); },
          py::arg("name"), py::arg("value"), "The counter row `name` takes `value` from now on (when enabled).")
      .def(
          "write",
          [](PyTracer& t, py::object path) {
            // As the OS names it (bytes and names that are not UTF-8 included); a NUL would cut it short.
            const std::string p = py::module_::import("os").attr("fsencode")(path).cast<std::string>();
            if (p.find('\0') != std::string::npos) throw py::value_error("path: embedded null byte");
            t.Write(p);
          },
          py::arg("path"),
          "Writes everything recorded so far as Chrome trace-event JSON (ui.perfetto.dev, chrome://tracing); "
          "dsc.Error naming the path when it cannot be written. Recording may go on meanwhile.")
      .def_property(
          "enabled", [](PyTracer& t) { return t.tracer().enabled(); },
          [](PyTracer& t, bool on) { t.tracer().set_enabled(on); },
          "Recording on or off (for a window of steps); the loaders' workers see it within a sample.")
      .def_property_readonly(
          "events", [](PyTracer& t) { return t.tracer().size(); }, "Spans and counter values recorded so far.");

  // The default tracer's functions in C++: `with dsc.trace.phase(...)` then costs no Python frame.
  m.def("default_tracer", &DefaultTracer, "The process's default Tracer (dsc.trace.default()).");
  m.def(
      "default_phase", [](std::string_view name, int64_t n) { return MakePhase(DefaultTracer(), name, n); }, py::arg("name"),
      py::arg("n") = -1, "`with dsc.trace.phase('forward'):` or `@dsc.trace.phase('forward')`: tracer.phase(name, n) on the default "
      "Tracer (dsc.trace.default()).");
}

}  // namespace dsc::python
