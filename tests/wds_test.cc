// WebDataset shards as a build source (writer/source_wds.cc): shards written by GNU tar from real
// CIFAR-10 JPEGs; the built file holds each JPEG byte for byte with its .cls class, in shard and
// member order, plain or compressed, with --shard; malformed shards give errors naming shard and key.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "format/error.h"
#include "reader/dataset.h"
#include "tests/test_util.h"
#include "writer/build.h"
#include "writer/merge.h"

namespace dsc::test {
namespace {

namespace fs = std::filesystem;

struct Expected {
  std::vector<std::vector<uint8_t>> jpeg;
  std::vector<int32_t> label;
};

// Writes shard files shard-00.tar ... from the first images of the CIFAR train classes: sample k of
// shard s is "s{s}/img{k}" with .jpg, .cls (k % 10, as text with a newline) and, when `json`, a .json.
Expected WriteShards(const std::string& dir, int shards, int per_shard, bool json, const std::string& ext = ".tar") {
  const std::string root = CifarJpegRoot() + "/train";
  std::vector<fs::path> classes;
  for (const auto& e : fs::directory_iterator(root)) classes.push_back(e.path());
  std::sort(classes.begin(), classes.end());
  Expected ex;
  for (int s = 0; s < shards; ++s) {
    const std::string stage = dir + "/stage" + std::to_string(s);
    fs::create_directories(stage + "/s" + std::to_string(s));
    std::string members;
    for (int k = 0; k < per_shard; ++k) {
      const int label = k % 10;
      char name[32];
      std::snprintf(name, sizeof name, "%04d.jpg", s * per_shard + k);
      const std::vector<uint8_t> jpg = ReadFile((classes[size_t(label)] / name).string());
      const std::string key = "s" + std::to_string(s) + "/img" + std::to_string(k);
      WriteFile(stage + "/" + key + ".jpg", jpg);
      const std::string cls = std::to_string(label) + "\n";
      WriteFile(stage + "/" + key + ".cls", cls.data(), cls.size());
      members += " " + key + ".cls " + key + ".jpg";  // .cls first: order inside a sample is free
      if (json) {
        const std::string j = "{\"k\": " + std::to_string(k) + "}";
        WriteFile(stage + "/" + key + ".json", j.data(), j.size());
        members += " " + key + ".json";
      }
      ex.jpeg.push_back(jpg);
      ex.label.push_back(label);
    }
    char shard[64];
    std::snprintf(shard, sizeof shard, "/shard-%02d%s", s, ext.c_str());
    const std::string flags = ext == ".tar.gz" ? "-czf" : "-cf";
    EXPECT_EQ(RunShell("tar " + flags + " " + dir + shard + " -C " + stage + members), 0);
  }
  return ex;
}

writer::BuildOptions PassThrough() {
  writer::BuildOptions o;
  o.format = "auto";
  o.encode.restart_interval = "none";  // every JPEG byte as it was
  o.jpeg_tables = "inline";
  o.log = [](const std::string&) {};
  return o;
}

void ExpectHolds(const std::string& file, const Expected& ex) {
  Dataset ds(file);
  ASSERT_EQ(ds.size(), ex.jpeg.size());
  std::vector<uint8_t> scratch;
  for (uint64_t i = 0; i < ds.size(); ++i) {
    const Payload p = ds.ReadPayload(i, &scratch);
    ASSERT_EQ(std::vector<uint8_t>(p.data, p.data + p.size), ex.jpeg[i]) << "sample " << i;
    ASSERT_EQ(ds.label(i), ex.label[i]) << "sample " << i;
  }
}

TEST(WebDataset, ShardsBuildInShardAndMemberOrder) {
  const std::string dir = ScratchDir();
  const Expected ex = WriteShards(dir, 3, 25, /*json=*/true);
  std::vector<std::string> ignored;
  writer::BuildOptions o = PassThrough();
  o.log = [&](const std::string& line) { ignored.push_back(line); };
  const auto rep = writer::Build(dir + "/shard-{00..02}.tar", dir + "/wds.beton", o);
  EXPECT_EQ(rep.format, "webdataset");
  ExpectHolds(dir + "/wds.beton", ex);
  // The .json members are not lost silently: each is listed.
  size_t json_lines = 0;
  for (const auto& l : ignored) json_lines += l.find(".json (.json is not stored)") != std::string::npos;
  EXPECT_EQ(json_lines, 75u);
  // One shard alone, and a folder of shards, name the same samples.
  writer::Build(dir + "/shard-01.tar", dir + "/one.beton", PassThrough());
  EXPECT_EQ(Dataset(dir + "/one.beton").size(), 25u);
  fs::create_directory(dir + "/folder");
  for (int s = 0; s < 3; ++s) fs::copy_file(dir + "/shard-0" + std::to_string(s) + ".tar", dir + "/folder/shard-0" + std::to_string(s) + ".tar");
  writer::BuildOptions f = PassThrough();
  f.format = "webdataset";
  writer::Build(dir + "/folder", dir + "/folder.beton", f);
  ExpectHolds(dir + "/folder.beton", ex);
}

TEST(WebDataset, CompressedShardsAndShardedBuilds) {
  const std::string dir = ScratchDir();
  const Expected ex = WriteShards(dir, 2, 30, false, ".tar.gz");
  writer::BuildOptions o = PassThrough();
  writer::Build(dir + "/shard-{00..01}.tar.gz", dir + "/whole.beton", o);
  ExpectHolds(dir + "/whole.beton", ex);
  std::vector<std::string> parts;
  for (uint32_t i = 0; i < 4; ++i) {
    writer::BuildOptions p = o;
    p.shard_index = i;
    p.shard_count = 4;
    p.threads = 2;
    parts.push_back(dir + "/part" + std::to_string(i) + ".beton");
    writer::Build(dir + "/shard-{00..01}.tar.gz", parts.back(), p);
  }
  writer::Merge(parts, dir + "/merged.beton");
  EXPECT_TRUE(ReadFile(dir + "/whole.beton") == ReadFile(dir + "/merged.beton"));
}

std::string BuildError(const std::string& src) {
  try {
    writer::Build(src, src + ".beton", PassThrough());
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(WebDataset, MalformedShardsAreNamed) {
  const std::string dir = ScratchDir();
  WriteShards(dir, 1, 4, false);
  const std::string stage = dir + "/stage0/s0";
  // A sample without its class, after a good one.
  ASSERT_EQ(RunShell("tar -cf " + dir + "/nocls.tar -C " + dir + "/stage0 s0/img0.cls s0/img0.jpg s0/img1.jpg"), 0);
  EXPECT_EQ(BuildError(dir + "/nocls.tar"), dir + "/nocls.tar: s0/img1: no .cls member (the class)");
  // A class that is not a number.
  WriteFile(stage + "/img2.cls", "cat\n", 4);
  ASSERT_EQ(RunShell("tar -cf " + dir + "/badcls.tar -C " + dir + "/stage0 s0/img2.cls s0/img2.jpg"), 0);
  EXPECT_NE(BuildError(dir + "/badcls.tar").find("badcls.tar: s0/img2.cls: 'cat' is not a non-negative integer class"),
            std::string::npos);
  // Two images under one key.
  fs::copy_file(stage + "/img3.jpg", stage + "/img3.png");
  ASSERT_EQ(RunShell("tar -cf " + dir + "/two.tar -C " + dir + "/stage0 s0/img3.cls s0/img3.jpg s0/img3.png"), 0);
  EXPECT_EQ(BuildError(dir + "/two.tar"), dir + "/two.tar: s0/img3: two image members; one image per sample");
  // A tar of a plain image folder is not taken for shards.
  ASSERT_EQ(RunShell("tar -cf " + dir + "/tree.tar -C " + dir + "/stage0 s0/img0.jpg s0/img1.jpg"), 0);
  EXPECT_NE(BuildError(dir + "/tree.tar").find("an archive, not a folder or a manifest, and not WebDataset shards"),
            std::string::npos);
  EXPECT_NE(BuildError(dir + "/shard-{00..03}.tar").find("shard-01.tar: no such shard"), std::string::npos);
  EXPECT_NE(BuildError(dir + "/shard-{03..01}.tar").find("must be ascending"), std::string::npos);
  // A truncated shard: the damage is named, nothing is written.
  const std::vector<uint8_t> whole = ReadFile(dir + "/shard-00.tar");
  WriteFile(dir + "/cut.tar", whole.data(), 1500);
  EXPECT_NE(BuildError(dir + "/cut.tar").find("cut.tar"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir + "/cut.tar.beton"));
}

}  // namespace
}  // namespace dsc::test
