#include "reader/bottleneck.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace dsc {

namespace {

std::string Fmt(const char* fmt, double a, double b = 0, double c = 0, double d = 0, double e = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, a, b, c, d, e);
  return buf;
}

}  // namespace

StageShare LargestStage(const StageStats& s) {
  const StageShare all[] = {{"read", s.read_ns, 0}, {"decode", s.decode_ns, 0}, {"augment", s.augment_ns, 0}, {"collate", s.collate_ns, 0}};
  StageShare top = all[0];
  uint64_t total = 0;
  for (const auto& st : all) {
    total += st.ns;
    if (st.ns > top.ns) top = st;
  }
  top.share = total ? double(top.ns) / double(total) : 0;
  return top;
}

Diagnosis Diagnose(const RunProfile& p) {
  Diagnosis d;
  const double step = std::max(p.step_seconds, 1e-9);
  const int threads = std::max(1, p.loader_threads);
  const int cores = std::max(1, p.cores);
  const uint64_t worker_ns = p.loader.read_ns + p.loader.decode_ns + p.loader.augment_ns + p.loader.collate_ns;
  d.wait_share = std::clamp(p.wait_seconds / step, 0.0, 1.0);
  d.loader_busy = double(worker_ns) / (step * 1e9 * threads);
  d.idle_cores = std::max(0.0, cores - p.cpu_seconds / step);
  // The rate the model would take batches at if it never waited, and the loader core-seconds an
  // image costs: their product is the loader cores that keep up.
  const double compute_s = step * (1 - d.wait_share);
  const double model_rate = compute_s > 0 ? double(p.images) / compute_s : 0;
  const double per_image = p.loader.samples ? double(worker_ns) / 1e9 / double(p.loader.samples) : 0;
  d.worker_cores_needed = model_rate * per_image;
  if (d.wait_share <= kInputBoundWaitShare) {
    d.bottleneck = "compute";
    d.remedy = "none";
    d.advice = Fmt("compute-bound: the trainer waited for data %.1f%% of its step time (input-bound above %.0f%%); the "
                   "model's step bounds throughput, a faster loader would not help",
                   100 * d.wait_share, 100 * kInputBoundWaitShare);
    return d;
  }
  d.bottleneck = "input";
  const std::string head = Fmt("input-bound: the trainer waited for data %.1f%% of its step time; ", 100 * d.wait_share);
  const StageShare top = LargestStage(p.loader);
  const double out_pixels = double(p.output_width) * double(p.output_height);
  const double area_ratio = out_pixels > 0 ? p.source_pixels / out_pixels : 0;
  // Storage and stored resolution are the cause only while the loader's threads are saturated; idle
  // threads mean they lacked CPU or depth, whichever stage dominates their work ("starved" below).
  const bool saturated = d.loader_busy >= 0.8;
  if (saturated && std::strcmp(top.name, "read") == 0 && top.share >= 0.5) {
    d.remedy = "storage";
    d.advice = head + Fmt("reading takes %.0f%% of the loader's time (%.1f MB/s of payload): storage-bound; read in "
                          "block order (order quasi_random: dsc bench --order, LoaderOptions::order) from a local "
                          "disk, or warm the page cache",
                          100 * top.share, double(p.loader.payload_bytes) / step / 1e6);
  } else if (saturated && std::strcmp(top.name, "decode") == 0 && top.share >= 0.5 && area_ratio > 4) {
    // Decoding work grows with the stored pixels; 1.5x the output side leaves room for crops.
    const uint32_t side = std::max(p.output_width, p.output_height);
    d.remedy = "max_resolution";
    d.advice = head + Fmt("decoding takes %.0f%% of the loader's time on stored images of %.0f pixels, %.1fx the "
                          "%.0f-pixel output: rebuild with a smaller payload (dsc build --max-resolution %.0f)",
                          100 * top.share, p.source_pixels, area_ratio, out_pixels, std::ceil(1.5 * side));
  } else if (saturated) {
    const std::string busy = Fmt("the %.0f loader thread(s) were busy %.0f%% of the time and keeping up with the "
                                 "model's %.0f images/s takes ~%.1f loader cores (%.0f us per image); ",
                                 threads, 100 * d.loader_busy, model_rate, d.worker_cores_needed, per_image * 1e6);
    const int needed = int(std::ceil(d.worker_cores_needed - 1e-9));
    if (d.idle_cores >= 0.5) {
      const int spare = std::max(1, int(std::lround(d.idle_cores)));
      const int want = std::max(threads + 1, needed), use = std::min(want, threads + spare);
      d.remedy = "more_threads";
      d.advice = head + busy + Fmt("%.1f of %.0f cores are idle: use --loader-threads %.0f", d.idle_cores, cores, use);
      if (want > use) d.advice += Fmt(", and add the other ~%.0f cores as auxiliary workers (--remote)", want - use);
    } else {
      d.remedy = "remote_or_gpu";
      d.advice = head + busy + Fmt("no core is idle (the process uses %.1f of %.0f): add ~%.0f worker cores as "
                                   "auxiliary workers (--remote), or decode on the GPU (--decoder gpu)",
                                   cores - d.idle_cores, cores, std::max(1, needed - threads));
    }
  } else {
    d.remedy = "starved";
    d.advice = head + Fmt("yet the %.0f loader thread(s) were busy only %.0f%% of the time: they lack CPU or prefetch "
                          "depth; give libtorch fewer threads (--torch-threads) or prefetch deeper",
                          threads, 100 * d.loader_busy);
  }
  return d;
}

std::string BenchVerdict(const BenchEpoch& e) {
  const double wall_ns = std::max(e.seconds, 1e-9) * 1e9;
  const double wait = double(e.stages.consumer_wait_ns) / wall_ns;
  const int threads = std::max(0, e.threads);  // 0: remote workers only (--local-threads 0)
  const auto pct = [](double x) { return std::to_string(int(100 * x + 0.5)) + "%"; };
  std::string consumer;  // what the consumer did with each batch besides taking it
  if (e.gpu) consumer = "the GPU's decode and augmentation";
  if (e.consumer_ms > 0) {
    if (!consumer.empty()) consumer += " and ";
    consumer += Fmt("the simulated %g ms training step", e.consumer_ms);
  }
  if (!consumer.empty() && wait < kInputBoundWaitShare)
    return "the loader keeps up: the consumer waited " + pct(wait) + " of the time, so " + consumer +
           " bound" + (e.gpu && e.consumer_ms > 0 ? "" : "s") + " throughput";
  // The stage times below are the local threads' only: with the work mostly remote they say nothing.
  if (e.workers > 0 && e.remote_share >= 0.5)
    return "input-bound on the remote workers: the consumer waited " + pct(wait) + " of the time and the " +
           std::to_string(e.workers) + " worker(s) did " + pct(e.remote_share) +
           " of the samples; add workers (dsc serve on more machines, or more --threads there) or local threads "
           "(--local-threads, " + std::to_string(threads) + " now)";
  struct Advice {
    const char* stage;
    const char* advice;
  };
  static const Advice kAdvice[] = {
      {"read", "storage or page cache bound: warm the cache, use a faster disk, or quasi_random order (it reads each "
               "block once per epoch, from a disk or a URL)"},
      {"decode", "decode bound: more cores, raw payloads (--encoding raw at build), or smaller images"},
      {"augment", "augment/normalise bound: output uint8 and normalise on the GPU, or fewer transforms"},
      {"collate", "collate bound: larger batches"}};
  const StageShare top = LargestStage(e.stages);
  const char* advice = "";
  for (const auto& a : kAdvice)
    if (std::strcmp(a.stage, top.name) == 0) advice = a.advice;
  const uint64_t total = e.stages.read_ns + e.stages.decode_ns + e.stages.augment_ns + e.stages.collate_ns;
  const double busy = double(total) / (wall_ns * std::max(1, threads));
  std::string v = std::string(top.name) + " is the largest stage (" + pct(top.share) + " of worker time): " + advice;
  if (busy < 0.7) v += "; workers were busy only " + pct(busy) + " of the time (backpressure or scheduling: try a larger --prefetch)";
  if (threads < e.cores) v += "; " + std::to_string(threads) + " of " + std::to_string(e.cores) + " cores used";
  return v;
}

}  // namespace dsc
