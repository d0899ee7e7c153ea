// The byte layout of docs/format.md, and the reader's refusals of what it does not understand.
#include <gtest/gtest.h>

#include <cstring>

#include "format/bytes.h"
#include "format/checksum.h"
#include "format/error.h"
#include "format/file_view.h"
#include "format/layout.h"
#include "format/meta.h"
#include "tests/test_util.h"
#include "writer/build.h"

namespace dsc::test {
namespace {

using namespace dsc::format;

TEST(Layout, EntriesRoundTripAtDocumentedOffsets) {
  IndexEntry e;
  e.offset = 0x0102030405060708ull;
  e.size = 0x11223344;
  e.block = 7;
  e.width = 640;
  e.height = 480;
  e.encoding = 1;
  e.channels = 3;
  e.jpeg_table = 2;
  e.label[0] = 999;
  e.label[1] = -5;
  uint8_t buf[kIndexEntrySize];
  EncodeIndexEntry(e, buf);
  EXPECT_EQ(buf[0], 0x08);  // little-endian
  EXPECT_EQ(le::get16(buf + 16), 640);
  EXPECT_EQ(buf[20], 1);
  EXPECT_EQ(int32_t(le::get32(buf + 28)), -5);
  IndexEntry d = DecodeIndexEntry(buf);
  EXPECT_EQ(d.offset, e.offset);
  EXPECT_EQ(d.size, e.size);
  EXPECT_EQ(d.jpeg_table, 2);
  EXPECT_EQ(d.label[1], -5);

  Header h;
  h.sample_count = 12345;
  h.block_count = 3;
  h.file_size = 999999;
  h.sections[kMeta] = {8192, 77, 0xABCDEF};
  uint8_t page[kPageSize];
  uint64_t c = EncodeHeader(h, page);
  EXPECT_EQ(std::memcmp(page, kHeaderMagic.data(), 8), 0);
  EXPECT_EQ(le::get64(page + 152), c);
  EXPECT_EQ(c, HeaderChecksum(page));
  Header r = DecodeHeader(page);
  EXPECT_EQ(r.sample_count, 12345u);
  EXPECT_EQ(r.sections[kMeta].size, 77u);
  EXPECT_EQ(r.sections[kMeta].checksum, 0xABCDEFu);
  for (size_t i = kHeaderUsed; i < kPageSize; ++i) ASSERT_EQ(page[i], 0);
}

TEST(Meta, RoundTripsAndRejectsGarbage) {
  Meta m;
  m.fields = {{FieldType::kImage, "image", {}}, {FieldType::kLabel, "fine_label", {"a", "b"}},
              {FieldType::kLabel, "coarse_label", {"x"}}};
  m.build_options = "a=1\nb=2\n";
  m.skipped_count = 3;
  m.jpeg_tables = {std::string("\xFF\xD8tables", 8)};
  std::string bytes = EncodeMeta(m);
  Meta d = DecodeMeta(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  EXPECT_EQ(d.fields[2].classes, std::vector<std::string>{"x"});
  EXPECT_EQ(d.build_options, m.build_options);
  EXPECT_EQ(d.jpeg_tables, m.jpeg_tables);
  EXPECT_EQ(d.skipped_count, 3u);
  for (size_t cut = 0; cut < bytes.size(); ++cut)
    EXPECT_THROW(DecodeMeta(reinterpret_cast<const uint8_t*>(bytes.data()), cut), Error) << cut;
  std::string extra = bytes + "x";
  EXPECT_THROW(DecodeMeta(reinterpret_cast<const uint8_t*>(extra.data()), extra.size()), Error);
}

class Refusals : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = ScratchDir();
    writer::BuildOptions o;
    o.log = [](const std::string&) {};
    writer::Build(SubsetTree(3), dir + "/f.beton", o);
    bytes_ = ReadFile(dir + "/f.beton");
  }
  // Rewrites the header with `edit` applied and a valid checksum (and footer), so only the edit is wrong.
  std::string OpenError(const std::function<void(Header*)>& edit) {
    auto b = bytes_;
    Header h = DecodeHeader(b.data());
    edit(&h);
    uint64_t c = EncodeHeader(h, b.data());
    uint8_t* foot = b.data() + b.size() - kFooterSize;
    Footer f = DecodeFooter(foot);
    f.header_checksum = c;
    f.version_major = h.version_major;
    f.version_minor = h.version_minor;
    EncodeFooter(f, foot);
    MemorySource src("f.beton", b.data(), b.size());
    try {
      FileView::Open(&src);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  std::vector<uint8_t> bytes_;
};

TEST_F(Refusals, UnknownVersionsFlagsAndBadOffsets) {
  EXPECT_NE(OpenError([](Header* h) { h->version_major = 2; }).find("unsupported format version 2.0"), std::string::npos);
  EXPECT_EQ(OpenError([](Header* h) { h->version_minor = 9; }), "");  // minor additions are readable
  EXPECT_NE(OpenError([](Header* h) { h->incompat_flags = 4; }).find("unsupported feature"), std::string::npos);
  EXPECT_NE(OpenError([](Header* h) { h->sections[kIndex].offset += 1u << 30; }).find("out of bounds"), std::string::npos);
  EXPECT_NE(OpenError([](Header* h) { h->sections[kMeta].size = 1ull << 40; }).find("out of bounds"), std::string::npos);
  EXPECT_NE(OpenError([](Header* h) { h->sample_count += 1; }), "");
  auto b = bytes_;
  b[0] = 'X';
  MemorySource src("f.beton", b.data(), b.size());
  try {
    FileView::Open(&src);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "f.beton: header: bad magic (not a dsc file)");
  }
}

TEST_F(Refusals, UnknownEncodingInTheIndex) {
  auto b = bytes_;
  Header h = DecodeHeader(b.data());
  uint8_t* idx = b.data() + h.sections[kIndex].offset;
  idx[20] = 9;  // encoding byte of sample 0
  h.sections[kIndex].checksum = Checksum(idx, h.sections[kIndex].size);
  uint64_t c = EncodeHeader(h, b.data());
  uint8_t* foot = b.data() + b.size() - kFooterSize;
  Footer f = DecodeFooter(foot);
  f.header_checksum = c;
  EncodeFooter(f, foot);
  MemorySource src("f.beton", b.data(), b.size());
  try {
    FileView::Open(&src);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sample 0: unknown encoding 9"), std::string::npos) << e.what();
  }
}

TEST(Checksum, IsXxh3Seed0) {
  // Known answer for the empty input, from xxHash's own test vectors.
  EXPECT_EQ(Checksum("", 0), 0x2D06800538D394C2ull);
}

}  // namespace
}  // namespace dsc::test
