// dsc bench: loader throughput on a file, where the time goes, and what bounds it.
#include <algorithm>
#include <chrono>
#include <cctype>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <memory>
#include <filesystem>
#include <fstream>
#include <sys/resource.h>
#include <thread>

#include "format/error.h"
#include "kernels/cpu.h"
#include "reader/bottleneck.h"
#include "reader/digest.h"
#include "reader/file_source.h"
#include "reader/gpu.h"
#include "reader/gpu_stage.h"
#include "reader/json.h"
#include "reader/loader.h"
#include "reader/option_table.h"
#include "reader/readahead.h"
#include "reader/trace.h"
#include "tools/commands.h"
#include "tools/loader_flags.h"

namespace dsc::tools {

namespace {

uint64_t AnonRssBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("RssAnon:", 0) == 0) return std::stoull(line.substr(8)) * 1024;
  return 0;
}

struct EpochResult {
  uint64_t images = 0;
  double seconds = 0;
  StageStats stages;
  uint64_t peak_anon = 0;
  uint64_t storage_bytes = 0;  // read from storage during the epoch (/proc/self/io)
  int threads = 0;             // threads taking work at the epoch's end (the controller's, with autotune)
  uint64_t settled_batch = 0;  // the batch from which the thread count stayed the same to the end
  uint64_t thread_changes = 0;
  double cpu_seconds = 0;      // this process's CPU time (user + system, all threads) during the epoch
  std::string digest;          // --digest: BatchDigest of the epoch
  double images_per_second() const { return seconds > 0 ? images / seconds : 0; }
};

// The simulated training step: a sleep, or with `spin` a busy loop that keeps a core, as a consumer
// that polls its GPU does.
void Consume(double ms, bool spin) {
  if (ms <= 0) return;
  const auto d = std::chrono::duration<double, std::milli>(ms);
  if (!spin) {
    std::this_thread::sleep_for(d);
    return;
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(d);
  while (std::chrono::steady_clock::now() < end) {
  }
}

double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// `indices`: when set, receives each batch's sample indices, one line per batch.
// `gpu`: --decoder gpu with a usable GPU: each batch is leased to it (decode + augment on the device).
EpochResult RunEpoch(Loader& loader, uint64_t epoch, double consumer_ms, bool spin, uint64_t max_batches, uint64_t* peak,
                     std::FILE* indices = nullptr, BatchDigest* digest = nullptr, gpu::Augmenter* gpu = nullptr) {
  loader.reset_stats();
  EpochResult r;
  const uint64_t io0 = StorageReadBytes();
  const double cpu0 = ProcessCpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t n = 0;
  r.threads = loader.active_threads();
  for (const Batch& b : loader.epoch(epoch)) {
    if (loader.active_threads() != r.threads) {
      r.threads = loader.active_threads();
      r.settled_batch = b.index;
      ++r.thread_changes;
    }
    r.images += b.size - b.padding_count;
    if (digest) digest->Add(b);
    if (gpu) gpu->ProcessFor(loader.lease(b), gpu::LegacyDefaultStream());
    if (indices) {
      for (uint32_t i = 0; i < b.size; ++i) std::fprintf(indices, i ? " %u" : "%u", b.indices[i]);
      std::fputc('\n', indices);
    }
    Consume(consumer_ms, spin);
    if ((++n & 7) == 0) *peak = std::max(*peak, AnonRssBytes());
    if (max_batches && n >= max_batches) break;
  }
  if (gpu) gpu->Finish();  // the epoch's time includes its last batches' GPU work, and their decode is checked
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.cpu_seconds = ProcessCpuSeconds() - cpu0;
  r.stages = loader.stats();
  r.storage_bytes = StorageReadBytes() - io0;
  if (digest) r.digest = digest->Hex();
  *peak = std::max(*peak, AnonRssBytes());
  r.peak_anon = *peak;
  return r;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}


// What the flags asked for beyond the loader's options.
struct BenchPlan {
  std::string file, trace_path, indices_path;
  int epochs = 3;
  double consumer_ms = 0;
  bool json = false, cold = false, digest = false, spin = false, gpu_decoder = false;
  DType gpu_dtype = DType::kFloat32;  // --decoder gpu: the GPU's output
};

// What the epochs measured.
struct BenchRun {
  std::vector<EpochResult> results;
  uint64_t peak = 0;  // anonymous RSS
  int max_threads = 0;
  bool on_gpu = false;
  StageStats twin;                                // --decoder gpu: staged and fallback counts over every epoch
  uint64_t stage_ns = 0, staged_after_first = 0;  // --decoder gpu: host staging, epochs after the first
  std::vector<RemoteWorkerStats> remote;
};

// The figures reported from them.
struct BenchFigures {
  double median = 0;          // images/s
  double cpu_us = 0;          // per delivered image
  bool any_delivered = false;  // a rank of padding only delivers none: no CPU figure, not 0
  double remote_share = 0, sequential = 0;
  uint64_t decoded = 0, remote_samples = 0, wire = 0;
  std::string verdict;
  const char* which = "";  // which epochs the median is of
};

// Whether --trace's file can be written: known before the epochs run, not after them.
void CheckTracePath(const std::string& trace_path) {
  std::error_code ec;
  const bool existed = std::filesystem::exists(trace_path, ec);
  std::FILE* f = std::fopen(trace_path.c_str(), "a");
  if (!f) {
    const int e = errno;
    throw Error(trace_path + ": cannot write the trace: " + std::strerror(e));
  }
  std::fclose(f);
  if (!existed) std::filesystem::remove(trace_path, ec);
}

// One epoch's line(s), as it ends (text output only).
void PrintEpoch(const BenchPlan& p, const LoaderOptions& o, int e, const EpochResult& r, int loader_threads) {
  if (p.json) return;
  std::printf("epoch %d: %llu images in %.3f s = %.0f images/s, %.1f MB/s of payload, consumer waited %.1f%%\n", e,
              (unsigned long long)r.images, r.seconds, r.images_per_second(), r.stages.payload_bytes / r.seconds / 1e6,
              100.0 * r.stages.consumer_wait_ns / (r.seconds * 1e9));
  if (p.digest) std::printf("epoch %d digest %s\n", e, r.digest.c_str());
  if (o.autotune)
    std::printf("  autotune: %d of %d threads, settled at batch %llu (%llu change(s) this epoch)\n", r.threads, loader_threads,
                (unsigned long long)r.settled_batch, (unsigned long long)r.thread_changes);
  std::printf("  read from storage %.1f MB (%.1f MB/s), readahead asked %.1f MB\n", r.storage_bytes / 1e6,
              r.storage_bytes / r.seconds / 1e6, r.stages.advised_bytes / 1e6);
}

// Runs the epochs (and the traced extra one). `o` ends up with the threads of the last epoch and the
// per-rank batch size, as the report gives them.
BenchRun RunBench(const BenchPlan& p, LoaderOptions& o) {
  BenchRun run;
  Tracer tracer;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> indices(nullptr, &std::fclose);
  if (!p.indices_path.empty()) {
    indices.reset(std::fopen(p.indices_path.c_str(), "w"));
    if (!indices) {
      const int e = errno;
      throw Error(p.indices_path + ": cannot write: " + std::strerror(e));
    }
  }
  if (!p.trace_path.empty()) CheckTracePath(p.trace_path);
  std::string why;
  run.on_gpu = p.gpu_decoder && gpu::Available(&why);
  if (p.gpu_decoder && !run.on_gpu)
    std::fprintf(stderr, "notice: no usable GPU (%s): the loader stages the batches for the GPU decoder but nothing "
                 "decodes them; the figures are the loader's side only\n", why.c_str());
  if (run.on_gpu) gpu::UsePinnedMemory(o);
  {
    Loader loader(p.file, o);
    std::unique_ptr<gpu::Augmenter> aug;
    if (run.on_gpu) {
      gpu::AugmenterOptions ao;
      ao.staging_bytes = gpu::StagingBytesFor(loader);
      ao.path = loader.dataset().path();
      ao.max_leases = o.max_leases;
      aug = std::make_unique<gpu::Augmenter>(o.augment, loader.width(), loader.height(), loader.options().batch_size,
                                             p.gpu_dtype, Layout::kNCHW, ao);
    }
    for (int e = 0; e < p.epochs; ++e) {
      if (p.cold) DropCachedPages(loader.dataset());
      BatchDigest epoch_digest;
      run.results.push_back(RunEpoch(loader, uint64_t(e), p.consumer_ms, p.spin, 0, &run.peak, indices.get(),
                                     p.digest ? &epoch_digest : nullptr, aug.get()));
      const auto& r = run.results.back();
      run.twin.twin_staged += r.stages.twin_staged;
      for (int k = 0; k < 32; ++k) run.twin.twin_fallback[k] += r.stages.twin_fallback[k];
      if (e > 0) run.stage_ns += r.stages.twin_stage_ns, run.staged_after_first += r.stages.twin_staged;
      PrintEpoch(p, o, e, r, loader.threads());
      std::fflush(stdout);  // each epoch as it ends, also into a pipe (| tee)
    }
    if (!p.trace_path.empty()) {
      // One more epoch, traced, on a fresh loader with the tracer attached (same options): left out
      // of every figure, since its cold start and the tracer's cost would skew them.
      LoaderOptions t = o;
      t.tracer = &tracer;
      Loader traced(p.file, t);
      if (p.cold) DropCachedPages(traced.dataset());
      uint64_t traced_peak = 0;
      const EpochResult r = RunEpoch(traced, uint64_t(p.epochs), p.consumer_ms, p.spin, 0, &traced_peak, nullptr, nullptr, aug.get());
      if (!p.json) std::printf("epoch %d (traced, not in the figures): %.0f images/s\n", p.epochs, r.images_per_second());
    }
    o.threads = run.results.back().threads;
    run.max_threads = loader.threads();
    o.batch_size = loader.options().batch_size;  // per rank, as --global-batch-size made it
    run.remote = loader.remote_stats();
  }
  if (indices && (std::fflush(indices.get()) != 0 || std::ferror(indices.get())))
    throw Error(p.indices_path + ": write failed");
  if (!p.trace_path.empty() && !tracer.Write(p.trace_path)) throw Error(p.trace_path + ": cannot write the trace");
  return run;
}

BenchFigures Figures(const BenchPlan& p, const LoaderOptions& o, const BenchRun& run) {
  BenchFigures f;
  const auto& results = run.results;
  // The yardstick for cold reads: the same file read front to back with large preads, from storage.
  f.sequential = p.cold && !IsUrl(p.file) ? SequentialReadRate(p.file) : 0;
  std::vector<double> rates;
  for (size_t i = results.size() > 1 ? 1 : 0; i < results.size(); ++i) rates.push_back(results[i].images_per_second());
  f.median = Median(rates);
  std::vector<double> cpu;  // per delivered image, microseconds
  for (size_t i = results.size() > 1 ? 1 : 0; i < results.size(); ++i)
    if (results[i].images) cpu.push_back(results[i].cpu_seconds * 1e6 / double(results[i].images));
  f.any_delivered = !cpu.empty();
  f.cpu_us = Median(cpu);
  for (const auto& w : run.remote) f.remote_samples += w.samples, f.wire += w.wire_bytes;
  for (const auto& r : results) f.decoded += r.stages.samples;
  const EpochResult& last = results.back();
  // Local threads count the padding samples they make (stages.samples), workers theirs too.
  f.remote_share = f.remote_samples ? double(f.remote_samples) / double(f.remote_samples + f.decoded) : 0;
  BenchEpoch be;
  be.stages = last.stages;
  be.seconds = last.seconds;
  be.threads = o.threads;
  be.cores = kernels::UsableCores();
  be.consumer_ms = p.consumer_ms;
  be.gpu = run.on_gpu;
  be.remote_share = f.remote_share;
  be.workers = run.remote.size();
  f.verdict = BenchVerdict(be);
  // With one epoch, its figures include the warm-up the median of later epochs leaves out.
  f.which = results.size() > 1 ? "median of epochs after the first" : "one epoch, warm-up included";
  return f;
}

std::string BenchJson(const BenchPlan& p, const LoaderOptions& o, const BenchRun& run, const BenchFigures& f) {
  JsonWriter j;
  j.Object(JsonWriter::kLines).Field("file", p.file).Field("images_per_second", f.median).Field("threads", o.threads);
  j.Field("prefetch", o.prefetch).Field("batch_size", o.batch_size).Field("consumer_ms", p.consumer_ms);
  j.Field("images_decoded", f.decoded).Field("peak_anon_rss_bytes", run.peak).Field("verdict", f.verdict);
  if (o.autotune) j.Field("autotune", true).Field("max_threads", run.max_threads);
  if (p.spin) j.Field("consumer_spin", true);
  if (p.gpu_decoder) {
    j.Field("decoder", "gpu").Field("gpu_used", run.on_gpu).Field("twin_staged", run.twin.twin_staged);
    j.Key("twin_fallback").Object();
    for (int k = 1; k < 32; ++k)
      if (run.twin.twin_fallback[k]) j.Field(FallbackName(k), run.twin.twin_fallback[k]);
    j.End();
    if (run.staged_after_first) j.Field("twin_stage_us_per_staged", double(run.stage_ns) / double(run.staged_after_first) / 1e3);
  }
  j.Key("cpu_us_per_image");
  if (f.any_delivered) j.Number(f.cpu_us);
  else j.Null();
  if (!run.remote.empty()) {
    j.Field("remote_wire_bytes_per_image", f.remote_samples ? double(f.wire) / double(f.remote_samples) : 0);
    j.Field("remote_share", f.remote_share).Key("remote").Array();
    for (const auto& w : run.remote)
      j.Object().Field("address", w.address).Field("up", w.up).Field("samples", w.samples).Field("requests", w.requests)
          .Field("failures", w.failures).Field("wire_bytes", w.wire_bytes).End();
    j.End();
  }
  if (p.cold) j.Field("cold", true).Field("sequential_bytes_per_second", f.sequential);
  if (p.digest) {
    j.Key("digests").Array();
    for (const auto& r : run.results) j.String(r.digest);
    j.End();
  }
  j.Key("epochs").Array(JsonWriter::kLines);
  for (size_t i = 0; i < run.results.size(); ++i) {
    const auto& r = run.results[i];
    j.Object().Field("epoch", i).Field("images", r.images).Field("seconds", r.seconds).Field("images_per_second", r.images_per_second());
    j.Field("mb_per_second", r.stages.payload_bytes / r.seconds / 1e6).Field("read_ns", r.stages.read_ns);
    j.Field("decode_ns", r.stages.decode_ns).Field("augment_ns", r.stages.augment_ns).Field("collate_ns", r.stages.collate_ns);
    j.Field("consumer_wait_ns", r.stages.consumer_wait_ns).Field("consumer_wait_share", r.stages.consumer_wait_ns / (r.seconds * 1e9));
    j.Field("storage_bytes", r.storage_bytes).Field("storage_bytes_per_second", r.storage_bytes / r.seconds);
    j.Field("advised_bytes", r.stages.advised_bytes).Field("payload_bytes", r.stages.payload_bytes);
    j.Field("images_decoded", r.stages.samples).Field("threads", r.threads).Field("settled_batch", r.settled_batch);
    j.Field("thread_changes", r.thread_changes).Field("cpu_seconds", r.cpu_seconds).End();
  }
  j.End().End();
  return j.Finish();
}

void PrintBench(const BenchPlan& p, const LoaderOptions& o, const BenchRun& run, const BenchFigures& f) {
  const EpochResult& last = run.results.back();
  const double per = last.stages.samples ? 1.0 / last.stages.samples : 0;
  std::printf("\n%.0f images/s (%s), %d thread(s)%s, prefetch %u, batch %u\n", f.median, f.which, o.threads,
              o.autotune ? (" (autotuned, at most " + std::to_string(run.max_threads) + ")").c_str() : "", o.prefetch, o.batch_size);
  std::printf("per image, summed over threads: read %.2f us, decode %.2f us, augment %.2f us, collate %.2f us\n",
              last.stages.read_ns * per / 1e3, last.stages.decode_ns * per / 1e3, last.stages.augment_ns * per / 1e3,
              last.stages.collate_ns * per / 1e3);
  std::printf("consumer waited %.1f%% of the last epoch; peak anonymous RSS %.1f MiB; %llu payloads decoded\n",
              100.0 * last.stages.consumer_wait_ns / (last.seconds * 1e9), run.peak / 1048576.0, (unsigned long long)f.decoded);
  if (f.any_delivered) std::printf("this process's CPU time per delivered image: %.1f us (all threads, %s)\n", f.cpu_us, f.which);
  else std::printf("this process's CPU time per delivered image: none delivered (all threads, %s)\n", f.which);
  if (p.gpu_decoder) {
    uint64_t fell = 0;
    for (uint64_t n : run.twin.twin_fallback) fell += n;
    const std::string why_cpu = FallbackSummary(run.twin);
    std::printf("decoder gpu%s: %llu payloads staged for the GPU, %llu decoded on the CPU%s (all epochs)\n",
                run.on_gpu ? "" : " (no GPU: not decoded)", (unsigned long long)run.twin.twin_staged, (unsigned long long)fell,
                why_cpu.empty() ? "" : (" (" + why_cpu + ")").c_str());
    if (run.staged_after_first)
      std::printf("host staging: %.2f us per staged payload (check + stage, summed over threads, epochs after the first)\n",
                  double(run.stage_ns) / double(run.staged_after_first) / 1e3);
  }
  for (const auto& w : run.remote)
    std::printf("remote %s: %s, %llu images in %llu requests, %llu failed requests, %.0f wire bytes per image\n",
                w.address.c_str(), w.up ? "up" : "down", (unsigned long long)w.samples, (unsigned long long)w.requests,
                (unsigned long long)w.failures, w.samples ? double(w.wire_bytes) / double(w.samples) : 0.0);
  if (!run.remote.empty())
    std::printf("remote workers did %.1f%% of the samples (padding of a short last batch included)\n", 100.0 * f.remote_share);
  std::printf("verdict: %s\n", f.verdict.c_str());
  if (p.cold) {
    std::vector<double> cold_rates;
    for (const auto& r : run.results) cold_rates.push_back(r.storage_bytes / r.seconds);
    std::printf("cold: median %.1f MB/s read from storage per epoch; the file read sequentially (16 MiB preads): %.1f MB/s "
                "(ratio %.2f)\n", Median(cold_rates) / 1e6, f.sequential / 1e6, f.sequential > 0 ? Median(cold_rates) / f.sequential : 0);
  }
  if (!p.trace_path.empty()) std::printf("trace of the extra epoch: %s (open in https://ui.perfetto.dev)\n", p.trace_path.c_str());
}

}  // namespace

// Every loader option the table gives the CLI.
const LoaderFlagSet kBenchFlags{};

int CmdBench(int argc, char** argv) {
  cli::Options opts("dsc bench", "Measure the loader's throughput on FILE, per stage, and name the bottleneck.\n\n"
                    "  dsc bench cifar10.beton --preset cifar-train --epochs 3\n"
                    "  dsc bench cifar10.beton --threads auto --consumer-ms 15 --consumer-spin --trace trace.json\n"
                    "  dsc bench cifar10.beton --digest --scalar   # epoch digests with every SIMD path off\n");
  opts.positional_help("FILE");
  opts.add_options()
      ("indices-out", "write the sample indices of each batch this rank delivers to FILE, one line per batch",
       cli::value<std::string>()->default_value(""))
      ("epochs", "epochs to run (the first is reported but excluded from the median)", cli::value<int>()->default_value("3"))
      ("decoder", "cpu, or gpu: the loader stages the JPEGs the GPU decoder takes (the rest it decodes, counted per reason) "
       "and the GPU decodes and augments them (--dtype is then its output); without a usable GPU, a notice and the "
       "loader's side only", cli::value<std::string>()->default_value("cpu"))
      ("consumer-ms", "simulate a training step of X ms per batch", cli::value<double>()->default_value("0"))
      ("consumer-spin", "the simulated step spins (keeps a core busy, as a GPU-polling trainer does) instead of sleeping")
      ("trace", "write a Chrome/Perfetto trace of one more epoch, run after the measured ones, to FILE", cli::value<std::string>()->default_value(""))
      ("digest", "print an XXH3-128 digest of each epoch's delivered batches (images, labels, indices, padding): equal digests "
                 "= identical data, whatever the threads, prefetch or machine")
      ("scalar", "turn every SIMD path off (dsc's AVX2 kernels and libjpeg-turbo's SIMD; also DSC_FORCE_SCALAR=1 in the "
                 "environment): with --digest, checks that the SIMD paths give the same bits")
      ("cold", "drop the file's cached pages before every epoch; report bytes read from storage and the file's sequential read rate")
      ("show-options", "print the loader options the flags resolve to (name = value, one per line) and exit; FILE is not read")
      ("json", "machine-readable output")
      ("h,help", "show this help")("file", "", cli::value<std::string>());
  DeclareLoaderFlags(opts, kBenchFlags, "cifar-train");
  opts.parse_positional({"file"});
  std::string file, trace_path, indices_path;
  LoaderOptions o;
  int epochs = 3;
  double consumer_ms = 0;
  bool json = false, cold = false, digest = false, spin = false, gpu_decoder = false;
  DType gpu_dtype = DType::kFloat32;
  try {
    auto r = Parse(opts, argc, argv);
    RejectUnmatched(r);
    if (r.count("help")) { std::fputs(opts.help().c_str(), stdout); return kExitOk; }
    const bool show = r.count("show-options") > 0;
    if (!r.count("file") && !show) throw cli::UsageError("expected FILE");
    if (!show) file = r["file"].as<std::string>();
    o = ApplyLoaderFlags(r, kBenchFlags, true);
    if (show) {
      for (const OptionRow& row : LoaderOptionTable())
        if (row.where & kOnCli) std::printf("%s = %s\n", row.name.c_str(), row.get(o).c_str());
      return kExitOk;
    }
    indices_path = r["indices-out"].as<std::string>();
    epochs = r["epochs"].as<int>();
    if (epochs < 1) throw cli::UsageError("--epochs must be at least 1");
    if (o.dtype == DType::kUint8) {  // uint8 is NHWC and unnormalised: said once, not three flags each time
      if (!LoaderFlagGiven(r, kBenchFlags, "layout")) o.layout = Layout::kNHWC;
      if (!LoaderFlagGiven(r, kBenchFlags, "normalize")) o.augment.normalize = false;
    }
    consumer_ms = r["consumer-ms"].as<double>();
    if (!(consumer_ms >= 0 && consumer_ms <= 1e6)) throw cli::UsageError("--consumer-ms must be 0 to 1e6");
    spin = r.count("consumer-spin") > 0;
    if (spin && consumer_ms == 0) throw cli::UsageError("--consumer-spin needs --consumer-ms (the step it spins for)");
    trace_path = r["trace"].as<std::string>();
    cold = r.count("cold") > 0;
    json = r.count("json") > 0;
    digest = r.count("digest") > 0;
    const std::string decoder = r["decoder"].as<std::string>();
    if (decoder == "gpu") {
      if (digest) throw cli::UsageError("--digest needs --decoder cpu (staged batches are finished on the GPU)");
      if (o.dtype == DType::kUint8) throw cli::UsageError("--decoder gpu: --dtype is the GPU's output, float32 or float16");
      gpu_decoder = true;
      gpu_dtype = o.dtype;
      o.decoder = LoaderOptions::Decoder::kGpu;
      o.defer_augment = true;
      o.dtype = DType::kUint8;
      o.layout = Layout::kNHWC;
    } else if (decoder != "cpu") {
      throw cli::UsageError("unknown --decoder '" + decoder + "': cpu or gpu");
    }
    if (r.count("scalar")) kernels::ForceScalar();  // before any decode and any loader thread
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsc bench: %s\n\n%s", e.what(), opts.help().c_str());
    return kExitUsage;
  }
  try {
    const BenchPlan plan{file, trace_path, indices_path, epochs, consumer_ms, json, cold, digest, spin, gpu_decoder, gpu_dtype};
    o.collect_stats = true;
    const BenchRun run = RunBench(plan, o);
    const BenchFigures figures = Figures(plan, o, run);
    if (json) std::fputs(BenchJson(plan, o, run, figures).c_str(), stdout);
    else PrintBench(plan, o, run, figures);
    return kExitOk;
  } catch (const OptionError& e) {  // a flag's value the loader rejects: a usage error
    std::fprintf(stderr, "dsc bench: %s\n", e.what());
    return kExitUsage;
  } catch (const Error& e) {
    std::fprintf(stderr, "dsc bench: error: %s\n", e.what());
    return kExitBad;
  }
}

}  // namespace dsc::tools
