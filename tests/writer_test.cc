// Every source layout and encoding round-trips through a built file; builds are deterministic.
// (Errors and limits: writer_errors_test.cc; resizes against PIL: writer_reference_test.cc.)
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
#include "tests/writer_helpers.h"
#include "writer/build.h"
#include "writer/source.h"

namespace dsc::test {
namespace {

namespace fs = std::filesystem;
using format::Encoding;

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

}  // namespace
}  // namespace dsc::test
