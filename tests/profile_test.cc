// The training verdict (reader/bottleneck.h) on synthetic measurements, one per branch, and the
// tracer (reader/trace.h): named rows, counters, the recording switch, bounds, shared rows, and a
// loader's worker rows, each file read back by Python's json parser.
#include <gtest/gtest.h>

#include <thread>

#include "reader/bottleneck.h"
#include "reader/loader.h"
#include "reader/trace.h"
#include "tests/test_util.h"
#include "writer/build.h"

namespace dsc::test {
namespace {

// 10 s of steps over 1000 images, one loader thread on 4 cores. The model alone would take
// 1000 / (10 s x (1 - wait)) images/s; the loader's four stages cost `ns_per_image` of thread time.
RunProfile Profile(double wait_share, double cpu_cores, uint64_t read, uint64_t decode, uint64_t augment = 0) {
  RunProfile p;
  p.step_seconds = 10;
  p.wait_seconds = 10 * wait_share;
  p.cpu_seconds = 10 * cpu_cores;
  p.cores = 4;
  p.loader_threads = 1;
  p.images = 1000;
  p.loader.samples = 1000;
  p.loader.read_ns = read * 1000;
  p.loader.decode_ns = decode * 1000;
  p.loader.augment_ns = augment * 1000;
  p.loader.collate_ns = 0;
  p.loader.payload_bytes = 1000 * 3000;
  p.output_width = p.output_height = 32;
  p.source_pixels = 32 * 32;
  return p;
}


TEST(Verdict, BelowTheThresholdIsComputeBound) {
  // Up to 5% data wait is compute-bound, whatever the loader's stages look like.
  for (double wait : {0.0, 0.02, 0.05}) {
    const Diagnosis d = Diagnose(Profile(wait, 1, 9'000'000, 1'000'000));
    EXPECT_EQ(d.bottleneck, "compute") << wait;
    EXPECT_EQ(d.remedy, "none");
    EXPECT_TRUE(Has(d.advice, "compute-bound")) << d.advice;
    EXPECT_NEAR(d.wait_share, wait, 1e-12);
  }
  EXPECT_EQ(Diagnose(Profile(0.051, 1, 0, 9'900'000)).bottleneck, "input");
}

TEST(Verdict, BusyThreadsAndIdleCoresAskForMoreThreads) {
  // wait 50%: the model takes 1000 / 5 s = 200 images/s; 9.9 ms of loader time per image = 1.98 cores,
  // and the one thread was busy 99% of the 10 s. The process used 1.2 of 4 cores: 2.8 idle.
  const Diagnosis d = Diagnose(Profile(0.5, 1.2, 0, 9'900'000));
  EXPECT_EQ(d.bottleneck, "input");
  EXPECT_EQ(d.remedy, "more_threads");
  EXPECT_NEAR(d.loader_busy, 0.99, 1e-9);
  EXPECT_NEAR(d.idle_cores, 2.8, 1e-9);
  EXPECT_NEAR(d.worker_cores_needed, 1.98, 1e-9);
  EXPECT_TRUE(Has(d.advice, "--loader-threads 2")) << d.advice;
  EXPECT_FALSE(Has(d.advice, "--remote")) << d.advice;
}

TEST(Verdict, MoreThreadsThanIdleCoresAddsAuxiliaryWorkers) {
  // wait 90%: 1000 images / 1 s of compute = 1000 images/s x 9.9 ms = 9.9 cores needed, one idle core.
  const Diagnosis d = Diagnose(Profile(0.9, 3, 0, 9'900'000));
  EXPECT_EQ(d.remedy, "more_threads");
  EXPECT_NEAR(d.worker_cores_needed, 9.9, 1e-9);
  EXPECT_TRUE(Has(d.advice, "--loader-threads 2")) << d.advice;
  EXPECT_TRUE(Has(d.advice, "~8 cores as auxiliary workers (--remote)")) << d.advice;
}

TEST(Verdict, BusyThreadsAndNoIdleCoreAskForRemoteWorkersOrGpuDecode) {
  const Diagnosis d = Diagnose(Profile(0.5, 3.8, 0, 9'900'000));
  EXPECT_EQ(d.remedy, "remote_or_gpu");
  EXPECT_TRUE(Has(d.advice, "--remote")) << d.advice;
  EXPECT_TRUE(Has(d.advice, "--decoder gpu")) << d.advice;
  EXPECT_TRUE(Has(d.advice, "add ~1 worker cores")) << d.advice;  // 1.98 needed, 1 thread there
}

TEST(Verdict, DecodeOfLargeImagesAsksForASmallerPayload) {
  RunProfile p = Profile(0.5, 3.8, 100'000, 9'800'000);
  p.output_width = p.output_height = 224;
  p.source_pixels = 500.0 * 375;  // ImageNet's typical photo: 3.7x the output's pixels
  EXPECT_EQ(Diagnose(p).remedy, "remote_or_gpu") << "3.7x the pixels is not large";
  p.source_pixels = 1000.0 * 750;
  const Diagnosis d = Diagnose(p);
  EXPECT_EQ(d.remedy, "max_resolution");
  EXPECT_TRUE(Has(d.advice, "--max-resolution 336")) << d.advice;
  // Large images, but decode is not what dominates: no payload advice.
  p.loader.decode_ns = 4'000'000'000;
  p.loader.augment_ns = 5'900'000'000;
  EXPECT_NE(Diagnose(p).remedy, "max_resolution");
}

TEST(Verdict, ReadDominatingIsStorageBound) {
  const Diagnosis d = Diagnose(Profile(0.3, 0.5, 7'000'000, 2'000'000, 1'000'000));
  EXPECT_EQ(d.remedy, "storage");
  // The order is named where it can be set (dsc train has no --order flag).
  EXPECT_TRUE(Has(d.advice, "order quasi_random")) << d.advice;
  EXPECT_TRUE(Has(d.advice, "LoaderOptions::order")) << d.advice;
  EXPECT_TRUE(Has(d.advice, "70%")) << d.advice;
}

TEST(Verdict, IdleLoaderThreadsWhileTheTrainerWaitsAreStarved) {
  const Diagnosis d = Diagnose(Profile(0.2, 2, 0, 3'000'000));  // busy 30%
  EXPECT_EQ(d.remedy, "starved");
  EXPECT_NEAR(d.loader_busy, 0.3, 1e-9);
  EXPECT_TRUE(Has(d.advice, "--torch-threads")) << d.advice;
  // The same idle threads whose work is mostly reading, or decoding large images: neither storage
  // nor the stored resolution held the trainer back (the verdict named them).
  const Diagnosis r = Diagnose(Profile(0.2, 2, 2'100'000, 600'000, 300'000));
  EXPECT_NEAR(r.loader_busy, 0.3, 1e-9);
  EXPECT_EQ(r.remedy, "starved") << r.advice;
  RunProfile p = Profile(0.2, 2, 0, 2'700'000, 300'000);
  p.output_width = p.output_height = 224;
  p.source_pixels = 1000.0 * 750;
  EXPECT_EQ(Diagnose(p).remedy, "starved") << Diagnose(p).advice;
  p.loader.decode_ns *= 3;  // the same run with its thread busy 90% of the time
  p.loader.augment_ns *= 3;
  EXPECT_EQ(Diagnose(p).remedy, "max_resolution") << Diagnose(p).advice;
}

TEST(Verdict, LargestStage) {
  StageStats s;
  s.read_ns = 1;
  s.decode_ns = 2;
  s.augment_ns = 5;
  s.collate_ns = 2;
  const StageShare top = LargestStage(s);
  EXPECT_STREQ(top.name, "augment");
  EXPECT_DOUBLE_EQ(top.share, 0.5);
  EXPECT_DOUBLE_EQ(LargestStage(StageStats()).share, 0);
}

// A 1 s epoch of `dsc bench` on 16 cores: one loader thread whose stages took `decode` ms (decode)
// and 0.1 ms (read), and a consumer that waited `wait` of the time.
BenchEpoch Epoch(double wait, uint64_t decode_ms) {
  BenchEpoch e;
  e.seconds = 1;
  e.threads = 1;
  e.cores = 16;
  e.stages.consumer_wait_ns = uint64_t(wait * 1e9);
  e.stages.read_ns = 100'000;
  e.stages.decode_ns = decode_ms * 1'000'000;
  return e;
}

TEST(BenchVerdict, AGpuConsumerThatHardlyWaitsBoundsThroughputNotTheLargestStage) {
  // --decoder gpu as measured on an H200: the consumer waited 3% while the loader's one thread staged
  // JPEGs (its "decode" stage) 60% of the time; the verdict said "decode bound: more cores".
  BenchEpoch e = Epoch(0.03, 600);
  e.gpu = true;
  std::string v = BenchVerdict(e);
  EXPECT_TRUE(Has(v, "the loader keeps up: the consumer waited 3% of the time, so the GPU's decode and augmentation "
                     "bounds throughput")) << v;
  EXPECT_FALSE(Has(v, "decode bound")) << v;
  e.consumer_ms = 2;  // and a simulated step as well
  v = BenchVerdict(e);
  EXPECT_TRUE(Has(v, "so the GPU's decode and augmentation and the simulated 2 ms training step bound throughput")) << v;
  // A GPU consumer that waits for batches: the loader's stages are the bound again.
  e = Epoch(0.4, 600);
  e.gpu = true;
  v = BenchVerdict(e);
  EXPECT_TRUE(Has(v, "decode is the largest stage (100% of worker time): decode bound")) << v;
  EXPECT_TRUE(Has(v, "workers were busy only 60% of the time")) << v;
  EXPECT_TRUE(Has(v, "1 of 16 cores used")) << v;
}

TEST(BenchVerdict, ASimulatedStepBelowTheThresholdKeepsUp) {
  BenchEpoch e = Epoch(0.049, 900);
  e.consumer_ms = 2.5;
  EXPECT_EQ(BenchVerdict(e), "the loader keeps up: the consumer waited 5% of the time, so the simulated 2.5 ms "
                             "training step bounds throughput");
  e.stages.consumer_wait_ns = 50'000'000;  // 5%: input-bound from here on, as in dsc train's verdict
  EXPECT_TRUE(Has(BenchVerdict(e), "decode is the largest stage")) << BenchVerdict(e);
  // A consumer that does nothing and still hardly waits: no work to blame, the stages are reported.
  e = Epoch(0.01, 900);
  EXPECT_TRUE(Has(BenchVerdict(e), "decode is the largest stage")) << BenchVerdict(e);
  EXPECT_FALSE(Has(BenchVerdict(e), "workers were busy only")) << BenchVerdict(e);
}

TEST(BenchVerdict, MostlyRemoteWorkNamesTheWorkers) {
  BenchEpoch e = Epoch(0.3, 10);
  e.workers = 2;
  e.remote_share = 0.8;
  std::string v = BenchVerdict(e);
  EXPECT_TRUE(Has(v, "input-bound on the remote workers: the consumer waited 30% of the time and the 2 worker(s) did 80% "
                     "of the samples")) << v;
  EXPECT_TRUE(Has(v, "(--local-threads, 1 now)")) << v;
  e.threads = 0;  // remote only
  EXPECT_TRUE(Has(BenchVerdict(e), "(--local-threads, 0 now)")) << BenchVerdict(e);
  e.threads = 1;
  e.remote_share = 0.4;  // mostly local: the local stages again
  EXPECT_TRUE(Has(BenchVerdict(e), "decode is the largest stage")) << BenchVerdict(e);
}

TEST(Tracer, NamedRowsCountersAndEscapedNamesParseAsJson) {
  const std::string path = ScratchDir() + "/t.json";
  Tracer t;
  const uint32_t trainer = t.AddTrack("trainer", "dsc train");
  const uint32_t py = t.AddTrack("python \"loop\"\x01", "dsc train");
  const uint32_t threads = t.AddCounter("loader threads", "loader");
  EXPECT_EQ(t.Counter("loader threads", "loader"), threads) << "Counter finds the existing row";
  EXPECT_NE(t.Counter("loader threads", "dsc train"), threads) << "in another group: a new row";
  EXPECT_NE(t.Counter("trainer", "dsc train"), trainer) << "a span row is not a counter";
  t.Add(trainer, "forward", 1000, 5000, 7);
  t.Add(trainer, "backward", 5000, 9000);
  { TraceSpan s(&t, py, t.Intern(std::string("phase \\ ") + "x")); }
  t.Count(threads, 2);
  t.Count(threads, 3);
  t.Add(99, "nowhere", 0, 1);  // an id never handed out: ignored
  ASSERT_TRUE(t.Write(path));
  EXPECT_EQ(t.size(), 5u);
  auto s = TraceSummary(path);
  ASSERT_FALSE(s.empty()) << "the trace does not parse";
  EXPECT_EQ(s["span/dsc train/trainer/forward"], 1);
  EXPECT_EQ(s["span/dsc train/trainer/backward"], 1);
  EXPECT_EQ(s["span/dsc train/python \"loop\"\x01/phase \\ x"], 1);
  EXPECT_EQ(s["counter/loader/loader threads/value"], 2);
  EXPECT_EQ(s["counter/loader/loader threads/value#last"], 3);
  EXPECT_EQ(s.size(), 5u);
}

TEST(Tracer, DisabledRecordsNothingAndRowsAreBounded) {
  Tracer t(10);
  const uint32_t row = t.AddTrack("r");
  t.set_enabled(false);
  for (int i = 0; i < 100; ++i) {
    t.Add(row, "x", 0, 1);
    TraceSpan s(&t, row, "y");
  }
  EXPECT_EQ(t.size(), 0u);
  t.set_enabled(true);
  for (int i = 0; i < 100; ++i) t.Add(row, "x", uint64_t(i), uint64_t(i) + 1);
  EXPECT_EQ(t.size(), 10u) << "a row keeps at most max_events_per_track events";
}

TEST(Tracer, ThreadsShareARowAndAddRowsWhileOthersRecord) {
  Tracer t;
  const uint32_t shared = t.AddTrack("shared");
  std::vector<std::thread> th;
  for (int k = 0; k < 4; ++k)
    th.emplace_back([&, k] {
      const uint32_t own = t.AddTrack("thread " + std::to_string(k));
      for (int i = 0; i < 1000; ++i) {
        const uint64_t now = Tracer::Now();
        t.Add(shared, t.Intern("phase " + std::to_string(i % 3)), now, now + 1);
        t.Add(own, "own", now, now + 1);
      }
    });
  for (auto& x : th) x.join();
  EXPECT_EQ(t.size(), 8000u);
  const std::string path = ScratchDir() + "/t.json";
  ASSERT_TRUE(t.Write(path));
  auto s = TraceSummary(path);
  EXPECT_EQ(s["span/dsc/shared/phase 0"] + s["span/dsc/shared/phase 1"] + s["span/dsc/shared/phase 2"], 4000);
  EXPECT_EQ(s["span/dsc/thread 3/own"], 1000);
}

std::string SmallFile() {
  static const std::string path = [] {
    const std::string p = ScratchDir("-profile") + "/small.beton";
    writer::BuildOptions o;
    o.log = [](const std::string&) {};
    writer::Build(SubsetTree(20), p, o);  // 200 real CIFAR-10 images
    return p;
  }();
  return path;
}

TEST(Tracer, LoaderWorkersRecordEveryStageOnTheirNamedRows) {
  Tracer t;
  LoaderOptions o = LoaderOptions::CifarTrain();
  o.batch_size = 50;
  o.threads = 2;
  o.tracer = &t;
  uint64_t samples = 0;
  {
    Loader l(SmallFile(), o);
    for (const Batch& b : l.epoch(0)) samples += b.size;
  }
  const std::string path = ScratchDir() + "/t.json";
  ASSERT_TRUE(t.Write(path));
  auto s = TraceSummary(path);
  ASSERT_EQ(samples, 200u);
  for (const char* stage : {"read", "decode", "augment", "collate"})
    EXPECT_EQ(s[std::string("span/loader/loader worker 0/") + stage] + s[std::string("span/loader/loader worker 1/") + stage], 200)
        << stage << ": one span per sample";
  EXPECT_GE(s["span/loader/loader worker 0/batch"] + s["span/loader/loader worker 1/batch"], 4) << "each batch's chunks";
  EXPECT_EQ(s["span/loader/loader consumer/wait for batch"], 4);
}

TEST(Tracer, ADisabledTracerKeepsTheLoaderSilent) {
  Tracer t;
  t.set_enabled(false);
  LoaderOptions o = LoaderOptions::CifarTrain();
  o.batch_size = 50;
  o.threads = 2;
  o.tracer = &t;
  Loader l(SmallFile(), o);
  for (const Batch& b : l.epoch(0)) (void)b;
  EXPECT_EQ(t.size(), 0u);
}

}  // namespace
}  // namespace dsc::test
