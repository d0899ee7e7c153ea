// The byte layout of docs/format.md, and the reader's refusals of what it does not understand.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>

#include "format/bytes.h"
#include "format/checksum.h"
#include "format/checksum_impl.h"
#include "format/error.h"
#include "format/file_view.h"
#include "format/layout.h"
#include "format/meta.h"
#include "reader/file_source.h"
#include "tests/test_util.h"
#include "format/optional.h"
#include "writer/build.h"
#include "writer/file_builder.h"

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
  // Names and build options are UTF-8 text (dsc info --json and Python's dsc.info print them): a
  // Latin-1 byte, an overlong form or a surrogate is refused on either side; table sets are bytes.
  for (const std::string& bad : {std::string("caf\xE9"), std::string("\xC0\xAF"), std::string("\xED\xA0\x80")}) {
    Meta w = m;
    w.fields[1].classes[1] = bad;
    EXPECT_THROW(EncodeMeta(w), Error);
    std::string b2 = bytes;
    const size_t at = b2.find(std::string("\x01\x00\x00\x00" "b", 5));  // class name "b": length 1, then 'b'
    ASSERT_NE(at, std::string::npos);
    b2.replace(at, 5, std::string(1, char(bad.size())) + std::string(3, '\0') + bad);
    try {
      DecodeMeta(reinterpret_cast<const uint8_t*>(b2.data()), b2.size());
      ADD_FAILURE() << "accepted a class name that is not UTF-8";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "meta: class name is not UTF-8");
    }
  }
  Meta u = m;
  u.fields[1].classes[0] = "caf\xC3\xA9 \xF0\x9F\x90\x88";  // café and a cat: fine
  const std::string ub = EncodeMeta(u);
  EXPECT_EQ(DecodeMeta(reinterpret_cast<const uint8_t*>(ub.data()), ub.size()).fields[1].classes[0], u.fields[1].classes[0]);
  // Build options are "key=value\n" lines sorted by key, each key once: refused on either side (a
  // file with them swapped, or a line without "=" or its newline, verified OK).
  const std::vector<std::pair<std::string, std::string>> forms = {
      {"b=2\na=1\n", "meta: build options: line 2: key 'a' is not after 'b' (keys are sorted, each once)"},
      {"a=1\na=2\n", "meta: build options: line 2: key 'a' is not after 'a' (keys are sorted, each once)"},
      {"a=1\nb_2\n", "meta: build options: line 2 is not key=value"},
      {"=11\nb=2\n", "meta: build options: line 1 is not key=value"},
      {"a=1\nb=2;", "meta: build options: line 2 does not end in a newline"},
  };
  for (const auto& [text, message] : forms) {
    ASSERT_EQ(text.size(), m.build_options.size()) << "same length: the bytes below are a replacement in place";
    Meta w = m;
    w.build_options = text;
    EXPECT_THROW(EncodeMeta(w), Error) << text;
    std::string b3 = bytes;
    b3.replace(b3.find(m.build_options), text.size(), text);
    try {
      DecodeMeta(reinterpret_cast<const uint8_t*>(b3.data()), b3.size());
      ADD_FAILURE() << "accepted build options " << text;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), message);
    }
  }
  Meta e = m;
  e.build_options = "";  // none at all is well formed
  const std::string eb = EncodeMeta(e);
  EXPECT_EQ(DecodeMeta(reinterpret_cast<const uint8_t*>(eb.data()), eb.size()).build_options, "");
}

// Every source checks its own arguments, so a read can never leave the file whatever an index says,
// including ranges whose end wraps past 2^64.
TEST(ByteSources, ReadRefusesRangesOutsideTheFile) {
  auto dir = ScratchDir();
  std::vector<uint8_t> bytes(10000, 7);
  WriteFile(dir + "/x.bin", bytes);
  MemorySource mem("x.bin", bytes.data(), bytes.size());
  auto mm = OpenMmapSource(dir + "/x.bin");
  auto pr = OpenPreadSource(dir + "/x.bin");
  for (const ByteSource* s : std::vector<const ByteSource*>{&mem, mm.get(), pr.get()}) {
    std::vector<uint8_t> scratch;
    EXPECT_EQ(s->Read(9990, 10, &scratch)[9], 7) << s->name();
    EXPECT_NO_THROW(s->Read(10000, 0, &scratch)) << s->name();
    const std::pair<uint64_t, size_t> bad[] = {{9991, 10}, {10001, 0}, {~0ull - 3, 8}, {16, ~size_t(0) - 8}};
    for (auto [off, n] : bad) {
      try {
        s->Read(off, n, &scratch);
        ADD_FAILURE() << s->name() << " read " << n << " bytes at " << off;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("x.bin"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("byte " + std::to_string(off)), std::string::npos) << e.what();
      }
    }
  }
}

// Writes header `h` with its checksum into file bytes `b`, and the footer's copy of it: only what the
// caller edited is wrong.
void Reseal(std::vector<uint8_t>* b, const Header& h) {
  uint64_t c = EncodeHeader(h, b->data());
  uint8_t* foot = b->data() + b->size() - kFooterSize;
  Footer f = DecodeFooter(foot);
  f.header_checksum = c;
  f.version_major = h.version_major;
  f.version_minor = h.version_minor;
  EncodeFooter(f, foot);
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
    Reseal(&b, h);
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
  // A short file that is not a dsc file is named as such, not as a truncated one.
  const std::string text = "path\tlabel\n";
  MemorySource tsv("list.tsv", reinterpret_cast<const uint8_t*>(text.data()), text.size());
  try {
    FileView::Open(&tsv);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "list.tsv: header: bad magic (not a dsc file)");
  }
  MemorySource cut("cut.beton", bytes_.data(), 100);
  try {
    FileView::Open(&cut);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cut.beton: header: truncated: file is 100 bytes"), std::string::npos) << e.what();
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

// A block offset near 2^64 whose end wraps round to a small number must be refused as out of bounds
// (it used to pass the "extends past the data section" check and verify then read at that offset).
TEST(Refusals2, BlockOffsetThatWrapsIsRefused) {
  auto dir = ScratchDir();
  writer::BuildOptions o;
  o.log = [](const std::string&) {};
  o.block_size = 8192;
  writer::Build(SubsetTree(10), dir + "/f.beton", o);
  auto b = ReadFile(dir + "/f.beton");
  Header h = DecodeHeader(b.data());
  ASSERT_GE(h.block_count, 2u);
  uint8_t* blocks = b.data() + h.sections[kBlocks].offset;
  BlockEntry be = DecodeBlockEntry(blocks + kBlockEntrySize);  // block 1: block 0 must start at PAGE
  ASSERT_GE(be.size, kPageSize);
  be.offset = 0ull - kPageSize;  // offset + size wraps to size - 4096
  EncodeBlockEntry(be, blocks + kBlockEntrySize);
  h.sections[kBlocks].checksum = Checksum(blocks, h.sections[kBlocks].size);
  Reseal(&b, h);
  MemorySource src("f.beton", b.data(), b.size());
  auto problems = VerifyFile(src);
  ASSERT_FALSE(problems.empty());
  EXPECT_EQ(problems[0].section, "blocks");
  EXPECT_EQ(problems[0].block, 1);
  EXPECT_NE(problems[0].message.find("past the data section"), std::string::npos) << problems[0].message;
  try {
    FileView::Open(&src);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f.beton: blocks: block 1"), std::string::npos) << e.what();
  }
}

// Rules that leave no byte of the data region unchecked, each broken with every checksum recomputed
// (so only the rule can catch it); all were accepted by verify before.
TEST(Refusals2, EveryDataByteIsCoveredByARule) {
  auto dir = ScratchDir();
  writer::BuildOptions o;
  o.log = [](const std::string&) {};
  writer::Build(SubsetTree(3), dir + "/f.beton", o);
  const auto bytes = ReadFile(dir + "/f.beton");
  auto problem = [&](const std::function<void(std::vector<uint8_t>*, Header*)>& edit) {
    auto b = bytes;
    Header h = DecodeHeader(b.data());
    edit(&b, &h);
    for (int i : {kIndex, kBlocks}) h.sections[i].checksum = Checksum(b.data() + h.sections[i].offset, h.sections[i].size);
    Reseal(&b, h);
    MemorySource src("f.beton", b.data(), b.size());
    auto problems = VerifyFile(src);
    return problems.empty() ? std::string("none") : problems[0].section + ": " + problems[0].message;
  };
  EXPECT_EQ(problem([](std::vector<uint8_t>*, Header*) {}), "none");
  // The first block one page in: the page before it (garbage, in the audit's file) had no checksum.
  EXPECT_NE(problem([](std::vector<uint8_t>* b, Header* h) {
              uint8_t* e = b->data() + h->sections[kBlocks].offset;
              BlockEntry be = DecodeBlockEntry(e);
              be.offset += kPageSize;
              EncodeBlockEntry(be, e);
            }).find("the first block is at offset 8192, not at the data section's start 4096"),
            std::string::npos);
  // Two samples sharing bytes (payloads tile their block).
  EXPECT_NE(problem([](std::vector<uint8_t>* b, Header* h) {
              uint8_t* idx = b->data() + h->sections[kIndex].offset;
              IndexEntry e0 = DecodeIndexEntry(idx), e1 = DecodeIndexEntry(idx + kIndexEntrySize);
              e1.offset = e0.offset;
              EncodeIndexEntry(e1, idx + kIndexEntrySize);
            }).find("(a block's payloads are contiguous, in sample order)"),
            std::string::npos);
  // A block size that is a power of two but absurd.
  for (uint64_t bs : {uint64_t(1) << 63, ~uint64_t(0), uint64_t(3) << 12})
    EXPECT_NE(problem([bs](std::vector<uint8_t>*, Header* h) { h->block_size = bs; }).find("is not a power of two from 4096 to 2^31"),
              std::string::npos) << bs;
}

// FFCV names its files .beton too; its header (ffcv/types.py HeaderType) must be recognised and the
// file read as FFCV's (format/ffcv.h), instead of a bare "bad magic": this one's table is torn.
TEST(Refusals2, FfcvFilesAreRecognised) {
  std::vector<uint8_t> b(3 << 20, 0);
  le::put16(b.data(), 2);             // version
  le::put16(b.data() + 2, 2);         // num_fields
  le::put32(b.data() + 4, 1u << 21);  // page_size
  le::put64(b.data() + 8, 50000);     // num_samples
  le::put64(b.data() + 16, 2u << 20); // alloc_table_ptr
  MemorySource src("cifar_train.beton", b.data(), b.size());
  const std::string want = "cifar_train.beton: FFCV file: allocation table: 1048576 bytes from byte 2097152 to the end of the file "
                           "are not whole 24-byte entries";
  try {
    FileView::Open(&src);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), want);
  }
  auto problems = VerifyFile(src);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].message.find("not whole 24-byte entries"), std::string::npos);
  // A table pointer past the end is an FFCV file cut short (a partial download), said so; not every
  // magic-less file is FFCV: a page size that is not a power of two is plain garbage.
  const std::pair<size_t, std::string> edits[] = {
      {16, "x.beton: FFCV file: truncated: the file is 3145728 bytes, but its header puts the allocation table (written "
           "last) at byte 5242880 (an incomplete copy or download, or a damaged header)"},
      {4, "x.beton: header: bad magic (not a dsc file)"}};
  for (const auto& [field, want] : edits) {
    auto c = b;
    if (field == 16) le::put64(c.data() + 16, 5u << 20);
    else le::put32(c.data() + 4, 3000);
    MemorySource other("x.beton", c.data(), c.size());
    try {
      FileView::Open(&other);
      FAIL();
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), want);
    }
  }
}

TEST(Layout, OptionalTableAtDocumentedOffsets) {
  Header h;
  h.optional = {{1, 8192, 100, 0x1111}, {9, 12288, 5, 0x2222}};
  uint8_t page[kPageSize];
  EncodeHeader(h, page);
  EXPECT_EQ(le::get32(page + 168), 2u);  // count
  EXPECT_EQ(le::get32(page + 172), 0u);
  EXPECT_EQ(le::get32(page + 176), 1u);  // entry 0: id, zero, offset, size, checksum
  EXPECT_EQ(le::get32(page + 180), 0u);
  EXPECT_EQ(le::get64(page + 184), 8192u);
  EXPECT_EQ(le::get64(page + 192), 100u);
  EXPECT_EQ(le::get64(page + 200), 0x1111u);
  EXPECT_EQ(le::get32(page + 208), 9u);  // entry 1
  // The table checksum is XXH3 of [168, 176 + 32n), computed here independently of the library.
  EXPECT_EQ(le::get64(page + 160), Checksum(page + 168, 8 + 64));
  for (size_t i = 240; i < kPageSize; ++i) ASSERT_EQ(page[i], 0) << i;
  Header r = DecodeHeader(page);
  ASSERT_EQ(r.optional.size(), 2u);
  EXPECT_EQ(r.optional[1].id, 9u);
  EXPECT_EQ(r.optional[1].size, 5u);
  EXPECT_EQ(r.optional_count, 2u);
  // No optional sections: the page from byte 160 on is zero, as in a 1.0 file.
  Header none;
  EncodeHeader(none, page);
  for (size_t i = kHeaderUsed; i < kPageSize; ++i) ASSERT_EQ(page[i], 0) << i;
}

TEST(RestartSection, RoundTripsAndRejectsGarbage) {
  RestartStats st;
  st.target = 4;
  st.min_mcus = 64;
  st.images = 7;
  st.transcoded = 5;
  st.reencoded = 2;
  st.whole_row = 1;
  st.untouched = 3;
  st.intervals = {{3, 4}, {47, 3}};
  const std::string b = EncodeRestartStats(st);
  EXPECT_EQ(b.size(), 64u + 2 * 16);
  const auto* p = reinterpret_cast<const uint8_t*>(b.data());
  EXPECT_EQ(le::get64(p + 48), 3u);   // untouched at its documented offset
  EXPECT_EQ(le::get32(p + 80), 47u);  // second interval
  RestartStats d = DecodeRestartStats(p, b.size());
  EXPECT_EQ(d.images, 7u);
  EXPECT_EQ(d.untouched, 3u);
  ASSERT_EQ(d.intervals.size(), 2u);
  EXPECT_EQ(d.intervals[1].images, 3u);
  for (size_t cut = 0; cut < b.size(); ++cut) EXPECT_THROW(DecodeRestartStats(p, cut), Error) << cut;
  // An unknown mode, counts that no longer add up, reserved words, intervals out of order.
  const std::pair<size_t, uint8_t> flips[] = {{0, 0x02}, {16, 0x01}, {24, 0x01}, {60, 0x01}, {64, 0x40}, {68, 0x01}, {72, 0x01}};
  for (auto [at, x] : flips) {
    std::string bad = b;
    bad[at] ^= char(x);
    EXPECT_THROW(DecodeRestartStats(reinterpret_cast<const uint8_t*>(bad.data()), bad.size()), Error) << at;
  }
}

// A file with the restart section and a section of an id this build does not know, written by the
// writer's own FileBuilder around three real CIFAR JPEGs.
std::vector<uint8_t> FileWithOptionalSections(const std::string& unknown = "future data") {
  auto dir = ScratchDir("-optional");
  const std::string path = dir + "/f.beton";
  {
    writer::AtomicFile out(path);
    writer::FileBuilder b(&out, 8192, true);
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(CifarJpegRoot() + "/train/cat")) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    const int32_t labels[2] = {0, 0};
    for (size_t i = 0; i < 3; ++i) {
      writer::Encoded e;
      e.payload = ReadFile(files[i]);
      e.width = e.height = 32;
      e.encoding = uint8_t(Encoding::kJpeg);
      b.Add(e, labels);
    }
    RestartStats st;
    st.images = st.transcoded = 1;
    st.intervals = {{4, 1}};
    b.AddOptional(kRestartSection, EncodeRestartStats(st));
    b.AddOptional(77, unknown);
    Meta m;
    m.fields = {{FieldType::kImage, "image", {}}, {FieldType::kLabel, "label", {}}};
    b.Finish(m);
    out.Commit();
  }
  return ReadFile(path);
}

TEST(OptionalSections, UnknownIdsAreVerifiedAndOtherwiseIgnored) {
  const auto bytes = FileWithOptionalSections();
  MemorySource src("f.beton", bytes.data(), bytes.size());
  auto v = FileView::Open(&src);
  EXPECT_EQ(v->header().version_minor, 1);
  ASSERT_TRUE(v->restart().has_value());
  EXPECT_EQ(v->restart()->intervals[0].mcus, 4u);
  EXPECT_TRUE(VerifyFile(src).empty());
  // The extents tile the file, the optional sections named after their ids, in file order.
  auto ext = v->Extents();
  std::vector<std::string> names;
  uint64_t at = 0;
  for (const auto& e : ext) {
    names.push_back(e.name);
    EXPECT_EQ(e.offset, at) << e.name;
    at += e.size;
  }
  EXPECT_EQ(at, bytes.size());
  EXPECT_EQ(names, (std::vector<std::string>{"header", "data", "index", "meta", "blocks", "restart", "optional-77", "footer"}));
  // Every byte of the unknown section and of its padding is checked, and named after the section.
  const auto& unk = ext[6];
  for (uint64_t off : {unk.offset, unk.offset + 5, unk.offset + unk.size - 1}) {
    auto b = bytes;
    b[off] ^= 0x40;
    MemorySource bad("f.beton", b.data(), b.size());
    auto problems = VerifyFile(bad);
    ASSERT_FALSE(problems.empty()) << off;
    EXPECT_EQ(problems[0].section, "optional-77") << Describe(problems[0]);
    try {
      FileView::Open(&bad);
      ADD_FAILURE() << "open accepted a flip at " << off;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("f.beton: optional-77: "), std::string::npos) << e.what();
    }
  }
  // Every bit of the table (checksum, count, zero word, both entries) and of the zero tail after it.
  for (uint64_t off = kOptionalTableAt; off < kOptionalEntriesAt + 2 * kOptionalEntrySize + 8; ++off)
    for (int bit = 0; bit < 8; ++bit) {
      auto b = bytes;
      b[off] ^= uint8_t(1 << bit);
      MemorySource bad("f.beton", b.data(), b.size());
      auto problems = VerifyFile(bad);
      ASSERT_FALSE(problems.empty()) << off << " bit " << bit;
      ASSERT_EQ(problems[0].section, "header") << off << ": " << Describe(problems[0]);
      EXPECT_THROW(FileView::Open(&bad), Error);
    }
}

// Fix-ups that keep every checksum right, so that only the rule under test is broken.
std::string OpenErrorOf(std::vector<uint8_t> b, const std::function<void(Header*)>& edit) {
  Header h = DecodeHeader(b.data());
  edit(&h);
  uint64_t c = EncodeHeader(h, b.data());
  uint8_t* foot = b.data() + b.size() - kFooterSize;
  Footer f = DecodeFooter(foot);
  f.header_checksum = c;
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

TEST(OptionalSections, TableRulesAreEnforced) {
  const auto bytes = FileWithOptionalSections();
  EXPECT_EQ(OpenErrorOf(bytes, [](Header*) {}), "");
  EXPECT_NE(OpenErrorOf(bytes, [](Header* h) { h->version_minor = 0; }).find("optional sections in a version 1.0 file"), std::string::npos);
  EXPECT_NE(OpenErrorOf(bytes, [](Header* h) { std::swap(h->optional[0].id, h->optional[1].id); }).find("out of order"), std::string::npos);
  EXPECT_NE(OpenErrorOf(bytes, [](Header* h) { h->optional[1].offset += 1; }).find("optional-77 section out of bounds"), std::string::npos);
  // Each message says which placement rule is broken.
  EXPECT_NE(OpenErrorOf(bytes, [](Header* h) { h->optional[1].offset += 8; }).find("): not page-aligned"), std::string::npos);
  EXPECT_NE(OpenErrorOf(bytes, [](Header* h) { h->optional[1].offset = h->optional[0].offset; }).find("overlaps the section before it"),
            std::string::npos);
  EXPECT_NE(OpenErrorOf(bytes, [](Header* h) { h->optional[1].size = 1ull << 40; }).find("out of bounds"), std::string::npos);
  EXPECT_NE(OpenErrorOf(bytes, [](Header* h) { h->optional[1].size = 1ull << 40; }).find("runs into the footer"), std::string::npos);
  // A higher minor version with the same sections is still readable (additions only).
  EXPECT_EQ(OpenErrorOf(bytes, [](Header* h) { h->version_minor = 7; }), "");
  // The restart section's content is decoded: a checksum-valid but inconsistent one is refused.
  auto b = FileWithOptionalSections();
  MemorySource src("f.beton", b.data(), b.size());
  const OptionalRef r = FileView::Open(&src)->header().optional[0];
  b[r.offset + 16] = 9;  // images no longer matches the interval list
  const std::string err = OpenErrorOf(b, [&](Header* h) { h->optional[0].checksum = Checksum(b.data() + r.offset, r.size); });
  EXPECT_NE(err.find("restart: image counts disagree"), std::string::npos) << err;
}

TEST(Checksum, IsXxh3Seed0) {
  // Known answer for the empty input, from xxHash's own test vectors.
  EXPECT_EQ(Checksum("", 0), 0x2D06800538D394C2ull);
}

TEST(Checksum, EveryBuildAndPiecewiseEqualTheSystemLibrary) {
  // The reference: libxxhash as Debian built it. Sizes cover XXH3's short, mid and long paths, its
  // stripe and block edges, and a 4 MiB block plus change; pieces split at random points.
  std::vector<uint8_t> bytes((4u << 20) + 7);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (uint8_t& b : bytes) b = uint8_t((x = x * 6364136223846793005ull + 1442695040888963407ull) >> 56);
  std::vector<size_t> sizes;
  for (size_t n = 0; n <= 260; ++n) sizes.push_back(n);
  for (size_t n : {1023u, 1024u, 1025u, 16383u, 16384u, 16385u, 65536u + 3u, 1u << 20}) sizes.push_back(n);
  sizes.push_back(bytes.size());
  std::vector<const checksum_impl::Functions*> builds{&checksum_impl::Baseline()};
  if (checksum_impl::Avx2() && __builtin_cpu_supports("avx2")) builds.push_back(checksum_impl::Avx2());
  ChecksumStream stream;
  for (size_t n : sizes) {
    const uint8_t* p = bytes.data() + (n % 13);  // unaligned starts too
    if (p + n > bytes.data() + bytes.size()) p = bytes.data();
    const uint64_t want = ::XXH3_64bits(p, n);
    EXPECT_EQ(Checksum(p, n), want) << n << " bytes";
    for (const auto* f : builds) {
      EXPECT_EQ(f->hash(p, n), want) << n << " bytes";
      void* st = f->create();
      f->reset(st);
      for (size_t at = 0; at < n;) {
        const size_t k = std::min<size_t>(n - at, 1 + (x = x * 6364136223846793005ull + 1) % 70000);
        f->update(st, p + at, k);
        at += k;
      }
      EXPECT_EQ(f->digest(st), want) << n << " bytes in pieces";
      f->destroy(st);
    }
    stream.Reset();
    for (size_t at = 0; at < n; at += std::min<size_t>(n - at, 4099)) stream.Update(p + at, std::min<size_t>(n - at, 4099));
    EXPECT_EQ(stream.Digest(), want) << n << " bytes through ChecksumStream";
  }
}

}  // namespace
}  // namespace dsc::test
