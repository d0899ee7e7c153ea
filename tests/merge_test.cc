// Sharded builds joined by Merge (writer/merge.h) are byte-identical to a one-machine build of the same
// source and options: CIFAR-10 JPEGs (shared JPEG tables, many small blocks whose edges fall anywhere
// in the parts) and real photos (restart markers, transcoded and re-encoded), for N = 1, 3 and 7; and
// merge refuses what does not add up, naming the part.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "format/error.h"
#include "tests/test_util.h"
#include "writer/build.h"
#include "writer/merge.h"

namespace dsc::test {
namespace {

writer::BuildOptions Quiet(writer::BuildOptions o) {
  o.log = [](const std::string&) {};
  return o;
}

// Builds `src` whole and in n parts (given to merge in reverse order), and compares the bytes.
void ExpectMergedEqualsWhole(const std::string& src, const writer::BuildOptions& options, uint32_t n,
                             const std::string& dir) {
  const std::string whole = dir + "/whole.beton";
  writer::Build(src, whole, Quiet(options));
  std::vector<std::string> parts;
  for (uint32_t i = 0; i < n; ++i) {
    writer::BuildOptions o = Quiet(options);
    o.shard_index = i;
    o.shard_count = n;
    o.threads = 1 + int(i % 3);  // the output never depends on it
    parts.push_back(dir + "/part-" + std::to_string(i) + "-of-" + std::to_string(n) + ".beton");
    writer::Build(src, parts.back(), o);
  }
  std::reverse(parts.begin(), parts.end());
  const std::string merged = dir + "/merged-" + std::to_string(n) + ".beton";
  const writer::MergeReport rep = writer::Merge(parts, merged);
  EXPECT_EQ(rep.parts, n);
  const std::vector<uint8_t> a = ReadFile(whole), b = ReadFile(merged);
  ASSERT_EQ(a.size(), b.size()) << "N = " << n;
  EXPECT_TRUE(a == b) << "merged file differs from the one-machine build, N = " << n;
}

TEST(Merge, CifarPartsJoinToTheOneMachineBuild) {
  const std::string src = SubsetTree(60);  // 600 real CIFAR-10 JPEGs
  const std::string dir = ScratchDir();
  writer::BuildOptions o;
  o.block_size = 1 << 16;  // ~70 blocks: part edges fall inside blocks of the whole build
  for (uint32_t n : {1u, 3u, 7u}) ExpectMergedEqualsWhole(src, o, n, dir);
  // The file really shares JPEG tables, so the merge had to rebuild the sharing.
  std::string info;
  ASSERT_EQ(RunDsc("info " + dir + "/whole.beton", &info), 0);
  EXPECT_EQ(info.find("JPEG table sets: 0"), std::string::npos) << info;
}

TEST(Merge, PhotoPartsJoinToTheOneMachineBuild) {
  const std::string photos = PhotosTree(DSC_PHOTOS);
  ASSERT_FALSE(photos.empty());
  // 36 photos (every 14th class folder): transcoded with restart markers, and re-encoded smaller.
  const std::string src = ScratchDir("photos-src");
  std::vector<std::filesystem::path> classes;
  for (const auto& e : std::filesystem::directory_iterator(photos)) classes.push_back(e.path());
  std::sort(classes.begin(), classes.end());
  for (size_t k = 0; k < classes.size(); k += 14)
    std::filesystem::create_directory_symlink(classes[k], src + "/" + classes[k].filename().string());
  const std::string dir = ScratchDir();
  writer::BuildOptions pass;
  pass.block_size = 1 << 16;
  for (uint32_t n : {1u, 3u, 7u}) ExpectMergedEqualsWhole(src, pass, n, dir);
  writer::BuildOptions small = pass;
  small.encode.max_resolution = 160;
  ExpectMergedEqualsWhole(src, small, 7, dir);
}

std::string MergeError(const std::vector<std::string>& parts, const std::string& out) {
  try {
    writer::Merge(parts, out);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Merge, RefusesPartsThatDoNotAddUp) {
  const std::string src = SubsetTree(20);
  const std::string dir = ScratchDir();
  auto part = [&](uint32_t i, uint32_t n, int quality = 90, std::string name = "") {
    writer::BuildOptions o = Quiet({});
    o.shard_index = i;
    o.shard_count = n;
    o.encode.quality = quality;
    o.encode.encoding = "jpeg";
    o.encode.reencode = true;
    if (name.empty()) name = "p" + std::to_string(i) + "of" + std::to_string(n) + "q" + std::to_string(quality);
    writer::Build(src, dir + "/" + name + ".beton", o);
    return dir + "/" + name + ".beton";
  };
  const std::string a0 = part(0, 3), a1 = part(1, 3), a2 = part(2, 3);
  const std::string out = dir + "/out.beton";
  EXPECT_EQ(MergeError({a0, a2}, out), "merge needs all 3 parts; missing part 1");
  EXPECT_NE(MergeError({a0, a1, a1, a2}, out).find(": part 1 is given twice"), std::string::npos);
  EXPECT_NE(MergeError({a0, part(1, 3, 80), a2}, out).find("was built with other options than"), std::string::npos);
  EXPECT_NE(MergeError({a0, part(1, 2), a2}, out).find("is part 1 of 2"), std::string::npos);
  writer::BuildOptions whole = Quiet({});
  writer::Build(src, dir + "/whole.beton", whole);
  EXPECT_EQ(MergeError({dir + "/whole.beton", a1}, out),
            dir + "/whole.beton: not a part of a sharded build (built without --shard)");
  // A damaged block of a part: the merge stops, names the part and block, and writes nothing.
  const std::string bad = dir + "/bad.beton";
  std::filesystem::copy_file(a1, bad);
  std::vector<uint8_t> bytes = ReadFile(bad);
  bytes[4096 + 100] ^= 0x10;  // inside block 0's first payload
  WriteFile(bad, bytes);
  EXPECT_EQ(MergeError({a0, bad, a2}, out), bad + ": data: block 0 checksum mismatch (offset 4096)");
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_NE(MergeError({a0, a1, a2}, a1).find("is one of the parts"), std::string::npos);
  // An empty part is an error at build time, not an empty file.
  writer::BuildOptions o = Quiet({});
  o.shard_index = 0;
  o.shard_count = 1000;
  try {
    writer::Build(src, dir + "/empty.beton", o);
    ADD_FAILURE() << "an empty part was built";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("part 0 of 1000 is empty (the source has 200 samples)"), std::string::npos)
        << e.what();
  }
}

TEST(Merge, CommandLine) {
  const std::string src = SubsetTree(10);
  const std::string dir = ScratchDir();
  std::string out;
  for (int i = 0; i < 2; ++i)
    ASSERT_EQ(RunDsc("build " + src + " " + dir + "/p" + std::to_string(i) + ".beton --quiet --shard " +
                         std::to_string(i) + "/2",
                     &out),
              0)
        << out;
  ASSERT_EQ(RunDsc("merge " + dir + "/p1.beton " + dir + "/p0.beton " + dir + "/m.beton", &out), 0) << out;
  EXPECT_NE(out.find("100 samples from 2 parts"), std::string::npos) << out;
  ASSERT_EQ(RunDsc("build " + src + " " + dir + "/w.beton --quiet", &out), 0) << out;
  EXPECT_TRUE(ReadFile(dir + "/w.beton") == ReadFile(dir + "/m.beton"));
  EXPECT_EQ(RunDsc("build " + src + " " + dir + "/x.beton --shard 2/2", &out), 2);
  EXPECT_NE(out.find("--shard 2/2: needs 1 <= N <= 1000000 and 0 <= I < N"), std::string::npos) << out;
  EXPECT_EQ(RunDsc("build " + src + " " + dir + "/x.beton --shard 1-2", &out), 2);
  EXPECT_EQ(RunDsc("merge " + dir + "/p0.beton " + dir + "/m2.beton", &out), 1);
  EXPECT_NE(out.find("missing part 1"), std::string::npos) << out;
  EXPECT_EQ(RunDsc("merge " + dir + "/m2.beton", &out), 2);
}

}  // namespace
}  // namespace dsc::test
