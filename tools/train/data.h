// dsc train's hardware and data: the GPU this rank trains on, the files the run writes (checked
// before any work), and the train and test loaders with their subsets and GPU augmenter.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "reader/gpu.h"
#include "reader/loader.h"
#include "reader/trace.h"
#include "tools/train/amp.h"
#include "tools/train/checkpoint.h"
#include "tools/train/config.h"
#include "tools/train/distributed.h"

namespace dsc::train {

// Where the model trains. On CUDA the loader decodes to pinned uint8 batches, dsc's kernel does
// flip/translate/cutout/normalise into channels_last on the GPU while the previous step runs, and the
// model runs under bf16 autocast (sm_80+) or fp16 with loss scaling (tools/train/amp.h).
struct Hardware {
  int cuda_device = 0;
  bool gpu_shared = false;  // several local ranks on one GPU
  bool cuda = false;        // --device cuda, and it can be honoured
  torch::Device device = torch::Device(torch::kCPU);
  Precision precision = Precision::kFloat32;
};

// The GPU first (NCCL's group needs it): picked for this rank and made current before anything
// touches a GPU. Device and precision are set by ChoosePrecisionFor.
Hardware PickHardware(const Config& c, const DistEnv& env);
DistOptions DistOptionsFor(const Config& c, const Hardware& hw);
// Sets hw->device and hw->precision, and says what CUDA training runs on.
void ChoosePrecisionFor(const Config& c, Hardware* hw);

// Per-rank file names (trace, steps-out) and every file the run writes checked now, not found
// unwritable after hours of training.
void PrepareOutputs(Config* c, const Distributed& dist);

// libtorch's threads: all cores with one loader thread, else what the loader leaves.
int TorchThreads(const Config& c, const DistEnv& env);

// The loaders of a run. Not movable: the loaders record into `tracer`.
class TrainData {
 public:
  TrainData(const Config& c, const Distributed& dist, const Hardware& hw, const Checkpoint* resume);
  TrainData(const TrainData&) = delete;
  TrainData& operator=(const TrainData&) = delete;

  LoaderOptions train_options;
  uint64_t train_samples = 0;  // in the train file
  bool gpu_decode = false;     // --decoder gpu on a GPU
  Tracer tracer;               // outlives the loaders that record into it
  std::unique_ptr<Loader> train, test;
  // The model's outputs: 10 (FFCV's CIFAR-10 model, which --save-init weights and checkpoints of fewer
  // classes fit), more for a train file of more classes.
  int64_t classes = 0;
  std::unique_ptr<gpu::Augmenter> augmenter;  // CUDA: the train batches' augmentation (and decode)
};

}  // namespace dsc::train
