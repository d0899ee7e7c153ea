// dsc train on real CIFAR-10: a short CPU run learns, and a resumed run equals an uninterrupted one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "tests/test_util.h"
#include "writer/build.h"

namespace dsc::test {
namespace {

namespace fs = std::filesystem;

using Files = CifarFiles;
Files Build() { return BuildCifarFiles("-train"); }

std::string Json(const std::string& path) {
  auto b = ReadFile(path);
  return std::string(b.begin(), b.end());
}

int Count(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

double Number(const std::string& json, const std::string& key) {
  const auto m = RegexSearch(json, "\"" + key + "\": ([-0-9.e]+)");
  EXPECT_FALSE(m.empty()) << key << " in " << json;
  return m.empty() ? 0 : std::stod(m[1]);
}

TEST(Train, ShortCpuRunLearns) {
  Files f = Build();
  auto dir = ScratchDir();
  std::string out;
  ASSERT_EQ(RunDsc("train " + f.train + " --test " + f.test + " --epochs 2 --limit 2560 --batch-size 128 --lr 0.2 "
                   "--test-limit 1000 --json " + dir + "/r.json --trace " + dir + "/t.json", &out), 0) << out;
  std::string j = Json(dir + "/r.json");
  const auto m = RegexSearch(j, "\"train_loss\": \\[([0-9.e-]+), ([0-9.e-]+)\\]");
  ASSERT_FALSE(m.empty()) << j;
  const double first = std::stod(m[1]), second = std::stod(m[2]);
  const double acc = Number(j, "test_accuracy");
  std::printf("train loss %.3f -> %.3f, test accuracy %.1f%%\n", first, second, 100 * acc);
  EXPECT_LT(second, first - 0.1) << "stated margin: the loss drops by more than 0.1 in the second epoch";
  EXPECT_GT(acc, 0.2) << "chance is 10%";
  EXPECT_GT(Number(j, "images_per_second"), 0);
  EXPECT_GE(Number(j, "data_wait_share"), 0);
  // ResNet-9 on this CPU is ~1000x slower than the loader: compute-bound, every epoch.
  EXPECT_EQ(Count(j, "\"bottleneck\": \"compute\""), 3) << "both epochs and the run: " << j;
  EXPECT_EQ(Count(out, "verdict: compute-bound"), 2) << out;
  EXPECT_EQ(Count(j, "\"phases\": {\"data_wait\": "), 2) << j;
  // The default trace window: the second epoch's first 50 steps (all 20 here) and its evaluation.
  const auto t = TraceSummary(dir + "/t.json");
  ASSERT_FALSE(t.empty()) << "the trace does not parse as JSON";
  for (const char* phase : {"wait for batch", "copy to device", "forward", "backward", "optimizer step", "step"})
    EXPECT_EQ(t.at(std::string("span/dsc train/trainer/") + phase), phase == std::string("wait for batch") ? 21 : 20) << phase;
  EXPECT_EQ(t.at("span/dsc train/trainer/evaluation"), 1);
  for (const char* stage : {"read", "decode", "augment", "collate"})
    EXPECT_GT(t.at(std::string("span/loader/loader worker 0/") + stage), 2000) << stage << ": ~20 x 128 samples";
}

// A loader slowed on purpose (DSC_TEST_DECODE_DELAY_US: 1 s per image, more than 10x the model's time
// per image on this CPU, so the verdict holds on a loaded machine) with idle cores: input-bound, and
// the remedy is more loader threads.
TEST(Train, ASlowLoaderIsInputBoundAndMoreThreadsAreAdvised) {
  Files f = Build();
  auto dir = ScratchDir();
  ::setenv("DSC_TEST_DECODE_DELAY_US", "1000000", 1);
  std::string out;
  const int rc = RunDsc("train " + f.train + " --test " + f.test + " --epochs 2 --limit 16 --batch-size 2 --test-limit 4 "
                        "--torch-threads 1 --json " + dir + "/r.json --trace " + dir + "/t.json --trace-steps 9:12", &out);
  ::unsetenv("DSC_TEST_DECODE_DELAY_US");
  ASSERT_EQ(rc, 0) << out;
  const std::string j = Json(dir + "/r.json");
  // The second epoch (the first one also warms libtorch up).
  const auto m = RegexSearch(j, "\"remedy\": \"([a-z_]+)\", \"advice\": \"([^\"]+)\"\\}\\]");
  ASSERT_FALSE(m.empty()) << j;
  EXPECT_EQ(m[1], "more_threads") << m[2];
  EXPECT_NE(m[2].find("--loader-threads "), std::string::npos) << m[2];
  EXPECT_NE(j.find("\"bottleneck\": \"input\",\n  \"advice\""), std::string::npos) << "the run's verdict: " << j;
  EXPECT_GT(Number(j, "data_wait_share"), 0.05);
  EXPECT_NE(out.find("verdict: input-bound"), std::string::npos) << out;
  // --trace-steps 9:12: exactly steps 9, 10 and 11 on the trainer row, nothing of the evaluation.
  const auto t = TraceSummary(dir + "/t.json");
  ASSERT_FALSE(t.empty()) << "the trace does not parse as JSON";
  for (const char* phase : {"wait for batch", "copy to device", "forward", "backward", "optimizer step", "step"})
    EXPECT_EQ(t.at(std::string("span/dsc train/trainer/") + phase), 3) << phase;
  EXPECT_EQ(t.count("span/dsc train/trainer/evaluation"), 0u);
  for (const char* stage : {"read", "decode", "augment", "collate"}) {
    const double n = t.at(std::string("span/loader/loader worker 0/") + stage);
    EXPECT_GE(n, 4) << stage << ": the three steps' 6 samples, less what was decoded before the window";
    EXPECT_LE(n, 10) << stage << ": nothing long before or after the window";
  }
  EXPECT_EQ(t.at("counter/loader/loader threads/value#last"), 1);
  // A malformed window is a usage error.
  EXPECT_EQ(RunDsc("train " + f.train + " --test " + f.test + " --trace-steps 5:5", &out), 2) << out;
  EXPECT_NE(out.find("--trace-steps 5:5"), std::string::npos) << out;
  // So is a device dsc does not know ('CUDA' or 'tpu' trained on the CPU without a word).
  for (const char* dev : {"tpu", "CUDA"}) {
    EXPECT_EQ(RunDsc("train " + f.train + " --test " + f.test + " --device " + dev, &out), 2) << out;
    EXPECT_NE(out.find(std::string("unknown --device '") + dev + "'"), std::string::npos) << out;
    EXPECT_EQ(out.find("epoch 0:"), std::string::npos) << out;
  }
  // A trace that cannot be written is an error before any training, not after it.
  EXPECT_EQ(RunDsc("train " + f.train + " --test " + f.test + " --trace " + dir + "/missing/t.json", &out), 1) << out;
  EXPECT_NE(out.find("--trace " + dir + "/missing/t.json: its folder " + dir + "/missing does not exist"), std::string::npos) << out;
  EXPECT_EQ(out.find("epoch 0:"), std::string::npos) << out;
}

TEST(Train, ResumeReproducesTheUninterruptedRun) {
  Files f = Build();
  auto dir = ScratchDir();
  const std::string common = "train " + f.train + " --test " + f.test +
                             " --epochs 2 --limit 512 --batch-size 64 --test-limit 100 --torch-threads 1 --seed 3";
  std::string out;
  ASSERT_EQ(RunDsc(common + " --json " + dir + "/full.json", &out), 0) << out;
  ASSERT_EQ(RunDsc(common + " --max-steps 5 --checkpoint " + dir + "/ckpt", &out), 0) << out;
  ASSERT_EQ(RunDsc(common + " --resume " + dir + "/ckpt --json " + dir + "/resumed.json", &out), 0) << out;
  EXPECT_NE(out.find("resumed from"), std::string::npos) << out;
  const std::string full = Json(dir + "/full.json"), resumed = Json(dir + "/resumed.json");
  const std::string sum = "\"param_checksum\": \"([0-9a-f]+)\"";
  const auto a = RegexSearch(full, sum), b = RegexSearch(resumed, sum);
  ASSERT_FALSE(a.empty()) << full;
  ASSERT_FALSE(b.empty()) << resumed;
  EXPECT_EQ(a[1], b[1]) << "parameters after 16 steps differ between the resumed and the uninterrupted run";
  EXPECT_EQ(Number(full, "steps"), 16);
  EXPECT_EQ(Number(resumed, "steps"), 16);
}

// Checkpoints: one atomic commit of a complete directory; resume takes the run's identity from it.
std::string Checksum(const std::string& json_path) {
  const std::string j = Json(json_path);
  const auto m = RegexSearch(j, "\"param_checksum\": \"([0-9a-f]+)\"");
  EXPECT_FALSE(m.empty()) << j;
  return m.empty() ? "" : m[1];
}

TEST(Train, ResumeTakesTheSubsetBatchAndSeedFromTheCheckpoint) {
  Files f = Build();
  auto dir = ScratchDir();
  const std::string base = "train " + f.train + " --test " + f.test + " --epochs 2 --test-limit 100 --torch-threads 1";
  const std::string identity = " --limit 512 --batch-size 64 --seed 3";
  std::string out;
  ASSERT_EQ(RunDsc(base + identity + " --json " + dir + "/full.json", &out), 0) << out;
  ASSERT_EQ(RunDsc(base + identity + " --max-steps 5 --checkpoint " + dir + "/ckpt", &out), 0) << out;
  // No --limit, --batch-size or --seed: the checkpoint supplies them (the flags' defaults would train
  // on all 50000 samples in batches of 512 with seed 0).
  // (--max-steps only bounds the run should the resume wrongly take the defaults.)
  ASSERT_EQ(RunDsc(base + " --max-steps 16 --resume " + dir + "/ckpt --json " + dir + "/resumed.json", &out), 0) << out;
  EXPECT_NE(out.find("512 samples/epoch"), std::string::npos) << out;
  EXPECT_EQ(Number(Json(dir + "/resumed.json"), "steps"), 16);
  EXPECT_EQ(Checksum(dir + "/full.json"), Checksum(dir + "/resumed.json"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir + "/ckpt"), fs::directory_iterator()), 4)
      << "model, optimiser, state and loader state, nothing else";

  // A flag that contradicts the checkpoint is a usage error naming both values, before any training.
  for (const std::string bad : {" --seed 4", " --batch-size 32", " --limit 256"}) {
    EXPECT_EQ(RunDsc(base + bad + " --max-steps 6 --resume " + dir + "/ckpt", &out), 2) << bad << ": " << out;
    EXPECT_NE(out.find("contradicts the checkpoint"), std::string::npos) << bad << ": " << out;
    EXPECT_EQ(out.find("epoch 1:"), std::string::npos) << bad << ": " << out;
  }
  // Repeating the checkpoint's own values is fine.
  EXPECT_EQ(RunDsc(base + identity + " --max-steps 9 --resume " + dir + "/ckpt", &out), 0) << out;
}

TEST(Train, ATornCheckpointIsIgnoredAndCleanedAndResumeUsesTheLastComplete) {
  Files f = Build();
  auto dir = ScratchDir();
  const std::string common = "train " + f.train + " --test " + f.test +
                             " --epochs 2 --limit 512 --batch-size 64 --test-limit 100 --torch-threads 1 --seed 3";
  std::string out;
  ASSERT_EQ(RunDsc(common + " --json " + dir + "/full.json", &out), 0) << out;
  ASSERT_EQ(RunDsc(common + " --max-steps 5 --checkpoint " + dir + "/ckpt", &out), 0) << out;
  // A crash while writing the next checkpoint: its temporary directory holds a truncated model and a
  // state from later on.
  const std::string torn = dir + "/.ckpt.dsc-tmp-00000000deadbeef";
  fs::create_directories(torn);
  auto model = ReadFile(dir + "/ckpt/model.pt");
  WriteFile(torn + "/model.pt", model.data(), model.size() / 2);
  const std::string later = "1 3 3 11\n";
  WriteFile(torn + "/state.txt", later.data(), later.size());
  // Resuming (and checkpointing again) uses the complete checkpoint and removes the torn one.
  ASSERT_EQ(RunDsc(common + " --resume " + dir + "/ckpt --checkpoint " + dir + "/ckpt --json " + dir + "/resumed.json", &out), 0)
      << out;
  EXPECT_NE(out.find("resumed from " + dir + "/ckpt at epoch 0, batch 5"), std::string::npos) << out;
  EXPECT_EQ(Checksum(dir + "/full.json"), Checksum(dir + "/resumed.json"));
  EXPECT_FALSE(fs::exists(torn)) << "the torn checkpoint is removed by the next save";
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".dsc-tmp-"), std::string::npos) << "left behind: " << e.path();
  // The final checkpoint is the end of training: resuming it trains no further.
  ASSERT_EQ(RunDsc(common + " --resume " + dir + "/ckpt --json " + dir + "/again.json", &out), 0) << out;
  EXPECT_NE(out.find("at epoch 2, batch 0"), std::string::npos) << out;
  EXPECT_EQ(Checksum(dir + "/full.json"), Checksum(dir + "/again.json"));
}

// --checkpoint swaps its directory in and deletes what was there: only a checkpoint of ours may be. A
// folder of the user's, or a file, was deleted (an audit lost a thesis.txt and a dataset this way).
TEST(Train, CheckpointNeverReplacesWhatIsNotACheckpoint) {
  Files f = Build();
  auto dir = ScratchDir();
  const std::string common = "train " + f.train + " --test " + f.test + " --limit 128 --batch-size 64 --test-limit 100 --epochs 1";
  const std::string note = "keep me\n";
  fs::create_directories(dir + "/mine");
  WriteFile(dir + "/mine/notes.txt", note.data(), note.size());
  WriteFile(dir + "/data.bin", note.data(), note.size());
  std::string out;
  for (const std::string& target : {dir + "/mine", dir + "/data.bin"}) {
    EXPECT_EQ(RunDsc(common + " --checkpoint " + target, &out), 1) << out;
    EXPECT_NE(out.find(target + ": exists and is not a dsc train checkpoint"), std::string::npos) << out;
    EXPECT_EQ(out.find("epoch 0:"), std::string::npos) << "refused before training: " << out;
  }
  const auto kept = ReadFile(dir + "/mine/notes.txt"), file = ReadFile(dir + "/data.bin");
  EXPECT_EQ(std::string(kept.begin(), kept.end()), note);
  EXPECT_EQ(std::string(file.begin(), file.end()), note);
  // A checkpoint of ours is replaced, as always.
  ASSERT_EQ(RunDsc(common + " --max-steps 1 --checkpoint " + dir + "/ck", &out), 0) << out;
  ASSERT_EQ(RunDsc(common + " --max-steps 2 --checkpoint " + dir + "/ck", &out), 0) << out;
  const auto st = ReadFile(dir + "/ck/state.txt");
  EXPECT_NE(std::string(st.begin(), st.end()).find("step 2"), std::string::npos);
}

// --max-steps ending exactly at an epoch's end: the resume starts the next epoch (it used to log an
// empty epoch of 0 images/s and evaluate twice), and a limit the checkpoint already reached trains nothing.
TEST(Train, StoppedAtAnEpochsEndResumesAtTheNextEpoch) {
  Files f = Build();
  auto dir = ScratchDir();
  const std::string common = "train " + f.train + " --test " + f.test + " --epochs 2 --limit 256 --batch-size 64 --test-limit 100 --torch-threads 1";
  std::string out;
  ASSERT_EQ(RunDsc(common + " --json " + dir + "/full.json", &out), 0) << out;
  ASSERT_EQ(RunDsc(common + " --max-steps 4 --checkpoint " + dir + "/ck", &out), 0) << out;
  ASSERT_EQ(RunDsc(common + " --resume " + dir + "/ck --json " + dir + "/resumed.json", &out), 0) << out;
  EXPECT_NE(out.find("at epoch 1, batch 0 (step 4)"), std::string::npos) << out;
  EXPECT_EQ(Count(out, "epoch 0:"), 0) << out;
  const std::string resumed = Json(dir + "/resumed.json");
  EXPECT_FALSE(RegexSearch(resumed, "\"train_loss\": \\[[0-9.e-]+\\]").empty()) << "one epoch logged: " << resumed;
  EXPECT_EQ(Checksum(dir + "/full.json"), Checksum(dir + "/resumed.json"));
  ASSERT_EQ(RunDsc(common + " --resume " + dir + "/ck --max-steps 4 --checkpoint " + dir + "/ck", &out), 0) << out;
  EXPECT_NE(out.find("nothing to train"), std::string::npos) << out;
  const auto st = ReadFile(dir + "/ck/state.txt");
  EXPECT_NE(std::string(st.begin(), st.end()).find("step 4\n"), std::string::npos) << "the checkpoint is unchanged";
}

// The test file must be the train file's task: another class list or image size is refused before
// training, naming both files (a 12-class train file used to die in libtorch, "Target 11 is out of
// bounds", after loading everything); a train file of 12 classes trains a 12-way model (fewer keep
// FFCV's 10 outputs); a test file may lack the last classes, not have more; and the 12-way model's
// model.pt does not resume a 10-class run (libtorch took the stored shape and failed in the optimiser).
TEST(Train, ATestFileOfAnotherTaskIsRefusedAndAnyClassCountTrains) {
  Files f = Build();
  auto dir = ScratchDir();
  std::string out;
  ASSERT_EQ(RunDsc("generate " + dir + "/g12 --classes 12 --train 8 --test 3 --seed 1", &out), 0) << out;
  ASSERT_EQ(RunDsc("generate " + dir + "/g48 --classes 10 --train 1 --test 3 --size 48 --seed 2", &out), 0) << out;
  ASSERT_EQ(RunDsc("generate " + dir + "/g3 --classes 3 --train 4 --test 3 --seed 3", &out), 0) << out;
  for (const char* split : {"g12/train", "g12/test", "g48/test", "g3/train", "g3/test"}) {
    std::string name = split;
    std::replace(name.begin(), name.end(), '/', '-');
    ASSERT_EQ(RunDsc("build " + dir + "/" + split + " " + dir + "/" + name + ".beton", &out), 0) << out;
  }
  const std::string small = " --epochs 1 --batch-size 32 --limit 64 --test-limit 30 --torch-threads 1";
  EXPECT_EQ(RunDsc("train " + f.train + " --test " + dir + "/g12-test.beton" + small, &out), 1) << out;
  EXPECT_NE(out.find("--test " + dir + "/g12-test.beton names its classes class_000"), std::string::npos) << out;
  EXPECT_NE(out.find(f.train + " names airplane, automobile"), std::string::npos) << out;
  EXPECT_EQ(out.find("epoch 0:"), std::string::npos) << out;
  EXPECT_EQ(RunDsc("train " + f.train + " --test " + dir + "/g48-test.beton" + small, &out), 1) << out;
  EXPECT_NE(out.find("g48-test.beton holds 48x48 images, " + f.train + " 32x32"), std::string::npos) << out;
  EXPECT_EQ(out.find("epoch 0:"), std::string::npos) << out;
  ASSERT_EQ(RunDsc("train " + dir + "/g12-train.beton --test " + dir + "/g12-test.beton" + small + " --checkpoint " + dir + "/ck12", &out), 0)
      << out;
  EXPECT_NE(out.find("training ResNet-9 (12 outputs)"), std::string::npos) << out;
  EXPECT_NE(out.find("test accuracy"), std::string::npos) << out;
  // A test file of the first classes only (class_000..002 of class_000..011) is the same task; fewer
  // classes than 10 keep FFCV's 10 outputs (--save-init weights and older checkpoints fit them).
  EXPECT_EQ(RunDsc("train " + dir + "/g12-train.beton --test " + dir + "/g3-test.beton" + small + " --max-steps 1", &out), 0) << out;
  EXPECT_EQ(RunDsc("train " + dir + "/g3-train.beton --test " + dir + "/g3-test.beton" + small + " --max-steps 1", &out), 0) << out;
  EXPECT_NE(out.find("training ResNet-9 (10 outputs)"), std::string::npos) << out;
  // A grayscale file trains the RGB model (dsc train asks the loader for three channels).
  ASSERT_EQ(RunDsc("build " + dir + "/g3/train " + dir + "/g3-gray.beton --subsampling gray --reencode", &out), 0) << out;
  EXPECT_EQ(RunDsc("train " + dir + "/g3-gray.beton --test " + dir + "/g3-test.beton" + small + " --max-steps 1", &out), 0) << out;
  EXPECT_EQ(RunDsc("train " + dir + "/g3-train.beton --test " + dir + "/g12-test.beton" + small, &out), 1) << out;
  EXPECT_NE(out.find("names its classes class_000, class_001, class_002, class_003"), std::string::npos) << out;
  ASSERT_EQ(RunDsc("train " + f.train + " --test " + f.test + small + " --max-steps 1 --checkpoint " + dir + "/ck", &out), 0) << out;
  fs::copy_file(dir + "/ck12/model.pt", dir + "/ck/model.pt", fs::copy_options::overwrite_existing);
  EXPECT_EQ(RunDsc("train " + f.train + " --test " + f.test + small + " --resume " + dir + "/ck", &out), 1) << out;
  EXPECT_NE(out.find(dir + "/ck/model.pt: does not fit a ResNet-9 of 10 outputs (its fc.weight has another shape)"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("Exception raised"), std::string::npos) << "no libtorch trace: " << out;
}

// What the run writes at its end is checked at its start: a --json, --trace or --checkpoint under a
// file, or in a missing folder, failed only after the whole run (the checkpoint after its first
// epoch); an output naming an input would have overwritten it. Flags out of range are usage errors
// (exit 2) before any work: an --epochs the checkpoint reader refuses, a learning rate of 0 or below
// (libtorch's trace), negative thread counts (quietly automatic), --loader-threads auto: (quietly all
// cores), remote flags without --remote, --trace-steps without --trace; a resume's contradicting --lr
// is a usage error printed as given ("0.4", not 0.40000000000000002).
TEST(Train, OutputsAndFlagsAreCheckedBeforeTraining) {
  Files f = Build();
  auto dir = ScratchDir();
  const std::string common = "train " + f.train + " --test " + f.test + " --epochs 1 --batch-size 32 --limit 64 --test-limit 30 --torch-threads 1";
  WriteFile(dir + "/afile", "x", 1);
  // A dangling link is written through: its target's folder is the one that must exist.
  ASSERT_EQ(::symlink((dir + "/gone/r.json").c_str(), (dir + "/link.json").c_str()), 0);
  std::string out;
  const std::vector<std::pair<std::string, std::string>> outputs = {
      {" --json " + dir + "/link.json", "--json " + dir + "/link.json: its folder " + dir + "/gone does not exist"},
      {" --json " + dir + "/afile/r.json", "--json " + dir + "/afile/r.json: " + dir + "/afile is not a folder"},
      {" --json " + dir + "/none/r.json", "--json " + dir + "/none/r.json: its folder " + dir + "/none does not exist"},
      {" --json " + dir, "--json " + dir + ": is a directory"},
      {" --trace " + dir + "/afile/t.json", "--trace " + dir + "/afile/t.json: " + dir + "/afile is not a folder"},
      {" --checkpoint " + dir + "/afile/ck", "--checkpoint " + dir + "/afile/ck: " + dir + "/afile is not a folder"},
      {" --checkpoint " + dir + "/afile/deeper/ck", "--checkpoint " + dir + "/afile/deeper/ck: " + dir + "/afile is not a folder"},
      {" --steps-out " + dir + "/afile/s", "--steps-out " + dir + "/afile/s: " + dir + "/afile is not a folder"},
  };
  for (const auto& [flag, message] : outputs) {
    EXPECT_EQ(RunDsc(common + flag, &out), 1) << flag << ": " << out;
    EXPECT_NE(out.find(message), std::string::npos) << flag << ": " << out;
    EXPECT_EQ(out.find("epoch 0:"), std::string::npos) << flag << ": refused before training: " << out;
  }
  const auto before = ReadFile(f.test);
  EXPECT_EQ(RunDsc(common + " --json " + f.test, &out), 2) << out;
  EXPECT_NE(out.find("--json " + f.test + " is the input " + f.test + "; it would be overwritten"), std::string::npos) << out;
  EXPECT_TRUE(ReadFile(f.test) == before) << "the input is unchanged";
  const std::vector<std::pair<std::string, std::string>> flags = {
      {" --epochs 1000001", "--epochs must be 1 to 1000000"},
      {" --lr=-1", "--lr -1: expected a learning rate above 0"},
      {" --lr 0", "--lr 0: expected a learning rate above 0"},
      {" --torch-threads=-3", "--torch-threads -3: expected 0 (automatic) to 4096"},
      {" --local-threads=-7 --remote 127.0.0.1:1", "--local-threads -7: out of range [0, 1024]"},
      {" --local-threads 2", "--local-threads needs --remote"},
      {" --wire-compression", "--wire-compression needs --remote"},
      {" --loader-threads auto:", "--loader-threads auto:: expected N, auto or auto:N"},
      {" --trace-steps 1:3", "--trace-steps needs --trace FILE"},
  };
  for (const auto& [flag, message] : flags) {
    EXPECT_EQ(RunDsc(common + flag, &out), 2) << flag << ": " << out;
    EXPECT_NE(out.find(message), std::string::npos) << flag << ": " << out;
    EXPECT_EQ(out.find("epoch 0:"), std::string::npos) << flag << ": " << out;
  }
  ASSERT_EQ(RunDsc(common + " --max-steps 1 --checkpoint " + dir + "/new/ck --json " + dir + "/r.json", &out), 0) << out;
  EXPECT_EQ(RunDsc(common + " --resume " + dir + "/new/ck --lr 0.4", &out), 2) << out;
  EXPECT_NE(out.find("--lr 0.4 contradicts the checkpoint's 0.5"), std::string::npos) << out;
  EXPECT_EQ(RunDsc(common + " --resume " + dir + "/new/ck --lr 0.5", &out), 0) << out;
  EXPECT_EQ(RunDsc(common + " --precision fp16 --limit 100000 --max-steps 1", &out), 0) << out;
  EXPECT_NE(out.find("notice: --precision fp16 applies to CUDA training; the CPU trains in float32"), std::string::npos) << out;
  EXPECT_NE(out.find("notice: --limit 100000 is more than " + f.train + "'s 50000 samples: training on all of them"), std::string::npos)
      << out;
}

}  // namespace
}  // namespace dsc::test
