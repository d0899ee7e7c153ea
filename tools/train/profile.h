// dsc train's own profiler: where each step's time goes (waiting for the batch, copy to the device,
// forward, backward, optimiser step; evaluation per epoch), a per-epoch verdict (reader/bottleneck.h),
// and with --trace the same phases as spans on a "trainer" row of the trace, next to the loader's rows.
//
//   StepProfiler prof(tracer, window, loader.threads());
//   prof.BeginEpoch(step);
//   for (...) {                      // one step
//     prof.Mark(Phase::kWait);       // the time since the previous mark was spent waiting for the batch
//     ...copy...       prof.Mark(Phase::kCopy);
//     ...                            // forward, backward, optimiser step likewise
//     prof.EndStep(step++);          // the rest of the step is "other"
//   }
//   prof.EndSteps();
//   prof.Mark(Phase::kEvaluation);   // after evaluating
//
// Marks cost two clock reads; spans are recorded only for steps inside the trace window, and the
// tracer is switched off outside it so the loader records nothing there either.
#pragma once
#include <cstdint>
#include <string>

#include "reader/bottleneck.h"
#include "reader/dataset.h"
#include "reader/json.h"
#include "reader/loader.h"
#include "reader/trace.h"

namespace dsc::train {

enum class Phase { kWait, kCopy, kForward, kBackward, kOptimizer, kOther, kEvaluation };
constexpr int kPhases = 7;
const char* PhaseName(Phase p);  // as in the trace: "wait for batch", "copy to device", ...
const char* PhaseKey(Phase p);   // as in --json: "data_wait", "copy", ...

// Steps [first, last) (global step numbers, counted from 0 over the whole run).
struct TraceWindow {
  uint64_t first = 0, last = 0;
  bool Contains(uint64_t step) const { return step >= first && step < last; }
};
// "A:B" with A < B; throws std::invalid_argument naming the text otherwise.
TraceWindow ParseTraceWindow(const std::string& text);
// The default: the second epoch's first 50 steps (the first epoch's with only one).
TraceWindow DefaultTraceWindow(uint64_t steps_per_epoch, int epochs);

struct EpochProfile {
  double seconds[kPhases] = {};  // per phase
  double step_seconds = 0;       // the steps' wall time (evaluation excluded)
  double cpu_seconds = 0;        // the process's CPU time over the steps
  uint64_t steps = 0;
  double share(Phase p) const { return step_seconds > 0 ? seconds[int(p)] / step_seconds : 0; }
};

class StepProfiler {
 public:
  // `tracer`: null without --trace. The profiler adds a "trainer" row and a "loader threads" counter.
  StepProfiler(Tracer* tracer, TraceWindow window, int loader_threads);
  // Starts an epoch whose first step is `next_step`.
  void BeginEpoch(uint64_t next_step);
  // Charges the time since the previous mark to `p` (and traces it inside the window).
  void Mark(Phase p);
  // Ends step `step` (the rest of it is kOther) and switches tracing on or off for the next one.
  void EndStep(uint64_t step);
  // The epoch's steps are done: fixes its step and CPU time (evaluation comes after).
  void EndSteps();
  const EpochProfile& epoch() const { return epoch_; }

 private:
  Tracer* tracer_;
  TraceWindow window_;
  int loader_threads_;
  uint32_t track_ = 0, threads_counter_ = 0;
  bool tracing_ = false;
  uint64_t step_ = 0;  // the step under way
  uint64_t last_ns_ = 0, step_start_ns_ = 0, epoch_start_ns_ = 0;
  double epoch_cpu_start_ = 0;
  EpochProfile epoch_;
  void SetTracing(bool on);
};

// The process's CPU time so far (all threads).
double ProcessCpuSeconds();
// Mean stored pixels per image over (at most 4096 evenly spaced of) the samples trained on.
double MeanStoredPixels(const Dataset& ds, const std::vector<uint32_t>& subset);

// What Diagnose() weighs for the epoch just profiled: its phases, the loader's stage times since its
// last reset_stats(), the process's CPU time and cores, and the stored against the output pixels.
RunProfile Measured(const EpochProfile& e, const Loader& loader, uint64_t images, double stored_pixels);
// Throws dsc::Error, naming `flag` and `path`, when the run could not write `path` at its end: it is a
// folder or a read-only file, or its folder is missing (with `parents_made`: the nearest existing
// ancestor, the run creating the rest), not a folder, or not writable.
void CheckWritable(const std::string& path, const std::string& flag, bool parents_made = false);

// "data wait 0.2%, copy 0.0%, forward 30.1%, ..." (shares of step time).
std::string FormatShares(const EpochProfile& e);
// An epoch's --json fields, into the object `j` has open: "phases": {...}, "evaluation_seconds",
// "cpu_seconds", the diagnosis's figures, "bottleneck", "remedy" and "advice".
void JsonFields(JsonWriter& j, const EpochProfile& e, const Diagnosis& d);

}  // namespace dsc::train
