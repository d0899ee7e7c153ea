// Every source layout and encoding round-trips through a built file; builds are deterministic and
// atomic; bad sources give errors naming the file.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <png.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "format/error.h"
#include "format/layout.h"
#include "kernels/jpeg_codec.h"
#include "reader/dataset.h"
#include "reader/decode_rgb.h"
#include "tests/cifar_fixtures.h"
#include "tests/test_util.h"
#include "writer/build.h"
#include "writer/source.h"

namespace dsc::test {
namespace {

namespace fs = std::filesystem;
using format::Encoding;

writer::BuildOptions Opts(const std::string& encoding = "default", int threads = 2) {
  writer::BuildOptions o;
  o.encode.encoding = encoding;
  o.threads = threads;
  o.log = [](const std::string&) {};
  return o;
}

std::vector<uint8_t> Pixels(const Dataset& ds, uint64_t i) {
  kernels::JpegCodec codec;
  std::vector<uint8_t> scratch, rgb;
  DecodeSampleRGB(ds, i, &codec, &scratch, &rgb);
  return rgb;
}

std::vector<uint8_t> PayloadBytes(const Dataset& ds, uint64_t i) {
  std::vector<uint8_t> scratch;
  Payload p = ds.ReadPayload(i, &scratch);
  return std::vector<uint8_t>(p.data, p.data + p.size);
}

// Sorted image files of a tree, in the order the writer must store them.
std::vector<std::pair<std::string, int>> TreeFiles(const std::string& root) {
  std::vector<std::string> classes;
  for (const auto& c : fs::directory_iterator(root)) classes.push_back(c.path().filename().string());
  std::sort(classes.begin(), classes.end());
  std::vector<std::pair<std::string, int>> out;
  for (size_t c = 0; c < classes.size(); ++c) {
    std::vector<std::string> files;
    for (const auto& f : fs::directory_iterator(fs::path(root) / classes[c])) files.push_back(f.path().string());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) out.emplace_back(f, int(c));
  }
  return out;
}

void ExpectCifarRoundTrip(const std::string& file, const CifarSet& set, bool hundred) {
  Dataset ds(file, {.verify = true});
  ASSERT_EQ(ds.size(), set.size());
  ASSERT_EQ(ds.meta().fields.size(), hundred ? 3u : 2u);
  EXPECT_EQ(ds.meta().fields[1].name, hundred ? "fine_label" : "label");
  if (hundred) {
    EXPECT_EQ(ds.meta().fields[2].name, "coarse_label");
    EXPECT_EQ(ds.meta().fields[1].classes.size(), 100u);
    EXPECT_EQ(ds.meta().fields[2].classes.size(), 20u);
  } else {
    EXPECT_EQ(ds.meta().fields[1].classes, writer::Cifar10ClassNames());
  }
  for (uint64_t i = 0; i < ds.size(); ++i) {
    auto e = ds.entry(i);
    ASSERT_EQ(e.encoding, uint8_t(Encoding::kRaw));
    ASSERT_EQ(Pixels(ds, i), set.hwc[i]) << "sample " << i;
    ASSERT_EQ(e.label[0], set.fine[i]) << "sample " << i;
    if (hundred) {
      ASSERT_EQ(e.label[1], set.coarse[i]) << "sample " << i;
    }
  }
}

TEST(CifarBinary, Cifar10BothSplitsRoundTripExactly) {
  auto train = LoadCifar(250, "train"), test = LoadCifar(60, "test");
  auto dir = ScratchDir();
  auto src = WriteCifar10Binary(dir, train, 5, test);
  writer::Build(src, dir + "/train.beton", Opts());
  ExpectCifarRoundTrip(dir + "/train.beton", train, false);
  auto o = Opts();
  o.split = "test";
  writer::Build(dir, dir + "/test.beton", o);  // the parent folder of the download is accepted too
  ExpectCifarRoundTrip(dir + "/test.beton", test, false);
}

TEST(CifarBinary, EveryEncodingRoundTrips) {
  auto train = LoadCifar(60, "train"), test = LoadCifar(10, "test");
  auto dir = ScratchDir();
  auto src = WriteCifar10Binary(dir, train, 2, test);
  for (const char* enc : {"raw", "raw-zstd", "jpeg", "auto"}) {
    SCOPED_TRACE(enc);
    auto o = Opts(enc);
    o.encode.quality = 95;
    o.encode.subsampling = "444";
    writer::Build(src, dir + "/" + enc + ".beton", o);
    Dataset ds(dir + "/" + enc + ".beton", {.verify = true});
    ASSERT_EQ(ds.size(), train.size());
    double worst = 99;
    for (uint64_t i = 0; i < ds.size(); ++i) {
      ASSERT_EQ(ds.entry(i).label[0], train.fine[i]);
      const auto px = Pixels(ds, i);
      if (ds.entry(i).encoding == uint8_t(Encoding::kJpeg)) {
        worst = std::min(worst, Psnr(px, train.hwc[i]));
      } else {
        ASSERT_EQ(px, train.hwc[i]) << "sample " << i;
      }
    }
    EXPECT_GT(worst, 33.0) << "worst PSNR of a q95 4:4:4 encode of CIFAR pixels";
  }
}

TEST(CifarBinary, Cifar100KeepsFineAndCoarseLabels) {
  auto train = LoadCifar(300, "train", true), test = LoadCifar(40, "test", true);
  auto dir = ScratchDir();
  auto src = WriteCifar100Binary(dir, train, test);
  writer::Build(src, dir + "/train.beton", Opts());
  ExpectCifarRoundTrip(dir + "/train.beton", train, true);
}

TEST(CifarBinary, TruncatedBatchIsAnErrorNamingTheFile) {
  auto train = LoadCifar(20, "train"), test = LoadCifar(10, "test");
  auto dir = ScratchDir();
  auto src = WriteCifar10Binary(dir, train, 2, test);
  fs::resize_file(src + "/data_batch_2.bin", 3073 * 3 + 100);
  try {
    writer::Build(src, dir + "/out.beton", Opts());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data_batch_2.bin"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir + "/out.beton"));
}

TEST(CifarPython, Python2PicklesRoundTrip) {
  auto train = LoadCifar(250, "train"), test = LoadCifar(30, "test");
  auto dir = ScratchDir();
  auto src = WriteCifar10PythonPy2(dir, train, 5, test);
  writer::Build(src, dir + "/train.beton", Opts());
  ExpectCifarRoundTrip(dir + "/train.beton", train, false);
  auto train100 = LoadCifar(120, "train", true), test100 = LoadCifar(20, "test", true);
  auto src100 = WriteCifar100PythonPy2(dir, train100, test100);
  auto o = Opts();
  o.split = "test";
  writer::Build(src100, dir + "/test100.beton", o);
  ExpectCifarRoundTrip(dir + "/test100.beton", test100, true);
}

TEST(CifarPython, Python3PicklesAllProtocolsRoundTrip) {
  auto train = LoadCifar(120, "train"), test = LoadCifar(20, "test");
  auto train100 = LoadCifar(60, "train", true), test100 = LoadCifar(20, "test", true);
  for (int protocol = 2; protocol <= 5; ++protocol) {
    for (bool bytes_keys : {false, true}) {
      SCOPED_TRACE("protocol " + std::to_string(protocol) + (bytes_keys ? " bytes keys" : " str keys"));
      auto dir = ScratchDir("-p" + std::to_string(protocol) + (bytes_keys ? "b" : "s"));
      auto src = WriteCifarPythonPy3(dir + "/c10", train, 3, test, protocol, false, bytes_keys);
      if (src.empty()) GTEST_SKIP() << "/usr/bin/python3 with numpy is not installed";
      writer::Build(src, dir + "/train.beton", Opts());
      ExpectCifarRoundTrip(dir + "/train.beton", train, false);
      auto src100 = WriteCifarPythonPy3(dir + "/c100", train100, 1, test100, protocol, true, bytes_keys);
      writer::Build(src100, dir + "/train100.beton", Opts());
      ExpectCifarRoundTrip(dir + "/train100.beton", train100, true);
    }
  }
}

TEST(CifarPython, BinaryAndPythonVersionsStoreIdenticalPayloads) {
  auto train = LoadCifar(100, "train"), test = LoadCifar(10, "test");
  auto dir = ScratchDir();
  writer::Build(WriteCifar10Binary(dir, train, 5, test), dir + "/a.beton", Opts());
  writer::Build(WriteCifar10PythonPy2(dir, train, 5, test), dir + "/b.beton", Opts());
  Dataset a(dir + "/a.beton"), b(dir + "/b.beton");
  ASSERT_EQ(a.size(), b.size());
  for (uint64_t i = 0; i < a.size(); ++i) ASSERT_EQ(PayloadBytes(a, i), PayloadBytes(b, i));
}

TEST(CifarPython, CorruptPickleIsAnErrorNamingFileAndByte) {
  auto train = LoadCifar(20, "train"), test = LoadCifar(10, "test");
  auto dir = ScratchDir();
  auto src = WriteCifar10PythonPy2(dir, train, 1, test);
  auto bytes = ReadFile(src + "/data_batch_1");
  bytes.resize(bytes.size() / 2);
  WriteFile(src + "/data_batch_1", bytes);
  try {
    writer::Build(src, dir + "/out.beton", Opts());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("data_batch_1"), std::string::npos) << m;
    EXPECT_NE(m.find("at byte"), std::string::npos) << m;
  }
  EXPECT_FALSE(fs::exists(dir + "/out.beton"));
}

TEST(ImageTree, PassThroughStoresTheExactSourceBytes) {
  auto root = SubsetTree(30);
  auto dir = ScratchDir();
  auto rep = writer::Build(root, dir + "/shared.beton", Opts());
  auto o = Opts();
  o.jpeg_tables = "inline";
  writer::Build(root, dir + "/inline.beton", o);
  auto files = TreeFiles(root);
  Dataset shared(dir + "/shared.beton", {.verify = true}), inl(dir + "/inline.beton", {.verify = true});
  ASSERT_EQ(shared.size(), files.size());
  EXPECT_EQ(shared.meta().fields[1].classes, writer::Cifar10ClassNames());
  EXPECT_EQ(shared.meta().jpeg_tables.size(), 1u);  // every real CIFAR JPEG has the same 623-byte header
  for (uint64_t i = 0; i < shared.size(); ++i) {
    auto src = ReadFile(files[i].first);
    ASSERT_EQ(PayloadBytes(shared, i), src) << files[i].first;
    ASSERT_EQ(PayloadBytes(inl, i), src) << files[i].first;
    ASSERT_EQ(shared.entry(i).label[0], files[i].second);
    ASSERT_EQ(shared.entry(i).jpeg_table, 1);
    ASSERT_EQ(inl.entry(i).jpeg_table, 0);
    ASSERT_EQ(Pixels(shared, i), ReferenceDecode(src));
  }
  EXPECT_LT(fs::file_size(dir + "/shared.beton"), fs::file_size(dir + "/inline.beton"));
  EXPECT_EQ(rep.encodings["jpeg"], files.size());
}

TEST(ImageTree, RawAndZstdStoreTheDecodedPixels) {
  auto root = SubsetTree(12);
  auto dir = ScratchDir();
  auto files = TreeFiles(root);
  for (const char* enc : {"raw", "raw-zstd"}) {
    std::string out = dir + "/" + enc + ".beton";
    writer::Build(root, out, Opts(enc));
    Dataset ds(out, {.verify = true});
    for (uint64_t i = 0; i < ds.size(); ++i) {
      ASSERT_EQ(ds.entry(i).encoding, uint8_t(std::string(enc) == "raw" ? Encoding::kRaw : Encoding::kRawZstd));
      ASSERT_EQ(Pixels(ds, i), ReferenceDecode(ReadFile(files[i].first))) << enc << " sample " << i;
    }
  }
}

TEST(ImageTree, ReencodeKeepsQualityAboveBound) {
  auto root = SubsetTree(10);
  auto dir = ScratchDir();
  auto o = Opts("jpeg");
  o.encode.reencode = true;
  o.encode.quality = 90;
  o.encode.subsampling = "444";
  writer::Build(root, dir + "/q90.beton", o);
  Dataset ds(dir + "/q90.beton");
  auto files = TreeFiles(root);
  double worst = 99;
  for (uint64_t i = 0; i < ds.size(); ++i) {
    auto ref = ReferenceDecode(ReadFile(files[i].first));
    worst = std::min(worst, Psnr(Pixels(ds, i), ref));
    ASSERT_NE(PayloadBytes(ds, i), ReadFile(files[i].first));  // really re-encoded
  }
  EXPECT_GT(worst, 30.0) << "worst PSNR of a q90 4:4:4 re-encode";
}

// Independent area-average reference: exact for integer factors.
std::vector<uint8_t> Downscale2x(const std::vector<uint8_t>& src, int w, int h) {
  std::vector<uint8_t> out(size_t(w / 2) * (h / 2) * 3);
  for (int y = 0; y < h / 2; ++y)
    for (int x = 0; x < w / 2; ++x)
      for (int c = 0; c < 3; ++c) {
        int s = 0;
        for (int dy = 0; dy < 2; ++dy)
          for (int dx = 0; dx < 2; ++dx) s += src[(size_t(2 * y + dy) * w + 2 * x + dx) * 3 + c];
        out[(size_t(y) * (w / 2) + x) * 3 + c] = uint8_t((s + 2) / 4);
      }
  return out;
}

TEST(ImageTree, MaxResolutionAndCenterCrop) {
  auto root = SubsetTree(3);
  auto dir = ScratchDir();
  auto files = TreeFiles(root);
  auto o = Opts("raw");
  o.encode.max_resolution = 16;
  writer::Build(root, dir + "/small.beton", o);
  Dataset small(dir + "/small.beton");
  for (uint64_t i = 0; i < small.size(); ++i) {
    auto e = small.entry(i);
    ASSERT_EQ(e.width, 16);
    ASSERT_EQ(e.height, 16);
    auto ref = Downscale2x(ReferenceDecode(ReadFile(files[i].first)), 32, 32);
    auto got = Pixels(small, i);
    for (size_t k = 0; k < ref.size(); ++k) ASSERT_LE(std::abs(int(got[k]) - int(ref[k])), 1) << "sample " << i;
  }
  o.encode.max_resolution = 0;
  o.encode.center_crop = 0.5;
  writer::Build(root, dir + "/crop.beton", o);
  Dataset crop(dir + "/crop.beton");
  for (uint64_t i = 0; i < crop.size(); ++i) {
    auto full = ReferenceDecode(ReadFile(files[i].first));
    auto got = Pixels(crop, i);
    ASSERT_EQ(crop.entry(i).width, 16);
    for (int y = 0; y < 16; ++y)
      for (int x = 0; x < 16; ++x)
        for (int c = 0; c < 3; ++c) ASSERT_EQ(got[(size_t(y) * 16 + x) * 3 + c], full[(size_t(y + 8) * 32 + x + 8) * 3 + c]);
  }
  // Changing the geometry forces a re-encode under the default (pass-through) encoding.
  auto j = Opts();
  j.encode.max_resolution = 16;
  writer::Build(root, dir + "/small.jpg.beton", j);
  Dataset sj(dir + "/small.jpg.beton");
  EXPECT_EQ(sj.entry(0).width, 16);
  EXPECT_GT(Psnr(Pixels(sj, 0), Pixels(small, 0)), 28.0);
}

TEST(ImageTree, AutoPicksTheSmallerEncoding) {
  auto root = SubsetTree(2);
  auto dir = ScratchDir();
  writer::Build(root, dir + "/auto.beton", Opts("auto"));
  Dataset ds(dir + "/auto.beton");
  for (uint64_t i = 0; i < ds.size(); ++i) EXPECT_EQ(ds.entry(i).encoding, uint8_t(Encoding::kJpeg));  // 900 B < 3072 B
  // A 4x4 JPEG is bigger than its 48 raw bytes: auto stores raw.
  auto tiny = dir + "/tiny/cls";
  fs::create_directories(tiny);
  std::vector<uint8_t> px(4 * 4 * 3, 77), jpg;
  kernels::JpegCodec codec;
  ASSERT_TRUE(codec.Encode(px.data(), 4, 4, 3, 90, TJSAMP_420, &jpg));
  WriteFile(tiny + "/a.jpg", jpg);
  writer::Build(dir + "/tiny", dir + "/tiny.beton", Opts("auto"));
  Dataset t(dir + "/tiny.beton");
  EXPECT_EQ(t.entry(0).encoding, uint8_t(Encoding::kRaw));
}

TEST(ImageTree, GrayscaleStaysGrayAndCmykIsConverted) {
  auto dir = ScratchDir();
  fs::create_directories(dir + "/src/a");
  kernels::JpegCodec codec;
  std::vector<uint8_t> gray(24 * 16), jpg;
  for (size_t i = 0; i < gray.size(); ++i) gray[i] = uint8_t(i * 7);
  ASSERT_TRUE(codec.Encode(gray.data(), 24, 16, 1, 95, TJSAMP_GRAY, &jpg));
  WriteFile(dir + "/src/a/gray.jpg", jpg);
  std::vector<uint8_t> cmyk(8 * 8 * 4, 200);
  tjhandle h = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long len = 0;
  ASSERT_EQ(tjCompress2(h, cmyk.data(), 8, 0, 8, TJPF_CMYK, &buf, &len, TJSAMP_444, 95, 0), 0);
  WriteFile(dir + "/src/a/zcmyk.JPG", buf, len);  // upper-case extension is accepted
  tjFree(buf);
  tjDestroy(h);
  writer::Build(dir + "/src", dir + "/out.beton", Opts());
  Dataset ds(dir + "/out.beton");
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_EQ(ds.entry(0).channels, 1);
  EXPECT_EQ(PayloadBytes(ds, 0), jpg);
  auto rgb = Pixels(ds, 0);
  for (size_t i = 0; i < gray.size(); ++i) ASSERT_TRUE(rgb[i * 3] == rgb[i * 3 + 1] && rgb[i * 3] == rgb[i * 3 + 2]);
  EXPECT_EQ(ds.entry(1).channels, 3);
  EXPECT_EQ(ds.entry(1).encoding, uint8_t(Encoding::kJpeg));
  kernels::JpegInfo info;
  auto p1 = PayloadBytes(ds, 1);
  ASSERT_TRUE(codec.ReadHeader(p1.data(), p1.size(), &info));
  EXPECT_FALSE(info.is_cmyk());
}

TEST(ImageTree, SplitFoldersAndIgnoredFiles) {
  auto root = SubsetTree(4, "test", true);
  WriteFile(root + "/README.txt", "root-level files are ignored", 28);
  WriteFile(root + "/test/cat/notes.txt", "x", 1);
  WriteFile(root + "/test/cat/.hidden.jpg", "x", 1);
  auto dir = ScratchDir();
  std::vector<std::string> log;
  auto o = Opts();
  o.split = "test";
  o.log = [&](const std::string& s) { log.push_back(s); };
  auto rep = writer::Build(root, dir + "/t.beton", o);
  EXPECT_EQ(rep.samples, 40u);
  bool reported = false;
  for (const auto& l : log) reported |= l.find("notes.txt") != std::string::npos;
  EXPECT_TRUE(reported) << "a non-image file in a class folder must be reported";
  o.split = "train";
  EXPECT_THROW(writer::Build(root, dir + "/u.beton", o), Error);  // no train/ folder
}

TEST(ImageTree, PngFilesAreStoredAsTheirExactPixels) {
  auto root = SubsetTree(3);
  auto dir = ScratchDir();
  std::vector<std::vector<uint8_t>> want;
  for (const auto& [path, label] : TreeFiles(root)) {
    int w, h;
    auto px = ReferenceDecode(ReadFile(path), &w, &h);
    const auto cls = fs::path(path).parent_path().filename();
    fs::create_directories(fs::path(dir) / "png" / cls);
    png_image img;
    std::memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    img.width = unsigned(w);
    img.height = unsigned(h);
    img.format = PNG_FORMAT_RGB;
    const auto out = (fs::path(dir) / "png" / cls / (fs::path(path).stem().string() + ".PNG")).string();
    ASSERT_TRUE(png_image_write_to_file(&img, out.c_str(), 0, px.data(), 0, nullptr)) << img.message;
    want.push_back(px);
  }
  writer::Build(dir + "/png", dir + "/p.beton", Opts());
  Dataset ds(dir + "/p.beton");
  ASSERT_EQ(ds.size(), want.size());
  for (uint64_t i = 0; i < ds.size(); ++i) {
    EXPECT_EQ(ds.entry(i).encoding, uint8_t(Encoding::kRaw)) << "PNG is a pixel source: raw by default";
    ASSERT_EQ(Pixels(ds, i), want[i]) << "sample " << i;
  }
  // A damaged PNG is an error naming it.
  const auto bad = (fs::path(dir) / "png" / "cat" / "0000.PNG").string();
  auto bytes = ReadFile(bad);
  bytes.resize(bytes.size() / 2);
  WriteFile(bad, bytes);
  try {
    writer::Build(dir + "/png", dir + "/q.beton", Opts());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("corrupt PNG"), std::string::npos) << e.what();
  }
}

TEST(Manifest, ReadsPathsAndLabels) {
  auto root = SubsetTree(2);
  auto files = TreeFiles(root);
  auto dir = ScratchDir();
  std::string m = "# path<TAB>label\n";
  for (size_t i = 0; i < files.size(); ++i) m += fs::relative(files[i].first, dir).string() + "\t" + std::to_string(7 * i % 13) + "\n";
  WriteFile(dir + "/list.tsv", m.data(), m.size());
  writer::Build(dir + "/list.tsv", dir + "/m.beton", Opts());
  Dataset ds(dir + "/m.beton");
  ASSERT_EQ(ds.size(), files.size());
  for (uint64_t i = 0; i < ds.size(); ++i) {
    EXPECT_EQ(ds.entry(i).label[0], int(7 * i % 13));
    EXPECT_EQ(PayloadBytes(ds, i), ReadFile(files[i].first));
  }
  WriteFile(dir + "/bad.tsv", "a.jpg\tcat\n", 10);
  try {
    writer::Build(dir + "/bad.tsv", dir + "/bad.beton", Opts());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.tsv:1"), std::string::npos) << e.what();
  }
}

TEST(Determinism, SameBytesForAnyThreadCountAndRun) {
  auto root = SubsetTree(40);
  auto dir = ScratchDir();
  for (const char* enc : {"default", "raw-zstd"}) {
    std::vector<std::vector<uint8_t>> outs;
    for (int threads : {1, 2, 3, 1}) {
      auto o = Opts(enc, threads);
      o.encode.reencode = std::string(enc) == "default";  // exercise the encoder too
      o.block_size = 16384;  // many blocks
      std::string out = dir + "/d" + std::to_string(outs.size()) + ".beton";
      writer::Build(root, out, o);
      outs.push_back(ReadFile(out));
    }
    for (size_t i = 1; i < outs.size(); ++i) EXPECT_EQ(outs[i], outs[0]) << enc << " run " << i;
  }
}

TEST(Errors, CorruptJpegNamesTheFileAndLeavesNoTarget) {
  auto root = SubsetTree(3);
  auto files = TreeFiles(root);
  auto bad = files[5].first;
  auto bytes = ReadFile(bad);
  fs::remove(bad);  // replace the symlink with a truncated copy
  bytes.resize(bytes.size() / 2);
  WriteFile(bad, bytes);
  auto dir = ScratchDir();
  WriteFile(dir + "/out.beton", "old contents", 12);
  try {
    writer::Build(root, dir + "/out.beton", Opts());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
  EXPECT_EQ(ReadFile(dir + "/out.beton").size(), 12u);  // the previous file is untouched
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  std::vector<std::string> log;
  auto o = Opts();
  o.skip_invalid = true;
  o.log = [&](const std::string& s) { log.push_back(s); };
  auto rep = writer::Build(root, dir + "/out.beton", o);
  EXPECT_EQ(rep.skipped, 1u);
  EXPECT_EQ(rep.samples, files.size() - 1);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find(bad), std::string::npos);
  Dataset ds(dir + "/out.beton");
  EXPECT_EQ(ds.meta().skipped_count, 1u);
}

TEST(Errors, KilledBuildLeavesNothingBehind) {
  auto train = LoadCifar(100, "train"), test = LoadCifar(10, "test");
  auto root = SubsetTree(300);
  auto dir = ScratchDir();
  fs::create_directories(dir + "/out");
  std::mt19937 rng(1234);
  int finished = 0, killed = 0;
  for (int trial = 0; trial < 20; ++trial) {
    pid_t pid = ::fork();
    if (pid == 0) {
      auto o = Opts("jpeg", 1);
      o.encode.reencode = true;
      try {
        writer::Build(root, dir + "/out/x.beton", o);
      } catch (...) {
      }
      ::_exit(0);
    }
    ::usleep(useconds_t(rng() % 150000));
    ::kill(pid, SIGKILL);
    int st = 0;
    ::waitpid(pid, &st, 0);
    (WIFSIGNALED(st) ? killed : finished) += 1;
    // Either the build finished (a complete, valid file) or nothing is there at all.
    for (const auto& e : fs::directory_iterator(dir + "/out")) {
      ASSERT_EQ(e.path().filename(), "x.beton") << "left behind: " << e.path();
      EXPECT_NO_THROW(Dataset(e.path().string(), {.verify = true}));
      fs::remove(e.path());
    }
  }
  std::printf("kill -9 trials: %d killed mid-build, %d finished first; nothing partial left in any\n", killed, finished);
  EXPECT_GT(killed, 5);
}

TEST(Errors, FullDiskIsAClearErrorAndLeavesNoTarget) {
  auto root = SubsetTree(30);
  auto dir = ScratchDir();
  // A file-size limit makes every write past 64 KiB fail with EFBIG, as a full disk fails with ENOSPC.
  pid_t pid = ::fork();
  if (pid == 0) {
    struct rlimit lim = {65536, 65536};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    ::signal(SIGXFSZ, SIG_IGN);
    try {
      writer::Build(root, dir + "/x.beton", Opts("raw"));
      ::_exit(3);
    } catch (const Error& e) {
      std::string m = e.what();
      ::_exit(m.find("x.beton") != std::string::npos && m.find("write failed") != std::string::npos ? 0 : 4);
    }
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "3: the build succeeded, 4: the message did not name the file and the write";
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 0);
}

TEST(Errors, RealFullTmpfsIsAClearErrorAndLeavesNothing) {
  auto root = SubsetTree(30);
  auto dir = ScratchDir() + "/small";
  fs::create_directories(dir);
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=256k") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here (" << std::strerror(errno) << "); the RLIMIT_FSIZE test covers the write path";
  std::string msg;
  try {
    writer::Build(root, dir + "/x.beton", Opts("raw"));  // 300 x 3 KiB does not fit in 256 KiB
  } catch (const Error& e) {
    msg = e.what();
  }
  const auto left = std::distance(fs::directory_iterator(dir), fs::directory_iterator());
  ::umount2(dir.c_str(), MNT_DETACH);
  EXPECT_NE(msg.find("x.beton"), std::string::npos) << msg;
  EXPECT_NE(msg.find("No space left on device"), std::string::npos) << msg;
  EXPECT_EQ(left, 0) << "a full disk left files behind";
  // A read-only target directory (root ignores permission bits, so a read-only mount).
  ASSERT_EQ(::mount("tmpfs", dir.c_str(), "tmpfs", MS_RDONLY, "size=64k"), 0) << std::strerror(errno);
  msg.clear();
  try {
    writer::Build(root, dir + "/y.beton", Opts());
  } catch (const Error& e) {
    msg = e.what();
  }
  ::umount2(dir.c_str(), MNT_DETACH);
  EXPECT_NE(msg.find("y.beton"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Read-only file system"), std::string::npos) << msg;
}

TEST(Errors, UnwritableTargetsAndChangingSources) {
  auto root = SubsetTree(2);
  std::string msg;
  try {
    writer::Build(root, "/proc/dsc-test.beton", Opts());
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("/proc/dsc-test.beton"), std::string::npos) << msg;
  try {
    writer::Build(root, "/nonexistent-dir/x.beton", Opts());
    msg.clear();
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("cannot open output directory"), std::string::npos) << msg;
  // A source file that vanishes or changes after it was listed is an error naming it.
  auto src = writer::OpenSource(root, "tree", "train");
  auto files = TreeFiles(root);
  fs::remove(files[3].first);
  writer::SourceItem item;
  try {
    src->Load(3, &item);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(files[3].first), std::string::npos) << e.what();
  }
  fs::remove(files[4].first);
  WriteFile(files[4].first, "different", 9);
  try {
    src->Load(4, &item);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("changed during the build"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dsc::test
