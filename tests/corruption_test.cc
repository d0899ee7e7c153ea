// A flipped bit anywhere, or a truncation anywhere, is detected: by `verify` with the right section
// named, and by the reader (open, or first touch of the damaged block with verification on).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "format/error.h"
#include "format/file_view.h"
#include "kernels/jpeg_codec.h"
#include "reader/dataset.h"
#include "reader/loader.h"
#include "tests/test_util.h"
#include "writer/build.h"
#include "writer/writer.h"

namespace dsc::test {
namespace {

struct Built {
  std::vector<uint8_t> bytes;
  std::vector<format::SectionExtent> sections;
};

// Photo-sized JPEGs (256x192 mosaics of real CIFAR images), so that the writer gives them restart
// markers and the file has format 1.1's optional-section table and restart section.
std::string MosaicTree() {
  const std::string dir = ScratchDir("-mosaics");
  std::vector<std::string> files;
  for (const auto& f : std::filesystem::recursive_directory_iterator(CifarJpegRoot() + "/test"))
    if (f.is_regular_file()) files.push_back(f.path());
  std::sort(files.begin(), files.end());
  kernels::JpegCodec codec;
  const int w = 256, h = 192;
  for (int m = 0; m < 12; ++m) {
    std::vector<uint8_t> rgb(size_t(w) * h * 3), jpeg;
    for (int t = 0; t < 48; ++t) {
      const auto tile = ReferenceDecode(ReadFile(files[size_t(m * 48 + t) * 7 % files.size()]));
      for (int y = 0; y < 32; ++y)
        std::copy_n(&tile[size_t(y) * 32 * 3], 32 * 3, &rgb[(size_t((t / 8) * 32 + y) * w + (t % 8) * 32) * 3]);
    }
    EXPECT_TRUE(codec.Encode(rgb.data(), w, h, 3, 90, 2 /* 4:2:0 */, &jpeg));
    const std::string cls = dir + "/c" + std::to_string(m % 2);
    std::filesystem::create_directories(cls);
    WriteFile(cls + "/" + std::to_string(m) + ".jpg", jpeg);
  }
  return dir;
}

// Format 1.2: the tree's JPEGs with typed fields (a scalar, a fixed array, a variable array, text),
// so that the columns and varsizes sections and variable values in the blocks are there to damage.
void WriteTyped(const std::string& root, const std::string& out) {
  std::vector<std::string> files;
  for (const auto& f : std::filesystem::recursive_directory_iterator(root))
    if (f.is_regular_file()) files.push_back(f.path());
  std::sort(files.begin(), files.end());
  WriterOptions o;
  o.block_size = 8192;
  o.threads = 2;
  Writer w(out, {ImageField("image"), LabelField("label"), ScalarField("score", format::DType::kFloat32),
                 ArrayField("pair", format::DType::kInt16, {2}), VarArrayField("boxes", format::DType::kFloat32, {4}),
                 TextField("caption")}, o);
  for (size_t i = 0; i < files.size(); ++i) {
    Sample s;
    s.SetImage("image", ReadFile(files[i]));
    s.SetLabel("label", int32_t(i % 10));
    s.SetScalar("score", float(i) / 3);
    const int16_t pair[2] = {int16_t(i), int16_t(-int(i))};
    s.SetArray("pair", pair, 2);
    std::vector<float> boxes(4 * (i % 4), float(i));
    s.SetArray("boxes", boxes.data(), boxes.size());
    s.SetText("caption", "sample " + std::to_string(i));
    w.Add(std::move(s));
  }
  w.Close();
}

Built BuildSmall(const std::string& encoding) {
  const bool restart = encoding == "restart";
  if (encoding == "typed") {
    const auto dir = ScratchDir("-typed");
    WriteTyped(SubsetTree(25), dir + "/f.beton");
    Built b;
    b.bytes = ReadFile(dir + "/f.beton");
    format::MemorySource src("f.beton", b.bytes.data(), b.bytes.size());
    auto v = format::FileView::Open(&src);
    EXPECT_TRUE(v->typed());
    b.sections = v->Extents();
    return b;
  }
  auto root = restart ? MosaicTree() : SubsetTree(25);
  auto dir = ScratchDir("-" + encoding);
  writer::BuildOptions o;
  o.encode.encoding = restart ? "default" : encoding;
  o.block_size = 8192;  // several blocks
  o.log = [](const std::string&) {};
  writer::Build(root, dir + "/f.beton", o);
  Built b;
  b.bytes = ReadFile(dir + "/f.beton");
  format::MemorySource src("f.beton", b.bytes.data(), b.bytes.size());
  auto v = format::FileView::Open(&src);
  b.sections = v->Extents();
  EXPECT_EQ(v->restart().has_value(), restart);  // the restart case really covers the optional bytes
  return b;
}

// Which data block holds `offset`, from the intact file.
int64_t BlockAt(const std::vector<uint8_t>& intact, uint64_t offset) {
  format::MemorySource src("f", intact.data(), intact.size());
  auto v = format::FileView::Open(&src);
  int64_t found = -1;
  for (size_t b = 0; b < v->block_count(); ++b)
    if (v->block(b).offset <= offset) found = int64_t(b);
  return found;
}

// Reading every sample with verification on: true when some read threw dsc::Error.
bool ReaderRejects(const std::vector<uint8_t>& bytes) {
  try {
    Dataset ds(std::make_unique<format::MemorySource>("f.beton", bytes.data(), bytes.size()), {.verify = true});
    std::vector<uint8_t> scratch;
    for (uint64_t i = 0; i < ds.size(); ++i) ds.ReadPayload(i, &scratch);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f.beton"), std::string::npos) << e.what();
    return true;
  }
  return false;
}

// The loader with verification off, over every sample of a damaged file: it may deliver changed
// pixels or throw dsc::Error, but must not crash or read outside the file (ASan checks that in CI).
// Returns true when it threw.
bool LoaderWithoutVerifyThrows(const std::vector<uint8_t>& bytes, const std::string& path) {
  WriteFile(path, bytes);
  try {
    LoaderOptions o = LoaderOptions::CifarTrain();
    o.batch_size = 50;
    o.threads = 2;
    Loader l(path, o);
    for (const Batch& b : l.epoch(0)) (void)b;
  } catch (const Error&) {
    return true;
  }
  return false;
}

class Corruption : public ::testing::TestWithParam<std::string> {};

TEST_P(Corruption, EveryFlippedBitIsDetectedInTheRightSection) {
  Built b = BuildSmall(GetParam());
  std::mt19937 rng(42);
  // Each count is incremented only by the outcome it names, so the final comparisons with `tried` can
  // fail: a flip that verify misses, or reports in the wrong section or block, lowers `named_right`.
  int tried = 0, detected = 0, named_right = 0, reader_checked = 0, reader_rejected = 0;
  int reader_missed_padding = 0, unverified_threw = 0, unverified_ran = 0;
  const std::string scratch = ScratchDir("-unverified-" + GetParam()) + "/f.beton";
  for (const auto& s : b.sections) {
    // The first and last bytes, and 40 random ones, of each section's extent.
    std::vector<uint64_t> offs = {s.offset, s.offset + s.size - 1};
    for (int k = 0; k < 40; ++k) offs.push_back(s.offset + rng() % s.size);
    // Every byte of the optional-section table (format 1.1) and the 8 zero bytes after it.
    if (s.name == "header")
      for (uint64_t o = format::kOptionalTableAt; o < s.content + 8; ++o) offs.push_back(o);
    for (uint64_t off : offs) {
      auto bytes = b.bytes;
      bytes[off] ^= uint8_t(1u << (rng() % 8));
      format::MemorySource src("f.beton", bytes.data(), bytes.size());
      auto problems = format::VerifyFile(src);
      ++tried;
      if (problems.empty()) {
        ADD_FAILURE() << "flip at " << off << " in " << s.name << " not detected";
      } else {
        ++detected;
        const bool section_right = problems[0].section == s.name;
        const bool block_right = s.name != "data" || problems[0].block == BlockAt(b.bytes, off);
        if (section_right && block_right) ++named_right;
        else ADD_FAILURE() << "flip at " << off << " in " << s.name << " (block " << BlockAt(b.bytes, off)
                           << ") reported as: " << format::Describe(problems[0]);
      }
      // The reader: metadata damage fails at open; payload damage at first touch. Padding after a
      // block's content is never read by the loader, so only verify sees it (by design).
      bool in_block_padding = false;
      if (s.name == "data") {
        format::MemorySource intact("f", b.bytes.data(), b.bytes.size());
        auto v = format::FileView::Open(&intact);
        const auto& blk = v->block(size_t(BlockAt(b.bytes, off)));
        in_block_padding = off >= blk.offset + blk.size;
      }
      if (in_block_padding) {
        ++reader_missed_padding;
      } else {
        ++reader_checked;
        if (ReaderRejects(bytes)) ++reader_rejected;
        else ADD_FAILURE() << "reader accepted a flip at " << off << " in " << s.name;
      }
      if (s.name == "data") (LoaderWithoutVerifyThrows(bytes, scratch) ? unverified_threw : unverified_ran) += 1;
    }
  }
  std::printf("[%s] flips tried %d: detected by verify %d, named with the right section (and block) %d; "
              "reader rejected %d of %d (%d in block padding, verify-only); payload flips through the loader "
              "without verification: %d raised dsc::Error, %d decoded, 0 crashed\n",
              GetParam().c_str(), tried, detected, named_right, reader_rejected, reader_checked,
              reader_missed_padding, unverified_threw, unverified_ran);
  EXPECT_EQ(detected, tried);
  EXPECT_EQ(named_right, tried);
  EXPECT_EQ(reader_rejected, reader_checked);
  EXPECT_GT(tried, 100);  // the loop really ran over every section
}

TEST_P(Corruption, AFlipInEveryBlockIsNamedByBlock) {
  Built b = BuildSmall(GetParam());
  format::MemorySource intact("f", b.bytes.data(), b.bytes.size());
  auto v = format::FileView::Open(&intact);
  ASSERT_GT(v->block_count(), 3u);
  for (size_t blk = 0; blk < v->block_count(); ++blk) {
    auto bytes = b.bytes;
    bytes[v->block(blk).offset + v->block(blk).size / 2] ^= 0x10;
    format::MemorySource src("f.beton", bytes.data(), bytes.size());
    auto problems = format::VerifyFile(src);
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(problems[0].section, "data");
    EXPECT_EQ(problems[0].block, int64_t(blk));
    EXPECT_TRUE(ReaderRejects(bytes));
  }
}

TEST_P(Corruption, TruncationAnywhereIsRejected) {
  Built b = BuildSmall(GetParam());
  std::vector<uint64_t> cuts = {0, 1, 100, b.bytes.size() - 1};
  for (const auto& s : b.sections) {
    cuts.push_back(s.offset);
    cuts.push_back(s.offset + s.size / 2);
  }
  std::mt19937 rng(7);
  for (int k = 0; k < 20; ++k) cuts.push_back(rng() % b.bytes.size());
  for (uint64_t cut : cuts) {
    if (cut >= b.bytes.size()) continue;
    std::vector<uint8_t> bytes(b.bytes.begin(), b.bytes.begin() + long(cut));
    format::MemorySource src("f.beton", bytes.data(), bytes.size());
    EXPECT_FALSE(format::VerifyFile(src).empty()) << "truncation at " << cut;
    try {
      format::FileView::Open(&src);
      ADD_FAILURE() << "open accepted a file truncated at " << cut;
    } catch (const Error& e) {
      std::string m = e.what();
      EXPECT_EQ(m.rfind("f.beton: ", 0), 0u) << m;
      EXPECT_TRUE(m.find("truncated") != std::string::npos || m.find("footer") != std::string::npos ||
                  m.find("magic") != std::string::npos) << m;
    }
  }
}

TEST_P(Corruption, AppendedBytesAreRejected) {
  Built b = BuildSmall(GetParam());
  b.bytes.push_back(0);
  format::MemorySource src("f.beton", b.bytes.data(), b.bytes.size());
  EXPECT_THROW(format::FileView::Open(&src), Error);
}

INSTANTIATE_TEST_SUITE_P(Encodings, Corruption, ::testing::Values("default", "raw", "raw-zstd", "restart", "typed"),
                         [](const auto& info) { return info.param == "raw-zstd" ? std::string("raw_zstd") : info.param; });

}  // namespace
}  // namespace dsc::test
