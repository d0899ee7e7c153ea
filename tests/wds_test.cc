// WebDataset shards as a build source (writer/source_wds.cc): shards written by GNU tar from real
// CIFAR-10 JPEGs; the built file holds each JPEG byte for byte with its .cls class (and its .json as
// text), in shard and member order, plain or compressed, with --shard; malformed shards give errors
// naming shard and key.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "format/error.h"
#include "format/file_view.h"
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
  std::vector<std::string> json;  // when written
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
        const std::string j = "{\"k\": " + std::to_string(k) + ", \"caption\": \"caf\u00e9 \xC3\xA9\"}\n";
        WriteFile(stage + "/" + key + ".json", j.data(), j.size());
        members += " " + key + ".json";
        ex.json.push_back(j);
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
  // Each .json member is the sample's text field 'json', byte for byte, and is not listed as ignored.
  for (const auto& l : ignored) EXPECT_EQ(l.find(".json"), std::string::npos) << l;
  {
    const std::vector<uint8_t> bytes = ReadFile(dir + "/wds.beton");
    format::MemorySource src("wds.beton", bytes.data(), bytes.size());
    auto v = format::FileView::Open(&src);
    ASSERT_TRUE(v->typed());
    const auto& f = v->meta().fields;
    ASSERT_EQ(f.size(), 3u);
    EXPECT_EQ(f[2].name, "json");
    EXPECT_EQ(f[2].type, format::FieldType::kText);
    std::vector<uint8_t> scratch;
    for (uint64_t i = 0; i < v->sample_count(); ++i) {
      const auto r = v->VarValue(2, i);
      const uint8_t* p = src.Read(r.offset, r.size, &scratch);
      ASSERT_EQ(std::string(reinterpret_cast<const char*>(p), r.size), ex.json[i]) << "sample " << i;
    }
  }
  // Split with --shard, the parts hold the samples in the same order, text included.
  for (uint32_t i = 0; i < 2; ++i) {
    writer::BuildOptions p = PassThrough();
    p.shard_index = i;
    p.shard_count = 2;
    writer::Build(dir + "/shard-{00..02}.tar", dir + "/part.beton", p);
    Expected half;
    const size_t from = i * ex.jpeg.size() / 2, to = (i + 1) * ex.jpeg.size() / 2;
    half.jpeg.assign(ex.jpeg.begin() + long(from), ex.jpeg.begin() + long(to));
    half.label.assign(ex.label.begin() + long(from), ex.label.begin() + long(to));
    ExpectHolds(dir + "/part.beton", half);
  }
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

// KEY.NAME.jpg members are further images (format 1.3) named NAME, byte for byte; without a .json
// the file is typed for them alone; a sample that lacks one is named.
TEST(WebDataset, NamedImageMembersBecomeFurtherImages) {
  const std::string dir = ScratchDir();
  const std::string root = CifarJpegRoot() + "/test";
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  const std::string stage = dir + "/stage";
  fs::create_directories(stage);
  std::string members;
  const int n = 12;
  for (int k = 0; k < n; ++k) {
    const std::string key = "img" + std::to_string(10 + k);
    fs::copy_file(files[size_t(k)], stage + "/" + key + ".jpg");
    fs::copy_file(files[size_t(n + k)], stage + "/" + key + ".depth.jpg");
    fs::copy_file(files[size_t(2 * n + k)], stage + "/" + key + ".left.jpeg");
    WriteFile(stage + "/" + key + ".cls", "3\n", 2);
    members += " " + key + ".left.jpeg " + key + ".cls " + key + ".jpg " + key + ".depth.jpg";
  }
  ASSERT_EQ(RunShell("tar -cf " + dir + "/shard.tar -C " + stage + members), 0);
  writer::Build(dir + "/shard.tar", dir + "/wds.beton", PassThrough());
  Dataset ds(dir + "/wds.beton");
  const auto& f = ds.meta().fields;
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[2].name, "depth");  // in name order
  EXPECT_EQ(f[3].name, "left");
  EXPECT_EQ(f[3].type, format::FieldType::kImage);
  std::vector<uint8_t> scratch;
  for (uint64_t i = 0; i < ds.size(); ++i) {
    for (uint32_t image : {0u, 2u, 3u}) {
      const Payload p = ds.ReadPayload(i, &scratch, image);
      ASSERT_EQ(std::vector<uint8_t>(p.data, p.data + p.size), ReadFile(files[size_t(i + (image == 0 ? 0 : image == 2 ? n : 2 * n))].string()))
          << "sample " << i << " image " << image;
    }
    EXPECT_EQ(ds.label(i), 3);
  }
  // A sample without the depth member every other sample has: named.
  fs::remove(stage + "/img15.depth.jpg");
  const std::string less = members.substr(0, members.find(" img15.depth.jpg")) + members.substr(members.find(" img15.depth.jpg") + 16);
  ASSERT_EQ(RunShell("tar -cf " + dir + "/less.tar -C " + stage + less), 0);
  try {
    writer::Build(dir + "/less.tar", dir + "/less.beton", PassThrough());
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("img15: no .depth.jpg/.jpeg/.png member"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir + "/less.beton"));
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
  // A .json on one sample but not on another: the text field needs a value in every sample.
  WriteFile(stage + "/img0.json", "{}", 2);
  ASSERT_EQ(RunShell("tar -cf " + dir + "/somejson.tar -C " + dir + "/stage0 s0/img0.cls s0/img0.jpg s0/img0.json s0/img1.cls s0/img1.jpg"), 0);
  EXPECT_NE(BuildError(dir + "/somejson.tar").find("somejson.tar: s0/img1: no .json member, while other samples have one"), std::string::npos)
      << BuildError(dir + "/somejson.tar");
  // JSON that is not UTF-8: named with its sample and field.
  WriteFile(stage + "/img1.json", "\"\xC3(\"", 4);
  ASSERT_EQ(RunShell("tar -cf " + dir + "/badjson.tar -C " + dir + "/stage0 s0/img0.cls s0/img0.jpg s0/img0.json s0/img1.cls s0/img1.jpg s0/img1.json"), 0);
  const std::string bad = BuildError(dir + "/badjson.tar");
  EXPECT_EQ(bad, dir + "/badjson.tar: s0/img1.json: field 'json': not UTF-8");
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
