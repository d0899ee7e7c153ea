// dsc._dsc.Tracer: reader/trace.h's Tracer for Python (the package's dsc.trace wraps it).
//
// One Tracer is shared by Python code and the loaders given it (dsc.Loader(..., tracer=t)), so the
// training loop's phases and the loaders' worker rows land in one file. A loader keeps its tracer
// alive (shared_ptr), since its workers record into it until they stop.
#pragma once
#include <pybind11/pybind11.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "reader/trace.h"

namespace dsc::python {

class PyTracer {
 public:
  explicit PyTracer(size_t max_events_per_row) : tracer_(max_events_per_row), serial_(NextSerial()) {}

  Tracer& tracer() { return tracer_; }

  // The calling thread's row: "trainer" for the first thread that records, "trainer (NAME)" with the
  // Python thread's name for the others, so each row's spans nest. Called with the GIL held.
  uint32_t ThreadRow();
  // The counter row `name` (made on first use).
  uint32_t CounterRow(const std::string& name);
  // Writes the file (GIL released); dsc::Error naming `path` when it cannot be written.
  void Write(const std::string& path);

 private:
  static uint64_t NextSerial();
  Tracer tracer_;
  const uint64_t serial_;  // never reused, so a thread's cached row cannot belong to a dead tracer
  std::mutex mu_;          // rows_ and counters_
  std::unordered_map<std::thread::id, uint32_t> rows_;
  std::map<std::string, uint32_t, std::less<>> counters_;
};

void BindTrace(pybind11::module_& m);

}  // namespace dsc::python
