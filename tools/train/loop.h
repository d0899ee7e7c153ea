// dsc train's loop: the optimiser steps of an epoch, its figures and evaluation, and the results
// (--json) of the whole run.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "reader/bottleneck.h"
#include "tools/train/amp.h"
#include "tools/train/config.h"
#include "tools/train/data.h"
#include "tools/train/distributed.h"
#include "tools/train/profile.h"
#include "tools/train/repro.h"
#include "tools/train/resnet9.h"

namespace dsc::train {

struct EpochLog {
  double images_per_second = 0, data_wait_share = 0, train_loss = 0, test_accuracy = -1, seconds = 0;
  EpochProfile profile;
  Diagnosis verdict;
};

// Parameters and buffers hashed together (the same value on every rank, and in a resumed run).
uint64_t ParamChecksum(ResNet9& model);

class Trainer {
 public:
  // Continues from optimiser step `step` (0, or a resumed checkpoint's). `batches_per_epoch`: of a
  // full epoch, as the train loader said before any restore.
  Trainer(const Config& c, Distributed& dist, const Hardware& hw, TrainData& data, ResNet9& model, torch::optim::SGD& opt,
          uint64_t batches_per_epoch, uint64_t step);

  // Trains epoch `e` from batch `first` to its end or to --max-steps, gathers the ranks' figures,
  // evaluates (unless --max-steps cut the epoch short) and prints the epoch's report. `state`: the
  // loaders' merged state after the epoch's steps, for a checkpoint.
  EpochLog Epoch(uint64_t e, uint64_t first, LoaderState* state);

  // The trace written (when --trace) and the step digests closed.
  void Finish();

  uint64_t step() const { return step_; }
  bool stopped() const { return stopped_; }  // --max-steps reached
  uint64_t batches_per_epoch() const { return per_epoch_; }
  // Each rank's images/s, summed over the epochs (the JSON gives the mean, as for the total).
  const std::vector<double>& rank_rates() const { return rank_rates_; }
  double comm_share() const { return comm_share_; }  // of the last epoch's time, in all-reduce and broadcast

 private:
  // One optimiser step on `b`; `x` its images on the model's device. Returns the loss.
  torch::Tensor Step(const Batch& b, const torch::Tensor& x);
  void LogStep(const Batch& b, const torch::Tensor& loss);
  void PrintEpoch(uint64_t e, const EpochLog& log) const;
  double Evaluate();

  const Config& c_;
  Distributed& dist_;
  const Hardware& hw_;
  TrainData& data_;
  ResNet9& model_;
  torch::optim::SGD& opt_;
  std::unique_ptr<LossScaler> scaler_;  // fp16 only
  uint64_t per_epoch_, total_, step_;
  bool stopped_;
  StepLog batch_log_;  // --steps-out
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> step_log_{nullptr, &std::fclose};  // --step-log
  const std::vector<torch::Tensor> weights_, buffers_;
  const TraceWindow window_;
  StepProfiler prof_;
  const double stored_pixels_;
  std::vector<double> rank_rates_;
  double comm_share_ = 0;
};

// The --json document of the run.
void WriteResults(const std::string& path, const std::vector<EpochLog>& logs, const Trainer& trainer, int world_size,
                  uint64_t param_checksum);

}  // namespace dsc::train
