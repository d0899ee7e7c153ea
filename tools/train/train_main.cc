// dsc-train (run as `dsc train`): ResNet-9 on CIFAR-10 from dsc files, with FFCV's CIFAR-10 recipe as
// the default so results compare with its published figures. Links libtorch; the rest of dsc does not.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "format/error.h"
#include "kernels/cpu.h"
#include "tools/commands.h"
#include "tools/loader_flags.h"
#include "tools/train/amp.h"
#include "tools/train/checkpoint.h"
#include "tools/train/config.h"
#include "tools/train/data.h"
#include "tools/train/distributed.h"
#include "tools/train/loop.h"
#include "tools/train/profile.h"
#include "tools/train/repro.h"
#include "tools/train/resnet9.h"

namespace dsc::train {
namespace {

// One rank's run: hardware and process group, outputs checked, data, model, the epochs (each
// checkpointed), then the trace and the results. Per step the host waits only for LossScaler's
// inf/NaN flag (fp16 only); loss figures are read once per epoch.
int Run(Config c) {
  const DistEnv env = ReadDistEnv();
  if (env.rank != 0 && !std::freopen("/dev/null", "w", stdout))  // rank 0 alone prints
    throw Error("cannot silence rank " + std::to_string(env.rank) + "'s output");
  Hardware hw = PickHardware(c, env);
  Distributed dist(env, DistOptionsFor(c, hw));
  if (dist.grouped()) std::printf("process group: %s, %d rank%s\n", BackendName(dist.backend()), dist.world_size(), dist.world_size() == 1 ? "" : "s");
  PrepareOutputs(&c, dist);
  Checkpoint resume;
  if (!c.resume.empty()) resume = LoadCheckpointState(&c);
  ChoosePrecisionFor(c, &hw);

  TrainData data(c, dist, hw, c.resume.empty() ? nullptr : &resume);

  const int torch_threads = TorchThreads(c, env);
  torch::set_num_threads(torch_threads);
  torch::manual_seed(c.seed);
  ResNet9 model(data.classes);
  model->to(hw.device, torch::kFloat);
  if (!c.save_init.empty() && dist.lead()) SaveWeights(model, c.save_init);  // the same weights on every rank
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(c.lr).momentum(c.momentum).weight_decay(c.weight_decay));
  const uint64_t per_epoch = data.train->batches_per_epoch();  // of a full epoch: asked before a restore
  ResumePoint start;
  if (!c.resume.empty()) start = Resume(c, resume, data.classes, model, opt, *data.train, per_epoch);
  const std::vector<uint32_t>& subset = data.train_options.subset;
  std::printf("training ResNet-9 (%lld outputs) on %s (%llu samples/epoch), %d epochs, batch %u, %d loader + %d torch threads\n",
              (long long)data.classes, c.train.c_str(), (unsigned long long)(subset.empty() ? data.train->dataset().size() : subset.size()),
              c.epochs, c.batch, data.train->threads(), torch_threads);

  Trainer trainer(c, dist, hw, data, model, opt, per_epoch, start.step);
  if (trainer.stopped())
    std::printf("notice: the checkpoint is at step %llu, --max-steps %llu: nothing to train\n", (unsigned long long)start.step,
                (unsigned long long)c.max_steps);
  std::vector<EpochLog> logs;
  for (uint64_t e = start.epoch; e < uint64_t(c.epochs) && !trainer.stopped(); ++e) {
    LoaderState state;
    logs.push_back(trainer.Epoch(e, e == start.epoch ? start.batch : 0, &state));
    if (!c.checkpoint.empty() && dist.lead())
      SaveCheckpoint(c.checkpoint,
                     EpochCheckpoint(c, std::move(state), e, trainer.stopped(), trainer.batches_per_epoch(), trainer.step(),
                                     data.train_samples, subset),
                     model, opt);
  }
  trainer.Finish();

  const uint64_t params = ParamChecksum(model);
  std::printf("parameter checksum %016llx after %llu steps\n", (unsigned long long)params, (unsigned long long)trainer.step());
  if (!c.json.empty() && dist.lead()) WriteResults(c.json, logs, trainer, dist.world_size(), params);
  return 0;
}

}  // namespace
}  // namespace dsc::train

namespace cli = dsc::tools::cli;

// The loader options dsc train takes, as the option table declares them (tools/loader_flags.h): the
// decode threads (--loader-threads, beside --torch-threads) and the remote workers of the training loader.
const dsc::tools::LoaderFlagSet kLoaderFlags{
    {"threads", "remote", "token_file", "tls_root", "local_threads", "wire_compression", "remote_chunk", "remote_in_flight",
     "ship_uint8", "wire_planes", "data_path", "cache_dir", "cache_budget"},
    {{"threads", "loader-threads"}}};

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
  dsc::tools::DeclareLoaderFlags(opts, kLoaderFlags, nullptr);
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
    dsc::LoaderOptions one_thread;  // the training loader's default: one decode thread (TorchThreads gives libtorch the rest)
    one_thread.threads = 1;
    const dsc::LoaderOptions flags = dsc::tools::ApplyLoaderFlags(r, kLoaderFlags, false, one_thread);
    c.loader_threads = flags.threads;
    c.loader_autotune = flags.autotune;
    if (c.loader_autotune && c.loader_threads == 0) c.loader_threads = dsc::kernels::UsableCores();
    c.remote = flags.remote;
    c.cache_dir = flags.cache_dir;
    c.cache_budget = flags.cache_budget;
    c.torch_threads = r["torch-threads"].as<int>();
    if (c.torch_threads < 0 || c.torch_threads > 4096)
      throw cli::UsageError("--torch-threads " + std::to_string(c.torch_threads) + ": expected 0 (automatic) to 4096");
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
