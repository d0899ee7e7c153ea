// The GPU JPEG decoder's host twin (kernels/jpeg_twin.h) on what it must not decode: unsupported
// streams classified, what libjpeg refuses refused, corrupt ones reported without a crash; `dsc verify`
// of the twin, and staged batches through the GPU stages run on the CPU.
#include <gtest/gtest.h>
#include <jpeglib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <turbojpeg.h>

#include <algorithm>
#include <csetjmp>
#include <cstring>
#include <random>
#include <set>

#include "kernels/cpu.h"
#include "kernels/jpeg_codec.h"
#include "kernels/jpeg_transcode.h"
#include "kernels/jpeg_twin.h"
#include "kernels/jpeg_twin_batch.h"
#include "reader/dataset.h"
#include "reader/loader.h"
#include "tests/jpeg_twin_fixtures.h"
#include "tests/test_util.h"
#include "writer/atomic_file.h"
#include "writer/build.h"
#include "writer/file_builder.h"

namespace dsc::test {
namespace {

TEST(JpegTwin, UnsupportedStreamsAreClassified) {
  ASSERT_FALSE(PhotoFile().empty());
  Dataset ds(PhotoFile());
  std::vector<uint8_t> scratch;
  const Payload p = ds.ReadPayload(7, &scratch);
  const std::vector<uint8_t> whole(p.data, p.data + p.size);
  std::vector<uint8_t> rgb;
  int w, h;
  ASSERT_TRUE(Turbo(whole, &rgb, &w, &h));
  auto expect = [](const std::vector<uint8_t>& jpeg, int reason, const char* what) {
    ASSERT_FALSE(jpeg.empty()) << what;
    const Twin t = RunTwin(jpeg, false);
    EXPECT_EQ(t.r.status, kernels::kTwinUnsupported) << what;
    EXPECT_EQ(t.r.reason, reason) << what << ": " << kernels::TwinReasonName(t.r.reason);
  };
  expect(Transcode(whole, Recode::kProgressive), kernels::kReasonProgressive, "progressive");
  expect(Transcode(whole, Recode::kArithmetic), kernels::kReasonArithmetic, "arithmetic");
  const int mx = McusX(whole);
  unsigned foreign = 3;
  while (mx % int(foreign) == 0) ++foreign;
  expect(Transcode(whole, Recode::kRestart, foreign), kernels::kReasonRestartLayout, "foreign restart interval");
  expect(Encode(rgb, w, h, nullptr, JCS_CMYK), kernels::kReasonComponents, "CMYK");
  expect(Encode(rgb, w, h, nullptr, JCS_RGB), kernels::kReasonColorTransform, "RGB JPEG");
  const int odd[3][2] = {{3, 1}, {1, 1}, {1, 1}};
  expect(Encode(rgb, w, h, odd, JCS_YCbCr), kernels::kReasonSampling, "3x1 sampling");
  const int chroma_max[3][2] = {{1, 1}, {2, 1}, {1, 1}};
  expect(Encode(rgb, w, h, chroma_max, JCS_YCbCr), kernels::kReasonSampling, "chroma above luma");
  // 12-bit: patch SOF's precision byte (walking the marker segments: APP data may hold a thumbnail).
  std::vector<uint8_t> twelve = whole;
  size_t at = 2;
  while (at + 4 < twelve.size() && twelve[at + 1] != 0xC0) at += 2 + (size_t(twelve[at + 2]) << 8 | twelve[at + 3]);
  ASSERT_LT(at + 4, twelve.size());
  twelve[at + 4] = 12;
  expect(twelve, kernels::kReasonPrecision, "12-bit");
}

// Offset of the first marker segment `code` (its 0xFF byte), walking the segments from SOI.
size_t FindSegment(const std::vector<uint8_t>& jpeg, uint8_t code) {
  size_t at = 2;
  while (at + 4 < jpeg.size() && jpeg[at + 1] != code) at += 2 + (size_t(jpeg[at + 2]) << 8 | jpeg[at + 3]);
  return at + 4 < jpeg.size() ? at : 0;
}

// Streams libjpeg refuses (an error, or a warning the CPU decoder treats as one) are corrupt for the
// twin too: an audit found it decoding both kinds below, so the GPU path handed out images the CPU
// path refused.
TEST(JpegTwin, WhatLibjpegRefusesTheTwinRefuses) {
  // A JFIF major version other than 1: libjpeg warns "unknown JFIF revision number".
  const std::vector<uint8_t> gray(16 * 16 * 3, 128);
  const int s221[3][2] = {{2, 2}, {2, 2}, {1, 1}};
  std::vector<uint8_t> jfif = Encode(gray, 16, 16, s221, JCS_YCbCr);
  const size_t app0 = FindSegment(jfif, 0xE0);
  ASSERT_NE(app0, 0u);
  ASSERT_EQ(std::memcmp(&jfif[app0 + 4], "JFIF", 5), 0);
  std::vector<uint8_t> rgb;
  int w, h;
  ASSERT_TRUE(Libjpeg(jfif, &rgb, &w, &h, false));
  ASSERT_EQ(RunTwin(jfif, false).r.status, kernels::kTwinOk);
  jfif[app0 + 9] = 2;  // the major version
  EXPECT_FALSE(Libjpeg(jfif, &rgb, &w, &h, false));
  EXPECT_EQ(RunTwin(jfif, false).r.status, kernels::kTwinCorrupt);
  // 2x2,2x2,2x2 sampling: 12 blocks per MCU, over libjpeg's 10 for an interleaved scan. libjpeg's
  // encoder refuses it too, so: the 2x2,2x2,1x1 encode of a 16x16 mid-gray image (every coefficient
  // 0), Cr's factors raised to 2x2 in SOF, and the one MCU's entropy data rewritten for 12 blocks with
  // the standard tables: 4 luma blocks "00" (DC 0) "1010" (EOB), then 8 chroma blocks "00" "00".
  std::vector<uint8_t> big = Encode(gray, 16, 16, s221, JCS_YCbCr);
  const size_t sof = FindSegment(big, 0xC0), sos = FindSegment(big, 0xDA);
  ASSERT_NE(sof, 0u);
  ASSERT_NE(sos, 0u);
  ASSERT_EQ(big[sof + 17], 0x11);  // Cr: 1x1
  big[sof + 17] = 0x22;
  big.resize(sos + 2 + (size_t(big[sos + 2]) << 8 | big[sos + 3]));
  for (uint8_t b : {0x28, 0xA2, 0x8A, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xD9}) big.push_back(b);
  EXPECT_FALSE(Libjpeg(big, &rgb, &w, &h, false));
  const Twin t = RunTwin(big, false);
  EXPECT_EQ(t.r.status, kernels::kTwinCorrupt) << kernels::TwinReasonName(t.r.reason);
  // The same MCU at 2x2,2x2,1x1 (9 blocks) decodes in both, to mid-gray: the bits above are right.
  std::vector<uint8_t> nine = big;
  nine[sof + 17] = 0x11;
  const size_t data = sos + 2 + (size_t(big[sos + 2]) << 8 | big[sos + 3]);
  nine.resize(data);
  for (uint8_t b : {0x28, 0xA2, 0x8A, 0x00, 0x00, 0x0F, 0xFF, 0xD9}) nine.push_back(b);  // 24 + 16 + 4 bits, 1-padded
  ASSERT_TRUE(Libjpeg(nine, &rgb, &w, &h, false));
  const Twin ok = RunTwin(nine, false);
  ASSERT_EQ(ok.r.status, kernels::kTwinOk);
  EXPECT_TRUE(ok.rgb == rgb);
}

// Damaged streams: never a crash or an out-of-bounds access (ASan), and whenever the twin accepts a
// damaged stream that libjpeg-turbo decodes without complaint, the pixels are the same.
TEST(JpegTwin, CorruptStreamsAreReportedNeverCrash) {
  ASSERT_FALSE(PhotoFile().empty());
  Dataset ds(PhotoFile());
  std::vector<uint8_t> scratch;
  std::mt19937 rng(7);
  int corrupt = 0, accepted_equal = 0, runs = 0;
  for (uint64_t i : {0u, 11u, 42u}) {
    const Payload p = ds.ReadPayload(i, &scratch);
    const std::vector<uint8_t> whole(p.data, p.data + p.size);
    const int mx = McusX(whole);
    for (const auto& src : {whole, Transcode(whole, Recode::kRestart, unsigned(mx))}) {
      for (int k = 0; k < 60; ++k) {
        std::vector<uint8_t> bad = src;
        const int kind = k % 3;
        if (kind == 0) {
          bad.resize(size_t(rng() % bad.size()));  // truncated anywhere
        } else {
          const int flips = 1 + int(rng() % 4);
          for (int f = 0; f < flips; ++f) bad[200 + rng() % (bad.size() - 200)] ^= uint8_t(1 + rng() % 255);
        }
        for (bool split : {false, true}) {
          const Twin t = RunTwin(bad, split);
          ++runs;
          if (t.r.status == kernels::kTwinCorrupt) {
            ++corrupt;
            continue;
          }
          if (t.r.status != kernels::kTwinOk) continue;
          std::vector<uint8_t> ref;
          int w, h;
          // What the twin decodes, libjpeg decodes without a warning (the CPU loader's errors): the
          // twin used to stop after the last MCU and take a stream with extraneous bytes, and hand
          // its garbage to training (an audit: 437 of 3,000 damaged streams).
          EXPECT_TRUE(Libjpeg(bad, &ref, &w, &h, false)) << "photo " << i << " damage " << k << (split ? " split" : "")
                                                         << ": the twin decoded a stream libjpeg warns about";
          if (Turbo(bad, &ref, &w, &h)) {
            EXPECT_TRUE(t.rgb == ref) << "photo " << i << " damage " << k << ": " << FirstDiff(t.rgb, ref, w);
            ++accepted_equal;
          }
        }
      }
    }
  }
  std::printf("%d damaged decodes: %d corrupt, %d accepted and equal to libjpeg-turbo\n", runs, corrupt, accepted_equal);
  EXPECT_GT(corrupt, runs / 2);
}

// `dsc verify --decode --decoder gpu-twin`: counts and exit codes on a real file and a file holding
// JPEGs the twin does not decode (stored inline, as the writer keeps already-JPEG files).
TEST(JpegTwin, VerifyCommand) {
  ASSERT_FALSE(PhotoFile().empty());
  std::string out;
  EXPECT_EQ(RunDsc("verify --decoder gpu '" + PhotoFile() + "'", &out), 2) << out;
  EXPECT_EQ(RunDsc("verify --decoder gpu-twin '" + PhotoFile() + "'", &out), 2) << out;  // needs --decode
  // A tree of progressive and arithmetic-coded copies of a few photos, built into a dsc file.
  Dataset ds(PhotoFile());
  std::vector<uint8_t> scratch;
  const std::string dir = ScratchDir("-twin-verify");
  for (int i = 0; i < 4; ++i) {
    const Payload p = ds.ReadPayload(uint64_t(i), &scratch);
    const std::vector<uint8_t> whole(p.data, p.data + p.size);
    ::mkdir((dir + "/tree").c_str(), 0755);
    ::mkdir((dir + "/tree/a").c_str(), 0755);
    WriteFile(dir + "/tree/a/p" + std::to_string(i) + ".jpg", Transcode(whole, Recode::kProgressive));
    WriteFile(dir + "/tree/a/b" + std::to_string(i) + ".jpg", whole);
  }
  // --restart-interval none: stored as they are (the default would transcode them to baseline).
  ASSERT_EQ(RunDsc("build --restart-interval none '" + dir + "/tree' '" + dir + "/f.beton'", &out), 0) << out;
  const int rc = RunDsc("verify --decode --decoder gpu-twin '" + dir + "/f.beton'", &out);
  std::printf("%s", out.c_str());
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("4 supported (4 equal to libjpeg-turbo, 0 mismatching), 0 corrupt"), std::string::npos) << out;
  EXPECT_NE(out.find("4 unsupported (progressive: 4)"), std::string::npos) << out;
}

// A staged batch run through the GPU stages on the CPU (DecodeTwinBatchCpu, the kernels' per-thread
// functions in launch order) equals libjpeg-turbo image by image.
void ExpectBatchEqual(kernels::TwinBatchStager& st, const std::vector<std::vector<uint8_t>>& wholes,
                      const std::string& what) {
  ASSERT_TRUE(st.Finish());
  const auto& h = st.header();
  ASSERT_EQ(h.images, wholes.size());
  std::vector<int16_t> coef(h.total_blocks * 64);
  std::vector<uint8_t> planes(h.total_blocks * 64), rgb(h.rgb_bytes);
  std::vector<int> status(h.images);
  std::vector<uint8_t> staged(st.bytes_used());
  std::memcpy(staged.data(), &h, st.bytes_used());  // what the device receives: exactly the used bytes
  kernels::DecodeTwinBatchCpu(staged.data(), coef.data(), planes.data(), rgb.data(), status.data());
  const auto* images = kernels::TwinImages(staged.data());
  for (uint32_t i = 0; i < h.images; ++i) {
    std::vector<uint8_t> ref;
    int w, hh;
    ASSERT_TRUE(Turbo(wholes[i], &ref, &w, &hh));
    ASSERT_EQ(status[i], 0) << what << " image " << i << ": " << kernels::TwinReasonName(status[i]);
    ASSERT_EQ(images[i].frame.width, w);
    ASSERT_EQ(images[i].frame.height, hh);
    ASSERT_EQ(std::memcmp(rgb.data() + images[i].rgb, ref.data(), ref.size()), 0) << what << " image " << i;
  }
}

TEST(JpegTwin, StagedBatchesThroughTheGpuStagesOnCpu) {
  ASSERT_FALSE(PhotoFile().empty());
  std::vector<uint8_t> buf(64u << 20);
  kernels::TwinBatchStager st(buf.data(), buf.size(), 1024, 1 << 16);
  // CIFAR test split, batches of 512 from the dsc file's two pieces: the shared tables are staged once.
  {
    Dataset ds(BuildDsc(CifarJpegRoot() + "/test", "cifar-test", 0));
    std::vector<uint8_t> scratch;
    std::vector<std::vector<uint8_t>> wholes;
    size_t tables = 0, images = 0;
    for (uint64_t i = 0; i < ds.size(); ++i) {
      const auto parts = ds.ReadPayloadParts(i, &scratch);
      std::vector<uint8_t> whole(parts.head.data, parts.head.data + parts.head.size);
      whole.insert(whole.end(), parts.body.data, parts.body.data + parts.body.size);
      ASSERT_EQ(st.Add(parts.head.data, parts.head.size, parts.body.data, parts.body.size).status, kernels::kTwinOk);
      wholes.push_back(std::move(whole));
      if (wholes.size() == 512 || i + 1 == ds.size()) {
        ExpectBatchEqual(st, wholes, "cifar batch ending at " + std::to_string(i));
        tables += st.header().table_sets;
        images += st.header().images;
        ASSERT_FALSE(HasFatalFailure());
        st.Reset();
        wholes.clear();
      }
    }
    EXPECT_EQ(images, 10000u);
    std::printf("CIFAR test split: %zu table sets staged for %zu images\n", tables, images);
    EXPECT_LT(tables * 10, images);
  }
  // Photos with restart intervals: many units per image.
  {
    Dataset ds(PhotoFile());
    std::vector<uint8_t> scratch;
    std::vector<std::vector<uint8_t>> wholes;
    for (uint64_t i = 0; i < 40; ++i) {
      const Payload p = ds.ReadPayload(i, &scratch);
      const std::vector<uint8_t> whole(p.data, p.data + p.size);
      wholes.push_back(Transcode(whole, Recode::kRestart, unsigned(McusX(whole))));
      ASSERT_EQ(st.Add(nullptr, 0, wholes.back().data(), wholes.back().size()).status, kernels::kTwinOk);
    }
    ExpectBatchEqual(st, wholes, "photos with restart intervals");
    EXPECT_GT(st.header().units, 40u * 20);
  }
  // Unsupported and corrupt payloads are refused and leave the batch untouched.
  {
    st.Reset();
    Dataset ds(PhotoFile());
    std::vector<uint8_t> scratch;
    const Payload p = ds.ReadPayload(5, &scratch);
    const std::vector<uint8_t> whole(p.data, p.data + p.size);
    const auto prog = Transcode(whole, Recode::kProgressive);
    EXPECT_EQ(st.Add(nullptr, 0, prog.data(), prog.size()).status, kernels::kTwinUnsupported);
    std::vector<uint8_t> cut(whole.begin(), whole.begin() + long(whole.size() / 2));
    EXPECT_EQ(st.Add(nullptr, 0, cut.data(), cut.size()).status, kernels::kTwinCorrupt);
    ASSERT_TRUE(st.Finish());
    EXPECT_EQ(st.header().images, 0u);
    EXPECT_EQ(st.header().units, 0u);
  }
}

}  // namespace
}  // namespace dsc::test
