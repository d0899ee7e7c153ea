// dsc train's run as its flags describe it (read in train_main.cc's main()).
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "reader/loader.h"

namespace dsc::train {

struct Config {
  std::string train, test, json, checkpoint, resume, device = "cpu", decoder = "cpu", precision = "auto", trace, trace_steps, save_init, steps_out;
  int epochs = 24;
  uint32_t batch = 512;
  double lr = 0.5, momentum = 0.9, weight_decay = 5e-4, label_smoothing = 0.1, peak = 5.0 / 24;
  uint64_t limit = 0, test_limit = 0, max_steps = 0, seed = 0;
  int loader_threads = 1, torch_threads = 0;
  bool loader_autotune = false;  // --loader-threads auto[:N]: loader_threads is the maximum
  RemoteOptions remote;          // remote workers for the training loader (the option table's remote rows)
  std::string cache_dir;         // a URL's cache folder and its budget (the option table's rows; docs/streaming.md)
  uint64_t cache_budget = 256ull << 20;
  int nproc = 0;               // --nproc: ranks to launch on this machine
  double dist_timeout = 60;    // seconds a collective waits for a silent peer
  std::string dist_backend = "auto";
  std::string step_log;        // per-rank step records (tools/train/distributed.h)
  std::set<std::string> given;  // the flags named on the command line (a resume checks them)
};

constexpr int kMaxEpochs = 1000000;  // --epochs' range, and what a checkpoint's state may hold

// The shortest decimal that reads back as v ("0.4", not 0.40000000000000002).
inline std::string Shortest(double v) {
  char text[40];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, v);
    if (std::strtod(text, nullptr) == v) break;
  }
  return text;
}

}  // namespace dsc::train
