#include "tools/train/data.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "format/error.h"
#include "kernels/cpu.h"
#include "reader/gpu_stage.h"
#include "reader/torch_adapter.h"
#include "tools/train/profile.h"
#include "tools/train/repro.h"

namespace dsc::train {

namespace {

namespace fs = std::filesystem;

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

}  // namespace

Hardware PickHardware(const Config& c, const DistEnv& env) {
  Hardware hw;
  hw.cuda_device = c.device == "cuda" ? PickCudaDevice(env, &hw.gpu_shared) : 0;
  hw.cuda = UseCuda(c, hw.cuda_device);
  return hw;
}

DistOptions DistOptionsFor(const Config& c, const Hardware& hw) {
  DistOptions dopt;
  dopt.timeout = std::chrono::milliseconds(int64_t(c.dist_timeout * 1000));
  dopt.backend = ChooseBackend(c.dist_backend, hw.cuda, hw.gpu_shared);
  dopt.cuda_device = hw.cuda_device;
  dopt.group_of_one = c.dist_backend != "auto";  // a named backend is formed, and exercised, on one rank too
  return dopt;
}

void ChoosePrecisionFor(const Config& c, Hardware* hw) {
  hw->device = hw->cuda ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(hw->cuda_device)) : torch::Device(torch::kCPU);
  hw->precision = hw->cuda ? ChoosePrecision(c.precision, gpu::ComputeCapability(hw->cuda_device)) : Precision::kFloat32;
  if (hw->cuda) std::printf("cuda: %s; %s\n", gpu::Describe(hw->cuda_device).c_str(), PrecisionName(hw->precision));
  if (!hw->cuda && c.precision != "auto")
    std::printf("notice: --precision %s applies to CUDA training; the CPU trains in float32\n", c.precision.c_str());
}

void PrepareOutputs(Config* cp, const Distributed& dist) {
  Config& c = *cp;
  // Every rank traces its own trainer and loader: one file per rank, or they would overwrite each other.
  if (!c.trace.empty() && dist.world_size() > 1) c.trace += ".rank" + std::to_string(dist.rank());
  if (!c.steps_out.empty() && dist.world_size() > 1) c.steps_out += ".rank" + std::to_string(dist.rank());  // this rank's batches
  if (!c.checkpoint.empty()) CheckCheckpointTarget(c.checkpoint);  // before any training, not after an epoch of it
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
}

int TorchThreads(const Config& c, const DistEnv& env) {
  // At CPU training rates one decode thread is busy well under 1% of the time (measured: data wait
  // 0.2%, ~8 us per image), so libtorch gets every core unless the loader has several fixed threads
  // (with auto, the controller keeps only the loader threads the step needs).
  return c.torch_threads > 0                           ? c.torch_threads
         : c.loader_threads > 1 && !c.loader_autotune ? torch_view::ShareCores(c.loader_threads)
                                                      : std::max(1, kernels::UsableCores() / env.local_world_size);
}

TrainData::TrainData(const Config& c, const Distributed& dist, const Hardware& hw, const Checkpoint* resume) {
  LoaderOptions& to = train_options;
  to = LoaderOptions::CifarTrain();
  to.batch_size = c.batch;
  to.global_batch_size = c.batch;  // --batch-size is the global batch: the same batches on any rank count
  to.rank = uint32_t(dist.rank());
  to.world_size = uint32_t(dist.world_size());
  to.seed = c.seed;
  to.threads = c.loader_threads;
  to.autotune = c.loader_autotune;
  to.layout = Layout::kNHWC;  // viewed as channels_last NCHW, the model's memory format
  to.channels = 3;            // the model takes RGB: a grayscale file's values come in all three
  to.remote = c.remote;
  to.cache_dir = c.cache_dir;
  to.cache_budget = c.cache_budget;
  const kernels::AugmentSpec train_aug = to.augment;
  gpu_decode = hw.cuda && c.decoder == "gpu";
  if (c.decoder == "gpu" && !hw.cuda) std::printf("notice: --decoder gpu: decoding on the CPU\n");
  if (hw.cuda) {
    to.defer_augment = true;
    to.dtype = DType::kUint8;
    if (gpu_decode) to.decoder = LoaderOptions::Decoder::kGpu;  // JPEGs decoded on the GPU (reader/gpu_stage.h)
    gpu::UsePinnedMemory(to, hw.cuda_device);  // allocated through that GPU's context, none on another
  }
  LoaderOptions eo = LoaderOptions::CifarTest();
  eo.batch_size = 500;
  eo.rank = uint32_t(dist.rank());
  eo.world_size = uint32_t(dist.world_size());
  eo.threads = c.loader_threads;
  eo.layout = Layout::kNHWC;
  eo.channels = 3;
  eo.cache_dir = c.cache_dir;
  eo.cache_budget = c.cache_budget;
  const DatasetOptions source{.cache_dir = c.cache_dir, .cache_budget = c.cache_budget};
  {
    Dataset probe(c.train, source);
    train_samples = probe.size();
    if (resume && resume->train_samples != train_samples)
      throw Error(c.resume + ": the checkpoint trained on " + std::to_string(resume->train_samples) + " samples; " + c.train +
                  " has " + std::to_string(train_samples));
    if (c.limit > train_samples)
      std::printf("notice: --limit %llu is more than %s's %llu samples: training on all of them\n", (unsigned long long)c.limit,
                  c.train.c_str(), (unsigned long long)train_samples);
    to.subset = resume ? resume->subset : RandomSubset(train_samples, c.limit, c.seed);
  }
  {
    Dataset probe(c.test, source);
    if (c.test_limit > probe.size())
      std::printf("notice: --test-limit %llu is more than %s's %llu samples: evaluating on all of them\n",
                  (unsigned long long)c.test_limit, c.test.c_str(), (unsigned long long)probe.size());
    eo.subset = RandomSubset(probe.size(), c.test_limit, c.seed + 1);
    std::sort(eo.subset.begin(), eo.subset.end());
  }
  to.collect_stats = true;  // the verdict weighs the loader's stage times
  if (!c.trace.empty()) to.tracer = &tracer;
  train = std::make_unique<Loader>(c.train, to);
  test = std::make_unique<Loader>(c.test, eo);
  classes = std::max<int64_t>(10, CheckCompatible(*train, *test));
  if (hw.cuda) {
    gpu::AugmenterOptions ao;
    ao.device = hw.cuda_device;
    ao.max_leases = to.max_leases;
    if (gpu_decode) ao.staging_bytes = gpu::StagingBytesFor(*train);
    ao.path = c.train;
    augmenter = std::make_unique<gpu::Augmenter>(train_aug, train->width(), train->height(), c.batch,
                                                 hw.precision == Precision::kFloat32 ? DType::kFloat32 : DType::kFloat16,
                                                 Layout::kNHWC, ao);
  }
}

}  // namespace dsc::train
