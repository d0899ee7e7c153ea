#include "tools/train/loop.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>

#include "format/checksum.h"
#include "format/error.h"
#include "kernels/random.h"
#include "reader/gpu_stage.h"
#include "reader/json.h"
#include "reader/torch_adapter.h"

namespace dsc::train {

namespace {

using Clock = std::chrono::steady_clock;

// The triangular schedule: up to c.lr at c.peak of the run, down to 0 at its end.
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

}  // namespace

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

Trainer::Trainer(const Config& c, Distributed& dist, const Hardware& hw, TrainData& data, ResNet9& model,
                 torch::optim::SGD& opt, uint64_t batches_per_epoch, uint64_t step)
    : c_(c),
      dist_(dist),
      hw_(hw),
      data_(data),
      model_(model),
      opt_(opt),
      scaler_(hw.precision == Precision::kFloat16 ? std::make_unique<LossScaler>() : nullptr),
      per_epoch_(batches_per_epoch),
      total_(per_epoch_ * uint64_t(c.epochs)),
      step_(step),
      stopped_(c.max_steps && step >= c.max_steps),
      batch_log_(c.steps_out),
      weights_(model->parameters()),
      buffers_(model->buffers()),
      window_(c.trace_steps.empty() ? DefaultTraceWindow(per_epoch_, c.epochs) : ParseTraceWindow(c.trace_steps)),
      prof_(c.trace.empty() ? nullptr : &data.tracer, window_, data.train->threads()),
      stored_pixels_(MeanStoredPixels(data.train->dataset(), data.train_options.subset)) {
  if (!c.step_log.empty()) {
    const std::string path = c.step_log + ".rank" + std::to_string(dist.rank());
    step_log_.reset(std::fopen(path.c_str(), "w"));
    if (!step_log_) {
      const int e = errno;
      throw Error(path + ": cannot write: " + std::strerror(e));
    }
  }
}

torch::Tensor Trainer::Step(const Batch& b, const torch::Tensor& x) {
  const torch::Device& device = hw_.device;
  auto y = ToDevice(torch_view::Labels(b).to(torch::kLong), device);
  auto keep = ToDevice(torch_view::Padding(b).logical_not().to(torch::kFloat), device);
  prof_.Mark(Phase::kCopy);
  if (hw_.cuda) SetCudaAutocast(true, hw_.precision);
  auto logits = model_->forward(x).to(torch::kFloat);
  if (hw_.cuda) SetCudaAutocast(false, hw_.precision);
  auto per_sample = torch::nn::functional::cross_entropy(
      logits, y, torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(c_.label_smoothing).reduction(torch::kNone));
  // The mean over the global batch's real samples, as one rank would compute it: the averaged
  // gradient of W ranks' (sum x W / real) is then the one-rank gradient. A rank whose slice is all
  // padding (the epoch's last batch) contributes nothing, not 0/0. Padding comes only in that batch
  // (reader/order.cc), so only there do the ranks count their real samples together.
  double real = double(b.size - b.padding_count);
  if (b.index + 1 == per_epoch_) {
    std::vector<double> v{real};
    dist_.Sum(&v);
    real = v[0];
  } else if (b.padding_count) {
    throw Error("internal: padding in batch " + std::to_string(b.index) + " of " + std::to_string(per_epoch_));
  } else {
    real = double(c_.batch);
  }
  auto loss = (per_sample * keep).sum() * (double(dist_.world_size()) / std::max(1.0, real));
  prof_.Mark(Phase::kForward);
  if (dist_.grouped()) dist_.ZeroGradients(weights_);  // gradients as views of the all-reduce buckets
  else opt_.zero_grad();
  if (scaler_) scaler_->Scale(loss).backward();
  else loss.backward();
  dist_.AverageGradients(weights_);  // before unscaling: every rank checks and steps on the same gradients
  prof_.Mark(Phase::kBackward);
  if (scaler_) scaler_->Step(opt_);  // skipped on inf/NaN gradients: the step's one host sync
  else opt_.step();
  dist_.BroadcastBuffers(buffers_);  // after the step, so parameters and buffers agree on every rank
  prof_.Mark(Phase::kOptimizer);
  ++step_;
  return loss;
}

void Trainer::LogStep(const Batch& b, const torch::Tensor& loss) {
  if (!step_log_) return;
  std::fprintf(step_log_.get(), "step %llu loss %.6f checksum %016llx samples", (unsigned long long)step_, loss.item<double>(),
               (unsigned long long)ParamChecksum(model_));
  for (uint32_t i = 0; i < b.size; ++i) std::fprintf(step_log_.get(), " %u", b.indices[i]);
  std::fputc('\n', step_log_.get());
  std::fflush(step_log_.get());  // readable as the run goes (the tests watch it)
}

EpochLog Trainer::Epoch(uint64_t e, uint64_t first, LoaderState* state) {
  Loader& train = *data_.train;
  EpochLog log;
  torch::Tensor loss_sum = torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(hw_.device));
  uint64_t images = 0, batches = 0;
  train.reset_stats();
  prof_.BeginEpoch(step_);
  const auto t0 = Clock::now();
  auto range = train.epoch(e, first);
  for (auto it = range.begin(); it != range.end();) {
    prof_.Mark(Phase::kWait);
    const Batch& b = *it;
    for (auto& g : opt_.param_groups()) static_cast<torch::optim::SGDOptions&>(g.options()).lr(LearningRate(c_, step_, total_));
    torch::Tensor x;
    if (hw_.cuda) {
      // libtorch's (default) stream waits for the batch without the host waiting; the buffer is
      // reused only once this step's work on that stream is done (reader/gpu.h).
      x = torch_view::DeviceImages(data_.augmenter->ProcessFor(it.lease(), gpu::LegacyDefaultStream()));
    } else {
      x = torch_view::Images(b);
    }
    const torch::Tensor loss = Step(b, x);
    LogStep(b, loss);
    ++batches;
    images += b.size - b.padding_count;
    loss_sum += loss.detach().to(torch::kDouble);  // read at the epoch's end, not per step
    if (!c_.steps_out.empty()) batch_log_.Add(b, loss.item<double>());
    prof_.EndStep(step_ - 1);
    if (c_.max_steps && step_ >= c_.max_steps) {
      stopped_ = true;
      break;
    }
    ++it;
  }
  prof_.EndSteps();
  if (data_.augmenter) data_.augmenter->Finish();  // the epoch's last batches' GPU decode is checked too
  log.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  comm_share_ = dist_.TakeCommSeconds() / log.seconds;
  const std::vector<double> rates = dist_.AllGather(images / log.seconds);
  rank_rates_.resize(rates.size(), 0.0);
  log.images_per_second = 0;  // all ranks together
  for (size_t r = 0; r < rates.size(); ++r) log.images_per_second += rates[r], rank_rates_[r] += rates[r];
  log.data_wait_share = prof_.epoch().seconds[int(Phase::kWait)] / log.seconds;
  log.verdict = Diagnose(Measured(prof_.epoch(), train, images, stored_pixels_));
  std::vector<double> sums{loss_sum.item<double>(), double(batches)};
  dist_.Sum(&sums);
  log.train_loss = sums[1] > 0 ? sums[0] / sums[1] : 0;
  *state = MergedLoaderState(dist_, train.state(), "loader-state-" + std::to_string(e));
  if (!stopped_ || c_.max_steps == 0) {
    log.test_accuracy = Evaluate();
    prof_.Mark(Phase::kEvaluation);
  }
  log.profile = prof_.epoch();
  PrintEpoch(e, log);
  return log;
}

double Trainer::Evaluate() {
  torch::NoGradGuard no_grad;
  model_->eval();
  int64_t correct = 0, seen = 0;
  for (const Batch& b : data_.test->epoch(0)) {
    if (b.size == 0) continue;  // sequential on several ranks: a rank's last slice may be empty
    auto x = torch_view::Images(b).to(hw_.device);
    auto logits = model_->forward(x) + model_->forward(x.flip({3}));  // test-time flip augmentation
    auto pred = logits.argmax(1);
    correct += pred.eq(torch_view::Labels(b).to(hw_.device, torch::kLong)).sum().item<int64_t>();
    seen += b.size;
  }
  model_->train();
  std::vector<double> counts{double(correct), double(seen)};  // each rank saw its shard of the test set
  dist_.Sum(&counts);
  return counts[1] > 0 ? counts[0] / counts[1] : 0;
}

void Trainer::PrintEpoch(uint64_t e, const EpochLog& log) const {
  std::printf("epoch %llu: %.1f images/s, data wait %.2f%%, train loss %.4f", (unsigned long long)e, log.images_per_second,
              100 * log.data_wait_share, log.train_loss);
  if (log.test_accuracy >= 0) std::printf(", test accuracy %.2f%%", 100 * log.test_accuracy);
  std::printf(" (%.1f s)\n  phases: %s; evaluation %.1f s\n  verdict: %s\n", log.seconds, FormatShares(log.profile).c_str(),
              log.profile.seconds[int(Phase::kEvaluation)], log.verdict.advice.c_str());
  if (data_.gpu_decode) {
    const StageStats st = data_.train->stats();
    uint64_t fell = 0;
    for (uint64_t f : st.twin_fallback) fell += f;
    const std::string why = FallbackSummary(st);
    std::printf("  decoder gpu: %llu JPEGs decoded on the GPU, %llu on the CPU%s\n", (unsigned long long)st.twin_staged,
                (unsigned long long)fell, why.empty() ? "" : (" (" + why + ")").c_str());
  }
  std::fflush(stdout);
}

void Trainer::Finish() {
  if (!c_.trace.empty()) {
    if (!data_.tracer.Write(c_.trace)) {
      const int e = errno;
      throw Error(c_.trace + ": cannot write the trace: " + std::strerror(e));
    }
    if (window_.first < step_)
      std::printf("trace of steps %llu..%llu: %s (open in https://ui.perfetto.dev)\n", (unsigned long long)window_.first,
                  (unsigned long long)std::min(window_.last, step_) - 1, c_.trace.c_str());
    else
      std::printf("trace: %s holds no step: the run ended at step %llu, before the window\n", c_.trace.c_str(),
                  (unsigned long long)step_);
  }
  batch_log_.Close();
}

void WriteResults(const std::string& path, const std::vector<EpochLog>& logs, const Trainer& trainer, int world_size,
                  uint64_t param_checksum) {
  double ips = 0, wait = 0, acc = -1;
  for (const auto& l : logs) {
    ips += l.images_per_second / double(logs.size());
    wait += l.data_wait_share / double(logs.size());
    if (l.test_accuracy >= 0) acc = l.test_accuracy;
  }
  JsonWriter j;
  j.Object(JsonWriter::kLines).Field("test_accuracy", acc).Field("images_per_second", ips).Field("data_wait_share", wait);
  j.Field("world_size", world_size).Key("images_per_second_per_rank").Array();
  for (double r : trainer.rank_rates()) j.Number(r / double(logs.size()));
  j.End().Field("allreduce_share", trainer.comm_share()).Field("steps", trainer.step());
  if (!logs.empty()) j.Field("bottleneck", logs.back().verdict.bottleneck).Field("advice", logs.back().verdict.advice);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%llx", (unsigned long long)param_checksum);
  j.Field("param_checksum", hex).Key("train_loss").Array();
  for (const auto& l : logs) j.Number(l.train_loss);
  j.End().Key("epochs").Array();
  for (const auto& l : logs) {
    j.Object().Field("images_per_second", l.images_per_second).Field("data_wait_share", l.data_wait_share);
    j.Field("train_loss", l.train_loss).Field("test_accuracy", l.test_accuracy).Field("seconds", l.seconds);
    JsonFields(j, l.profile, l.verdict);
    j.End();
  }
  j.End().End();
  std::ofstream out(path);
  out << j.Finish();
  if (!out) throw Error(path + ": write failed");
}

}  // namespace dsc::train
