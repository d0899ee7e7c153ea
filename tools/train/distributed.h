// Multi-rank training for dsc-train on torch.distributed's c10d: a Gloo process group formed from the
// variables torchrun sets, DDP's gradient averaging and buffer broadcast, and a local launcher
// (`dsc train --nproc N`). dsc only shards the data; the transport is c10d's (docs/distributed.md).
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>  // torch::Tensor without the nn / optim headers

#include "reader/loader.h"

namespace dsc::train {

// What torchrun (or `dsc train --nproc`) sets: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT. Without RANK/WORLD_SIZE: one rank, no process group.
struct DistEnv {
  int rank = 0, world_size = 1, local_rank = 0, local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  uint16_t master_port = 29500;
};
// Throws dsc::Error naming the variable for a malformed or inconsistent value.
DistEnv ReadDistEnv();

class Distributed {
 public:
  // Joins the process group (rank 0 hosts the TCPStore). Every collective, and joining itself, fails
  // with a dsc::Error after `timeout` when a peer is gone or silent. World size 1: no group; every
  // operation below is then a no-op.
  Distributed(const DistEnv& env, std::chrono::milliseconds timeout);
  ~Distributed();
  Distributed(const Distributed&) = delete;
  Distributed& operator=(const Distributed&) = delete;

  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  bool lead() const { return env_.rank == 0; }

  // After backward: every gradient becomes the mean over ranks. Gradients are flattened into buckets
  // of about `bucket_bytes` (one all-reduce each) in parameter order, as DDP does (without overlap).
  void AverageGradients(const std::vector<torch::Tensor>& params, size_t bucket_bytes = 25u << 20);
  // Rank 0's buffers (BatchNorm running statistics) overwrite every other rank's, one broadcast per dtype.
  void BroadcastBuffers(const std::vector<torch::Tensor>& buffers);
  // Element-wise sum over ranks, in place.
  void Sum(std::vector<double>* values);
  // Every rank's `v`, indexed by rank, on every rank.
  std::vector<double> AllGather(double v);
  // Rank 0 receives every rank's bytes (indexed by rank) through the store; other ranks get {}.
  // `tag` must be new for each call and the same on every rank.
  std::vector<std::string> GatherToLead(const std::string& tag, const std::string& bytes);

  // Seconds spent in gradient all-reduce and buffer broadcast since the last call (then reset).
  double TakeCommSeconds();

 private:
  struct Group;  // the c10d objects (their headers stay in distributed.cc)
  void AllReduce(const char* what, torch::Tensor t);

  DistEnv env_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<Group> g_;
  double comm_seconds_ = 0;
};

// Every rank's loader state united into one (LoaderState::Merge) on rank 0, for its checkpoint; other
// ranks get their own state back. `tag` as for GatherToLead.
LoaderState MergedLoaderState(Distributed& dist, const LoaderState& mine, const std::string& tag);

// `dsc train --nproc N`: runs this program N times on this machine with torchrun's variables
// (loopback, a free port), argv without --nproc; waits for all. When a rank fails, the others are
// terminated and its status is reported. Returns the exit code for the launcher.
int LaunchLocal(int nproc, int argc, char** argv);

}  // namespace dsc::train
