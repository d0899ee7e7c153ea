// The worker's decode threads (dsc serve): a Process call's samples split into pieces that the threads
// take from one queue, so that calls from many clients share the cores. Each thread keeps the
// SampleProcessors of its last few (file, spec) pairs, as a loader thread keeps one.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "reader/dataset.h"
#include "reader/sample_work.h"

namespace dsc::remote {

// Processors (and their scratch) a decode thread keeps, one per recent spec.
constexpr size_t kProcessorsPerThread = 4;

// One Process call's work: where its samples come from and where their output goes.
struct DecodeCall {
  const Dataset* ds = nullptr;
  std::shared_ptr<const SampleWork> work;
  std::string key;  // the processors' cache key: file, verify, spec
  uint64_t seed = 0, epoch = 0;
  const uint32_t* samples = nullptr;
  uint8_t* images = nullptr;  // sample_bytes() per sample
  uint8_t* params = nullptr;  // kParamBytes per sample
  uint8_t* forms = nullptr;   // when set: each sample's SampleForm
  std::atomic<bool> cancelled{false};
  std::string error;  // the first damaged sample's message, once Run returns

 private:
  friend class DecodePool;
  std::mutex mu_;
  std::condition_variable cv_;
  uint32_t pending_ = 0;  // pieces not yet done
};

class DecodePool {
 public:
  // Starts n threads; throws dsc::Error when the system refuses them.
  explicit DecodePool(int n);
  ~DecodePool();
  size_t size() const { return threads_.size(); }

  // Runs the call's `count` samples and returns when all are done, or skipped once `cancelled` (asked
  // every 20 ms) said the client went away: then c->cancelled is set.
  void Run(DecodeCall* c, uint32_t count, const std::function<bool()>& cancelled);

 private:
  struct Piece {
    DecodeCall* call;
    uint32_t from, to;
  };
  void Stop();
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Piece> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace dsc::remote
