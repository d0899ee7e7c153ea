// dsc-train (run as `dsc train`): ResNet-9 on CIFAR-10 from dsc files, with FFCV's CIFAR-10 recipe as
// the default so results compare with its published figures. Links libtorch; the rest of dsc does not.
#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "format/checksum.h"
#include "format/error.h"
#include "kernels/cpu.h"
#include "kernels/random.h"
#include "reader/gpu.h"
#include "reader/gpu_stage.h"
#include "reader/loader.h"
#include "reader/torch_adapter.h"
#include "tools/train/amp.h"
#include "tools/commands.h"
#include "tools/remote_cli.h"
#include "tools/train/profile.h"
#include "tools/train/distributed.h"
#include "tools/train/repro.h"
#include "tools/train/resnet9.h"

namespace dsc::train {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Config {
  std::string train, test, json, checkpoint, resume, device = "cpu", decoder = "cpu", precision = "auto", trace, trace_steps, save_init, steps_out;
  int epochs = 24;
  uint32_t batch = 512;
  double lr = 0.5, momentum = 0.9, weight_decay = 5e-4, label_smoothing = 0.1, peak = 5.0 / 24;
  uint64_t limit = 0, test_limit = 0, max_steps = 0, seed = 0;
  int loader_threads = 1, torch_threads = 0;
  bool loader_autotune = false;  // --loader-threads auto[:N]: loader_threads is the maximum
  std::string remote, token_file, tls_root;  // remote workers for the training loader (tools/remote_cli.h)
  int local_threads = -1;
  bool wire_compression = false;
  int nproc = 0;               // --nproc: ranks to launch on this machine
  double dist_timeout = 60;    // seconds a collective waits for a silent peer
  std::string dist_backend = "auto";
  std::string step_log;        // per-rank step records (tools/train/distributed.h)
  std::set<std::string> given;  // the flags named on the command line (a resume checks them)
};

// A JSON number, or null for NaN and infinities (which JSON has no way to write).
std::string Num(double v) {
  if (!std::isfinite(v)) return "null";
  std::ostringstream o;
  o << v;
  return o.str();
}

struct EpochLog {
  double images_per_second = 0, data_wait_share = 0, train_loss = 0, test_accuracy = -1, seconds = 0;
  EpochProfile profile;
  Diagnosis verdict;
};

double LearningRate(const Config& c, uint64_t step, uint64_t total) {
  const double t = double(step) / double(std::max<uint64_t>(1, total));
  const double shape = t < c.peak ? t / c.peak : std::max(0.0, (1 - t) / (1 - c.peak));
  return c.lr * shape;
}

// A small host tensor on `device` without blocking the host: through pinned memory, which libtorch's
// caching host allocator keeps until the copy is done.
torch::Tensor ToDevice(const torch::Tensor& t, const torch::Device& device) {
  if (device.is_cpu()) return t;
  return t.pin_memory().to(t.options().device(device), /*non_blocking=*/true);
}

double Evaluate(ResNet9& model, Loader& test, const torch::Device& device, Distributed& dist) {
  torch::NoGradGuard no_grad;
  model->eval();
  int64_t correct = 0, seen = 0;
  for (const Batch& b : test.epoch(0)) {
    if (b.size == 0) continue;  // sequential on several ranks: a rank's last slice may be empty
    auto x = torch_view::Images(b).to(device);
    auto logits = model->forward(x) + model->forward(x.flip({3}));  // test-time flip augmentation
    auto pred = logits.argmax(1);
    correct += pred.eq(torch_view::Labels(b).to(device, torch::kLong)).sum().item<int64_t>();
    seen += b.size;
  }
  model->train();
  std::vector<double> counts{double(correct), double(seen)};  // each rank saw its shard of the test set
  dist.Sum(&counts);
  return counts[1] > 0 ? counts[0] / counts[1] : 0;
}

uint64_t ParamChecksum(ResNet9& model) {
  uint64_t h = 0;
  for (const auto& p : model->named_parameters()) {
    auto t = p.value().to(torch::kCPU).contiguous();
    h = kernels::Mix64(h ^ Checksum(t.data_ptr(), size_t(t.numel()) * t.element_size()));
  }
  for (const auto& p : model->named_buffers()) {
    auto t = p.value().to(torch::kCPU).contiguous();
    h = kernels::Mix64(h ^ Checksum(t.data_ptr(), size_t(t.numel()) * t.element_size()));
  }
  return h;
}

// A checkpoint is a directory (model.pt, optimizer.pt, state.txt) that is replaced as a whole: the
// new one is written and fsynced in a hidden sibling ".NAME.dsc-tmp-RANDOM", then swapped in with
// renameat2(RENAME_EXCHANGE) and the old one (now under the hidden name) deleted. A crash at any
// point leaves DIR holding a complete checkpoint, old or new; hidden siblings left by a crash are
// removed by the next save. One trainer writes a given checkpoint directory at a time.
//
// loader.state holds LoaderState::Serialize()'s bytes (position and the loader's run fingerprint);
// state.txt holds the step and the options that decide what is trained (the subset itself, batch
// size, seed, epochs, learning rate), so a resume continues the same run.
struct Checkpoint {
  LoaderState loader;
  uint64_t seed = 0, step = 0, train_samples = 0, limit = 0, epochs = 0;
  uint32_t batch = 0;
  double lr = 0;
  std::vector<uint32_t> subset;
};

constexpr const char* kCheckpointMagic = "dsc-train-checkpoint";
constexpr int kCheckpointVersion = 3;
constexpr int kMaxEpochs = 1000000;  // --epochs' range, and what a checkpoint's state may hold

// The shortest decimal that reads back as v ("0.4", not 0.40000000000000002).
std::string Shortest(double v) {
  char text[40];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, v);
    if (std::strtod(text, nullptr) == v) break;
  }
  return text;
}

void WriteState(const fs::path& path, const Checkpoint& k) {
  std::ofstream st(path);
  st.precision(17);
  st << kCheckpointMagic << " " << kCheckpointVersion << "\n"
     << "seed " << k.seed << "\nstep " << k.step
     << "\nbatch_size " << k.batch << "\nlimit " << k.limit << "\nepochs " << k.epochs << "\nlr " << k.lr << "\ntrain_samples "
     << k.train_samples << "\nsubset " << k.subset.size();
  for (uint32_t i : k.subset) st << " " << i;
  st << "\nend\n";
  st.close();
  if (!st) throw Error(path.string() + ": write failed");
}

Checkpoint ReadState(const fs::path& path) {
  std::ifstream st(path);
  if (!st) {
    const int e = errno;
    throw Error(path.string() + ": cannot open the checkpoint's state: " + std::strerror(e));
  }
  std::string magic;
  int version = 0;
  if (!(st >> magic >> version) || magic != kCheckpointMagic || version != kCheckpointVersion)
    throw Error(path.string() + ": not a dsc-train checkpoint of format " + std::to_string(kCheckpointVersion) +
                " (written by an older dsc?)");
  Checkpoint k;
  std::string key;
  auto expect = [&](const char* want) {
    if (!(st >> key) || key != want) throw Error(path.string() + ": expected \"" + want + "\", found \"" + key + "\"");
  };
  auto field = [&](const char* want, auto& value) {
    expect(want);
    if (!(st >> value)) throw Error(path.string() + ": unreadable value of " + want);
  };
  uint64_t n = 0;
  field("seed", k.seed);
  field("step", k.step);
  field("batch_size", k.batch);
  field("limit", k.limit);
  field("epochs", k.epochs);
  field("lr", k.lr);
  field("train_samples", k.train_samples);
  field("subset", n);
  if (k.batch == 0 || k.epochs == 0 || k.epochs > uint64_t(kMaxEpochs) || n > k.train_samples)
    throw Error(path.string() + ": inconsistent state (batch size, epochs or subset size)");
  // Grown entry by entry: a corrupt count cannot make a huge allocation ahead of the data.
  for (uint64_t j = 0; j < n; ++j) {
    uint32_t i = 0;
    if (!(st >> i) || i >= k.train_samples) throw Error(path.string() + ": bad subset entry " + std::to_string(j));
    k.subset.push_back(i);
  }
  expect("end");
  // The loader's position and run identity, in the format every dsc state consumer shares.
  const fs::path lpath = path.parent_path() / "loader.state";
  std::ifstream ls(lpath, std::ios::binary);
  if (!ls) {
    const int e = errno;
    throw Error(lpath.string() + ": cannot open the checkpoint's loader state: " + std::strerror(e));
  }
  const std::string bytes((std::istreambuf_iterator<char>(ls)), std::istreambuf_iterator<char>());
  try {
    k.loader = LoaderState::Deserialize(bytes);
  } catch (const Error& e) {
    throw Error(lpath.string() + ": " + e.what());
  }
  if (k.loader.run.seed != k.seed) throw Error(lpath.string() + ": loader seed disagrees with state.txt");
  return k;
}

void WriteLoaderState(const fs::path& path, const LoaderState& s) {
  std::ofstream ls(path, std::ios::binary);
  const std::string bytes = s.Serialize();
  ls.write(bytes.data(), std::streamsize(bytes.size()));
  ls.close();
  if (!ls) throw Error(path.string() + ": write failed");
}

// The checkpoint's directory split into its parent and name (a trailing slash is allowed).
std::pair<fs::path, std::string> SplitDir(const std::string& dir) {
  fs::path p = fs::absolute(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return {p.parent_path(), p.filename().string()};
}

void FsyncPath(const fs::path& p, bool directory) {
  int fd = ::open(p.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw Error(p.string() + ": fsync failed: " + why);
  }
  ::close(fd);
}

// Hidden siblings of the checkpoint directory: ".NAME.dsc-tmp-*" (all left by a crash, given one
// trainer per checkpoint).
void RemoveCheckpointLeftovers(const fs::path& parent, const std::string& name) {
  const std::string prefix = "." + name + ".dsc-tmp-";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(parent, ec))
    if (e.path().filename().string().rfind(prefix, 0) == 0) fs::remove_all(e.path(), ec);
}

// --checkpoint replaces what is at its path: only nothing, or a checkpoint of ours (its state file's
// magic, no other files), may be there. Anything else (a folder of the user's, a dataset, ".") is
// refused, before training and again before each swap.
void CheckCheckpointTarget(const std::string& path) {
  const fs::path p = fs::absolute(path).lexically_normal();
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(p, ec);
  if (ec || st.type() == fs::file_type::not_found) {
    CheckWritable(path, "--checkpoint", /*parents_made=*/true);  // its folder can be made and written
    return;
  }
  const std::string refuse = path + ": exists and is not a dsc train checkpoint, so --checkpoint will not replace it";
  if (st.type() != fs::file_type::directory) throw Error(refuse + " (not a directory)");
  static const std::set<std::string> ours{"model.pt", "optimizer.pt", "state.txt", "loader.state"};
  for (const auto& e : fs::directory_iterator(p, ec))
    if (!ours.count(e.path().filename().string()) || !e.is_regular_file())
      throw Error(refuse + " (it holds " + e.path().filename().string() + ")");
  if (ec) throw Error(path + ": cannot list it: " + ec.message());
  std::ifstream in(p / "state.txt");
  std::string magic;
  if (!(in >> magic) || magic != kCheckpointMagic) throw Error(refuse + " (no " + kCheckpointMagic + " state.txt)");
}

void SaveCheckpoint(const Config& c, const Checkpoint& k, ResNet9& model, torch::optim::SGD& opt) {
  CheckCheckpointTarget(c.checkpoint);
  const auto [parent, name] = SplitDir(c.checkpoint);
  if (name.empty() || name == "." || name == "..") throw Error(c.checkpoint + ": not a directory name --checkpoint can replace");
  fs::create_directories(parent);
  RemoveCheckpointLeftovers(parent, name);
  char suffix[17];
  std::snprintf(suffix, sizeof suffix, "%016llx", (unsigned long long)((uint64_t(std::random_device{}()) << 32) ^ std::random_device{}()));
  const fs::path tmp = parent / ("." + name + ".dsc-tmp-" + suffix), target = parent / name;
  fs::create_directory(tmp);
  torch::save(model, (tmp / "model.pt").string());
  torch::save(opt, (tmp / "optimizer.pt").string());
  WriteState(tmp / "state.txt", k);
  WriteLoaderState(tmp / "loader.state", k.loader);
  for (const char* f : {"model.pt", "optimizer.pt", "state.txt", "loader.state"}) FsyncPath(tmp / f, false);
  FsyncPath(tmp, true);
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(tmp);  // the old checkpoint, swapped out
  } else if (errno == ENOENT) {  // the first checkpoint
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, target.c_str(), RENAME_NOREPLACE) != 0) {
      const int e = errno;
      throw Error(target.string() + ": cannot move the checkpoint into place: " + std::strerror(e));
    }
  } else {
    const std::string why = std::strerror(errno);
    fs::remove_all(tmp);
    throw Error(target.string() + ": cannot swap the new checkpoint in (" + why +
                "; the file system needs renameat2 RENAME_EXCHANGE); the previous checkpoint is kept");
  }
  FsyncPath(parent, true);
}

// Reads the checkpoint to resume and makes its identity the run's: a flag naming a different value
// is an error (silently training another run than the one checkpointed would waste it).
Checkpoint LoadCheckpointState(Config* c) {
  const fs::path dir = c->resume;
  if (!fs::is_directory(dir)) throw Error(c->resume + ": no checkpoint directory to resume from");
  Checkpoint k = ReadState(dir / "state.txt");
  auto check = [&](const char* flag, const std::string& given, const std::string& stored) {
    if (c->given.count(flag) && given != stored)
      throw OptionError(std::string("--") + flag + " " + given + " contradicts the checkpoint's " + stored + " (" + c->resume +
                  "); resume takes it from the checkpoint, so leave the flag out");
  };
  check("limit", std::to_string(c->limit), std::to_string(k.limit));
  check("batch-size", std::to_string(c->batch), std::to_string(k.batch));
  check("seed", std::to_string(c->seed), std::to_string(k.seed));
  check("epochs", std::to_string(c->epochs), std::to_string(k.epochs));
  check("lr", Shortest(c->lr), Shortest(k.lr));
  c->limit = k.limit;
  c->batch = k.batch;
  c->seed = k.seed;
  c->epochs = int(k.epochs);
  c->lr = k.lr;
  return k;
}

// The GPU this rank trains on: its LOCAL_RANK's when the machine shows one per local rank (one rank:
// the first visible one, CUDA_VISIBLE_DEVICES picks it). Made the current device before anything
// touches a GPU, so libtorch's default stream and dsc's kernels run there and no rank makes a CUDA
// context on another rank's GPU (restoring device 0 after a check would create one there).
int PickCudaDevice(const DistEnv& env, bool* gpu_shared) {
  bool& shared = *gpu_shared;
  const int count = gpu::DeviceCount();
  const int d = gpu::DeviceForLocalRank(env.local_rank, env.local_world_size, count,
                                        std::getenv("CUDA_VISIBLE_DEVICES") != nullptr, &shared);
  if (shared && env.local_rank == 0)
    std::fprintf(stderr, "notice: %d local ranks share %d GPU%s (local rank r uses GPU r mod %d)\n", env.local_world_size,
                 count, count == 1 ? "" : "s", count);
  if (count > 0) gpu::SetCurrentDevice(d);
  return d;
}

// Whether --device cuda can be honoured: a GPU, and a libtorch with CUDA (Debian's is CPU-only).
bool UseCuda(const Config& c, int device) {
  if (c.device != "cuda") return false;
  std::string why;
  if (!gpu::Available(&why, device)) {
    std::printf("notice: no usable GPU (%s); training on the CPU\n", why.c_str());
    return false;
  }
  if (!torch_view::TorchHasCuda()) {
    std::printf("notice: this libtorch has no CUDA; training on the CPU\n");
    return false;
  }
  return true;
}

// A label field's classes: their names when the file has them, else how many its labels span.
struct Classes {
  std::vector<std::string> names;
  int64_t count = 0;
};

Classes LabelClasses(const Dataset& d) {
  if (d.meta().label_field_count() == 0) throw Error(d.path() + ": has no labels; dsc train needs a class label per image");
  Classes k;
  k.names = d.meta().fields[1].classes;
  int64_t top = -1;
  for (uint64_t i = 0; i < d.size(); ++i) {
    const int32_t l = d.label(i);
    if (l < 0) throw Error(d.path() + ": sample " + std::to_string(i) + " has label " + std::to_string(l) + "; class labels are 0 or more");
    top = std::max<int64_t>(top, l);
  }
  k.count = std::max<int64_t>(int64_t(k.names.size()), top + 1);
  return k;
}

std::string Listed(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < 12; ++i) s += (i ? ", " : "") + names[i];
  return names.size() > 12 ? s + ", ..." : s;
}

// The test file must be the train file's task: the same image size, and labels that mean the same
// classes. Returns the train file's class count.
int64_t CheckCompatible(const Loader& train, const Loader& test) {
  const std::string tr = train.dataset().path(), te = test.dataset().path();
  if (train.width() != test.width() || train.height() != test.height())
    throw Error("--test " + te + " holds " + std::to_string(test.width()) + "x" + std::to_string(test.height()) + " images, " + tr +
                " " + std::to_string(train.width()) + "x" + std::to_string(train.height()) + ": not the same task");
  const Classes a = LabelClasses(train.dataset()), b = LabelClasses(test.dataset());
  // A test split may lack the last classes (its names a prefix of the train file's), not reorder them.
  if (!a.names.empty() && !b.names.empty() &&
      (b.names.size() > a.names.size() || !std::equal(b.names.begin(), b.names.end(), a.names.begin())))
    throw Error("--test " + te + " names its classes " + Listed(b.names) + "; " + tr + " names " + Listed(a.names) +
                ": the same label would mean different classes");
  if (b.count > a.count)
    throw Error("--test " + te + " has labels of " + std::to_string(b.count) + " classes, " + tr + " only " + std::to_string(a.count));
  if (a.count < 2) throw Error(tr + ": its labels span " + std::to_string(a.count) + " class; training needs at least 2");
  return a.count;
}

int Run(Config c) {
  // On CUDA (run on an H100: bench/RESULTS.md): the loader decodes to pinned uint8 batches,
  // dsc's kernel does flip/translate/cutout/normalise into channels_last on the GPU while the previous
  // step runs, and the model runs under bf16 autocast (sm_80+) or fp16 with loss scaling
  // (tools/train/amp.h). Per step the host waits only for LossScaler's inf/NaN flag (fp16 only); loss
  // figures are read once per epoch.
  const DistEnv env = ReadDistEnv();
  if (env.rank != 0 && !std::freopen("/dev/null", "w", stdout))  // rank 0 alone prints
    throw Error("cannot silence rank " + std::to_string(env.rank) + "'s output");
  // The GPU first: NCCL's group needs it (and its communicators are made on it).
  bool gpu_shared = false;
  const int cuda_device = c.device == "cuda" ? PickCudaDevice(env, &gpu_shared) : 0;
  const bool cuda = UseCuda(c, cuda_device);
  DistOptions dopt;
  dopt.timeout = std::chrono::milliseconds(int64_t(c.dist_timeout * 1000));
  dopt.backend = ChooseBackend(c.dist_backend, cuda, gpu_shared);
  dopt.cuda_device = cuda_device;
  dopt.group_of_one = c.dist_backend != "auto";  // a named backend is formed, and exercised, on one rank too
  Distributed dist(env, dopt);
  if (dist.grouped()) std::printf("process group: %s, %d rank%s\n", BackendName(dist.backend()), dist.world_size(), dist.world_size() == 1 ? "" : "s");
  // Every rank traces its own trainer and loader: one file per rank, or they would overwrite each other.
  if (!c.trace.empty() && dist.world_size() > 1) c.trace += ".rank" + std::to_string(dist.rank());
  if (!c.steps_out.empty() && dist.world_size() > 1) c.steps_out += ".rank" + std::to_string(dist.rank());  // this rank's batches
  if (!c.checkpoint.empty()) CheckCheckpointTarget(c.checkpoint);  // before any training, not after an epoch of it
  // Every file the run writes is checked now, not found unwritable after hours of training.
  auto output = [&](const std::string& path, const char* flag) {
    CheckWritable(path, flag);
    std::error_code ec;
    for (const std::string& input : {c.train, c.test})
      if (fs::equivalent(path, input, ec)) throw OptionError(std::string(flag) + " " + path + " is the input " + input + "; it would be overwritten");
  };
  if (!c.json.empty() && dist.lead()) output(c.json, "--json");
  if (!c.trace.empty()) output(c.trace, "--trace");
  if (!c.steps_out.empty()) output(c.steps_out, "--steps-out");
  if (!c.save_init.empty() && dist.lead()) output(c.save_init, "--save-init");
  if (!c.step_log.empty()) output(c.step_log + ".rank" + std::to_string(dist.rank()), "--step-log");
  Checkpoint resume;
  if (!c.resume.empty()) resume = LoadCheckpointState(&c);
  const torch::Device device = cuda ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(cuda_device)) : torch::Device(torch::kCPU);
  const Precision precision = cuda ? ChoosePrecision(c.precision, gpu::ComputeCapability(cuda_device)) : Precision::kFloat32;
  if (cuda) std::printf("cuda: %s; %s\n", gpu::Describe(cuda_device).c_str(), PrecisionName(precision));
  if (!cuda && c.precision != "auto")
    std::printf("notice: --precision %s applies to CUDA training; the CPU trains in float32\n", c.precision.c_str());
  std::unique_ptr<LossScaler> scaler;
  if (precision == Precision::kFloat16) scaler = std::make_unique<LossScaler>();
  LoaderOptions to = LoaderOptions::CifarTrain();
  to.batch_size = c.batch;
  to.global_batch_size = c.batch;  // --batch-size is the global batch: the same batches on any rank count
  to.rank = uint32_t(dist.rank());
  to.world_size = uint32_t(dist.world_size());
  to.seed = c.seed;
  to.threads = c.loader_threads;
  to.autotune = c.loader_autotune;
  to.layout = Layout::kNHWC;  // viewed as channels_last NCHW, the model's memory format
  tools::ApplyRemoteFlags(c.remote, c.token_file, c.tls_root, c.local_threads, c.wire_compression, &to);
  const kernels::AugmentSpec train_aug = to.augment;
  const bool gpu_decode = cuda && c.decoder == "gpu";
  if (c.decoder == "gpu" && !cuda) std::printf("notice: --decoder gpu: decoding on the CPU\n");
  if (cuda) {
    to.defer_augment = true;
    to.dtype = DType::kUint8;
    if (gpu_decode) to.decoder = LoaderOptions::Decoder::kGpu;  // JPEGs decoded on the GPU (reader/gpu_stage.h)
    gpu::UsePinnedMemory(to, cuda_device);  // allocated through that GPU's context, none on another
  }
  LoaderOptions eo = LoaderOptions::CifarTest();
  eo.batch_size = 500;
  eo.rank = uint32_t(dist.rank());
  eo.world_size = uint32_t(dist.world_size());
  eo.threads = c.loader_threads;
  eo.layout = Layout::kNHWC;
  uint64_t train_samples = 0;
  {
    Dataset probe(c.train);
    train_samples = probe.size();
    if (!c.resume.empty() && resume.train_samples != train_samples)
      throw Error(c.resume + ": the checkpoint trained on " + std::to_string(resume.train_samples) + " samples; " + c.train +
                  " has " + std::to_string(train_samples));
    if (c.limit > train_samples)
      std::printf("notice: --limit %llu is more than %s's %llu samples: training on all of them\n", (unsigned long long)c.limit,
                  c.train.c_str(), (unsigned long long)train_samples);
    to.subset = c.resume.empty() ? RandomSubset(train_samples, c.limit, c.seed) : resume.subset;
  }
  {
    Dataset probe(c.test);
    if (c.test_limit > probe.size())
      std::printf("notice: --test-limit %llu is more than %s's %llu samples: evaluating on all of them\n",
                  (unsigned long long)c.test_limit, c.test.c_str(), (unsigned long long)probe.size());
    eo.subset = RandomSubset(probe.size(), c.test_limit, c.seed + 1);
    std::sort(eo.subset.begin(), eo.subset.end());
  }
  to.collect_stats = true;  // the verdict weighs the loader's stage times
  Tracer tracer;             // outlives the loaders that record into it
  if (!c.trace.empty()) to.tracer = &tracer;
  Loader train(c.train, to), test(c.test, eo);
  // The model's outputs: 10 (FFCV's CIFAR-10 model, which --save-init weights and checkpoints of fewer
  // classes fit), more for a train file of more classes.
  const int64_t classes = std::max<int64_t>(10, CheckCompatible(train, test));
  std::unique_ptr<gpu::Augmenter> augmenter;
  if (cuda) {
    gpu::AugmenterOptions ao;
    ao.device = cuda_device;
    ao.max_leases = to.max_leases;
    if (gpu_decode) ao.staging_bytes = gpu::StagingBytesFor(train);
    ao.path = c.train;
    augmenter = std::make_unique<gpu::Augmenter>(train_aug, train.width(), train.height(), c.batch,
                                                 precision == Precision::kFloat32 ? DType::kFloat32 : DType::kFloat16,
                                                 Layout::kNHWC, ao);
  }
  // At CPU training rates one decode thread is busy well under 1% of the time (measured: data wait
  // 0.2%, ~8 us per image), so libtorch gets every core unless the loader has several fixed threads
  // (with auto, the controller keeps only the loader threads the step needs).
  const int torch_threads = c.torch_threads > 0   ? c.torch_threads
                            : c.loader_threads > 1 && !c.loader_autotune ? torch_view::ShareCores(c.loader_threads)
                                                   : std::max(1, kernels::UsableCores() / env.local_world_size);
  torch::set_num_threads(torch_threads);
  torch::manual_seed(c.seed);
  ResNet9 model(classes);
  model->to(device, torch::kFloat);
  if (!c.save_init.empty() && dist.lead()) SaveWeights(model, c.save_init);  // the same weights on every rank
  StepLog batch_log(c.steps_out);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(c.lr).momentum(c.momentum).weight_decay(c.weight_decay));
  const uint64_t per_epoch = train.batches_per_epoch(), total = per_epoch * uint64_t(c.epochs);
  uint64_t step = 0, start_epoch = 0, start_batch = 0;
  if (!c.resume.empty()) {
    const fs::path dir = c.resume;
    // A model.pt of another run (another class count, or not ours) is named, not a libtorch trace.
    // torch::load takes a stored tensor of another shape as it is, so the shapes are compared too.
    std::vector<std::vector<int64_t>> shapes;
    for (const auto& p : model->named_parameters()) shapes.push_back(p.value().sizes().vec());
    for (const char* f : {"model.pt", "optimizer.pt"}) {
      const std::string misfit = (dir / f).string() + ": does not fit a ResNet-9 of " + std::to_string(classes) + " outputs";
      try {
        if (f[0] == 'm') torch::load(model, (dir / f).string());
        else torch::load(opt, (dir / f).string());
      } catch (const c10::Error& e) {
        const std::string what = e.what_without_backtrace();
        throw Error(misfit + " (" + what.substr(0, what.find('\n')) + ")");
      }
      size_t i = 0;
      for (const auto& p : model->named_parameters())
        if (p.value().sizes().vec() != shapes[i++]) throw Error(misfit + " (its " + p.key() + " has another shape)");
    }
    const LoaderState& s = resume.loader;
    step = resume.step;
    train.restore(s);
    start_epoch = s.epoch;
    start_batch = s.next_batch;
    if (start_batch >= per_epoch) start_epoch += 1, start_batch = 0;  // stopped at an epoch's end (older checkpoints)
    std::printf("resumed from %s at epoch %llu, batch %llu (step %llu)\n", c.resume.c_str(), (unsigned long long)s.epoch,
                (unsigned long long)s.next_batch, (unsigned long long)step);
  }
  std::printf("training ResNet-9 (%lld outputs) on %s (%llu samples/epoch), %d epochs, batch %u, %d loader + %d torch threads\n",
              (long long)classes, c.train.c_str(), (unsigned long long)(to.subset.empty() ? train.dataset().size() : to.subset.size()), c.epochs,
              c.batch, train.threads(), torch_threads);
  std::vector<EpochLog> logs;
  std::vector<double> rank_rates;  // images/s of each rank, summed over the epochs (the JSON gives the mean, as for the total)
  double comm_share = 0;           // share of training time in gradient all-reduce and buffer broadcast
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> step_log(nullptr, &std::fclose);
  if (!c.step_log.empty()) {
    const std::string path = c.step_log + ".rank" + std::to_string(dist.rank());
    step_log.reset(std::fopen(path.c_str(), "w"));
    if (!step_log) {
      const int e = errno;
      throw Error(path + ": cannot write: " + std::strerror(e));
    }
  }
  const std::vector<torch::Tensor> weights = model->parameters(), buffers = model->buffers();
  bool stopped = c.max_steps && step >= c.max_steps;
  if (stopped)
    std::printf("notice: the checkpoint is at step %llu, --max-steps %llu: nothing to train\n", (unsigned long long)step,
                (unsigned long long)c.max_steps);
  const TraceWindow window = c.trace_steps.empty() ? DefaultTraceWindow(per_epoch, c.epochs) : ParseTraceWindow(c.trace_steps);
  StepProfiler prof(c.trace.empty() ? nullptr : &tracer, window, train.threads());
  const double stored_pixels = MeanStoredPixels(train.dataset(), to.subset);
  for (uint64_t e = start_epoch; e < uint64_t(c.epochs) && !stopped; ++e) {
    EpochLog log;
    torch::Tensor loss_sum = torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(device));
    uint64_t images = 0, batches = 0;
    train.reset_stats();
    prof.BeginEpoch(step);
    const auto t0 = Clock::now();
    auto range = train.epoch(e, e == start_epoch ? start_batch : 0);
    for (auto it = range.begin(); it != range.end();) {
      prof.Mark(Phase::kWait);
      const Batch& b = *it;
      for (auto& g : opt.param_groups()) static_cast<torch::optim::SGDOptions&>(g.options()).lr(LearningRate(c, step, total));
      torch::Tensor x;
      if (cuda) {
        // libtorch's (default) stream waits for the batch without the host waiting; the buffer is
        // reused only once this step's work on that stream is done (reader/gpu.h).
        x = torch_view::DeviceImages(augmenter->ProcessFor(it.lease(), gpu::LegacyDefaultStream()));
      } else {
        x = torch_view::Images(b);
      }
      auto y = ToDevice(torch_view::Labels(b).to(torch::kLong), device);
      auto keep = ToDevice(torch_view::Padding(b).logical_not().to(torch::kFloat), device);
      prof.Mark(Phase::kCopy);
      if (cuda) SetCudaAutocast(true, precision);
      auto logits = model->forward(x).to(torch::kFloat);
      if (cuda) SetCudaAutocast(false, precision);
      auto per_sample = torch::nn::functional::cross_entropy(
          logits, y, torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(c.label_smoothing).reduction(torch::kNone));
      // The mean over the global batch's real samples, as one rank would compute it: the averaged
      // gradient of W ranks' (sum x W / real) is then the one-rank gradient. A rank whose slice is all
      // padding (the epoch's last batch) contributes nothing, not 0/0. Padding comes only in that batch
      // (reader/order.cc), so only there do the ranks count their real samples together.
      double real = double(b.size - b.padding_count);
      if (b.index + 1 == per_epoch) {
        std::vector<double> v{real};
        dist.Sum(&v);
        real = v[0];
      } else if (b.padding_count) {
        throw Error("internal: padding in batch " + std::to_string(b.index) + " of " + std::to_string(per_epoch));
      } else {
        real = double(c.batch);
      }
      auto loss = (per_sample * keep).sum() * (double(dist.world_size()) / std::max(1.0, real));
      prof.Mark(Phase::kForward);
      if (dist.grouped()) dist.ZeroGradients(weights);  // gradients as views of the all-reduce buckets
      else opt.zero_grad();
      if (scaler) scaler->Scale(loss).backward();
      else loss.backward();
      dist.AverageGradients(weights);  // before unscaling: every rank checks and steps on the same gradients
      prof.Mark(Phase::kBackward);
      if (scaler) scaler->Step(opt);  // skipped on inf/NaN gradients: the step's one host sync
      else opt.step();
      dist.BroadcastBuffers(buffers);  // after the step, so parameters and buffers agree on every rank
      prof.Mark(Phase::kOptimizer);
      ++step;
      if (step_log) {
        std::fprintf(step_log.get(), "step %llu loss %.6f checksum %016llx samples", (unsigned long long)step, loss.item<double>(),
                     (unsigned long long)ParamChecksum(model));
        for (uint32_t i = 0; i < b.size; ++i) std::fprintf(step_log.get(), " %u", b.indices[i]);
        std::fputc('\n', step_log.get());
        std::fflush(step_log.get());  // readable as the run goes (the tests watch it)
      }
      ++batches;
      images += b.size - b.padding_count;
      loss_sum += loss.detach().to(torch::kDouble);  // read at the epoch's end, not per step
      if (!c.steps_out.empty()) batch_log.Add(b, loss.item<double>());
      prof.EndStep(step - 1);
      if (c.max_steps && step >= c.max_steps) {
        stopped = true;
        break;
      }
      ++it;
    }
    prof.EndSteps();
    if (augmenter) augmenter->Finish();  // the epoch's last batches' GPU decode is checked too
    log.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    comm_share = dist.TakeCommSeconds() / log.seconds;
    const std::vector<double> rates = dist.AllGather(images / log.seconds);
    rank_rates.resize(rates.size(), 0.0);
    log.images_per_second = 0;  // all ranks together
    for (size_t r = 0; r < rates.size(); ++r) log.images_per_second += rates[r], rank_rates[r] += rates[r];
    log.data_wait_share = prof.epoch().seconds[int(Phase::kWait)] / log.seconds;
    log.verdict = Diagnose(Measured(prof.epoch(), train, images, stored_pixels));
    std::vector<double> sums{loss_sum.item<double>(), double(batches)};
    dist.Sum(&sums);
    log.train_loss = sums[1] > 0 ? sums[0] / sums[1] : 0;
    LoaderState s = MergedLoaderState(dist, train.state(), "loader-state-" + std::to_string(e));
    if (!stopped || c.max_steps == 0) {
      log.test_accuracy = Evaluate(model, test, device, dist);
      prof.Mark(Phase::kEvaluation);
    }
    log.profile = prof.epoch();
    std::printf("epoch %llu: %.1f images/s, data wait %.2f%%, train loss %.4f", (unsigned long long)e, log.images_per_second,
                100 * log.data_wait_share, log.train_loss);
    if (log.test_accuracy >= 0) std::printf(", test accuracy %.2f%%", 100 * log.test_accuracy);
    std::printf(" (%.1f s)\n  phases: %s; evaluation %.1f s\n  verdict: %s\n", log.seconds, FormatShares(log.profile).c_str(),
                log.profile.seconds[int(Phase::kEvaluation)], log.verdict.advice.c_str());
    if (gpu_decode) {
      const StageStats st = train.stats();
      uint64_t fell = 0;
      for (uint64_t f : st.twin_fallback) fell += f;
      const std::string why = FallbackSummary(st);
      std::printf("  decoder gpu: %llu JPEGs decoded on the GPU, %llu on the CPU%s\n", (unsigned long long)st.twin_staged,
                  (unsigned long long)fell, why.empty() ? "" : (" (" + why + ")").c_str());
    }
    std::fflush(stdout);
    logs.push_back(log);
    if (!c.checkpoint.empty() && dist.lead()) {
      if (!stopped || s.next_batch >= per_epoch) {  // the epoch is complete: resume at the next one
        s.epoch = e + 1;
        s.next_batch = 0;
        s.excluded.clear();  // nothing of the next epoch is consumed yet
        std::fill(s.consumed.begin(), s.consumed.end(), uint8_t(0));
      }
      Checkpoint k;
      k.loader = s;
      k.seed = c.seed;
      k.step = step;
      k.train_samples = train_samples;
      k.limit = c.limit;
      k.epochs = uint64_t(c.epochs);
      k.batch = c.batch;
      k.lr = c.lr;
      k.subset = to.subset;
      SaveCheckpoint(c, k, model, opt);
    }
  }
  if (!c.trace.empty()) {
    if (!tracer.Write(c.trace)) {
      const int e = errno;
      throw Error(c.trace + ": cannot write the trace: " + std::strerror(e));
    }
    if (window.first < step)
      std::printf("trace of steps %llu..%llu: %s (open in https://ui.perfetto.dev)\n", (unsigned long long)window.first,
                  (unsigned long long)std::min(window.last, step) - 1, c.trace.c_str());
    else
      std::printf("trace: %s holds no step: the run ended at step %llu, before the window\n", c.trace.c_str(),
                  (unsigned long long)step);
  }
  batch_log.Close();
  const uint64_t params = ParamChecksum(model);
  std::printf("parameter checksum %016llx after %llu steps\n", (unsigned long long)params, (unsigned long long)step);
  if (!c.json.empty() && dist.lead()) {
    std::ofstream j(c.json);
    double ips = 0, wait = 0, acc = -1;
    for (const auto& l : logs) {
      ips += l.images_per_second / double(logs.size());
      wait += l.data_wait_share / double(logs.size());
      if (l.test_accuracy >= 0) acc = l.test_accuracy;
    }
    j << "{\n  \"test_accuracy\": " << Num(acc) << ",\n  \"images_per_second\": " << Num(ips) << ",\n  \"data_wait_share\": " << Num(wait)
      << ",\n  \"world_size\": " << dist.world_size() << ",\n  \"images_per_second_per_rank\": [";
    for (size_t i = 0; i < rank_rates.size(); ++i) j << (i ? ", " : "") << Num(rank_rates[i] / double(logs.size()));
    j << "],\n  \"allreduce_share\": " << Num(comm_share) << ",\n  \"steps\": " << step;
    if (!logs.empty())
      j << ",\n  \"bottleneck\": " << tools::JsonString(logs.back().verdict.bottleneck)
        << ",\n  \"advice\": " << tools::JsonString(logs.back().verdict.advice);
    j << ",\n  \"param_checksum\": \"" << std::hex << params << std::dec << "\",\n  \"train_loss\": [";
    for (size_t i = 0; i < logs.size(); ++i) j << (i ? ", " : "") << Num(logs[i].train_loss);
    j << "],\n  \"epochs\": [";
    for (size_t i = 0; i < logs.size(); ++i)
      j << (i ? ", " : "") << "{\"images_per_second\": " << Num(logs[i].images_per_second) << ", \"data_wait_share\": "
        << Num(logs[i].data_wait_share) << ", \"train_loss\": " << Num(logs[i].train_loss) << ", \"test_accuracy\": "
        << Num(logs[i].test_accuracy) << ", \"seconds\": " << Num(logs[i].seconds) << JsonFields(logs[i].profile, logs[i].verdict) << "}";
    j << "]\n}\n";
    if (!j) throw Error(c.json + ": write failed");
  }
  return 0;
}

}  // namespace
}  // namespace dsc::train

namespace cli = dsc::tools::cli;

int main(int argc, char** argv) {
  cli::Options opts("dsc train", "Train ResNet-9 on CIFAR-10 from dsc files. Defaults reproduce FFCV's CIFAR-10 example\n"
                    "(SGD lr 0.5, momentum 0.9, weight decay 5e-4, label smoothing 0.1, batch 512, 24 epochs,\n"
                    "triangular learning rate peaking at 5/24, flip + translate + cutout, test-time flip).\n\n"
                    "  dsc train cifar10-train.beton --test cifar10-test.beton --epochs 1 --limit 5000 --json out.json\n");
  opts.positional_help("FILE");
  dsc::train::Config c;
  opts.add_options()
      ("test", "the test split's dsc file", cli::value<std::string>())
      ("epochs", "epochs", cli::value<int>()->default_value("24"))
      ("batch-size", "batch size", cli::value<uint32_t>()->default_value("512"))
      ("lr", "peak learning rate", cli::value<double>()->default_value("0.5"))
      ("limit", "train on a fixed, seeded random subset of N samples", cli::value<uint64_t>()->default_value("0"))
      ("test-limit", "evaluate on a seeded random subset of N test samples", cli::value<uint64_t>()->default_value("0"))
      ("seed", "seed for the loader, the subset and the weights", cli::value<uint64_t>()->default_value("0"))
      ("loader-threads", "decode threads, or auto / auto:N for the loader's controller (at most N, default all cores): "
       "only as many as the training step needs", cli::value<std::string>()->default_value("1"))
      ("remote", "auxiliary workers (dsc serve) ADDR:PORT[,...] that decode training batches beside the loader threads",
       cli::value<std::string>()->default_value(""))
      ("token-file", "the workers' token", cli::value<std::string>()->default_value(""))
      ("tls-root", "PEM of the CA of the workers' certificates", cli::value<std::string>()->default_value(""))
      ("local-threads", "with --remote: local decode threads (0: only while no worker is reachable)", cli::value<int>()->default_value("-1"))
      ("wire-compression", "with --remote: zstd the images on the wire")
      ("torch-threads", "libtorch threads (0: all cores with one loader thread, else the cores the loader leaves)",
       cli::value<int>()->default_value("0"))
      ("device", "cpu or cuda (falls back to cpu, with a notice, without a usable GPU)", cli::value<std::string>()->default_value("cpu"))
      ("decoder", "cpu, or gpu (needs --device cuda): JPEGs decoded on the GPU, those it cannot decode on the CPU (counted)",
       cli::value<std::string>()->default_value("cpu"))
      ("precision", "cuda: auto (bf16 on sm_80+, else fp16 with loss scaling), bf16, fp16 or fp32", cli::value<std::string>()->default_value("auto"))
      ("checkpoint", "save model, optimiser and loader state to DIR after every epoch", cli::value<std::string>()->default_value(""))
      ("resume", "resume from a checkpoint DIR (its subset, batch size, seed, epochs and lr; contradicting flags are errors)", cli::value<std::string>()->default_value(""))
      ("max-steps", "stop after N optimiser steps in all (and checkpoint there)", cli::value<uint64_t>()->default_value("0"))
      ("json", "write results to FILE", cli::value<std::string>()->default_value(""))
      ("trace", "write a Chrome/Perfetto trace of the trainer's phases and the loader's work to FILE",
       cli::value<std::string>()->default_value(""))
      ("trace-steps", "trace steps FIRST:END (end excluded; default: the second epoch's first 50)",
       cli::value<std::string>()->default_value(""))
      ("nproc", "start N ranks on this machine (else ranks come from torchrun's RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); "
       "--batch-size is the global batch", cli::value<int>()->default_value("0"))
      ("dist-timeout", "seconds a rank waits for a silent or dead peer before failing", cli::value<double>()->default_value("60"))
      ("dist-backend", "auto (NCCL for --device cuda where built with it and each rank has its own GPU, else Gloo), gloo or nccl; "
       "a named one is formed on one rank too", cli::value<std::string>()->default_value("auto"))
      ("step-log", "each rank writes PREFIX.rankR: per step its loss, parameter+buffer checksum and sample indices",
       cli::value<std::string>()->default_value(""))
      ("save-init", "write the initial weights to FILE (tools/train/repro.h)", cli::value<std::string>()->default_value(""))
      ("steps-out", "write each step's batch digests and loss to FILE (tools/train/repro.h)", cli::value<std::string>()->default_value(""))
      ("h,help", "show this help")("file", "", cli::value<std::string>());
  opts.parse_positional({"file"});
  try {
    auto r = dsc::tools::Parse(opts, argc, argv);
    if (r.count("help")) {
      std::fputs(opts.help().c_str(), stdout);
      return 0;
    }
    if (!r.count("file") || !r.count("test")) throw cli::UsageError("expected FILE and --test TESTFILE");
    c.train = r["file"].as<std::string>();
    c.test = r["test"].as<std::string>();
    c.epochs = r["epochs"].as<int>();
    c.batch = r["batch-size"].as<uint32_t>();
    c.lr = r["lr"].as<double>();
    c.limit = r["limit"].as<uint64_t>();
    c.test_limit = r["test-limit"].as<uint64_t>();
    c.seed = r["seed"].as<uint64_t>();
    const std::string lt = r["loader-threads"].as<std::string>();
    c.loader_autotune = lt.rfind("auto", 0) == 0;
    if (c.loader_autotune && lt != "auto" && (lt.rfind("auto:", 0) != 0 || lt.size() == 5))
      throw cli::UsageError("--loader-threads " + lt + ": expected N, auto or auto:N");
    const std::string n = c.loader_autotune ? (lt.size() > 5 ? lt.substr(5) : "0") : lt;
    size_t used = 0;
    try {
      c.loader_threads = std::stoi(n, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != n.size() || n.empty() || c.loader_threads < 0)
      throw cli::UsageError("--loader-threads " + lt + ": expected N, auto or auto:N");
    if (c.loader_autotune && c.loader_threads == 0) c.loader_threads = dsc::kernels::UsableCores();
    c.torch_threads = r["torch-threads"].as<int>();
    if (c.torch_threads < 0 || c.torch_threads > 4096)
      throw cli::UsageError("--torch-threads " + std::to_string(c.torch_threads) + ": expected 0 (automatic) to 4096");
    c.remote = r["remote"].as<std::string>();
    c.token_file = r["token-file"].as<std::string>();
    c.tls_root = r["tls-root"].as<std::string>();
    c.local_threads = r["local-threads"].as<int>();
    if (r.count("local-threads") && c.local_threads < 0)
      throw cli::UsageError("--local-threads " + std::to_string(c.local_threads) + ": expected 0 or more");
    c.wire_compression = r.count("wire-compression") > 0;
    c.device = r["device"].as<std::string>();
    if (c.device != "cpu" && c.device != "cuda")  // 'CUDA' or 'gpu' trained on the CPU without a word
      throw cli::UsageError("unknown --device '" + c.device + "': cpu or cuda");
    c.decoder = r["decoder"].as<std::string>();
    if (c.decoder != "cpu" && c.decoder != "gpu")
      throw cli::UsageError("unknown --decoder '" + c.decoder + "': cpu or gpu");
    if (c.decoder == "gpu" && c.device != "cuda") throw cli::UsageError("--decoder gpu needs --device cuda");
    c.precision = r["precision"].as<std::string>();
    dsc::train::ChoosePrecision(c.precision, 0);  // a bad name is a usage error on any device
    c.checkpoint = r["checkpoint"].as<std::string>();
    c.resume = r["resume"].as<std::string>();
    c.max_steps = r["max-steps"].as<uint64_t>();
    c.json = r["json"].as<std::string>();
    c.trace = r["trace"].as<std::string>();
    c.trace_steps = r["trace-steps"].as<std::string>();
    if (!c.trace_steps.empty()) dsc::train::ParseTraceWindow(c.trace_steps);  // a usage error, before any work
    if (!c.trace_steps.empty() && c.trace.empty()) throw cli::UsageError("--trace-steps needs --trace FILE");
    c.nproc = r["nproc"].as<int>();
    c.dist_timeout = r["dist-timeout"].as<double>();
    c.dist_backend = r["dist-backend"].as<std::string>();
    if (c.dist_backend != "auto" && c.dist_backend != "gloo" && c.dist_backend != "nccl")
      throw cli::UsageError("unknown --dist-backend '" + c.dist_backend + "': auto, gloo or nccl");
    if (c.dist_backend == "nccl" && c.device != "cuda") throw cli::UsageError("--dist-backend nccl needs --device cuda");
    c.step_log = r["step-log"].as<std::string>();
    if (c.nproc < 0 || c.nproc > 1024 || !(c.dist_timeout >= 0.001 && c.dist_timeout <= 1e6))
      throw cli::UsageError("--nproc must be in [0, 1024] and --dist-timeout in [0.001, 1e6] seconds");
    // A launcher (torchrun, Slurm) already made this process a rank: --nproc would start a second world.
    if (c.nproc > 1 && std::getenv("RANK"))
      throw cli::UsageError("--nproc " + std::to_string(c.nproc) + " with RANK=" + std::getenv("RANK") +
                                           " set: this process is already a rank of a launcher; drop --nproc or unset RANK");
    c.save_init = r["save-init"].as<std::string>();
    c.steps_out = r["steps-out"].as<std::string>();
    for (const char* f : {"limit", "batch-size", "seed", "epochs", "lr"})
      if (r.count(f)) c.given.insert(f);
    if (c.epochs < 1 || c.epochs > dsc::train::kMaxEpochs || c.batch < 1)
      throw cli::UsageError("--epochs must be 1 to " + std::to_string(dsc::train::kMaxEpochs) +
                                           " and --batch-size positive");
    if (!std::isfinite(c.lr) || c.lr <= 0 || c.lr > 1e6)
      throw cli::UsageError("--lr " + dsc::train::Shortest(c.lr) + ": expected a learning rate above 0 (and at most 1e6)");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsc train: %s\n\n%s", e.what(), opts.help().c_str());
    return 2;
  }
  try {
    if (c.nproc > 1) return dsc::train::LaunchLocal(c.nproc, argc, argv);
    return dsc::train::Run(c);
  } catch (const dsc::OptionError& e) {  // a flag's value the loader rejects: a usage error
    std::fprintf(stderr, "dsc train: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsc train: error: %s\n", e.what());
    return 1;
  }
}
