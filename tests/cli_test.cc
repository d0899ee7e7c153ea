// The dsc program as a user runs it: exit codes, messages, info --json, verify, export.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "tests/test_util.h"

namespace dsc::test {
namespace {

namespace fs = std::filesystem;

uint64_t JsonNumber(const std::string& json, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\": ([0-9]+)"))) return ~0ull;
  return std::stoull(m[1]);
}

TEST(Cli, UsageErrorsExitTwo) {
  std::string out;
  EXPECT_EQ(RunDsc("", &out), 2);
  EXPECT_EQ(RunDsc("frobnicate", &out), 2);
  EXPECT_EQ(RunDsc("build onlyone", &out), 2);
  EXPECT_EQ(RunDsc("build a b --no-such-flag", &out), 2);
  EXPECT_EQ(RunDsc("--version", &out), 0);
  EXPECT_NE(out.find("dsc "), std::string::npos);
  EXPECT_EQ(RunDsc("build --help", &out), 0);
  EXPECT_NE(out.find("--encoding"), std::string::npos);
}

TEST(Cli, BuildInfoVerifyExport) {
  auto root = SubsetTree(20);
  auto dir = ScratchDir();
  std::string out;
  ASSERT_EQ(RunDsc("build " + root + " " + dir + "/f.beton --quiet", &out), 0) << out;
  ASSERT_EQ(RunDsc("info " + dir + "/f.beton --json", &out), 0) << out;
  EXPECT_EQ(JsonNumber(out, "samples"), 200u);
  EXPECT_NE(out.find("\"label_counts\": [20, 20, 20, 20, 20, 20, 20, 20, 20, 20]"), std::string::npos) << out;
  // sections tile the file: each starts where the previous ended, the last ends at the file size
  std::regex sec("\\{\"name\": \"([a-z]+)\", \"offset\": ([0-9]+), \"size\": ([0-9]+)");
  uint64_t expect = 0;
  std::vector<std::string> names;
  for (std::sregex_iterator it(out.begin(), out.end(), sec), end; it != end; ++it) {
    EXPECT_EQ(std::stoull((*it)[2]), expect) << (*it)[1];
    expect += std::stoull((*it)[3]);
    names.push_back((*it)[1]);
  }
  EXPECT_EQ(expect, fs::file_size(dir + "/f.beton"));
  EXPECT_EQ(names, (std::vector<std::string>{"header", "data", "index", "meta", "blocks", "footer"}));
  ASSERT_EQ(RunDsc("info " + dir + "/f.beton", &out), 0);
  EXPECT_NE(out.find("airplane"), std::string::npos);

  ASSERT_EQ(RunDsc("verify " + dir + "/f.beton --decode", &out), 0) << out;
  EXPECT_NE(out.find("OK"), std::string::npos);

  ASSERT_EQ(RunDsc("export " + dir + "/f.beton --index 195 --count 5 --out " + dir + "/look", &out), 0) << out;
  auto png = ReadFile(dir + "/look/00000199.png");
  ASSERT_GT(png.size(), 8u);
  EXPECT_EQ(png[1], 'P');
  auto labels = ReadFile(dir + "/look/labels.tsv");
  EXPECT_NE(std::string(labels.begin(), labels.end()).find("00000199.png\t199\t9\ttruck"), std::string::npos);
  EXPECT_EQ(RunDsc("export " + dir + "/f.beton --index 199 --count 5 --out " + dir + "/bad", &out), 1);
  EXPECT_NE(out.find("out of range"), std::string::npos);
}

TEST(Cli, BenchReportsJsonAndWritesATrace) {
  auto root = SubsetTree(20);
  auto dir = ScratchDir();
  std::string out;
  ASSERT_EQ(RunDsc("build " + root + " " + dir + "/f.beton --quiet", &out), 0) << out;
  ASSERT_EQ(RunDsc("bench " + dir + "/f.beton --epochs 3 --batch-size 32 --json --trace " + dir + "/t.json", &out), 0) << out;
  for (const char* key : {"images_per_second", "threads", "images_decoded", "peak_anon_rss_bytes"})
    EXPECT_NE(JsonNumber(out, key), ~0ull) << key << " missing in " << out;
  EXPECT_GT(JsonNumber(out, "images_per_second"), 0u);
  EXPECT_EQ(JsonNumber(out, "images_decoded"), 3u * 7 * 32) << "7 padded batches of 32 per epoch, decoded every epoch";
  EXPECT_NE(out.find("\"epochs\": ["), std::string::npos);
  EXPECT_NE(out.find("\"verdict\""), std::string::npos);
  auto trace = ReadFile(dir + "/t.json");
  const std::string t(trace.begin(), trace.end());
  EXPECT_NE(t.find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(t.find("\"name\": \"decode\""), std::string::npos);
  EXPECT_NE(t.find("wait for batch"), std::string::npos);
  ASSERT_EQ(RunDsc("bench " + dir + "/f.beton --epochs 1 --batch-size 32 --threads auto --consumer-ms 1", &out), 0) << out;
  EXPECT_NE(out.find("autotune:"), std::string::npos) << out;
  EXPECT_NE(out.find("verdict:"), std::string::npos) << out;
  EXPECT_EQ(RunDsc("bench " + dir + "/f.beton --preset nope", &out), 2);
}

TEST(Cli, DamageAndBadInputExitOne) {
  auto root = SubsetTree(5);
  auto dir = ScratchDir();
  std::string out;
  ASSERT_EQ(RunDsc("build " + root + " " + dir + "/f.beton --quiet", &out), 0) << out;
  auto bytes = ReadFile(dir + "/f.beton");
  bytes[4096 + 10] ^= 4;  // inside the first data block
  WriteFile(dir + "/g.beton", bytes);
  EXPECT_EQ(RunDsc("verify " + dir + "/g.beton", &out), 1);
  EXPECT_NE(out.find("data: block 0: checksum mismatch"), std::string::npos) << out;
  EXPECT_EQ(RunDsc("info " + dir + "/nonexistent.beton", &out), 1);
  EXPECT_NE(out.find("nonexistent.beton"), std::string::npos);
  EXPECT_EQ(RunDsc("build " + dir + "/nothing-here " + dir + "/x.beton", &out), 1);
  EXPECT_NE(out.find("nothing-here"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir + "/x.beton"));
  EXPECT_EQ(RunDsc("build " + root + " " + dir + "/y.beton --encoding png", &out), 1);
  EXPECT_NE(out.find("--encoding"), std::string::npos);
}

}  // namespace
}  // namespace dsc::test
