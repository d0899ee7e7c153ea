// The fuzzers' checksum fixup (tests/fuzz/fixup_checksums.h): after it, a file whose payload, index or
// meta bytes were changed passes every checksum, so what FileView::Open and verify then say comes from
// the structural checks behind them; without it the same change stops at a checksum mismatch.
#include <gtest/gtest.h>

#include <random>

#include "format/error.h"
#include "format/file_view.h"
#include "reader/dataset.h"
#include "tests/fuzz/fixup_checksums.h"
#include "tests/test_util.h"
#include "writer/build.h"
#include "writer/file_builder.h"

namespace dsc::test {
namespace {

const std::vector<uint8_t>& SmallFile() {
  static const std::vector<uint8_t> bytes = [] {
    auto root = SubsetTree(2);  // 20 real CIFAR-10 JPEGs, 10 classes
    auto dir = ScratchDir();
    writer::BuildOptions o;
    o.encode.encoding = "raw";  // a payload is exactly its stored bytes
    o.block_size = 8192;         // two samples a block: ten blocks
    o.log = [](const std::string&) {};
    writer::Build(root, dir + "/f.beton", o);
    return ReadFile(dir + "/f.beton");
  }();
  return bytes;
}

// FileView::Open's error for `bytes`, or "" when it opens.
std::string OpenError(const std::vector<uint8_t>& bytes) {
  format::MemorySource src("f.beton", bytes.data(), bytes.size());
  try {
    format::FileView::Open(&src);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string VerifyProblems(const std::vector<uint8_t>& bytes) {
  format::MemorySource src("f.beton", bytes.data(), bytes.size());
  std::string all;
  for (const auto& p : format::VerifyFile(src)) all += format::Describe(p) + "\n";
  return all;
}

std::vector<uint8_t> Fixed(std::vector<uint8_t> b) {
  fuzz::FixupChecksums(b.data(), b.size());
  return b;
}

struct Layout {
  format::Header header;
  std::vector<format::BlockEntry> blocks;
};
Layout LayoutOf(const std::vector<uint8_t>& bytes) {
  format::MemorySource src("f.beton", bytes.data(), bytes.size());
  auto v = format::FileView::Open(&src);
  Layout l{v->header(), {}};
  for (size_t b = 0; b < v->block_count(); ++b) l.blocks.push_back(v->block(b));
  return l;
}

TEST(FuzzFixup, IntactFileIsUnchanged) {
  // The writer's checksums and the fixup's agree byte for byte.
  const auto& f = SmallFile();
  ASSERT_GT(LayoutOf(f).blocks.size(), 2u);
  EXPECT_TRUE(Fixed(f) == f);
}

TEST(FuzzFixup, PayloadChangePassesEveryChecksum) {
  const auto& f = SmallFile();
  const Layout l = LayoutOf(f);
  const uint64_t at = l.blocks[1].offset + l.blocks[1].size / 2;  // inside block 1's pixels
  std::vector<uint8_t> m = f;
  m[at] ^= 0x5a;
  EXPECT_NE(VerifyProblems(m).find("block 1"), std::string::npos) << VerifyProblems(m);
  const auto fixed = Fixed(m);
  EXPECT_EQ(fixed[at], m[at]);  // the change itself stays
  EXPECT_EQ(VerifyProblems(fixed), "");
  EXPECT_EQ(OpenError(fixed), "");
  // The reader, verifying blocks on first touch, accepts the block and returns the changed byte.
  Dataset ds(std::make_unique<format::MemorySource>("f.beton", fixed.data(), fixed.size()), {.verify = true});
  std::vector<uint8_t> scratch;
  bool seen = false;
  for (uint64_t i = 0; i < ds.size(); ++i) {
    const auto e = ds.entry(i);
    if (e.offset <= at && at < e.offset + e.size) {
      auto p = ds.ReadPayload(i, &scratch);
      EXPECT_EQ(p.data[at - e.offset], m[at]);
      seen = true;
    }
  }
  EXPECT_TRUE(seen);
}

TEST(FuzzFixup, IndexChangeReachesTheIndexRules) {
  const auto& f = SmallFile();
  const Layout l = LayoutOf(f);
  const uint64_t entry3 = l.header.sections[format::kIndex].offset + 3 * format::kIndexEntrySize;
  // A different but valid label: without the fixup a checksum mismatch, with it the file opens with it.
  std::vector<uint8_t> m = f;
  m[entry3 + 24] = uint8_t((m[entry3 + 24] + 1) % 10);
  EXPECT_NE(OpenError(m).find("index checksum mismatch"), std::string::npos) << OpenError(m);
  auto fixed = Fixed(m);
  ASSERT_EQ(OpenError(fixed), "");
  format::MemorySource src("f.beton", fixed.data(), fixed.size());
  EXPECT_EQ(format::FileView::Open(&src)->entry(3).label[0], int32_t(m[entry3 + 24]));
  // A width of 0 or an unknown encoding: the index rules name the sample, not a checksum.
  m = f;
  m[entry3 + 16] = m[entry3 + 17] = 0;
  EXPECT_NE(OpenError(m).find("checksum"), std::string::npos) << OpenError(m);
  EXPECT_NE(OpenError(Fixed(m)).find("sample 3: zero width or height"), std::string::npos) << OpenError(Fixed(m));
  m = f;
  m[entry3 + 20] = 9;
  EXPECT_NE(OpenError(Fixed(m)).find("unknown encoding 9"), std::string::npos) << OpenError(Fixed(m));
}

TEST(FuzzFixup, MetaAndBlockTableChangesReachTheirChecks) {
  const auto& f = SmallFile();
  const Layout l = LayoutOf(f);
  // Meta: an extra byte claimed by the field count makes the decoder, not the checksum, complain.
  std::vector<uint8_t> m = f;
  const uint64_t meta = l.header.sections[format::kMeta].offset;
  m[meta] ^= 0x04;
  EXPECT_NE(OpenError(m).find("meta checksum mismatch"), std::string::npos) << OpenError(m);
  std::string err = OpenError(Fixed(m));
  EXPECT_NE(err, "");
  EXPECT_EQ(err.find("checksum"), std::string::npos) << err;
  // Block table: the reserved word of block 2.
  m = f;
  m[l.header.sections[format::kBlocks].offset + 2 * format::kBlockEntrySize + 20] = 1;
  EXPECT_NE(OpenError(m).find("blocks checksum mismatch"), std::string::npos) << OpenError(m);
  EXPECT_NE(OpenError(Fixed(m)).find("reserved bytes not zero"), std::string::npos) << OpenError(Fixed(m));
}

// Format 1.1's optional sections: the fixup recomputes each one's checksum and the table's.
TEST(FuzzFixup, OptionalSectionChangesPassEveryChecksum) {
  const std::string path = ScratchDir() + "/opt.beton";
  {
    writer::AtomicFile out(path);
    writer::FileBuilder b(&out, 8192, false);
    const int32_t labels[2] = {0, 0};
    writer::Encoded e;
    e.payload.assign(12, 7);
    e.width = 2;
    e.height = 2;
    e.encoding = uint8_t(format::Encoding::kRaw);
    b.Add(e, labels);
    b.AddOptional(77, "opaque bytes of a later version");
    format::Meta m;
    m.fields = {{format::FieldType::kImage, "image", {}}, {format::FieldType::kLabel, "label", {}}};
    b.Finish(m);
    out.Commit();
  }
  const auto f = ReadFile(path);
  EXPECT_TRUE(Fixed(f) == f);
  const Layout l = LayoutOf(f);
  ASSERT_EQ(l.header.optional.size(), 1u);
  std::vector<uint8_t> m = f;
  m[l.header.optional[0].offset + 3] ^= 0x20;  // inside the unknown section: opaque, so only its checksum can tell
  EXPECT_NE(VerifyProblems(m).find("optional-77: optional-77 checksum mismatch"), std::string::npos) << VerifyProblems(m);
  EXPECT_EQ(VerifyProblems(Fixed(m)), "");
  m = f;
  m[format::kOptionalEntriesAt] = 78;  // the entry's id: the table checksum, then the header's
  EXPECT_NE(OpenError(m).find("optional section table checksum mismatch"), std::string::npos) << OpenError(m);
  const auto fixed = Fixed(m);
  EXPECT_EQ(OpenError(fixed), "");
  EXPECT_EQ(LayoutOf(fixed).header.optional[0].id, 78u);
}

TEST(FuzzFixup, AnyBytesAnyLengthAreSafe) {
  // Random damage and every truncation around the header and footer sizes: never reads outside.
  const auto& f = SmallFile();
  std::mt19937 rng(7);
  for (int k = 0; k < 200; ++k) {
    std::vector<uint8_t> m = f;
    for (int j = 0; j < 8; ++j) m[rng() % 200] = uint8_t(rng());  // header fields: sections, counts
    m.resize(rng() % (f.size() + 1));
    fuzz::FixupChecksums(m.data(), m.size(), k % 2 == 0);
    (void)OpenError(m);
  }
  SUCCEED();
}

}  // namespace
}  // namespace dsc::test
