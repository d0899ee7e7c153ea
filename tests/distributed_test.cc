// dsc train on two ranks over loopback (c10d Gloo): the ranks stay identical step by step, together they
// train on exactly the one-rank run's global batches, the loss falls, a checkpoint resumes on another
// rank count, and a rank that dies makes the other fail with a clear error within the time-out. A
// backend named with --dist-backend (Gloo; NCCL on a GPU where built with it) on one rank trains as no
// group does. Built when dsc train has Gloo or NCCL (DSC_HAVE_GLOO / DSC_HAVE_NCCL, 0 or 1).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>

#include "reader/gpu.h"
#include "tests/test_util.h"
#include "writer/build.h"

namespace dsc::test {
namespace {

using Files = CifarFiles;
const Files& Built() {
  static const Files f = BuildCifarFiles("-dist");
  return f;
}

struct Step {
  double loss = 0;
  std::string checksum;
  std::vector<uint32_t> samples;
};

// A --step-log file: "step N loss L checksum HEX samples I I I ...", one line per step.
std::map<uint64_t, Step> ReadSteps(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  std::map<uint64_t, Step> steps;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string k1, k2, k3, k4;
    uint64_t n = 0;
    Step s;
    ls >> k1 >> n >> k2 >> s.loss >> k3 >> s.checksum >> k4;
    EXPECT_EQ(k1 + k2 + k3 + k4, "steplosschecksumsamples") << line;
    for (uint32_t i; ls >> i;) s.samples.push_back(i);
    steps[n] = s;
  }
  return steps;
}

std::vector<uint32_t> Sorted(std::vector<uint32_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::string Common(const std::string& extra = "", const std::string& size = " --limit 1024 --batch-size 128") {
  return "train " + Built().train + " --test " + Built().test + size + " --lr 0.2 --test-limit 200 --seed 5" + extra;
}

// The two-rank tests run on the CPU over Gloo (a build against PyTorch's pip wheels has NCCL alone).
#define NEEDS_GLOO() \
  if (!DSC_HAVE_GLOO) GTEST_SKIP() << "this dsc train has no c10d Gloo (its libtorch ships no gloo headers)"

TEST(Distributed, TwoRanksStayIdenticalAndTrainOnTheGlobalBatches) {
  NEEDS_GLOO();
  auto dir = ScratchDir();
  std::string out;
  // 16 steps: two epochs of 8 global batches of 128.
  ASSERT_EQ(RunDsc(Common(" --epochs 2 --torch-threads 1 --step-log " + dir + "/one"), &out), 0) << out;
  ASSERT_EQ(RunDsc(Common(" --epochs 2 --nproc 2 --step-log " + dir + "/two --json " + dir + "/two.json"), &out), 0) << out;
  const auto one = ReadSteps(dir + "/one.rank0"), r0 = ReadSteps(dir + "/two.rank0"), r1 = ReadSteps(dir + "/two.rank1");
  ASSERT_EQ(one.size(), 16u);
  ASSERT_EQ(r0.size(), 16u);
  ASSERT_EQ(r1.size(), 16u);
  for (uint64_t k = 1; k <= 16; ++k) {
    const Step &a = r0.at(k), &b = r1.at(k);
    EXPECT_EQ(a.checksum, b.checksum) << "parameters or buffers differ between the ranks after step " << k;
    EXPECT_EQ(a.samples.size(), 64u);
    EXPECT_EQ(b.samples.size(), 64u);
    std::vector<uint32_t> both = a.samples;
    both.insert(both.end(), b.samples.begin(), b.samples.end());
    EXPECT_EQ(Sorted(both), Sorted(one.at(k).samples)) << "the ranks' samples of step " << k << " are not the one-rank global batch";
  }
  const auto j = ReadFile(dir + "/two.json");
  const std::string json(j.begin(), j.end());
  const auto m = RegexSearch(json, "\"train_loss\": \\[([0-9.e-]+), ([0-9.e-]+)\\]");
  ASSERT_FALSE(m.empty()) << json;
  EXPECT_LT(std::stod(m[2]), std::stod(m[1]) - 0.05) << "the two-rank loss does not fall: " << json;
  EXPECT_NE(json.find("\"world_size\": 2"), std::string::npos) << json;
  EXPECT_FALSE(RegexSearch(json, "\"images_per_second_per_rank\": \\[[0-9.e]+, [0-9.e]+\\]").empty()) << json;
  ASSERT_NE(out.find("epoch 0:"), std::string::npos) << out;
  EXPECT_EQ(out.find("epoch 0:"), out.rfind("epoch 0:")) << "only rank 0 prints: " << out;
}

TEST(Distributed, CheckpointOfTwoRanksResumesOnOne) {
  NEEDS_GLOO();
  auto dir = ScratchDir();
  std::string out;
  const std::string small = " --limit 512 --batch-size 64 --test-limit 100";  // 8 steps
  ASSERT_EQ(RunDsc(Common(" --epochs 1 --torch-threads 1 --step-log " + dir + "/one", small), &out), 0) << out;
  ASSERT_EQ(RunDsc(Common(" --epochs 1 --nproc 2 --max-steps 3 --checkpoint " + dir + "/ck", small), &out), 0) << out;
  ASSERT_EQ(RunDsc(Common(" --epochs 1 --torch-threads 1 --resume " + dir + "/ck --step-log " + dir + "/res", small), &out), 0) << out;
  const auto one = ReadSteps(dir + "/one.rank0"), res = ReadSteps(dir + "/res.rank0");
  ASSERT_EQ(one.size(), 8u);
  ASSERT_EQ(res.size(), 5u) << "steps 4..8 remain after 3 of 8";
  for (uint64_t k = 4; k <= 8; ++k)
    EXPECT_EQ(Sorted(res.at(k).samples), Sorted(one.at(k).samples)) << "resumed on one rank, step " << k << " is another batch";
}

// 300 samples in global batches of 256: the second holds 44 real samples, all in rank 0's half, so rank
// 1's slice is all padding. Its loss was 0/0 (NaN), and the all-reduce spread NaN to every rank's
// parameters. Now each step's loss, averaged over the ranks, is the one-rank loss of the global batch
// (up to BatchNorm's per-rank statistics).
TEST(Distributed, ARankWithOnlyPaddingAddsNothingAndTheLossIsTheGlobalMean) {
  NEEDS_GLOO();
  auto dir = ScratchDir();
  std::string out;
  const std::string size = " --limit 300 --batch-size 256 --test-limit 100";
  ASSERT_EQ(RunDsc(Common(" --epochs 1 --torch-threads 1 --step-log " + dir + "/one", size), &out), 0) << out;
  ASSERT_EQ(RunDsc(Common(" --epochs 1 --nproc 2 --step-log " + dir + "/two --json " + dir + "/two.json", size), &out), 0) << out;
  const auto one = ReadSteps(dir + "/one.rank0"), r0 = ReadSteps(dir + "/two.rank0"), r1 = ReadSteps(dir + "/two.rank1");
  ASSERT_EQ(one.size(), 2u);
  ASSERT_EQ(r0.size(), 2u);
  ASSERT_EQ(r1.size(), 2u);
  for (uint64_t k = 1; k <= 2; ++k) {
    EXPECT_TRUE(std::isfinite(r0.at(k).loss) && std::isfinite(r1.at(k).loss)) << "step " << k;
    EXPECT_EQ(r0.at(k).checksum, r1.at(k).checksum) << "step " << k;
    EXPECT_NEAR((r0.at(k).loss + r1.at(k).loss) / 2, one.at(k).loss, 0.05) << "step " << k;
  }
  EXPECT_EQ(r1.at(2).loss, 0.0) << "rank 1's slice of step 2 is all padding";
  const auto j = ReadFile(dir + "/two.json");
  const std::string json(j.begin(), j.end());
  EXPECT_EQ(json.find("nan"), std::string::npos) << json;
  // A launcher's rank (RANK set) asking for --nproc: a usage error, not a silent one-rank run.
  ::setenv("RANK", "0", 1);
  EXPECT_EQ(RunDsc("train " + Built().train + " --test " + Built().test + " --nproc 2 --max-steps 1 --limit 64", &out), 2) << out;
  ::unsetenv("RANK");
  EXPECT_NE(out.find("already a rank of a launcher"), std::string::npos) << out;
}

// The launcher passes SIGTERM (a scheduler's stop) on to its ranks; they used to train on, orphaned.
TEST(Distributed, StoppingTheLauncherStopsEveryRank) {
  NEEDS_GLOO();
  auto dir = ScratchDir();
  const std::string script = "unset RANK; " + std::string(DSC_BINARY) + " " + Common(" --epochs 4 --nproc 2 --step-log " + dir + "/s") +
                             " > " + dir + "/out 2>&1 & launcher=$!; "
                             "while ! grep -q '^step 1 ' " + dir + "/s.rank1 2>/dev/null; do sleep 0.1; done; "
                             "kill -TERM $launcher; wait $launcher; echo \"launcher-exit=$?\"; sleep 2; "
                             "echo \"left=$(pgrep -f -- '--step-log " + dir + "/s' | wc -l)\"";
  WriteFile(dir + "/run.sh", reinterpret_cast<const uint8_t*>(script.data()), script.size());
  std::string out;
  RunShell("timeout 120 bash " + dir + "/run.sh", &out);
  EXPECT_NE(out.find("launcher-exit=143"), std::string::npos) << out;
  EXPECT_NE(out.find("left=0"), std::string::npos) << "ranks outlived their launcher: " << out;
  EXPECT_LT(ReadSteps(dir + "/s.rank0").size(), 16u) << "the ranks trained on";
}

uint16_t FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

double Now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

TEST(Distributed, ADeadRankFailsTheOthersWithinTheTimeout) {
  NEEDS_GLOO();
  auto dir = ScratchDir();
  const int timeout = 20;
  // Two ranks started by hand, as torchrun would; rank 1 is killed (SIGKILL) once it has logged step 2.
  const std::string run = std::string(DSC_BINARY) + " " + Common(" --epochs 1 --dist-timeout " + std::to_string(timeout) +
                                                                  " --step-log " + dir + "/s");
  const std::string script = "export WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(FreePort()) +
                             "; RANK=1 " + run + " >/dev/null 2>&1 & victim=$!; "
                             "(while ! grep -q '^step 2 ' " + dir + "/s.rank1 2>/dev/null; do sleep 0.1; done; kill -9 $victim; "
                             "date +%s.%N > " + dir + "/killed) & "
                             "RANK=0 " + run + " 2>&1; echo \"rank0-exit=$?\"; wait";
  WriteFile(dir + "/run.sh", reinterpret_cast<const uint8_t*>(script.data()), script.size());
  std::string out;
  RunShell("timeout 120 bash " + dir + "/run.sh", &out);
  const double end = Now();
  const auto k = ReadFile(dir + "/killed");
  ASSERT_FALSE(k.empty()) << "rank 1 was never killed: " << out;
  const double killed = std::stod(std::string(k.begin(), k.end()));
  EXPECT_EQ(out.find("rank0-exit=0"), std::string::npos) << out;
  EXPECT_NE(out.find("rank0-exit="), std::string::npos) << out;
  EXPECT_FALSE(RegexSearch(out, "rank 0: .* failed \\(a peer rank exited or did not answer within 20 s\\)").empty()) << out;
  std::printf("rank 0 exited %.1f s after rank 1 was killed; its last words: %s\n", end - killed,
              out.substr(out.rfind("dsc train:") == std::string::npos ? 0 : out.rfind("dsc train:")).c_str());
  EXPECT_LT(end - killed, timeout + 10.0) << "rank 0 outlived its time-out: " << out;
  EXPECT_LT(ReadSteps(dir + "/s.rank0").size(), 8u) << "rank 0 went on training alone";
}

// A backend named with --dist-backend is formed on one rank too, so a single GPU exercises NCCL: an
// all-reduce over one rank is the identity and the loss scale W / real is the one-rank mean, so the
// run must train exactly as without a group (on CUDA: as exactly as two group-less runs agree with each
// other). A backend this build or machine lacks is a clear error before any training.
TEST(Distributed, ANamedBackendOnOneRankTrainsAsWithoutAGroup) {
  auto dir = ScratchDir();
  std::string out;
  const std::string small = " --limit 512 --batch-size 64 --test-limit 100 --epochs 1";  // 8 steps
  auto train = [&](const std::string& name, const std::string& flags) {
    EXPECT_EQ(RunDsc(Common(flags + " --step-log " + dir + "/" + name, small), &out), 0) << out;
    return ReadSteps(dir + "/" + name + ".rank0");
  };
  EXPECT_EQ(RunDsc(Common(" --dist-backend nccl", small), &out), 2) << out;
  EXPECT_NE(out.find("--dist-backend nccl needs --device cuda"), std::string::npos) << out;
  EXPECT_EQ(RunDsc(Common(" --dist-backend mpi", small), &out), 2) << out;
  EXPECT_NE(out.find("unknown --dist-backend 'mpi'"), std::string::npos) << out;
  std::string why;
  const bool gpu = gpu::Available(&why);
  if (!DSC_HAVE_NCCL || !gpu) {
    EXPECT_NE(RunDsc(Common(" --device cuda --dist-backend nccl", small), &out), 0) << out;
    EXPECT_NE(out.find(DSC_HAVE_NCCL ? "needs --device cuda and a usable GPU" : "built without c10d NCCL"), std::string::npos) << out;
  }
  struct Case {
    const char* backend;
    std::string device;
  };
  std::vector<Case> cases;
  if (DSC_HAVE_GLOO) cases.push_back({"gloo", ""});
  if (DSC_HAVE_NCCL && gpu) cases.push_back({"nccl", " --device cuda"});
  if (cases.empty()) GTEST_SKIP() << "neither Gloo nor (NCCL and a GPU) here: " << why;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.backend);
    const auto base = train(std::string(c.backend) + "-base", c.device + " --torch-threads 1");
    const auto again = train(std::string(c.backend) + "-again", c.device + " --torch-threads 1");
    const auto grouped = train(c.backend, c.device + " --torch-threads 1 --dist-backend " + c.backend);
    EXPECT_NE(out.find(std::string("process group: ") + c.backend + ", 1 rank\n"), std::string::npos) << out;
    ASSERT_EQ(base.size(), 8u);
    ASSERT_EQ(grouped.size(), 8u);
    ASSERT_EQ(again.size(), 8u);
    bool reproducible = true;
    for (uint64_t k = 1; k <= 8; ++k) reproducible = reproducible && base.at(k).checksum == again.at(k).checksum;
    if (c.device.empty()) {
      EXPECT_TRUE(reproducible) << "CPU training is not reproducible";
    }
    for (uint64_t k = 1; k <= 8; ++k) {
      EXPECT_EQ(grouped.at(k).samples, base.at(k).samples) << "step " << k;
      if (reproducible) {
        EXPECT_EQ(grouped.at(k).checksum, base.at(k).checksum) << "a group of one changed the parameters at step " << k;
        EXPECT_EQ(grouped.at(k).loss, base.at(k).loss) << "step " << k;
      } else {  // nondeterministic GPU kernels: as close as the two group-less runs are
        const double spread = std::abs(base.at(k).loss - again.at(k).loss);
        EXPECT_LE(std::abs(grouped.at(k).loss - base.at(k).loss), std::max(4 * spread, 1e-3 * std::abs(base.at(k).loss)))
            << "step " << k;
      }
    }
    std::printf("%s on one rank: %s the group-less run's parameters%s\n", c.backend, reproducible ? "bit-identical to" : "close to",
                reproducible ? "" : " (the device's training is not bit-reproducible)");
  }
  // NCCL refuses two ranks on one GPU: said before any training, not as NCCL's "invalid usage".
  if (DSC_HAVE_NCCL && gpu && gpu::DeviceCount() == 1 && !std::getenv("CUDA_VISIBLE_DEVICES")) {
    EXPECT_NE(RunDsc(Common(" --device cuda --dist-backend nccl --nproc 2", small), &out), 0) << out;
    EXPECT_NE(out.find("which NCCL refuses"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace dsc::test
