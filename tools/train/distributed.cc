#include "tools/train/distributed.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include <exception>

#include <torch/utils.h>  // NoGradGuard
#include <torch/version.h>
#if DSC_HAVE_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#if DSC_HAVE_NCCL
#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL  // the header's guard; the torch_cuda target may define it already
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "format/error.h"
#include "remote/address.h"

namespace dsc::train {

namespace {

using Clock = std::chrono::steady_clock;

long EnvInt(const char* name, long fallback, long lo, long hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  if (errno || *end || x < lo || x > hi)
    throw Error(std::string(name) + "=" + v + ": expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

// "20 s", "0.5 s": the time-out as the user gave it (whole seconds lost a sub-second one).
std::string Seconds(std::chrono::milliseconds t) {
  char b[32];
  std::snprintf(b, sizeof b, "%g s", double(t.count()) / 1000);
  return b;
}

// An exception's message for the user: c10::Error's what() carries a C++ backtrace.
std::string Why(const std::exception& e) {
  if (const auto* c = dynamic_cast<const c10::Error*>(&e)) return c->what_without_backtrace();
  return e.what();
}

}  // namespace

DistEnv ReadDistEnv() {
  DistEnv e;
  e.world_size = int(EnvInt("WORLD_SIZE", 1, 1, 1 << 20));
  e.rank = int(EnvInt("RANK", 0, 0, e.world_size - 1));
  e.local_rank = int(EnvInt("LOCAL_RANK", e.rank, 0, 1 << 20));
  e.local_world_size = int(EnvInt("LOCAL_WORLD_SIZE", e.world_size, 1, 1 << 20));
  if (const char* a = std::getenv("MASTER_ADDR"); a && *a) e.master_addr = a;
  e.master_port = uint16_t(EnvInt("MASTER_PORT", 29500, 1, 65535));
  if (e.world_size > 1 && !std::getenv("RANK")) throw Error("WORLD_SIZE is " + std::to_string(e.world_size) + " but RANK is not set");
  return e;
}

struct Distributed::Group {
  c10::intrusive_ptr<c10d::Store> store;
#if DSC_HAVE_GLOO
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
#endif
#if DSC_HAVE_NCCL
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl;
#endif
};

const char* BackendName(CommBackend b) { return b == CommBackend::kNccl ? "nccl" : "gloo"; }

bool BuiltWith(CommBackend b) {
  return b == CommBackend::kNccl ? DSC_HAVE_NCCL != 0 : DSC_HAVE_GLOO != 0;
}

namespace {
// PyTorch's pip wheels ship no gloo headers; Debian's CPU-only libtorch has no NCCL.
[[noreturn]] void NotBuilt(CommBackend b, const std::string& where) {
  if (b == CommBackend::kGloo)
    throw Error(where + ": this dsc train was built without c10d Gloo (its libtorch has no gloo/ headers): "
                "multi-rank training on the CPU needs a libtorch that ships them (Debian's libtorch-dev with libgloo-dev)" +
                std::string(DSC_HAVE_NCCL ? "; on GPUs use --device cuda (NCCL)" : ""));
  throw Error(where + ": this dsc train was built without c10d NCCL (it needs a CUDA libtorch with "
              "ProcessGroupNCCL.hpp and nccl.h, such as PyTorch's pip wheels)");
}
}  // namespace

CommBackend ChooseBackend(const std::string& flag, bool cuda, bool gpu_shared) {
  if (flag == "gloo") {
    if (!BuiltWith(CommBackend::kGloo)) NotBuilt(CommBackend::kGloo, "--dist-backend gloo");
    return CommBackend::kGloo;
  }
  if (flag == "nccl") {
    if (!BuiltWith(CommBackend::kNccl)) NotBuilt(CommBackend::kNccl, "--dist-backend nccl");
    if (!cuda) throw Error("--dist-backend nccl needs --device cuda and a usable GPU (NCCL reduces CUDA tensors)");
    if (gpu_shared)
      throw Error("--dist-backend nccl: local ranks would share a GPU, which NCCL refuses (one GPU per rank); "
                  "start at most as many local ranks as there are GPUs");
    return CommBackend::kNccl;
  }
  if (flag != "auto") throw Error("unknown --dist-backend '" + flag + "': auto, gloo or nccl");
  if (cuda && BuiltWith(CommBackend::kNccl)) {
    if (!gpu_shared) return CommBackend::kNccl;
    // Local ranks sharing a GPU (only with several ranks) can use Gloo, where the build has it.
    if (!BuiltWith(CommBackend::kGloo))
      throw Error("local ranks would share a GPU, which NCCL refuses (one GPU per rank), and this dsc train has no Gloo "
                  "to fall back on: start at most as many local ranks as there are GPUs");
  }
  return CommBackend::kGloo;
}

Distributed::Distributed(const DistEnv& env, const DistOptions& options)
    : env_(env), options_(options) {
  if (env_.world_size == 1 && !options_.group_of_one) return;
  g_ = std::make_unique<Group>();
  const std::string where = "rank " + std::to_string(env_.rank) + " of " + std::to_string(env_.world_size) + " (store " +
                            env_.master_addr + ":" + std::to_string(env_.master_port) + ")";
  if (!BuiltWith(options_.backend)) NotBuilt(options_.backend, where);
  try {
    c10d::TCPStoreOptions so;
    so.port = env_.master_port;
    so.isServer = env_.rank == 0;
    so.numWorkers = size_t(env_.world_size);
    // Not waiting for the workers here: the process group's rendezvous below waits for them anyway,
    // and waiting twice made a missing rank take two time-outs to report.
    so.waitWorkers = false;
    so.timeout = options_.timeout;
    g_->store = c10::make_intrusive<c10d::TCPStore>(env_.master_addr, so);
#if DSC_HAVE_NCCL
    if (options_.backend == CommBackend::kNccl) {
      // Communicators are made at the first collective, on the device of its tensors (the caller's GPU).
      auto opts = c10d::ProcessGroupNCCL::Options::create();
      opts->timeout = options_.timeout;  // the watchdog's limit for a collective
      g_->nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(g_->store, env_.rank, env_.world_size, opts);
    }
#endif
#if DSC_HAVE_GLOO
    if (options_.backend == CommBackend::kGloo) {
      auto opts = c10d::ProcessGroupGloo::Options::create(options_.timeout);
      // Gloo binds its device to one interface: GLOO_SOCKET_IFNAME as torch honours it, `lo` when the
      // rendezvous is on loopback (all ranks on this machine), else the interface of this host's name.
      if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname)
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
      else if (remote::IsLoopback(env_.master_addr))
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface("lo"));
      else
        opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      g_->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(g_->store, env_.rank, env_.world_size, opts);
    }
#endif
  } catch (const std::exception& e) {
    throw Error(where + ": cannot form the " + BackendName(options_.backend) + " process group within " + Seconds(options_.timeout) + ": " +
                Why(e));
  }
}

Distributed::~Distributed() {
#if DSC_HAVE_NCCL && (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4))
  // As destroy_process_group: pending NCCL work finishes before the communicators go. Not while an
  // error unwinds (a dead peer's collective would never finish); the process is ending then anyway.
  if (g_ && g_->nccl && std::uncaught_exceptions() == 0) {
    try {
      g_->nccl->shutdown();
    } catch (const std::exception&) {
    }
  }
#endif
}

// The tensor is on the group's device: the caller's GPU for NCCL, the CPU or a GPU for Gloo.
void Distributed::Collective(const char* what, Op op, torch::Tensor& t) {
  std::vector<at::Tensor> ts{t};
  try {
#if DSC_HAVE_NCCL
    if (g_->nccl) {
      auto work = op == Op::kAllReduce ? g_->nccl->allreduce(ts) : g_->nccl->broadcast(ts);
      work->wait();  // the current stream waits for the NCCL stream; no host sync
      return;
    }
#endif
#if DSC_HAVE_GLOO
    if (g_->gloo) {
      auto work = op == Op::kAllReduce ? g_->gloo->allreduce(ts) : g_->gloo->broadcast(ts);
      work->wait(options_.timeout);
      return;
    }
#endif
    NotBuilt(options_.backend, what);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error("rank " + std::to_string(env_.rank) + ": " + what + " failed (a peer rank exited or did not answer within " +
                Seconds(options_.timeout) + "): " + Why(e));
  }
}

namespace {
// Parameters [i, end) of one bucket: consecutive ones of i's dtype up to `bucket_bytes` (at least one).
size_t BucketEnd(const std::vector<torch::Tensor>& ts, size_t i, size_t bucket_bytes) {
  size_t j = i, bytes = 0;
  while (j < ts.size() && ts[j].scalar_type() == ts[i].scalar_type() && (j == i || bytes + size_t(ts[j].nbytes()) <= bucket_bytes))
    bytes += size_t(ts[j++].nbytes());
  return j;
}
}  // namespace

bool Distributed::Viewed(const std::vector<torch::Tensor>& params) const {
  if (params.size() != params_.size() || buckets_.empty()) return false;
  for (size_t k = 0; k < params.size(); ++k) {
    const torch::Tensor& g = params[k].grad();
    if (params[k].data_ptr() != params_[k] || !g.defined() || g.data_ptr() != views_[k].data_ptr()) return false;
  }
  return true;
}

void Distributed::ZeroGradients(const std::vector<torch::Tensor>& params, size_t bucket_bytes) {
  torch::NoGradGuard no_grad;
  if (params.size() != params_.size() || buckets_.empty() ||
      !std::equal(params.begin(), params.end(), params_.begin(), [](const torch::Tensor& p, const void* q) { return p.data_ptr() == q; })) {
    buckets_.clear();
    views_.clear();
    params_.clear();
    for (size_t i = 0; i < params.size();) {
      const size_t j = BucketEnd(params, i, bucket_bytes);
      int64_t n = 0;
      for (size_t k = i; k < j; ++k) n += params[k].numel();
      buckets_.push_back({torch::empty({n}, params[i].options()), i, j});
      int64_t off = 0;
      for (size_t k = i; k < j; ++k) {
        views_.push_back(buckets_.back().flat.narrow(0, off, params[k].numel()).view(params[k].sizes()));
        params_.push_back(params[k].data_ptr());
        off += params[k].numel();
      }
      i = j;
    }
  }
  for (auto& b : buckets_) b.flat.zero_();
  for (size_t k = 0; k < params.size(); ++k)
    if (!params[k].grad().defined() || params[k].grad().data_ptr() != views_[k].data_ptr()) params[k].mutable_grad() = views_[k];
}

void Distributed::AverageGradients(const std::vector<torch::Tensor>& params, size_t bucket_bytes) {
  if (!g_) return;
  const auto t0 = Clock::now();
  torch::NoGradGuard no_grad;
  if (Viewed(params)) {  // backward accumulated into the buckets: reduce them in place
    for (auto& b : buckets_) {
      Collective("gradient all-reduce", Op::kAllReduce, b.flat);
      b.flat.div_(double(env_.world_size));
    }
    comm_seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
    return;
  }
  std::vector<torch::Tensor> grads;
  grads.reserve(params.size());
  for (const auto& p : params) {
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);  // every rank reduces the same tensors
    grads.push_back(p.grad());
  }
  for (size_t i = 0; i < grads.size();) {
    const size_t j = BucketEnd(grads, i, bucket_bytes);
    std::vector<torch::Tensor> flat;
    for (size_t k = i; k < j; ++k) flat.push_back(grads[k].reshape({-1}));
    torch::Tensor bucket = torch::cat(flat);
    Collective("gradient all-reduce", Op::kAllReduce, bucket);
    bucket.div_(double(env_.world_size));
    int64_t off = 0;
    for (size_t k = i; k < j; ++k) {
      const int64_t n = grads[k].numel();
      grads[k].copy_(bucket.narrow(0, off, n).view_as(grads[k]));
      off += n;
    }
    i = j;
  }
  comm_seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
}

void Distributed::BroadcastBuffers(const std::vector<torch::Tensor>& buffers) {
  if (!g_) return;
  const auto t0 = Clock::now();
  torch::NoGradGuard no_grad;
  bool aliased = buffers.size() == buffer_ptrs_.size();
  for (size_t k = 0; aliased && k < buffers.size(); ++k) aliased = buffers[k].data_ptr() == buffer_ptrs_[k];
  if (!aliased) {
    // One flat tensor per dtype (ordered: the same sequence of broadcasts on every rank), and every
    // buffer moved into it (set_ keeps the module's own tensor, so BatchNorm updates the flat storage in
    // place). The next steps broadcast it whole: one operation per dtype instead of ~4 per buffer.
    // A buffer that something replaced (a checkpoint load) is moved in again.
    std::map<int, std::vector<size_t>> by_type;
    for (size_t k = 0; k < buffers.size(); ++k) by_type[int(buffers[k].scalar_type())].push_back(k);
    buffer_flats_.clear();
    buffer_ptrs_.assign(buffers.size(), nullptr);
    for (auto& [type, list] : by_type) {
      int64_t n = 0;
      for (size_t k : list) n += buffers[k].numel();
      torch::Tensor flat = torch::empty({n}, buffers[list[0]].options());
      int64_t off = 0;
      for (size_t k : list) {
        torch::Tensor b = buffers[k];  // shares the module's TensorImpl
        const int64_t m = b.numel();
        flat.narrow(0, off, m).view(b.sizes()).copy_(b);
        std::vector<int64_t> strides(size_t(b.dim()), 1);
        for (int64_t d = b.dim() - 2; d >= 0; --d) strides[size_t(d)] = strides[size_t(d) + 1] * b.size(d + 1);
        b.set_(flat.storage(), flat.storage_offset() + off, b.sizes(), strides);
        buffer_ptrs_[k] = b.data_ptr();
        off += m;
      }
      buffer_flats_.push_back(flat);
    }
  }
  for (torch::Tensor& flat : buffer_flats_) Collective("buffer broadcast", Op::kBroadcast, flat);
  comm_seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
}

void Distributed::Sum(std::vector<double>* values) {
  if (!g_ || values->empty()) return;
  torch::Tensor t = torch::tensor(*values, torch::kDouble);
  if (options_.backend == CommBackend::kNccl) t = t.to(torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(options_.cuda_device)));
  Collective("metric all-reduce", Op::kAllReduce, t);
  t = t.cpu();
  for (size_t i = 0; i < values->size(); ++i) (*values)[i] = t[int64_t(i)].item<double>();
}

std::vector<double> Distributed::AllGather(double v) {
  std::vector<double> all(size_t(env_.world_size), 0.0);
  all[size_t(env_.rank)] = v;
  Sum(&all);
  return all;
}

std::vector<std::string> Distributed::GatherToLead(const std::string& tag, const std::string& bytes) {
  if (!g_) return {bytes};
  const std::string prefix = "dsc/" + tag + "/";
  try {
    if (!lead()) {
      g_->store->set(prefix + std::to_string(env_.rank), std::vector<uint8_t>(bytes.begin(), bytes.end()));
      return {};
    }
    std::vector<std::string> all(size_t(env_.world_size));
    all[0] = bytes;
    for (int r = 1; r < env_.world_size; ++r) {
      const std::vector<uint8_t> v = g_->store->get(prefix + std::to_string(r));  // waits up to the store's time-out
      all[size_t(r)].assign(v.begin(), v.end());
    }
    return all;
  } catch (const std::exception& e) {
    throw Error("rank " + std::to_string(env_.rank) + ": gathering " + tag + " failed (a peer rank exited or did not answer within " +
                Seconds(options_.timeout) + "): " + Why(e));
  }
}

double Distributed::TakeCommSeconds() {
  const double s = comm_seconds_;
  comm_seconds_ = 0;
  return s;
}

LoaderState MergedLoaderState(Distributed& dist, const LoaderState& mine, const std::string& tag) {
  if (dist.world_size() == 1) return mine;
  const std::vector<std::string> all = dist.GatherToLead(tag, mine.Serialize());
  if (!dist.lead()) return mine;
  std::vector<LoaderState> states;
  for (const auto& b : all) states.push_back(LoaderState::Deserialize(b));
  return LoaderState::Merge(states);
}

namespace {

// A TCP port free on loopback now (the kernel's pick); rank 0's store binds it moments later.
uint16_t FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    const int e = errno;
    throw Error(std::string("cannot create a socket: ") + std::strerror(e));
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    throw Error("cannot find a free port on loopback: " + why);
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

// The launcher's children, for its signal handler: a signal the launcher gets (Ctrl-C, a scheduler's
// SIGTERM) goes on to every rank, which would otherwise train on, orphaned.
constexpr int kMaxLocalRanks = 1024;  // --nproc's limit
pid_t g_children[kMaxLocalRanks];
volatile sig_atomic_t g_child_count = 0;
volatile sig_atomic_t g_signal = 0;

void ForwardSignal(int sig) {
  g_signal = sig;
  for (int i = 0; i < g_child_count; ++i)
    if (g_children[i] > 0) ::kill(g_children[i], sig);
}

std::string Status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "stopped";
}

}  // namespace

int LaunchLocal(int nproc, int argc, char** argv) {
  // The ranks get argv without --nproc (they learn their role from the environment).
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--nproc") {
      ++i;
      continue;
    }
    if (a.rfind("--nproc=", 0) == 0) continue;
    args.push_back(argv[i]);
  }
  args.push_back(nullptr);
  if (nproc > kMaxLocalRanks) throw Error("--nproc " + std::to_string(nproc) + ": at most " + std::to_string(kMaxLocalRanks));
  const uint16_t port = FreePort();
  std::fflush(stdout);
  std::fflush(stderr);
  struct sigaction sa {};
  sa.sa_handler = ForwardSignal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  const pid_t launcher = ::getpid();
  std::vector<pid_t> pids;
  for (int r = 0; r < nproc; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      const std::string why = std::strerror(errno);
      for (pid_t p : pids) ::kill(p, SIGTERM);
      for (pid_t p : pids) ::waitpid(p, nullptr, 0);
      throw Error("cannot start rank " + std::to_string(r) + ": " + why);
    }
    if (pid == 0) {
      // A rank dies with its launcher (SIGKILLed launchers forward nothing); exec keeps this setting.
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != launcher) ::_exit(1);  // the launcher died before the line above
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &dfl, nullptr);
      const std::string n = std::to_string(nproc), rs = std::to_string(r), ps = std::to_string(port);
      ::setenv("RANK", rs.c_str(), 1);
      ::setenv("LOCAL_RANK", rs.c_str(), 1);
      ::setenv("WORLD_SIZE", n.c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", n.c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", ps.c_str(), 1);
      ::execv("/proc/self/exe", args.data());
      std::fprintf(stderr, "dsc train: rank %d: cannot run /proc/self/exe: %s\n", r, std::strerror(errno));
      ::_exit(127);
    }
    pids.push_back(pid);
    g_children[r] = pid;
    g_child_count = r + 1;
  }
  // Wait for all; the first failure ends the others (they would otherwise wait for it until the
  // process group's time-out) and is what the launcher reports. A rank still there 10 s after being
  // told to stop is killed.
  int result = 0;
  size_t left = pids.size();
  bool stopping = false;
  Clock::time_point kill_at{};
  auto stop_all = [&](int sig) {
    for (pid_t p : pids)
      if (p > 0) ::kill(p, sig);
  };
  while (left > 0) {
    if (g_signal && !stopping) {
      std::fprintf(stderr, "dsc train: %s; stopping the ranks\n", strsignal(g_signal));
      stopping = true;
      kill_at = Clock::now() + std::chrono::seconds(10);
      result = 128 + g_signal;
    }
    if (stopping && Clock::now() >= kill_at) {
      std::fprintf(stderr, "dsc train: %zu rank%s did not stop within 10 s; killing\n", left, left == 1 ? "" : "s");
      stop_all(SIGKILL);
      kill_at = Clock::time_point::max();
    }
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (pid == 0) {  // none ended yet
      ::usleep(20000);
      continue;
    }
    size_t r = 0;
    while (r < pids.size() && pids[r] != pid) ++r;
    if (r == pids.size()) continue;
    pids[r] = -1;
    g_children[r] = -1;
    --left;
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0) && result == 0) {
      std::fprintf(stderr, "dsc train: rank %zu %s; stopping the other ranks\n", r, Status(status).c_str());
      result = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
      stopping = true;
      kill_at = Clock::now() + std::chrono::seconds(10);
      stop_all(SIGTERM);
    }
  }
  g_child_count = 0;
  return result;
}

}  // namespace dsc::train
