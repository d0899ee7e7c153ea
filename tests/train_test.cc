// dsc train on real CIFAR-10: a short CPU run learns, and a resumed run equals an uninterrupted one.
#include <gtest/gtest.h>

#include <regex>

#include "tests/test_util.h"
#include "writer/build.h"

namespace dsc::test {
namespace {

struct Files {
  std::string train, test;
};

Files Build() {
  auto dir = ScratchDir("-train");
  writer::BuildOptions o;
  o.log = [](const std::string&) {};
  Files f{dir + "/train.beton", dir + "/test.beton"};
  writer::Build(CifarJpegRoot() + "/train", f.train, o);
  writer::Build(CifarJpegRoot() + "/test", f.test, o);
  return f;
}

std::string Json(const std::string& path) {
  auto b = ReadFile(path);
  return std::string(b.begin(), b.end());
}

double Number(const std::string& json, const std::string& key) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(json, m, std::regex("\"" + key + "\": ([-0-9.e]+)"))) << key << " in " << json;
  return m.empty() ? 0 : std::stod(m[1]);
}

TEST(Train, ShortCpuRunLearns) {
  Files f = Build();
  auto dir = ScratchDir();
  std::string out;
  ASSERT_EQ(RunDsc("train " + f.train + " --test " + f.test + " --epochs 2 --limit 2560 --batch-size 128 --lr 0.2 "
                   "--test-limit 1000 --json " + dir + "/r.json", &out), 0) << out;
  std::string j = Json(dir + "/r.json");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(j, m, std::regex("\"train_loss\": \\[([0-9.e-]+), ([0-9.e-]+)\\]"))) << j;
  const double first = std::stod(m[1]), second = std::stod(m[2]);
  const double acc = Number(j, "test_accuracy");
  std::printf("train loss %.3f -> %.3f, test accuracy %.1f%%\n", first, second, 100 * acc);
  EXPECT_LT(second, first - 0.1) << "stated margin: the loss drops by more than 0.1 in the second epoch";
  EXPECT_GT(acc, 0.2) << "chance is 10%";
  EXPECT_GT(Number(j, "images_per_second"), 0);
  EXPECT_GE(Number(j, "data_wait_share"), 0);
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
  std::smatch a, b;
  const std::string full = Json(dir + "/full.json"), resumed = Json(dir + "/resumed.json");
  std::regex sum("\"param_checksum\": \"([0-9a-f]+)\"");
  ASSERT_TRUE(std::regex_search(full, a, sum));
  ASSERT_TRUE(std::regex_search(resumed, b, sum));
  EXPECT_EQ(a[1], b[1]) << "parameters after 16 steps differ between the resumed and the uninterrupted run";
  EXPECT_EQ(Number(full, "steps"), 16);
  EXPECT_EQ(Number(resumed, "steps"), 16);
}

}  // namespace
}  // namespace dsc::test
