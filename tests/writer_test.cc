// Every source layout and encoding round-trips through a built file; builds are deterministic and
// atomic; bad sources give errors naming the file.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <png.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <chrono>

// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>

#include "format/error.h"
#include "format/layout.h"
#include "kernels/jpeg_codec.h"
#include "kernels/jpeg_decoder.h"
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
    ASSERT_EQ(shared.entry(i).jpeg_table, i == 0 ? 0 : 1);  // shared from its second occurrence
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

// --subsampling gray stores one component from colour sources: the index said 3 channels.
TEST(ImageTree, GrayReencodeOfColourSourcesSaysOneChannel) {
  auto root = SubsetTree(1);
  auto dir = ScratchDir();
  for (const char* restart : {"auto", "none"}) {
    SCOPED_TRACE(restart);
    auto o = Opts("jpeg");
    o.encode.reencode = true;
    o.encode.subsampling = "gray";
    o.encode.restart_interval = restart;
    writer::Build(root, dir + "/g.beton", o);
    Dataset ds(dir + "/g.beton");
    ASSERT_EQ(ds.size(), 10u);
    kernels::JpegCodec codec;
    for (uint64_t i = 0; i < ds.size(); ++i) {
      kernels::JpegInfo info;
      const auto p = PayloadBytes(ds, i);
      ASSERT_TRUE(codec.ReadHeader(p.data(), p.size(), &info));
      EXPECT_TRUE(info.is_gray()) << "sample " << i;
      EXPECT_EQ(ds.entry(i).channels, 1) << "sample " << i;
      const auto px = Pixels(ds, i);
      for (size_t k = 0; k + 2 < px.size(); k += 3) ASSERT_TRUE(px[k] == px[k + 1] && px[k] == px[k + 2]) << "sample " << i;
    }
  }
}

// Without --reencode, colour JPEGs pass through (transcoded or as they were) whatever --subsampling
// says: the index said 1 channel over their 3 components, and readers decoded colour.
TEST(ImageTree, PassedThroughJpegsKeepTheirChannelsWithSubsamplingGray) {
  auto root = SubsetTree(1);
  auto dir = ScratchDir();
  for (const char* restart : {"auto", "none"}) {
    SCOPED_TRACE(restart);
    auto o = Opts("jpeg");
    o.encode.subsampling = "gray";
    o.encode.restart_interval = restart;
    writer::Build(root, dir + "/g.beton", o);
    Dataset ds(dir + "/g.beton");
    ASSERT_EQ(ds.size(), 10u);
    kernels::JpegCodec codec;
    for (uint64_t i = 0; i < ds.size(); ++i) {
      kernels::JpegInfo info;
      const auto p = PayloadBytes(ds, i);
      ASSERT_TRUE(codec.ReadHeader(p.data(), p.size(), &info));
      EXPECT_EQ(ds.entry(i).channels, info.is_gray() ? 1 : 3) << "sample " << i;
      EXPECT_FALSE(info.is_gray()) << "CIFAR-10 JPEGs are colour";
    }
  }
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
  std::string all;
  for (const auto& l : log) all += l + "\n";
  // Everything left out is reported: a non-image file, a hidden one, a file beside the split folders.
  EXPECT_NE(all.find("cat/notes.txt (not .jpg/.jpeg/.png)"), std::string::npos) << all;
  EXPECT_NE(all.find(".hidden.jpg (hidden)"), std::string::npos) << all;
  o.split = "train";
  EXPECT_THROW(writer::Build(root, dir + "/u.beton", o), Error);  // no train/ folder
  // The class folders' parent as the root (no split folders): a file beside them is reported.
  WriteFile(root + "/test/loose.jpg", "x", 1);
  log.clear();
  EXPECT_EQ(writer::Build(root + "/test", dir + "/w.beton", o).samples, 40u);
  all.clear();
  for (const auto& l : log) all += l + "\n";
  EXPECT_NE(all.find("loose.jpg (not in a class folder)"), std::string::npos) << all;
}

TEST(ImageTree, SplitsNumberTheirClassesAlike) {
  // A test/ folder lacking one of train/'s classes numbered the later classes one lower: test.beton's
  // "cat" was train.beton's "bird", in silence. Labels index every split's classes together; a class
  // without images keeps its label and is reported.
  auto src = TreeFiles(SubsetTree(1));  // airplane, automobile, bird, ...: one real JPEG each
  auto dir = ScratchDir();
  const std::string root = dir + "/tree";
  auto put = [&](const std::string& split, const std::string& cls, int from) {
    fs::create_directories(root + "/" + split + "/" + cls);
    fs::copy_file(src[size_t(from)].first, root + "/" + split + "/" + cls + "/0.jpg");
  };
  put("train", "a", 0);
  put("train", "b", 1);
  put("train", "c", 2);
  put("test", "a", 3);
  put("test", "c", 4);                            // no test/b
  fs::create_directories(root + "/test/d");       // an empty class folder
  std::vector<std::string> log;
  auto o = Opts();
  o.log = [&](const std::string& s) { log.push_back(s); };
  writer::Build(root, dir + "/train.beton", o);
  std::string train_log;
  for (const auto& l : log) train_log += l + "\n";
  log.clear();
  o.split = "test";
  writer::Build(root, dir + "/test.beton", o);
  std::string test_log;
  for (const auto& l : log) test_log += l + "\n";
  const std::vector<std::string> all = {"a", "b", "c", "d"};
  Dataset train(dir + "/train.beton"), test(dir + "/test.beton");
  EXPECT_EQ(train.meta().fields[1].classes, all);
  EXPECT_EQ(test.meta().fields[1].classes, all);
  ASSERT_EQ(train.size(), 3u);
  ASSERT_EQ(test.size(), 2u);
  EXPECT_EQ(train.entry(2).label[0], 2);  // c
  EXPECT_EQ(test.entry(1).label[0], 2);   // c, also in test (it was 1)
  EXPECT_EQ(PayloadBytes(test, 1), ReadFile(src[4].first));
  EXPECT_NE(train_log.find("class 'd' (label 3) has no folder in " + root + "/train"), std::string::npos) << train_log;
  EXPECT_NE(test_log.find("class 'b' (label 1) has no folder in " + root + "/test"), std::string::npos) << test_log;
  EXPECT_NE(test_log.find("class 'd' (label 3): " + root + "/test/d has no images"), std::string::npos) << test_log;
}

// What the user gave is never skipped in silence, and nothing crashes: entries that cannot be read
// are errors naming them (a self-referencing link among the class folders aborted the program; a
// dangling link or a FIFO named like an image was left out).
TEST(ImageTree, EntriesThatCannotBeReadAreErrorsNamingThem) {
  auto dir = ScratchDir();
  std::string out;
  auto expect_error = [&](const std::string& root, const std::string& what) {
    EXPECT_EQ(RunDsc("build '" + root + "' '" + dir + "/o.beton' --quiet", &out), 1) << root << ": " << out;
    EXPECT_NE(out.find(what), std::string::npos) << out;
    EXPECT_FALSE(fs::exists(dir + "/o.beton"));
  };
  auto a = SubsetTree(2);
  fs::create_symlink("selfloop", fs::path(a) / "selfloop");
  expect_error(a, "selfloop: cannot read (a symlink whose target is missing or loops)");
  auto b = SubsetTree(2);
  fs::create_symlink("/nonexistent/photo.jpg", fs::path(b) / "cat" / "gone.jpg");
  expect_error(b, "cat/gone.jpg: cannot read (a symlink");
  auto c = SubsetTree(2);
  ASSERT_EQ(::mkfifo((c + "/dog/pipe.jpg").c_str(), 0644), 0);
  expect_error(c, "dog/pipe.jpg: not a regular file");
  auto d = SubsetTree(2);
  fs::create_directory(fs::path(d) / "\xff\xfe");
  fs::copy_file(fs::path(d) / "cat" / fs::directory_iterator(fs::path(d) / "cat")->path().filename(), fs::path(d) / "\xff\xfe" / "x.jpg");
  expect_error(d, "the class folder's name is not UTF-8");
  // --split test on a tree without split folders built the whole tree: the training set.
  auto e = SubsetTree(2);
  expect_error(e + "' --split 'test", "--split test has nothing to select");
  WriteFile(dir + "/list.tsv", "a.jpg\t0\n", 8);
  expect_error(dir + "/list.tsv' --split 'test", "a manifest has no splits");
  WriteFile(dir + "/data.tar.zst", "(\xb5/\xfd", 4);
  expect_error(dir + "/data.tar.zst", "an archive, not a folder or a manifest");
  // An output naming a FIFO (or /dev/null) was replaced by a regular file.
  ASSERT_EQ(::mkfifo((dir + "/out.fifo").c_str(), 0644), 0);
  EXPECT_EQ(RunDsc("build '" + e + "' '" + dir + "/out.fifo' --quiet", &out), 1) << out;
  EXPECT_NE(out.find("out.fifo: exists and is not a regular file"), std::string::npos) << out;
  EXPECT_TRUE(fs::is_fifo(dir + "/out.fifo"));
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

TEST(Manifest, AnOverlongLineIsAnErrorNotAnUnboundedRead) {
  // A file that is not a manifest (no newlines) was read whole into one line; and a line of exactly the
  // limit, the last one without its newline, still reads.
  auto root = SubsetTree(1);
  auto files = TreeFiles(root);
  auto dir = ScratchDir();
  const std::string m = files[0].first + "\t3\n" + files[1].first + "\t4";  // no final newline
  WriteFile(dir + "/ok.tsv", m.data(), m.size());
  writer::Build(dir + "/ok.tsv", dir + "/ok.beton", Opts());
  Dataset ok(dir + "/ok.beton");
  ASSERT_EQ(ok.size(), 2u);
  EXPECT_EQ(ok.entry(1).label[0], 4);
  // a label padded with zeros to a line of exactly 65,536 bytes: read; one byte more: refused
  const std::string head = files[0].first + "\t";
  const std::string exact = head + std::string(65536 - head.size() - 1, '0') + "5";
  ASSERT_EQ(exact.size(), 65536u);
  WriteFile(dir + "/exact.tsv", (exact + "\n").data(), exact.size() + 1);
  writer::Build(dir + "/exact.tsv", dir + "/exact.beton", Opts());
  EXPECT_EQ(Dataset(dir + "/exact.beton").entry(0).label[0], 5);
  const std::string over = head + "0" + exact.substr(head.size()) + "\n";
  WriteFile(dir + "/long.tsv", over.data(), over.size());
  try {
    writer::Build(dir + "/long.tsv", dir + "/long.beton", Opts());
    FAIL() << "a 65,537-byte line was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("long.tsv:1: a line longer than 65536 bytes"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir + "/long.beton"));
}

TEST(Errors, TheOutputMustNotBeTheSourceOrOneOfItsSamples) {
  // The finished file replaced what the build had read: a manifest, or an image of the tree.
  auto root = SubsetTree(1);
  auto files = TreeFiles(root);
  auto dir = ScratchDir();
  const std::string m = files[0].first + "\t0\n";
  WriteFile(dir + "/list.tsv", m.data(), m.size());
  const std::string image = files[3].first;
  const auto before = ReadFile(image);
  auto expect_refused = [&](const std::string& src, const std::string& out, const std::string& said) {
    try {
      writer::Build(src, out, Opts());
      ADD_FAILURE() << "built " << src << " into " << out;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(said), std::string::npos) << e.what();
    }
  };
  expect_refused(dir + "/list.tsv", dir + "/list.tsv", "list.tsv: is the source itself");
  EXPECT_EQ(ReadFile(dir + "/list.tsv"), std::vector<uint8_t>(m.begin(), m.end()));
  expect_refused(root, image, ": is the source's sample " + image);
  // ... also by another name (a hard link) for the same file
  fs::create_hard_link(image, dir + "/alias.beton");
  expect_refused(root, dir + "/alias.beton", "alias.beton: is the source's sample " + image);
  EXPECT_EQ(ReadFile(image), before);
}

TEST(Errors, MachineFailuresAreNotSampleErrors) {
  // --skip-invalid skips bad samples; out of file descriptors (or memory, or an I/O error) is the
  // machine's failure: skipping on it gave a different file each run.
  auto dir = ScratchDir();
  WriteFile(dir + "/f.jpg", "x", 1);
  EXPECT_THROW(
      {
        try {
          writer::ReadWholeFile(dir + "/missing.jpg");
        } catch (const writer::EnvironmentError&) {
          ADD_FAILURE() << "a missing file is the sample's error";
        }
      },
      Error);
  // No descriptor free: the soft limit at the lowest free one.
  struct rlimit was;
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &was), 0);
  const int lowest = ::dup(0);
  ASSERT_GE(lowest, 0);
  ::close(lowest);
  struct rlimit tight = was;
  tight.rlim_cur = rlim_t(lowest);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &tight), 0);
  std::exception_ptr caught;
  try {
    writer::ReadWholeFile(dir + "/f.jpg");
  } catch (...) {
    caught = std::current_exception();  // looked at with descriptors again: UBSan's type check needs one
  }
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &was), 0);
  ASSERT_TRUE(caught) << "read with no descriptor free";
  std::string said;
  bool machine = false;
  try {
    std::rethrow_exception(caught);
  } catch (const writer::EnvironmentError& e) {
    machine = true;
    said = e.what();
  } catch (const std::exception& e) {
    said = e.what();
  }
  EXPECT_TRUE(machine) << said;
  EXPECT_NE(said.find("f.jpg: cannot open: Too many open files"), std::string::npos) << said;
}

TEST(Errors, ABuildOutOfDescriptorsStopsEvenWithSkipInvalid) {
  // The build itself, not only the error's class: with --skip-invalid, samples that could not be opened
  // for want of a descriptor were skipped and the file written without them. Every limit from "nothing
  // opens" up to "everything opens" either stops the build or writes every sample.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the build reads its error with no descriptor free: UBSan's vptr check needs one";
#endif
  auto root = SubsetTree(1);
  auto dir = ScratchDir();
  writer::BuildOptions o = Opts("default", 1);
  o.skip_invalid = true;
  std::vector<std::string> logged;
  o.log = [&](const std::string& m) { logged.push_back(m); };
  struct rlimit was;
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &was), 0);
  const int lowest = ::dup(0);
  ASSERT_GE(lowest, 0);
  ::close(lowest);
  int written = 0, stopped = 0;
  for (int extra = 0; extra <= 8; ++extra) {
    const std::string out = dir + "/t" + std::to_string(extra) + ".beton";
    logged.clear();
    struct rlimit tight = was;
    tight.rlim_cur = rlim_t(lowest + extra);
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &tight), 0);
    std::exception_ptr caught;
    writer::BuildReport rep;
    try {
      rep = writer::Build(root, out, o);
    } catch (...) {
      caught = std::current_exception();
    }
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &was), 0);
    for (const auto& m : logged) EXPECT_EQ(m.find("skipped"), std::string::npos) << "limit +" << extra << ": " << m;
    if (caught) {
      ++stopped;
      EXPECT_FALSE(fs::exists(out)) << "limit +" << extra;
    } else {
      ++written;
      EXPECT_EQ(rep.skipped, 0u) << "limit +" << extra;
      EXPECT_EQ(Dataset(out).size(), TreeFiles(root).size()) << "limit +" << extra;
    }
  }
  EXPECT_GT(stopped, 0) << "no limit was tight enough to matter";
  EXPECT_GT(written, 0) << "no limit was loose enough to build";
}

TEST(Errors, EncoderThreadsThatCannotStartAreAnErrorNotAHang) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizer runtimes reserve terabytes of address space: no address-space limit applies";
#else
  // A build whose threads could not all start (an address-space or process limit) hung in the pool's
  // constructor: the started threads waited on a condition variable being destroyed.
  auto root = SubsetTree(1);
  auto dir = ScratchDir();
  const int rc = RunForked(30, [&] {
    if (!LimitAddressSpace(48 << 20)) return 99;  // room for a few 8 MiB stacks
    writer::BuildOptions o = Opts();
    o.threads = 64;
    try {
      writer::Build(root, dir + "/t.beton", o);
      return 3;  // every thread started: the limit was too loose to show anything
    } catch (const Error& e) {
      const bool named = std::string(e.what()).find("cannot start 64 encoder threads") != std::string::npos;
      if (!named) std::fprintf(stderr, "said: %s\n", e.what());
      return named ? 0 : 4;
    } catch (...) {
      return 5;
    }
  });
  EXPECT_NE(rc, -1) << "the build hung when its threads could not start";
  EXPECT_EQ(rc, 0) << "3: all threads started; 4: another error; 5: not a dsc::Error; 128+: a signal";
  EXPECT_FALSE(fs::exists(dir + "/t.beton"));
#endif
}

// A few hundred bytes whose SOF claims 13000x13000 pixels (within --max-pixels) made --reencode allocate
// ~510 MB of pixels (and the restart transcode its coefficients) before the data ran out. Any Huffman
// JPEG codes at least one bit per 8x8 block, so the header alone shows this one cannot hold its image.
TEST(Errors, ATinyJpegClaimingAHugeImageIsRefusedFromItsHeader) {
  auto root = SubsetTree(1);
  auto dir = ScratchDir();
  const std::string victim = TreeFiles(root)[3].first;
  std::vector<uint8_t> b = ReadFile(victim);
  size_t sof = 2;
  while (sof + 9 < b.size() && !(b[sof] == 0xFF && b[sof + 1] == 0xC0)) ++sof;
  ASSERT_LT(sof + 9, b.size()) << "no SOF0 in " << victim;
  for (size_t k : {sof + 5, sof + 7}) b[k] = 13000 >> 8, b[k + 1] = 13000 & 0xFF;  // height, width
  fs::remove(victim);  // a symlink to the real file: replace the link, not the file
  WriteFile(victim, b);
  std::string why;
  EXPECT_TRUE(kernels::JpegShorterThanItsSize(b.data(), b.size(), 13000, 13000, &why));
  EXPECT_FALSE(kernels::JpegShorterThanItsSize(b.data(), b.size(), 32, 32, &why));  // its real size fits
  for (bool reencode : {false, true}) {
    auto body = [&] {
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
      if (!LimitAddressSpace(256 << 20)) return 99;  // the pixels of 13000x13000 would not fit
#endif
      writer::BuildOptions o = Opts();
      o.threads = 1;
      o.encode.reencode = reencode;
      try {
        writer::Build(root, dir + "/t.beton", o);
        return 3;
      } catch (const Error& e) {
        const std::string m = e.what();
        const bool named = m.find(victim) != std::string::npos && m.find("declares 13000x13000 pixels") != std::string::npos;
        if (!named) std::fprintf(stderr, "said: %s\n", e.what());
        return named ? 0 : 4;
      } catch (...) {
        return 5;
      }
    };
    const int rc = RunForked(60, body);
    EXPECT_EQ(rc, 0) << "reencode " << reencode << ": 3 built; 4: another error; 5: not a dsc::Error; 128+: a signal";
    EXPECT_FALSE(fs::exists(dir + "/t.beton"));
  }
  // --skip-invalid skips it, named, and stores the rest.
  auto o = Opts();
  o.skip_invalid = true;
  auto rep = writer::Build(root, dir + "/s.beton", o);
  EXPECT_EQ(rep.skipped, 1u);
  EXPECT_EQ(Dataset(dir + "/s.beton").size(), TreeFiles(root).size() - 1);
}

// An allocation that fails inside libjpeg is the machine failing, not the image: it stops the build
// even with --skip-invalid (libjpeg's "Insufficient memory" was a corrupt JPEG, and the build skipped a
// valid image by the moment's memory).
TEST(Errors, ACodecOutOfMemoryStopsTheBuildEvenWithSkipInvalid) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizer runtimes reserve terabytes of address space: no address-space limit applies";
#else
  auto dir = ScratchDir();
  const std::string root = dir + "/tree";
  fs::create_directories(root + "/a");
  // 8192x8192 of one colour: a small file whose coefficients (restart transcode) take ~192 MiB, far
  // more than the free memory earlier tests may leave cached in this process.
  const int side = 8192;
  std::vector<uint8_t> rgb(size_t(side) * side * 3, 90);
  tjhandle tj = tjInitCompress();
  unsigned char* jpg = nullptr;
  unsigned long size = 0;
  ASSERT_EQ(tjCompress2(tj, rgb.data(), side, 0, side, TJPF_RGB, &jpg, &size, TJSAMP_420, 90, 0), 0);
  WriteFile(root + "/a/big.jpg", jpg, size);
  tjFree(jpg);
  tjDestroy(tj);
  rgb = {};
  const std::string small = TreeFiles(SubsetTree(1))[0].first;
  fs::copy_file(small, root + "/a/small.jpg");
  auto build = [&](const std::string& out) {
    writer::BuildOptions o = Opts();
    o.threads = 1;
    o.skip_invalid = true;
    return writer::Build(root, out, o);
  };
  ASSERT_EQ(build(dir + "/free.beton").skipped, 0u);  // both images are valid
  const int rc = RunForked(60, [&] {
    if (!LimitAddressSpace(24 << 20)) return 99;
    try {
      const auto rep = build(dir + "/t.beton");
      return rep.skipped ? 3 : 6;  // built: skipped the valid image (the defect), or the limit did not bite
    } catch (const Error& e) {
      const std::string m = e.what();
      const bool named = m.find("big.jpg: out of memory") != std::string::npos;
      if (!named) std::fprintf(stderr, "said: %s\n", e.what());
      return named ? 0 : 4;
    } catch (...) {
      return 5;
    }
  });
  EXPECT_EQ(rc, 0) << "3: the valid image skipped; 4: another error; 5: not a dsc::Error; 6: the limit did not bite";
  EXPECT_FALSE(fs::exists(dir + "/t.beton"));
#endif
}

// cjpeg writes valid JPEGs with sampling factors TurboJPEG 2.1 cannot decode (4x2 luma, mixed
// chroma): the build named them "not a readable JPEG" with TurboJPEG's words; it says what is wrong.
TEST(Errors, AJpegOfUnsupportedSamplingIsNamedAsSuch) {
  auto dir = ScratchDir();
  fs::create_directories(dir + "/tree/a");
  std::string ppm = "P6\n24 16\n255\n";
  for (int i = 0; i < 24 * 16 * 3; ++i) ppm += char(i * 7 % 251);
  WriteFile(dir + "/in.ppm", ppm.data(), ppm.size());
  std::string out;
  ASSERT_EQ(RunShell("cjpeg -sample 4x2 " + dir + "/in.ppm > " + dir + "/tree/a/x.jpg 2>&1", &out), 0) << out;
  try {
    writer::Build(dir + "/tree", dir + "/t.beton", Opts());
    ADD_FAILURE() << "built";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("x.jpg: a JPEG with chroma sampling factors TurboJPEG cannot decode"), std::string::npos) << m;
  }
  EXPECT_FALSE(fs::exists(dir + "/t.beton"));
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
  int finished = 0, killed = 0, leftovers = 0;
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
    // Either the build finished (a complete, valid file) or no target is there. A kill inside the
    // microseconds between naming the finished file and renaming it may leave one hidden, complete
    // leftover (atomic_file.h); the next writer of the target removes it.
    bool leftover = false;
    for (const auto& e : fs::directory_iterator(dir + "/out")) {
      const std::string name = e.path().filename().string();
      if (name.rfind(".x.beton.dsc-tmp-", 0) == 0) {
        leftover = true;
        ++leftovers;
        continue;
      }
      ASSERT_EQ(name, "x.beton") << "left behind: " << e.path();
      EXPECT_NO_THROW(Dataset(e.path().string(), {.verify = true}));
      fs::remove(e.path());
    }
    if (leftover) {
      writer::Build(root, dir + "/out/x.beton", Opts("raw"));
      for (const auto& e : fs::directory_iterator(dir + "/out"))
        ASSERT_EQ(e.path().filename(), "x.beton") << "the next build left: " << e.path();
      fs::remove(dir + "/out/x.beton");
    }
  }
  std::printf("kill -9 trials: %d killed mid-build, %d finished first, %d left a hidden leftover (removed by the next build)\n",
              killed, finished, leftovers);
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


// ---- Writer-side image defects (issue 8) -------------------------------------------------------

// Runs tests/pil_ref.py (PIL, an independent reference) and returns its stdout.
std::vector<uint8_t> PilRef(const std::string& args) {
  const std::string cmd = "/usr/bin/python3 " + std::string(DSC_TEST_SCRIPTS) + "/pil_ref.py " + args;
  std::string out;
  EXPECT_EQ(RunShell(cmd, &out), 0) << cmd;
  return std::vector<uint8_t>(out.begin(), out.end());
}

// Naive area average, written independently of kernels/resize.cc: every output pixel integrates the
// source over its footprint in two dimensions at once, then rounds to nearest.
std::vector<uint8_t> NaiveArea(const std::vector<uint8_t>& src, int sw, int sh, int ch, int dw, int dh) {
  std::vector<uint8_t> out(size_t(dw) * dh * ch);
  const double fx = double(sw) / dw, fy = double(sh) / dh;
  for (int y = 0; y < dh; ++y)
    for (int x = 0; x < dw; ++x)
      for (int c = 0; c < ch; ++c) {
        double acc = 0;
        for (int sy = int(y * fy); sy < sh && sy < (y + 1) * fy; ++sy)
          for (int sx = int(x * fx); sx < sw && sx < (x + 1) * fx; ++sx) {
            const double wy = std::min((y + 1) * fy, sy + 1.0) - std::max(y * fy, double(sy));
            const double wx = std::min((x + 1) * fx, sx + 1.0) - std::max(x * fx, double(sx));
            acc += wx * wy * src[(size_t(sy) * sw + sx) * ch + c];
          }
        out[(size_t(y) * dw + x) * ch + c] = uint8_t(std::floor(acc / (fx * fy) + 0.5));
      }
  return out;
}

std::vector<uint8_t> Crop(const std::vector<uint8_t>& src, int sw, int ch, int x, int y, int cw, int chh) {
  std::vector<uint8_t> out;
  for (int r = 0; r < chh; ++r)
    out.insert(out.end(), src.begin() + (size_t(y + r) * sw + x) * ch, src.begin() + (size_t(y + r) * sw + x + cw) * ch);
  return out;
}

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(ImageTree, GrayscaleJpegResizeAndCropMatchReference) {
  auto dir = ScratchDir();
  fs::create_directories(dir + "/src/a");
  // An 800x600 grayscale photo stand-in: smooth structure plus noise, so rounding errors would show.
  const int W = 800, H = 600;
  std::vector<uint8_t> gray(size_t(W) * H);
  std::mt19937 rng(5);
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x)
      gray[size_t(y) * W + x] = uint8_t(std::clamp(128 + 90 * std::sin(x / 37.0) * std::cos(y / 23.0) + int(rng() % 41) - 20, 0.0, 255.0));
  tjhandle th = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long len = 0;
  ASSERT_EQ(tjCompress2(th, gray.data(), W, 0, H, TJPF_GRAY, &buf, &len, TJSAMP_GRAY, 92, 0), 0);
  const std::vector<uint8_t> jpg(buf, buf + len);
  tjFree(buf);
  tjDestroy(th);
  WriteFile(dir + "/src/a/gray.jpg", jpg);
  // Reference decode straight to one gray channel (TurboJPEG), then crop / area-average naively.
  std::vector<uint8_t> ref(size_t(W) * H);
  tjhandle dh = tjInitDecompress();
  ASSERT_EQ(tjDecompress2(dh, jpg.data(), jpg.size(), ref.data(), W, 0, H, TJPF_GRAY, 0), 0);
  tjDestroy(dh);

  struct Case {
    std::string args;
    int x, y, side_w, side_h, ow, oh;  // crop rectangle, then output size
  };
  // --center-crop 0.875: side = round(0.875 x 600) = 525 at ((800-525)/2, (600-525)/2).
  const Case cases[] = {{"--max-resolution 256", 0, 0, W, H, 256, 192},
                        {"--center-crop 0.875", 137, 37, 525, 525, 525, 525},
                        {"--center-crop 0.875 --max-resolution 256", 137, 37, 525, 525, 256, 256}};
  for (const auto& c : cases) {
    auto want = NaiveArea(Crop(ref, W, 1, c.x, c.y, c.side_w, c.side_h), c.side_w, c.side_h, 1, c.ow, c.oh);
    for (const char* enc : {"raw", "default"}) {
      SCOPED_TRACE(c.args + " --encoding " + enc);
      const std::string out = dir + "/out.beton";
      fs::remove(out);
      std::string log;
      ASSERT_EQ(RunDsc("build " + dir + "/src " + out + " --quiet --encoding " + enc + " " + c.args, &log), 0) << log;
      Dataset ds(out, {.verify = true});
      const auto e = ds.entry(0);
      ASSERT_EQ(e.width, c.ow);
      ASSERT_EQ(e.height, c.oh);
      const auto got = Pixels(ds, 0);
      ASSERT_EQ(got.size(), want.size() * 3);
      int worst = 0;
      double sum = 0;
      std::vector<uint8_t> got_gray(want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_TRUE(got[i * 3] == got[i * 3 + 1] && got[i * 3] == got[i * 3 + 2]) << "pixel " << i << " is not gray";
        got_gray[i] = got[i * 3];
        worst = std::max(worst, std::abs(int(got[i * 3]) - int(want[i])));
        sum += std::abs(int(got[i * 3]) - int(want[i]));
      }
      const double mean = sum / double(want.size());
      std::printf("  gray 800x600, %s --encoding %s: max |diff| %d, mean |diff| %.4f, PSNR %.1f dB\n", c.args.c_str(), enc,
                  worst, mean, Psnr(got_gray, want));
      if (std::string(enc) == "raw") {
        EXPECT_EQ(e.encoding, uint8_t(Encoding::kRaw));
        // Only floating-point ties may round differently from the naive reference.
        EXPECT_LE(worst, 1);
        EXPECT_LE(mean, 0.001);
      } else {
        EXPECT_EQ(e.encoding, uint8_t(Encoding::kJpeg));
        EXPECT_EQ(e.channels, 1) << "a gray source stays a one-channel JPEG";
        // A q90 gray re-encode of a noisy image: measured PSNR 36.3-39.9 dB, max error 12-18.
        EXPECT_GT(Psnr(got_gray, want), 34.0);
        EXPECT_LE(worst, 24);
      }
    }
  }
}

// A handful of real ImageNet photos, unpacked once from ../shared/data into the build tree.
std::string PhotoTree() {
  const fs::path root = fs::path(DSC_TESTDATA) / "photos10";
  if (fs::exists(root / ".unpacked")) return (root / "imagenet-photos-500").string();
  const std::string tmp = ScratchDir("photos");
  const std::string archive = std::string(DSC_TEST_SCRIPTS) + "/../../shared/data/imagenet-photos-500.tar.zst";
  const std::string cmd = "tar --zstd -xf '" + archive + "' -C '" + tmp +
                          "' --wildcards 'imagenet-photos-500/n014*' 'imagenet-photos-500/n015*'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  WriteFile(tmp + "/.unpacked", "", 0);
  std::error_code ec;
  fs::rename(tmp, root, ec);  // a parallel test may have won the race: either copy is complete
  return (root / "imagenet-photos-500").string();
}

// Area averaging preserves an image's mean exactly, so the mean of the output must equal the mean of
// the decoded source up to rounding noise (a biased rounding would shift it by up to 0.5 levels).
// PIL's Image.BOX is not that reference: at this non-integer factor (about 1.95) it is itself about
// +0.45 levels brighter than its source (rounding its 8-bit intermediate pass, and whole pixels in or
// out of a footprint rather than fractional coverage), which the printout shows; dsc is compared to it
// for geometry (PSNR) only.
TEST(ImageTree, AreaDownscaleOfRealPhotosIsUnbiased) {
  const auto root = PhotoTree();
  const auto files = TreeFiles(root);
  ASSERT_EQ(files.size(), 10u);
  auto dir = ScratchDir();
  auto o = Opts("raw");
  o.encode.max_resolution = 256;
  writer::Build(root, dir + "/p.beton", o);
  Dataset ds(dir + "/p.beton");
  ASSERT_EQ(ds.size(), files.size());
  std::string args = "rgb";
  for (uint64_t i = 0; i < ds.size(); ++i)
    args += " '" + files[i].first + ":" + std::to_string(ds.entry(i).width) + ":" + std::to_string(ds.entry(i).height) + "'";
  const auto pil = PilRef(args);
  std::vector<uint8_t> got, naive;
  double src_mean = 0, pil_mean = 0;
  for (uint64_t i = 0; i < ds.size(); ++i) {
    const int ow = ds.entry(i).width, oh = ds.entry(i).height;
    ASSERT_EQ(std::max(ow, oh), 256);
    int sw, sh;
    const auto src = ReferenceDecode(ReadFile(files[i].first), &sw, &sh);
    const auto want = NaiveArea(src, sw, sh, 3, ow, oh);
    const auto px = Pixels(ds, i);
    ASSERT_EQ(px.size(), want.size());
    double s = 0, d = 0, p = 0;
    for (uint8_t v : src) s += v;
    for (uint8_t v : px) d += v;
    for (size_t k = 0; k < px.size(); ++k) p += pil[got.size() + k];
    s /= double(src.size()), d /= double(px.size()), p /= double(px.size());
    std::printf("  %-36s %4dx%-4d -> %dx%d: mean(dsc) - mean(source) %+.4f, mean(PIL BOX) - mean(source) %+.4f\n",
                fs::path(files[i].first).filename().c_str(), sw, sh, ow, oh, d - s, p - s);
    EXPECT_LE(std::abs(d - s), 0.1) << files[i].first;
    src_mean += s / double(ds.size());
    pil_mean += p / double(ds.size());
    got.insert(got.end(), px.begin(), px.end());
    naive.insert(naive.end(), want.begin(), want.end());
  }
  ASSERT_EQ(got.size(), pil.size());
  double bias = 0, pil_bias = 0;
  int worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    bias += int(got[i]) - int(naive[i]);
    pil_bias += int(got[i]) - int(pil[i]);
    worst = std::max(worst, std::abs(int(got[i]) - int(naive[i])));
  }
  bias /= double(got.size());
  pil_bias /= double(got.size());
  std::printf("10 photos -> 256: mean(dsc - naive area) %+.4f (max |diff| %d); mean(dsc - PIL BOX) %+.4f, "
              "PSNR vs PIL %.1f dB\n", bias, worst, pil_bias, Psnr(got, pil));
  EXPECT_LE(std::abs(bias), 0.1);
  EXPECT_LE(worst, 1);  // floating-point ties only
  EXPECT_GT(Psnr(got, naive), 60.0);
  // Measured 34.7 dB: same photo, different footprints at the edges of each output pixel.
  EXPECT_GT(Psnr(got, pil), 33.0);
}

TEST(ImageTree, PngColourTypesMatchPilAndNeverDependOnThePreviousImage) {
  auto dir = ScratchDir();
  fs::create_directories(dir + "/ref");
  PilRef("pngs '" + dir + "/ref'");
  fs::create_directories(dir + "/src/a");
  std::vector<std::string> names;
  for (const auto& f : fs::directory_iterator(dir + "/ref"))
    if (f.path().extension() == ".png") names.push_back(f.path().stem().string());
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) { return a + ".png" < b + ".png"; });
  ASSERT_EQ(names.size(), 11u);
  for (const auto& n : names) fs::copy_file(dir + "/ref/" + n + ".png", dir + "/src/a/" + n + ".png");
  std::vector<std::vector<uint8_t>> outs;
  for (int threads : {1, 2}) {
    const std::string out = dir + "/t" + std::to_string(threads) + ".beton";
    writer::Build(dir + "/src", out, Opts("default", threads));
    outs.push_back(ReadFile(out));
    Dataset ds(out, {.verify = true});
    ASSERT_EQ(ds.size(), names.size());
    for (uint64_t i = 0; i < ds.size(); ++i) {
      EXPECT_EQ(ds.entry(i).width, 37);
      EXPECT_EQ(ds.entry(i).height, 23);
      const auto got = Pixels(ds, i), want = ReadFile(dir + "/ref/" + names[i] + ".rgb");
      ASSERT_EQ(got.size(), want.size()) << names[i];
      size_t wrong = 0;
      for (size_t k = 0; k < got.size(); ++k) wrong += got[k] != want[k];
      EXPECT_EQ(wrong, 0u) << names[i] << ", threads " << threads << ": bytes differing from PIL's convert(\"RGB\")";
    }
  }
  EXPECT_EQ(outs[0], outs[1]) << "--threads 1 and --threads 2 must write the same bytes";
}

// A copy of a baseline JPEG whose frame header declares w x h (only the header is ever read).
std::vector<uint8_t> WithJpegSize(std::vector<uint8_t> j, int w, int h) {
  for (size_t i = 2; i + 9 < j.size();) {
    if (j[i] != 0xFF) break;
    if (j[i + 1] >= 0xC0 && j[i + 1] <= 0xC2) {
      j[i + 5] = uint8_t(h >> 8), j[i + 6] = uint8_t(h);
      j[i + 7] = uint8_t(w >> 8), j[i + 8] = uint8_t(w);
      return j;
    }
    i += 2 + (size_t(j[i + 2]) << 8 | j[i + 3]);
  }
  ADD_FAILURE() << "no SOF marker";
  return j;
}

uint32_t Crc32(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
  }
  return ~c;
}

// A valid PNG whose IHDR declares w x h (CRC fixed up, so only the size is wrong).
std::vector<uint8_t> PngDeclaring(int w, int h) {
  std::vector<uint8_t> px(4 * 4 * 3, 99);
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  img.width = img.height = 4;
  img.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  EXPECT_TRUE(png_image_write_to_memory(&img, nullptr, &size, 0, px.data(), 0, nullptr));
  std::vector<uint8_t> out(size);
  EXPECT_TRUE(png_image_write_to_memory(&img, out.data(), &size, 0, px.data(), 0, nullptr));
  out.resize(size);
  // Signature (8), then IHDR: length (4), "IHDR" (4), width, height, ..., CRC over type + data.
  for (int k = 0; k < 4; ++k) {
    out[16 + k] = uint8_t(uint32_t(w) >> (24 - 8 * k));
    out[20 + k] = uint8_t(uint32_t(h) >> (24 - 8 * k));
  }
  const uint32_t crc = Crc32(&out[12], 17);
  for (int k = 0; k < 4; ++k) out[29 + k] = uint8_t(crc >> (24 - 8 * k));
  return out;
}

// `dsc build SRC OUT ARGS` must fail with exit 1, a message naming `file` and containing `what`,
// and no output file.
void ExpectBuildRefused(const std::string& src, const std::string& args, const std::string& file, const std::string& what) {
  const std::string out = fs::path(src).parent_path().string() + "/refused.beton";
  std::string log;
  EXPECT_EQ(RunDsc("build " + src + " " + out + " --quiet " + args, &log), 1) << log;
  EXPECT_TRUE(Contains(log, file)) << log;
  EXPECT_TRUE(Contains(log, what)) << log;
  EXPECT_FALSE(fs::exists(out));
  for (const auto& e : fs::directory_iterator(fs::path(out).parent_path()))
    EXPECT_FALSE(Contains(e.path().filename().string(), "refused")) << "left behind: " << e.path();
}

TEST(Limits, PixelLimitIsCheckedFromTheHeaderBeforeDecoding) {
  auto dir = ScratchDir();
  const auto cifar = TreeFiles(SubsetTree(1));
  fs::create_directories(dir + "/jpg/a");
  WriteFile(dir + "/jpg/a/big.jpg", WithJpegSize(ReadFile(cifar[0].first), 20000, 20000));
  ExpectBuildRefused(dir + "/jpg", "", dir + "/jpg/a/big.jpg", "400000000 pixels");
  fs::create_directories(dir + "/png/a");
  WriteFile(dir + "/png/a/big.png", PngDeclaring(20000, 20000));
  ExpectBuildRefused(dir + "/png", "", dir + "/png/a/big.png", "400000000 pixels");
  // --max-pixels sets the limit: 32 x 32 = 1024 pixels.
  fs::create_directories(dir + "/small/a");
  fs::copy_file(cifar[0].first, dir + "/small/a/x.jpg");
  ExpectBuildRefused(dir + "/small", "--max-pixels 1023", dir + "/small/a/x.jpg", "--max-pixels");
  fs::create_directories(dir + "/smallpng/a");
  WriteFile(dir + "/smallpng/a/y.png", PngDeclaring(4, 4));
  ExpectBuildRefused(dir + "/smallpng", "--max-pixels 15", dir + "/smallpng/a/y.png", "--max-pixels");
  std::string log;
  EXPECT_EQ(RunDsc("build " + dir + "/small " + dir + "/ok.beton --quiet --max-pixels 1024", &log), 0) << log;
  // Within the limit, but far more rows than its bytes can hold (deflate expands at most 1032:1):
  // refused from the header, where 507 MB were allocated and zero-filled first.
  fs::create_directories(dir + "/thin/a");
  WriteFile(dir + "/thin/a/z.png", PngDeclaring(13000, 13000));
  ExpectBuildRefused(dir + "/thin", "", dir + "/thin/a/z.png", "truncated PNG: 13000x13000 needs");
  fs::create_directories(dir + "/empty/a");
  WriteFile(dir + "/empty/a/e.png", "", 0);
  ExpectBuildRefused(dir + "/empty", "", dir + "/empty/a/e.png", "empty file (0 bytes)");
}

// A lossless progressive rewrite of a 3-component JPEG (libjpeg transcoding, as jpegtran does; its
// -scans takes at most 100): one scan for the DC of all components, then `passes`
// successive-approximation scans for every AC coefficient of every component on its own.
std::vector<uint8_t> ManyScans(const std::vector<uint8_t>& jpeg, int passes) {
  std::vector<jpeg_scan_info> scans;
  scans.push_back({3, {0, 1, 2, 0}, 0, 0, 0, 0});
  for (int c = 0; c < 3; ++c)
    for (int k = 1; k < 64; ++k)
      for (int p = passes - 1; p >= 0; --p) scans.push_back({1, {c, 0, 0, 0}, k, k, p == passes - 1 ? 0 : p + 1, p});
  jpeg_decompress_struct d;
  jpeg_error_mgr de, ce;
  d.err = jpeg_std_error(&de);
  jpeg_create_decompress(&d);
  jpeg_mem_src(&d, jpeg.data(), static_cast<unsigned long>(jpeg.size()));
  jpeg_read_header(&d, TRUE);
  jvirt_barray_ptr* coefs = jpeg_read_coefficients(&d);
  jpeg_compress_struct c;
  c.err = jpeg_std_error(&ce);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long len = 0;
  jpeg_mem_dest(&c, &buf, &len);
  jpeg_copy_critical_parameters(&d, &c);
  c.scan_info = scans.data();
  c.num_scans = int(scans.size());
  c.optimize_coding = TRUE;  // progressive AC scans need their own Huffman tables
  jpeg_write_coefficients(&c, coefs);
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  jpeg_finish_decompress(&d);
  jpeg_destroy_decompress(&d);
  std::vector<uint8_t> out(buf, buf + len);
  std::free(buf);
  return out;
}

TEST(Limits, ProgressiveScanLimitInTheWriterAndTheLoaderDecoder) {
  auto dir = ScratchDir();
  const auto cifar = TreeFiles(SubsetTree(1));
  const auto ok = ManyScans(ReadFile(cifar[0].first), 1);    // 1 + 189 scans: fine
  const auto bomb = ManyScans(ReadFile(cifar[0].first), 3);  // 1 + 567 scans: over the limit of 500
  const auto want = ReferenceDecode(ReadFile(cifar[0].first));
  ASSERT_EQ(ReferenceDecode(ok), want);  // the same coefficients, only reordered
  // The loader's decoder (libjpeg API).
  kernels::JpegDecoder dec;
  int w = 0, h = 0;
  std::vector<uint8_t> px(32 * 32 * 3);
  ASSERT_TRUE(dec.ReadHeader(ok.data(), ok.size(), &w, &h)) << dec.error();
  ASSERT_TRUE(dec.DecodeRGB(px.data(), 32 * 3)) << dec.error();
  EXPECT_EQ(px, want);
  ASSERT_TRUE(dec.ReadHeader(bomb.data(), bomb.size(), &w, &h)) << dec.error();
  EXPECT_FALSE(dec.DecodeRGB(px.data(), 32 * 3));
  EXPECT_TRUE(Contains(dec.error(), "scans")) << dec.error();
  ASSERT_TRUE(dec.ReadHeader(ok.data(), ok.size(), &w, &h)) << dec.error();  // still usable afterwards
  ASSERT_TRUE(dec.DecodeRGB(px.data(), 32 * 3)) << dec.error();
  EXPECT_EQ(px, want);
  // The writer (TurboJPEG).
  fs::create_directories(dir + "/src/a");
  WriteFile(dir + "/src/a/ok.jpg", ok);
  std::string log;
  EXPECT_EQ(RunDsc("build " + dir + "/src " + dir + "/ok.beton --quiet", &log), 0) << log;
  WriteFile(dir + "/src/a/zbomb.jpg", bomb);
  ExpectBuildRefused(dir + "/src", "", dir + "/src/a/zbomb.jpg", "scans");
}

TEST(Limits, MaxFileSizeIsCheckedBeforeReading) {
  auto dir = ScratchDir();
  const auto cifar = TreeFiles(SubsetTree(1));
  fs::create_directories(dir + "/src/a");
  uint64_t largest = 0;
  std::string largest_name;
  for (int i = 0; i < 3; ++i) {
    const std::string name = dir + "/src/a/" + std::to_string(i) + ".jpg";
    fs::copy_file(cifar[size_t(i)].first, name);
    if (fs::file_size(name) > largest) largest = fs::file_size(name), largest_name = name;
  }
  ExpectBuildRefused(dir + "/src", "--max-file-size " + std::to_string(largest - 1), largest_name, "--max-file-size");
  const std::string m = fs::relative(largest_name, dir).string() + "\t0\n";
  WriteFile(dir + "/list.tsv", m.data(), m.size());
  ExpectBuildRefused(dir + "/list.tsv", "--max-file-size " + std::to_string(largest - 1), "a/", "--max-file-size");
  std::string log;
  EXPECT_EQ(RunDsc("build " + dir + "/src " + dir + "/ok.beton --quiet --max-file-size " + std::to_string(largest), &log), 0) << log;
}

TEST(Limits, SymlinkLoopInATreeIsAnErrorNamingTheLink) {
  auto dir = ScratchDir();
  const auto cifar = TreeFiles(SubsetTree(1));
  fs::create_directories(dir + "/src/a/sub");
  fs::create_directories(dir + "/src/b");
  fs::copy_file(cifar[0].first, dir + "/src/a/x.jpg");
  fs::copy_file(cifar[1].first, dir + "/src/b/y.jpg");
  // A link to another folder that is not an ancestor is followed (its files are samples too).
  fs::create_directory_symlink("../../b", dir + "/src/a/sub/to_b");
  std::string log;
  ASSERT_EQ(RunDsc("build " + dir + "/src " + dir + "/ok.beton --quiet", &log), 0) << log;
  EXPECT_EQ(Dataset(dir + "/ok.beton").size(), 3u);
  fs::create_directory_symlink("..", dir + "/src/a/sub/up");  // a class folder's subfolder links back to the root
  ExpectBuildRefused(dir + "/src", "", dir + "/src/a/sub/up", "symlink loop");
  fs::remove(dir + "/src/a/sub/up");
  fs::create_directory_symlink(".", dir + "/src/b/self");
  // Met first through a/sub/to_b, which is fine: the message names the path that loops.
  ExpectBuildRefused(dir + "/src", "", "b/self: symlink loop", "symlink loop");
}

}  // namespace
}  // namespace dsc::test
