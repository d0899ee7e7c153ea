// Internal to the loader (not for users; see reader/loader.h, LoaderOptions::remote): the state of the
// remote workers that decode beside the loader's own threads.
//
// Each worker has `in_flight` driver threads (Pipeline::DriverLoop, reader/remote_drivers.cc), each
// running one request at a time: it claims tasks (reader/work_queue.h), sends them to the worker's
// RemoteExecutor within a deadline, and writes the reply into the batch (with ship_uint8, finishing
// the uint8 samples into the batch's dtype and layout as they arrive). A failed request gives its
// tasks back for another executor and marks the worker down; a down worker is reconnected with
// back-off while the others, and the local threads, carry on.
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "reader/executor.h"
#include "reader/loader.h"
#include "reader/sample_processor.h"
#include "reader/sample_work.h"
#include "reader/work_queue.h"

namespace dsc {

// One remote worker: its executor, health and back-off, and what it delivered.
struct Remote {
  std::unique_ptr<RemoteExecutor> ex;
  std::mutex mu;  // guards the fields below
  bool up = false;
  bool connecting = false;
  bool warned = false;  // about its current outage
  std::string refusal;  // why it last refused a reconnection (said once)
  int busy_streak = 0;  // requests turned away (RunResult::kBusy) since the last that was served
  std::chrono::steady_clock::time_point next_try{};
  int backoff_ms = 100;
  uint64_t samples = 0, requests = 0, failures = 0;
  // Samples/s one request runs at (moving average), x in_flight: what the worker could deliver
  // (not what it did: local threads may have taken the rest). The autotuner's other_rate.
  double request_rate = 0;
};

// Every remote worker of a loader, in address order.
class RemoteWorkers {
 public:
  // A driver turned away waits kBusyPauseMs before its next request; a worker that served none of
  // kBusyStreak requests in a row (at least a quarter of a second) is down.
  static constexpr int kBusyPauseMs = 5, kBusyStreak = 50;

  // Makes the executors and connects them: a worker that refuses this run is a user error (thrown);
  // one that is unreachable is retried with back-off while the loader runs. `standby`: no local
  // thread works while a worker is up (said when none is).
  void Connect(const RemoteOptions& r, const RemoteContext& ctx, bool standby);

  bool empty() const { return all_.empty(); }
  size_t size() const { return all_.size(); }
  Remote& operator[](size_t w) { return *all_[w]; }
  // Workers connected now.
  int up() const { return up_.load(std::memory_order_relaxed); }
  // Worker w's rank among the workers up now, and how many are up (window affinity).
  void UpRank(size_t w, size_t* rank, size_t* up);

  void MarkDown(Remote& rm, const std::string& why);
  // A down worker: one of its drivers reconnects when the back-off has passed, the others wait.
  void Reconnect(Remote& rm, int connect_timeout_ms);
  // A request of `samples` samples succeeded after `ms`.
  void Served(Remote& rm, uint32_t samples, double ms);
  // Makes every request in progress return soon (the loader is stopping mid-epoch).
  void CancelAll();

  // Samples/s the workers that are up could deliver, estimated from their recent requests.
  double Capacity(uint32_t in_flight);
  std::vector<RemoteWorkerStats> Stats();

 private:
  std::vector<std::unique_ptr<Remote>> all_;
  std::atomic<int> up_{0};
  bool standby_ = false;
};

// Recent successful requests' durations, for the deadline of the next.
class RequestTimes {
 public:
  // The deadline of one request: `fixed_ms` when set, else max(1 s, 10 x the median of recent
  // requests), generous until timed.
  int Deadline(uint32_t fixed_ms);
  void Add(double ms);

 private:
  std::mutex mu_;
  std::deque<double> ms_;
};

// One driver thread's job: what it sends, and with ship_uint8 what finishes the replies.
struct DriverState {
  uint64_t epoch = 0, seed = 0;
  uint32_t width = 0, height = 0;
  std::vector<uint32_t> samples;
  std::shared_ptr<const SampleWork> work;  // `finish` reads its tables
  std::unique_ptr<SampleProcessor> finish;
  std::vector<uint8_t> wire;  // the executor's scratch for the reply's uint8 images (ChunkTask::sink)
  std::vector<uint8_t> bounce;  // a sample's planes split between two receive buffers
  std::vector<kernels::SampleParams> params;
  RemoteClaim claim;  // tasks of a reserved batch not yet sent
};

}  // namespace dsc
