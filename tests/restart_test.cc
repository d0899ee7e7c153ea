// Restart-indexed JPEG payloads (docs/format.md): lossless transcoding of every real photo and CIFAR
// image, re-encodes with restart intervals, the interval rule, determinism and the option.
// The JPEG parsing here is the test's own (markers read byte by byte), independent of kernels/.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "format/error.h"
#include "format/file_view.h"
#include "kernels/jpeg_codec.h"
#include "kernels/jpeg_transcode.h"
#include "reader/dataset.h"
#include "tests/test_util.h"
#include "writer/build.h"

namespace dsc::test {
namespace {

namespace fs = std::filesystem;

// What a JPEG's markers say, read independently of the code under test.
struct Parsed {
  bool ok = false;
  int sof = -1;  // 0xC0.. marker
  int width = 0, height = 0, components = 0, max_h = 1, max_v = 1;
  int dri = 0;
  std::vector<int> appn;  // APPn / COM markers seen
  int rst = 0;            // RST markers in the entropy-coded data
};

Parsed Parse(const std::vector<uint8_t>& b) {
  Parsed p;
  size_t i = 2;
  if (b.size() < 4 || b[0] != 0xFF || b[1] != 0xD8) return p;
  while (i + 4 <= b.size()) {
    if (b[i] != 0xFF) return p;
    const int m = b[i + 1];
    if (m == 0xFF) { ++i; continue; }
    const size_t len = size_t(b[i + 2]) << 8 | b[i + 3];
    const uint8_t* s = &b[i + 4];
    if ((m >= 0xC0 && m <= 0xC3) || (m >= 0xC9 && m <= 0xCB)) {
      p.sof = m;
      p.height = s[1] << 8 | s[2];
      p.width = s[3] << 8 | s[4];
      p.components = s[5];
      for (int c = 0; c < p.components; ++c) {
        p.max_h = std::max(p.max_h, s[7 + 3 * c] >> 4);
        p.max_v = std::max(p.max_v, s[7 + 3 * c] & 15);
      }
    } else if (m == 0xDD) {
      p.dri = s[0] << 8 | s[1];
    } else if ((m >= 0xE0 && m <= 0xEF) || m == 0xFE) {
      p.appn.push_back(m);
    }
    i += 2 + len;
    if (m == 0xDA) {  // entropy-coded data up to EOI (a progressive file has more scans: not counted)
      for (; i + 1 < b.size(); ++i)
        if (b[i] == 0xFF && b[i + 1] >= 0xD0 && b[i + 1] <= 0xD7) ++p.rst;
      p.ok = true;
      return p;
    }
  }
  return p;
}

// All 500 real ImageNet photos, unpacked once into the build tree.
std::string AllPhotos() {
  const std::string tree = PhotosTree(DSC_PHOTOS);
  EXPECT_FALSE(tree.empty()) << "could not unpack " << DSC_PHOTOS;
  return tree;
}

// The first `n` photos (by class folder) as a tree of symlinks.
std::string PhotoSubset(size_t n) {
  const std::string all = AllPhotos();
  std::vector<fs::path> classes;
  for (const auto& c : fs::directory_iterator(all)) classes.push_back(c.path());
  std::sort(classes.begin(), classes.end());
  const std::string dir = ScratchDir("-subset" + std::to_string(n));
  for (size_t i = 0; i < std::min(n, classes.size()); ++i) {
    fs::create_directory(fs::path(dir) / classes[i].filename());
    for (const auto& f : fs::directory_iterator(classes[i]))
      fs::create_symlink(f.path(), fs::path(dir) / classes[i].filename() / f.path().filename());
  }
  return dir;
}

std::vector<std::string> Files(const std::string& root) {
  std::vector<std::string> out;
  for (const auto& f : fs::recursive_directory_iterator(root))
    if (!f.is_directory()) out.push_back(f.path().string());
  std::sort(out.begin(), out.end());  // class folder, then name: the writer's order here (one file per class or all in one)
  return out;
}

writer::BuildOptions Opts(const std::string& restart = "auto", int threads = 2) {
  writer::BuildOptions o;
  o.encode.restart_interval = restart;
  o.threads = threads;
  o.jpeg_tables = "inline";  // a payload is a whole JPEG
  o.log = [](const std::string&) {};
  return o;
}

// The payload as the reader hands it over: a whole JPEG (a shared table set is put back in front).
std::vector<uint8_t> WholeJpeg(const Dataset& ds, uint64_t i) {
  std::vector<uint8_t> scratch;
  dsc::Payload p = ds.ReadPayload(i, &scratch);
  return std::vector<uint8_t>(p.data, p.data + p.size);
}

int McusPerRow(const Parsed& p) {
  const int mw = p.components == 1 ? 8 : 8 * p.max_h;
  return (p.width + mw - 1) / mw;
}
int McuRows(const Parsed& p) {
  const int mh = p.components == 1 ? 8 : 8 * p.max_v;
  return (p.height + mh - 1) / mh;
}

// Every photo: transcoded losslessly (TurboJPEG decodes source and payload to the same pixels), the
// interval tiles each MCU row, the markers are where the interval says, and the restart section's
// counts are what the payloads show.
TEST(Restart, EveryPhotoIsTranscodedLosslessly) {
  const std::string root = AllPhotos();
  const auto files = Files(root);
  ASSERT_EQ(files.size(), 500u);
  const std::string out = ScratchDir() + "/photos.beton";
  writer::Build(root, out, Opts());
  Dataset ds(out, {.verify = true});
  ASSERT_EQ(ds.size(), files.size());
  size_t with = 0, whole_row = 0, small = 0, progressive = 0, differ = 0, differ_progressive = 0, cmyk = 0, cmyk_restart = 0;
  uint64_t src_bytes = 0, out_bytes = 0;
  for (uint64_t i = 0; i < ds.size(); ++i) {
    const auto src = ReadFile(files[i]);
    const auto pay = WholeJpeg(ds, i);
    const Parsed s = Parse(src), p = Parse(pay);
    ASSERT_TRUE(s.ok && p.ok) << files[i];
    src_bytes += src.size();
    out_bytes += pay.size();
    if (s.components == 4) {  // CMYK is re-encoded, as before (with restart markers when large)
      ++cmyk;
      cmyk_restart += p.dri > 0;
      continue;
    }
    const bool prog = s.sof == 0xC2;
    progressive += prog;
    const int per_row = McusPerRow(s), rows = McuRows(s);
    if (int64_t(per_row) * rows <= 64) {
      ++small;
      ASSERT_EQ(pay, src) << files[i] << ": small images stay as they are";
      continue;
    }
    ++with;
    ASSERT_TRUE(p.sof == 0xC0 || p.sof == 0xC1) << files[i] << ": payload is baseline";
    ASSERT_GT(p.dri, 0) << files[i];
    ASSERT_TRUE(per_row % p.dri == 0) << files[i] << ": interval " << p.dri << " spans rows of " << per_row;
    ASSERT_TRUE(p.dri > 1 || per_row == 1) << files[i];
    if (p.dri == per_row) ++whole_row;
    EXPECT_EQ(p.rst, (per_row * rows + p.dri - 1) / p.dri - 1) << files[i];
    for (int m : p.appn) EXPECT_TRUE(m == 0xE0 || m == 0xEE) << files[i] << ": marker " << std::hex << m << " copied";
    EXPECT_EQ(p.width, s.width);
    EXPECT_EQ(p.height, s.height);
    const auto a = ReferenceDecode(src), b = ReferenceDecode(pay);
    ASSERT_FALSE(a.empty());
    if (a != b) {
      ++differ;
      differ_progressive += prog;
    }
  }
  std::printf("[photos] %zu with restart markers (%zu whole-row), %zu small left as they are, %zu CMYK re-encoded; "
              "%zu progressive sources; %zu decode differently (%zu of them progressive); payload bytes %.4fx the sources\n",
              with, whole_row, small, cmyk, progressive, differ, differ_progressive, double(out_bytes) / double(src_bytes));
  EXPECT_EQ(differ, differ_progressive) << "a baseline source decoded differently after transcoding";
  EXPECT_GT(with, 400u);
  ASSERT_TRUE(ds.view().restart().has_value());
  const auto& r = *ds.view().restart();
  EXPECT_EQ(r.images, with + cmyk_restart);
  EXPECT_EQ(r.reencoded, cmyk_restart);
  EXPECT_EQ(r.whole_row, whole_row);
  EXPECT_EQ(r.transcoded, with);
  EXPECT_EQ(r.untouched, small);
  EXPECT_EQ(ds.view().header().version_minor, 1);
}

// CIFAR-10's 32x32 images (4 MCUs at 4:2:0) are far below the threshold: every one is stored byte for
// byte and a build of them stays a 1.0 file without optional sections.
TEST(Restart, EveryCifarImageIsStoredByteForByte) {
  const std::string dir = ScratchDir();
  for (const char* split : {"train", "test"}) {
    auto o = Opts();
    o.split = split;
    o.jpeg_tables = "shared";
    const std::string out = dir + "/" + split + ".beton";
    writer::Build(CifarJpegRoot(), out, o);
    const auto files = Files(CifarJpegRoot() + "/" + split);
    Dataset ds(out);
    ASSERT_EQ(ds.size(), files.size());
    for (uint64_t i = 0; i < ds.size(); ++i) {
      const auto a = WholeJpeg(ds, i), b = ReadFile(files[i]);
      ASSERT_TRUE(a == b) << files[i] << ": " << a.size() << " vs " << b.size() << " bytes";
    }
    EXPECT_FALSE(ds.view().restart().has_value());
    EXPECT_EQ(ds.view().header().version_minor, 0);
    EXPECT_EQ(ds.view().header().optional_count, 0u);
  }
}

// The re-encoder: with no interval it writes tjCompress2's exact bytes; with one, the same pixels.
TEST(Restart, ReencodeMatchesTurboJpeg) {
  const auto files = Files(PhotoSubset(12));
  kernels::JpegCodec tj;
  kernels::JpegRestartWriter w;
  kernels::RestartPolicy none;
  none.min_mcus = INT_MAX;
  int checked = 0;
  for (const auto& f : files) {
    int width, height;
    const auto rgb = ReferenceDecode(ReadFile(f), &width, &height);
    ASSERT_FALSE(rgb.empty()) << f;
    std::vector<uint8_t> gray(size_t(width) * height);
    for (size_t i = 0; i < gray.size(); ++i) gray[i] = rgb[i * 3 + 1];
    for (int samp : {0, 1, 2, 3}) {  // TJSAMP_444, 422, 420, GRAY
      const int channels = samp == 3 ? 1 : 3;
      const uint8_t* px = channels == 1 ? gray.data() : rgb.data();
      std::vector<uint8_t> ref, plain, restart;
      ASSERT_TRUE(tj.Encode(px, width, height, channels, 90, samp, &ref));
      kernels::RestartResult r;
      // A transcode first (optimised Huffman tables) must leave nothing behind for the next encode.
      const auto src = ReadFile(f);
      ASSERT_TRUE(w.Transcode(src.data(), src.size(), kernels::RestartPolicy(), &plain, &r)) << w.error();
      ASSERT_TRUE(w.Encode(px, width, height, channels, 90, samp, none, &plain, &r)) << w.error();
      EXPECT_EQ(r.interval, 0);
      ASSERT_EQ(plain, ref) << f << " subsampling " << samp;
      ASSERT_TRUE(w.Encode(px, width, height, channels, 90, samp, kernels::RestartPolicy(), &restart, &r)) << w.error();
      const Parsed p = Parse(restart);
      ASSERT_GT(p.dri, 0);
      EXPECT_EQ(p.dri, r.interval);
      EXPECT_EQ(McusPerRow(p) % p.dri, 0);
      ASSERT_EQ(ReferenceDecode(restart), ReferenceDecode(ref)) << f << " subsampling " << samp;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 48);
}

// Through the writer: --max-resolution re-encodes get restart intervals, decode to the pixels the
// re-encode without them gives, and identical headers are still shared.
TEST(Restart, ReencodedPayloadsKeepPixelsAndSharedTables) {
  const std::string root = PhotoSubset(24), dir = ScratchDir();
  std::vector<std::unique_ptr<Dataset>> ds;
  for (const char* mode : {"auto", "none"}) {
    auto o = Opts(mode);
    o.encode.max_resolution = 256;
    o.jpeg_tables = "shared";
    writer::Build(root, dir + "/" + mode + ".beton", o);
    ds.push_back(std::make_unique<Dataset>(dir + "/" + mode + ".beton"));
  }
  ASSERT_EQ(ds[0]->size(), ds[1]->size());
  size_t reencoded = 0;
  for (uint64_t i = 0; i < ds[0]->size(); ++i) {
    const auto a = WholeJpeg(*ds[0], i), b = WholeJpeg(*ds[1], i);
    if (Parse(a).dri) ++reencoded;
    const auto pa = ReferenceDecode(a);
    ASSERT_FALSE(pa.empty()) << "sample " << i;
    ASSERT_EQ(pa, ReferenceDecode(b)) << "sample " << i;
  }
  ASSERT_TRUE(ds[0]->view().restart().has_value());
  EXPECT_EQ(ds[0]->view().restart()->reencoded, reencoded);
  EXPECT_GT(reencoded, 20u);
  EXPECT_EQ(ds[0]->meta().jpeg_tables.size(), ds[1]->meta().jpeg_tables.size());
  EXPECT_LT(ds[0]->meta().jpeg_tables.size(), ds[0]->size());  // some sizes repeat: shared
}

// Transcoded photos have optimised Huffman tables: no two headers are alike, and sharing them put
// every header in meta (207 KB for 500 photos, loaded by every reader). Shared only when repeated.
TEST(Restart, HeadersThatNeverRepeatStayInTheirPayloads) {
  const std::string root = PhotoSubset(40), dir = ScratchDir();
  auto o = Opts("auto");
  o.jpeg_tables = "shared";
  writer::Build(root, dir + "/p.beton", o);
  Dataset ds(dir + "/p.beton", {.verify = true});
  ASSERT_GT(ds.size(), 30u);
  EXPECT_EQ(ds.meta().jpeg_tables.size(), 0u);
  for (uint64_t i = 0; i < ds.size(); ++i) ASSERT_EQ(ds.entry(i).jpeg_table, 0) << "sample " << i;
}

TEST(Restart, SameBytesForAnyThreadCount) {
  const std::string root = PhotoSubset(30), dir = ScratchDir();
  std::vector<std::vector<uint8_t>> outs;
  for (int threads : {1, 2, 3}) {
    auto o = Opts("auto", threads);
    o.encode.max_resolution = 400;  // the larger photos re-encoded, the others transcoded
    o.jpeg_tables = "shared";
    o.block_size = 65536;
    writer::Build(root, dir + "/t.beton", o);
    outs.push_back(ReadFile(dir + "/t.beton"));
  }
  format::MemorySource src("t.beton", outs[0].data(), outs[0].size());
  auto v = format::FileView::Open(&src);
  ASSERT_TRUE(v->restart().has_value());
  EXPECT_GT(v->restart()->transcoded, 0u);
  EXPECT_GT(v->restart()->reencoded, 0u);
  EXPECT_EQ(outs[1], outs[0]);
  EXPECT_EQ(outs[2], outs[0]);
}

TEST(Restart, OptionNoneAndFixedAndInvalid) {
  const std::string root = PhotoSubset(6), dir = ScratchDir();
  const auto files = Files(root);
  writer::Build(root, dir + "/none.beton", Opts("none"));
  Dataset none(dir + "/none.beton");
  for (uint64_t i = 0; i < none.size(); ++i) ASSERT_EQ(WholeJpeg(none, i), ReadFile(files[i]));
  EXPECT_FALSE(none.view().restart().has_value());
  EXPECT_NE(none.meta().build_options.find("restart_interval=none\n"), std::string::npos);
  writer::Build(root, dir + "/n5.beton", Opts("5"));
  Dataset n5(dir + "/n5.beton");
  for (uint64_t i = 0; i < n5.size(); ++i) {
    ASSERT_EQ(Parse(WholeJpeg(n5, i)).dri, 5);
    const auto px = ReferenceDecode(WholeJpeg(n5, i));
    ASSERT_FALSE(px.empty());
    ASSERT_EQ(px, ReferenceDecode(ReadFile(files[i])));
  }
  ASSERT_TRUE(n5.view().restart().has_value());
  EXPECT_EQ(n5.view().restart()->mode, format::RestartStats::kFixed);
  EXPECT_EQ(n5.view().restart()->target, 5u);
  for (const char* bad : {"0", "-3", "65536", "abc", "4x", ""}) {
    try {
      writer::Build(root, dir + "/bad.beton", Opts(bad));
      ADD_FAILURE() << "accepted --restart-interval '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--restart-interval"), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(fs::exists(dir + "/bad.beton"));
  // dsc info reports the section; verify names it when damaged.
  std::string text;
  ASSERT_EQ(RunDsc("info '" + dir + "/n5.beton' --json", &text), 0) << text;
  EXPECT_NE(text.find("\"restart\": {\"mode\": \"fixed\", \"target_mcus\": 5"), std::string::npos) << text;
  EXPECT_NE(text.find("{\"name\": \"restart\""), std::string::npos) << text;
  auto bytes = ReadFile(dir + "/n5.beton");
  format::MemorySource src("n5.beton", bytes.data(), bytes.size());
  const auto r = format::FileView::Open(&src)->header().optional.at(0);
  bytes[r.offset + 20] ^= 1;
  WriteFile(dir + "/damaged.beton", bytes);
  ASSERT_EQ(RunDsc("verify '" + dir + "/damaged.beton'", &text), 1) << text;
  EXPECT_NE(text.find("restart: restart checksum mismatch"), std::string::npos) << text;
}

// A damaged photo on the transcode path (which skips the pixel decode) is still refused, naming the file,
// and no output is left behind.
TEST(Restart, CorruptPhotoOnTheTranscodePathIsAnError) {
  const auto files = Files(PhotoSubset(1));
  const std::string dir = ScratchDir();
  auto bytes = ReadFile(files[0]);
  for (const bool truncate : {true, false}) {
    auto bad = bytes;
    if (truncate) bad.resize(bad.size() / 2);
    else std::fill(bad.begin() + long(bad.size() / 2), bad.begin() + long(bad.size() / 2) + 64, uint8_t(0xFF));
    fs::create_directories(dir + "/src/c");
    WriteFile(dir + "/src/c/bad.jpg", bad);
    try {
      writer::Build(dir + "/src", dir + "/out.beton", Opts());
      ADD_FAILURE() << "accepted a " << (truncate ? "truncated" : "damaged") << " JPEG";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("bad.jpg: corrupt JPEG"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(dir + "/out.beton"));
  }
}

// A payload's RST markers are found by scanning; the count is what the interval implies.
TEST(Restart, ScanFindsEveryMarker) {
  const auto files = Files(PhotoSubset(10));
  kernels::JpegRestartWriter w;
  for (const auto& f : files) {
    const auto src = ReadFile(f);
    std::vector<uint8_t> out;
    kernels::RestartResult r;
    ASSERT_TRUE(w.Transcode(src.data(), src.size(), kernels::RestartPolicy(), &out, &r)) << w.error();
    if (r.interval == 0) continue;
    std::vector<uint32_t> at;
    const size_t n = kernels::ScanRestartMarkers(out.data(), out.size(), &at);
    EXPECT_EQ(int(n), Parse(out).rst) << f;
    ASSERT_EQ(at.size(), n);
    for (size_t k = 0; k < at.size(); ++k) ASSERT_EQ(out[at[k] + 1], 0xD0 + k % 8) << f << " marker " << k;
  }
}

}  // namespace
}  // namespace dsc::test
