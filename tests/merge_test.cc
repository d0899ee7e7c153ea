// Builds split across machines: the parts of `dsc build --shard I/N`, joined by `dsc merge`, are byte
// for byte the file one build writes (real CIFAR-10 and real photos, N = 1, 3, 7).
#include <gtest/gtest.h>

#include <filesystem>

#include "format/error.h"
#include "tests/test_util.h"
#include "writer/build.h"
#include "writer/merge.h"

namespace dsc {
namespace {

namespace fs = std::filesystem;

// Builds `src` whole and in each of `counts` parts, merges the parts, and compares the bytes.
void ExpectMergeIdentical(const std::string& src, writer::BuildOptions o, std::initializer_list<uint32_t> counts) {
  const std::string dir = test::ScratchDir("-merge");
  o.log = [](const std::string&) {};
  writer::Build(src, dir + "/whole.beton", o);
  const auto whole = test::ReadFile(dir + "/whole.beton");
  for (uint32_t n : counts) {
    SCOPED_TRACE("N = " + std::to_string(n));
    std::vector<std::string> parts;
    for (uint32_t i = 0; i < n; ++i) {
      writer::BuildOptions p = o;
      p.shard_index = i;
      p.shard_count = n;
      p.threads = 1 + int(i % 2);  // the parts' machines differ; the output must not
      parts.push_back(dir + "/part-" + std::to_string(n) + "-" + std::to_string(i) + ".beton");
      writer::Build(src, parts.back(), p);
    }
    std::reverse(parts.begin(), parts.end());  // any order: the parts say where they go
    const auto rep = writer::Merge(parts, dir + "/merged.beton");
    const auto merged = test::ReadFile(dir + "/merged.beton");
    ASSERT_EQ(merged.size(), whole.size());
    EXPECT_TRUE(merged == whole) << "merged file differs from the one-machine build";
    EXPECT_EQ(rep.parts, n);
  }
}

TEST(Merge, CifarPartsByteIdentical) {
  writer::BuildOptions o;
  o.block_size = 64 << 10;  // parts end inside blocks of the whole file
  ExpectMergeIdentical(test::SubsetTree(70), o, {1, 3, 7});
}

TEST(Merge, PhotosPartsByteIdentical) {
  const std::string photos = test::PhotosTree(DSC_PHOTOS);
  ASSERT_FALSE(photos.empty());
  const std::string tree = test::ScratchDir("-tree");
  int n = 0;
  for (const auto& cls : fs::directory_iterator(photos))
    if (cls.is_directory() && n++ < 30) fs::create_directory_symlink(cls.path(), tree + "/" + cls.path().filename().string());
  writer::BuildOptions o;
  o.block_size = 128 << 10;
  o.encode.max_resolution = 160;  // re-encoded with restart markers: the restart section is summed
  ExpectMergeIdentical(tree, o, {1, 3, 7});
  writer::BuildOptions pass;  // passed through (transcoded): table sets shared across parts
  pass.block_size = 256 << 10;
  ExpectMergeIdentical(tree, pass, {3});
}

TEST(Merge, RefusesIncompleteOrMixedParts) {
  const std::string src = test::SubsetTree(3);
  const std::string dir = test::ScratchDir("-parts");
  writer::BuildOptions o;
  o.log = [](const std::string&) {};
  std::vector<std::string> parts;
  for (uint32_t i = 0; i < 3; ++i) {
    o.shard_index = i;
    o.shard_count = 3;
    parts.push_back(dir + "/p" + std::to_string(i) + ".beton");
    writer::Build(src, parts.back(), o);
  }
  auto message = [&](const std::vector<std::string>& ps) -> std::string {
    try {
      writer::Merge(ps, dir + "/out.beton");
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message({parts[0], parts[2]}).find("part 1 of 3 is missing"), std::string::npos);
  EXPECT_NE(message({parts[0], parts[1], parts[1]}).find("given twice"), std::string::npos);
  o.shard_index = 1;
  o.encode.quality = 80;
  o.encode.reencode = true;
  writer::Build(src, dir + "/other.beton", o);
  EXPECT_NE(message({parts[0], dir + "/other.beton", parts[2]}).find("other options"), std::string::npos);
  writer::BuildOptions whole;
  whole.log = o.log;
  writer::Build(src, dir + "/whole.beton", whole);
  EXPECT_NE(message({dir + "/whole.beton"}).find("not a part"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir + "/out.beton"));
}

TEST(Merge, CommandLine) {
  const std::string src = test::SubsetTree(5);
  const std::string dir = test::ScratchDir("-cli");
  std::string out;
  ASSERT_EQ(test::RunDsc("build " + src + " " + dir + "/whole.beton --quiet", &out), 0) << out;
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(test::RunDsc("build " + src + " " + dir + "/part-" + std::to_string(i) + ".beton --quiet --shard " + std::to_string(i) + "/3", &out), 0)
        << out;
  ASSERT_EQ(test::RunDsc("merge " + dir + "/part-0.beton " + dir + "/part-1.beton " + dir + "/part-2.beton " + dir + "/merged.beton", &out), 0)
      << out;
  EXPECT_TRUE(test::ReadFile(dir + "/merged.beton") == test::ReadFile(dir + "/whole.beton"));
  EXPECT_EQ(test::RunDsc("build " + src + " " + dir + "/x.beton --shard 3/3", &out), 2) << out;
  EXPECT_NE(out.find("--shard 3/3"), std::string::npos) << out;
}

}  // namespace
}  // namespace dsc
