#include "tools/train/profile.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "format/error.h"
#include "kernels/cpu.h"

namespace dsc::train {

namespace {
constexpr const char* kNames[kPhases] = {"wait for batch", "copy to device", "forward", "backward",
                                         "optimizer step", "other", "evaluation"};
constexpr const char* kKeys[kPhases] = {"data_wait", "copy", "forward", "backward", "optimizer", "other", "evaluation"};
constexpr uint64_t kDefaultWindowSteps = 50;
}  // namespace

const char* PhaseName(Phase p) { return kNames[int(p)]; }
const char* PhaseKey(Phase p) { return kKeys[int(p)]; }

TraceWindow ParseTraceWindow(const std::string& text) {
  const size_t colon = text.find(':');
  auto number = [&](const std::string& s) {
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
      throw std::invalid_argument("--trace-steps " + text + ": expected FIRST:END, step numbers with FIRST < END");
    return std::stoull(s);
  };
  if (colon == std::string::npos) number("");
  TraceWindow w{number(text.substr(0, colon)), number(text.substr(colon + 1))};
  if (w.first >= w.last) number("");
  return w;
}

TraceWindow DefaultTraceWindow(uint64_t steps_per_epoch, int epochs) {
  const uint64_t first = epochs > 1 ? steps_per_epoch : 0;
  return {first, first + kDefaultWindowSteps};
}

StepProfiler::StepProfiler(Tracer* tracer, TraceWindow window, int loader_threads)
    : tracer_(tracer), window_(window), loader_threads_(loader_threads) {
  if (tracer_) {
    track_ = tracer_->AddTrack("trainer", "dsc train");
    threads_counter_ = tracer_->Counter("loader threads", "loader");  // shared with an autotuned loader's
  }
  SetTracing(false);
}

void StepProfiler::SetTracing(bool on) {
  tracing_ = on && tracer_;
  if (tracer_) tracer_->set_enabled(on);
  if (tracing_) tracer_->Count(threads_counter_, double(loader_threads_));
}

void StepProfiler::BeginEpoch(uint64_t next_step) {
  epoch_ = EpochProfile();
  step_ = next_step;
  last_ns_ = step_start_ns_ = epoch_start_ns_ = Tracer::Now();
  epoch_cpu_start_ = ProcessCpuSeconds();
  SetTracing(window_.Contains(next_step));
}

void StepProfiler::Mark(Phase p) {
  const uint64_t now = Tracer::Now();
  epoch_.seconds[int(p)] += double(now - last_ns_) / 1e9;
  if (tracing_) tracer_->Add(track_, PhaseName(p), last_ns_, now, int64_t(step_));
  last_ns_ = now;
}

void StepProfiler::EndStep(uint64_t step) {
  step_ = step;
  Mark(Phase::kOther);
  if (tracing_) tracer_->Add(track_, "step", step_start_ns_, last_ns_, int64_t(step));
  ++epoch_.steps;
  step_start_ns_ = last_ns_;
  step_ = step + 1;
  SetTracing(window_.Contains(step_));
}

void StepProfiler::EndSteps() {
  // The end of the epoch (its last ++it) and the evaluation that follows are traced when the epoch's
  // last step was.
  SetTracing(step_ > 0 && window_.Contains(step_ - 1));
  Mark(Phase::kWait);
  epoch_.step_seconds = double(last_ns_ - epoch_start_ns_) / 1e9;
  epoch_.cpu_seconds = ProcessCpuSeconds() - epoch_cpu_start_;
}

double ProcessCpuSeconds() {
  timespec ts{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
  return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

double MeanStoredPixels(const Dataset& ds, const std::vector<uint32_t>& subset) {
  const uint64_t n = subset.empty() ? ds.size() : subset.size();
  if (n == 0) return 0;
  const uint64_t stride = std::max<uint64_t>(1, n / 4096);
  double sum = 0;
  uint64_t seen = 0;
  for (uint64_t i = 0; i < n; i += stride, ++seen) {
    const auto e = ds.entry(subset.empty() ? i : subset[i]);
    sum += double(e.width) * double(e.height);
  }
  return sum / double(seen);
}

RunProfile Measured(const EpochProfile& e, const Loader& loader, uint64_t images, double stored_pixels) {
  RunProfile p;
  p.step_seconds = e.step_seconds;
  p.wait_seconds = e.seconds[int(Phase::kWait)];
  p.cpu_seconds = e.cpu_seconds;
  p.cores = kernels::UsableCores();
  p.loader_threads = loader.threads();
  p.images = images;
  p.loader = loader.stats();
  p.source_pixels = stored_pixels;
  p.output_width = loader.width();
  p.output_height = loader.height();
  return p;
}

void CheckWritable(const std::string& path, const std::string& flag, bool parents_made) {
  namespace fs = std::filesystem;
  const std::string who = flag + " " + path + ": ";
  if (path.empty()) throw Error(flag + ": an empty path");
  fs::path p = fs::absolute(path);  // not normalised: "link/.." is where the link's target's parent is
  std::error_code ec;
  // A dangling link is written through, creating its target: the target's folder is the one to check.
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(p, ec)) && !fs::exists(fs::status(p, ec)); ++hops) {
    const fs::path t = fs::read_symlink(p, ec);
    if (ec) break;
    p = t.is_absolute() ? t : p.parent_path() / t;
  }
  const fs::file_status st = fs::status(p, ec);
  if (st.type() == fs::file_type::directory) throw Error(who + "is a directory, not a file to write");
  if (fs::exists(st)) {
    if (::access(p.c_str(), W_OK) != 0) {
      const int e = errno;
      throw Error(who + "cannot be written: " + std::strerror(e));
    }
    return;
  }
  // The folder it goes in: it must exist (or, when the run makes it, its nearest existing ancestor),
  // be a folder, and be writable. Checked before the run, not found out after hours of it.
  fs::path dir = p.parent_path();
  if (parents_made)
    while (!fs::exists(fs::symlink_status(dir, ec)) && dir.has_parent_path() && dir != dir.parent_path()) dir = dir.parent_path();
  const fs::file_status ds = fs::status(dir, ec);
  if (!fs::exists(ds)) throw Error(who + "its folder " + dir.string() + " does not exist");
  if (ds.type() != fs::file_type::directory) throw Error(who + dir.string() + " is not a folder");
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    const int e = errno;
    throw Error(who + "cannot write in " + dir.string() + ": " + std::strerror(e));
  }
}

std::string FormatShares(const EpochProfile& e) {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(1);
  for (int p = 0; p < int(Phase::kEvaluation); ++p)
    o << (p ? ", " : "") << PhaseName(Phase(p)) << " " << 100 * e.share(Phase(p)) << "%";
  return o.str();
}

void JsonFields(JsonWriter& j, const EpochProfile& e, const Diagnosis& d) {
  j.Key("phases").Object();
  for (int p = 0; p < int(Phase::kEvaluation); ++p) j.Field(PhaseKey(Phase(p)), e.share(Phase(p)));
  j.End().Field("evaluation_seconds", e.seconds[int(Phase::kEvaluation)]).Field("cpu_seconds", e.cpu_seconds);
  j.Field("loader_busy", d.loader_busy).Field("idle_cores", d.idle_cores).Field("worker_cores_needed", d.worker_cores_needed);
  j.Field("bottleneck", d.bottleneck).Field("remedy", d.remedy).Field("advice", d.advice);
}

}  // namespace dsc::train
