// Multi-rank training for dsc-train on torch.distributed's c10d: a Gloo or NCCL process group formed
// from the variables torchrun sets, DDP's gradient averaging and buffer broadcast, and a local launcher
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

// c10d's process group that carries the collectives: Gloo (CPU tensors; what Debian's libtorch has) or
// NCCL (CUDA tensors, one GPU per rank; a CUDA libtorch with NCCL, such as PyTorch's pip wheels).
enum class CommBackend { kGloo, kNccl };
const char* BackendName(CommBackend b);
// Whether this dsc train was built with the backend (its headers were beside libtorch).
bool BuiltWith(CommBackend b);

// --dist-backend (auto, gloo or nccl) made a choice: NCCL where training runs on CUDA, this build has
// it and no two local ranks share a GPU (NCCL refuses that), else Gloo. A named backend that cannot
// work here is a dsc::Error saying why.
CommBackend ChooseBackend(const std::string& flag, bool cuda, bool gpu_shared);

struct DistOptions {
  std::chrono::milliseconds timeout{60000};
  CommBackend backend = CommBackend::kGloo;
  int cuda_device = 0;         // NCCL: the GPU this rank's tensors are on (made current by the caller)
  bool group_of_one = false;   // form the group even for world size 1 (to exercise a backend on one GPU)
};

class Distributed {
 public:
  // Joins the process group (rank 0 hosts the TCPStore). Every collective, and joining itself, fails
  // with a dsc::Error after the time-out when a peer is gone or silent (NCCL: the group's watchdog ends
  // the process after the time-out, as torch.distributed does, since its waits do not block the host).
  // World size 1 without `group_of_one`: no group; every operation below is then a no-op.
  Distributed(const DistEnv& env, const DistOptions& options);
  ~Distributed();
  Distributed(const Distributed&) = delete;
  Distributed& operator=(const Distributed&) = delete;

  int rank() const { return env_.rank; }
  CommBackend backend() const { return options_.backend; }
  bool grouped() const { return g_ != nullptr; }
  int world_size() const { return env_.world_size; }
  bool lead() const { return env_.rank == 0; }

  // Before backward, in place of the optimiser's zero_grad when grouped: every gradient becomes a view
  // into a few flat buckets of about `bucket_bytes` (consecutive parameters of one dtype, as DDP's
  // gradient_as_bucket_view), zeroed with one operation each. Backward then accumulates into the
  // buckets and AverageGradients reduces them in place: no gathering and scattering copies, which cost
  // the host ~100 tensor operations a step (12% of a one-GPU ResNet-9 step, measured on an H200).
  void ZeroGradients(const std::vector<torch::Tensor>& params, size_t bucket_bytes = 25u << 20);
  // After backward: every gradient becomes the mean over ranks, one all-reduce per bucket. Gradients
  // that are not ZeroGradients' views (it was not called, or something replaced them) are gathered
  // into buckets of `bucket_bytes` and scattered back.
  void AverageGradients(const std::vector<torch::Tensor>& params, size_t bucket_bytes = 25u << 20);
  // Rank 0's buffers (BatchNorm running statistics) overwrite every other rank's, one broadcast per
  // dtype. The first call moves the buffers into one flat tensor per dtype (Tensor::set_), so later
  // ones broadcast that tensor in place.
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
  enum class Op { kAllReduce, kBroadcast };
  void Collective(const char* what, Op op, torch::Tensor& t);

  DistEnv env_;
  DistOptions options_;
  std::unique_ptr<Group> g_;
  double comm_seconds_ = 0;
  // ZeroGradients' buckets and the view it made each parameter's gradient.
  struct Bucket {
    torch::Tensor flat;
    size_t first = 0, end = 0;  // parameters [first, end)
  };
  std::vector<Bucket> buckets_;
  std::vector<torch::Tensor> views_;
  std::vector<const void*> params_;  // the parameters they were made for (their data pointers)
  bool Viewed(const std::vector<torch::Tensor>& params) const;
  // BroadcastBuffers' flat tensors (one per dtype) and where each buffer's data now is.
  std::vector<torch::Tensor> buffer_flats_;
  std::vector<const void*> buffer_ptrs_;
};

// Every rank's loader state united into one (LoaderState::Merge) on rank 0, for its checkpoint; other
// ranks get their own state back. `tag` as for GatherToLead.
LoaderState MergedLoaderState(Distributed& dist, const LoaderState& mine, const std::string& tag);

// `dsc train --nproc N`: runs this program N times on this machine with torchrun's variables
// (loopback, a free port), argv without --nproc; waits for all. When a rank fails, the others are
// terminated and its status is reported. Returns the exit code for the launcher.
int LaunchLocal(int nproc, int argc, char** argv);

}  // namespace dsc::train
