// WebDataset tar shards (made by GNU tar) as a build source: the same samples, payloads and labels as
// a manifest of the same files, shard and member order kept, and parts that merge byte-identically.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "format/error.h"
#include "reader/dataset.h"
#include "tests/test_util.h"
#include "writer/build.h"
#include "writer/merge.h"

namespace dsc {
namespace {

namespace fs = std::filesystem;

struct Shards {
  std::string dir, manifest;
  size_t samples = 0;
};

// 100 real CIFAR-10 images as KEY.jpg + KEY.cls (+ KEY.json, which no field takes) in 3 tar shards,
// and a manifest of the same images and labels in the same order.
Shards MakeShards(bool drop_one_label = false) {
  const std::string tree = test::SubsetTree(10), base = test::ScratchDir("-wds");
  Shards s{base + "/shards", base + "/list.tsv"};
  fs::create_directories(s.dir);
  fs::create_directories(base + "/members");
  std::ofstream manifest(s.manifest);
  std::vector<std::string> classes;
  for (const auto& c : fs::directory_iterator(tree)) classes.push_back(c.path().filename().string());
  std::sort(classes.begin(), classes.end());
  std::vector<std::vector<std::string>> per_shard(3);
  for (size_t label = 0; label < classes.size(); ++label) {
    std::vector<fs::path> files;
    for (const auto& f : fs::directory_iterator(tree + "/" + classes[label])) files.push_back(f.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      char key[16];
      std::snprintf(key, sizeof key, "%06zu", s.samples);
      const std::string m = base + "/members/" + key;
      fs::copy_file(fs::canonical(f), m + ".jpg");
      if (!(drop_one_label && s.samples == 42)) std::ofstream(m + ".cls") << label << "\n";
      std::ofstream(m + ".json") << "{\"i\": " << s.samples << "}";
      manifest << m << ".jpg\t" << label << "\n";
      auto& shard = per_shard[s.samples * 3 / 100];
      shard.push_back(std::string(key) + ".cls");
      shard.push_back(std::string(key) + ".jpg");
      shard.push_back(std::string(key) + ".json");
      ++s.samples;
    }
  }
  for (size_t i = 0; i < per_shard.size(); ++i) {
    std::string cmd = "tar -cf " + s.dir + "/train-" + std::to_string(i) + ".tar -C " + base + "/members";
    for (const auto& f : per_shard[i])
      if (fs::exists(base + "/members/" + f)) cmd += " " + f;
    std::string out;
    EXPECT_EQ(test::RunShell(cmd + " 2>&1", &out), 0) << out;
  }
  return s;
}

TEST(WebDataset, SameSamplesAsAManifest) {
  const Shards s = MakeShards();
  const std::string dir = test::ScratchDir("-out");
  writer::BuildOptions o;
  o.log = [](const std::string&) {};
  o.format = "wds";
  const auto rep = writer::Build(s.dir, dir + "/wds.beton", o);
  EXPECT_EQ(rep.format, "wds");
  o.format = "auto";
  writer::Build(s.manifest, dir + "/manifest.beton", o);
  Dataset a(dir + "/wds.beton"), b(dir + "/manifest.beton");
  ASSERT_EQ(a.size(), s.samples);
  ASSERT_EQ(b.size(), s.samples);
  std::vector<uint8_t> sa, sb;
  for (uint64_t i = 0; i < a.size(); ++i) {
    const Payload pa = a.ReadPayload(i, &sa), pb = b.ReadPayload(i, &sb);
    ASSERT_EQ(std::vector<uint8_t>(pa.data, pa.data + pa.size), std::vector<uint8_t>(pb.data, pb.data + pb.size)) << "sample " << i;
    ASSERT_EQ(a.label(i), b.label(i)) << "sample " << i;
  }
  // A single shard, named on the command line (auto-detected as WebDataset by its .tar name).
  std::string out;
  ASSERT_EQ(test::RunDsc("build " + s.dir + "/train-1.tar " + dir + "/one.beton --quiet 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("(wds)"), std::string::npos) << out;
  Dataset one(dir + "/one.beton");
  EXPECT_EQ(one.size(), s.samples * 2 / 3 - s.samples / 3);
}

TEST(WebDataset, PartsMergeToOneBuild) {
  const Shards s = MakeShards();
  const std::string dir = test::ScratchDir("-out");
  writer::BuildOptions o;
  o.log = [](const std::string&) {};
  o.block_size = 16 << 10;
  o.format = "wds";  // a folder of shards needs --format wds (a folder alone reads as an image tree)
  writer::Build(s.dir, dir + "/whole.beton", o);
  std::vector<std::string> parts;
  for (uint32_t i = 0; i < 4; ++i) {
    writer::BuildOptions p = o;
    p.shard_index = i;
    p.shard_count = 4;
    parts.push_back(dir + "/part-" + std::to_string(i) + ".beton");
    writer::Build(s.dir, parts.back(), p);
  }
  writer::Merge(parts, dir + "/merged.beton");
  EXPECT_TRUE(test::ReadFile(dir + "/merged.beton") == test::ReadFile(dir + "/whole.beton"));
}

TEST(WebDataset, MissingLabelNamesShardAndKey) {
  const Shards s = MakeShards(true);
  writer::BuildOptions o;
  o.log = [](const std::string&) {};
  o.format = "wds";
  try {
    writer::Build(s.dir, test::ScratchDir("-out") + "/x.beton", o);
    FAIL();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("train-1.tar: 000042: no label member (.cls)"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace dsc
