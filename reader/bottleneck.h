// What bounds a training run's throughput, from what it measured: the share of step time spent
// waiting for batches, the loader's per-stage time (StageStats), the process's CPU time and the core
// count. Pure functions of their inputs (tests feed them synthetic measurements); `dsc train` prints
// Diagnose()'s verdict per epoch and `dsc bench` BenchVerdict()'s.
#pragma once
#include <cstdint>
#include <string>

#include "reader/loader.h"

namespace dsc {

// A run whose trainer waits for data more than this share of its step time is input-bound.
constexpr double kInputBoundWaitShare = 0.05;

// One epoch (or any span) of a training run.
struct RunProfile {
  double step_seconds = 0;  // wall time of the training steps, evaluation excluded
  double wait_seconds = 0;  // of which the trainer waited for batches
  double cpu_seconds = 0;   // the process's CPU time (all threads) over step_seconds
  int cores = 1;            // cores the process may use
  int loader_threads = 1;
  uint64_t images = 0;      // images trained on in step_seconds
  StageStats loader;        // the loader's stage times over the same span (LoaderOptions::collect_stats)
  double source_pixels = 0;  // stored pixels per image (mean), 0: unknown
  uint32_t output_width = 0, output_height = 0;  // the loader's output image
};

struct Diagnosis {
  std::string bottleneck;  // "input" or "compute"
  // What to do, as a key: "none" (compute-bound), "more_threads", "remote_or_gpu", "max_resolution",
  // "storage", "starved" (loader threads idle while the trainer waits).
  std::string remedy;
  std::string advice;  // one sentence with the measured figures and the flags to try
  double wait_share = 0;
  double loader_busy = 0;          // loader thread time in stages / (wall time x threads)
  double idle_cores = 0;           // cores - the process's CPU use
  double worker_cores_needed = 0;  // loader cores that would keep up with the model's rate
};

Diagnosis Diagnose(const RunProfile& p);

// The loader stage that took the most worker time, and its share of the sum of the four.
struct StageShare {
  const char* name;  // "read", "decode", "augment" or "collate"
  uint64_t ns;
  double share;
};
StageShare LargestStage(const StageStats& s);

// One epoch of `dsc bench`: the loader's stages and what its consumer did with each batch.
struct BenchEpoch {
  StageStats stages;        // the local threads' stage times and the consumer's wait (consumer_wait_ns)
  double seconds = 0;       // the epoch's wall time
  int threads = 1;          // local loader threads (0: remote workers only)
  int cores = 1;            // cores the process may use
  double consumer_ms = 0;   // a simulated training step per batch (--consumer-ms), 0: none
  bool gpu = false;         // the consumer leased each batch to the GPU to decode and augment (--decoder gpu)
  double remote_share = 0;  // of the processed samples, the part remote workers did
  size_t workers = 0;       // remote workers
};

// One sentence naming what bounds the epoch's throughput. A consumer that waited under
// kInputBoundWaitShare of the time while it worked (a simulated step, the GPU's decode) bounds it
// itself: the loader keeps up, whatever its largest stage.
std::string BenchVerdict(const BenchEpoch& e);

}  // namespace dsc
