// The GPU JPEG decoder's host twin (kernels/jpeg_twin.h) against libjpeg-turbo's TurboJPEG
// (tjDecompress2, TJPF_RGB, FASTUPSAMPLE | ACCURATEDCT): every real CIFAR-10 image and every photo of
// imagenet-photos-500 through dsc files (shared tables), the photos again with restart intervals decoded
// sequentially and interval by interval, every sampling layout at odd sizes. (Unsupported and corrupt
// streams, dsc verify and the staged GPU batches: jpeg_twin_faults_test.cc.)
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

// ---- Tests ------------------------------------------------------------------------------------------

// The table build as it was (a run loop per code): the reference for kernels::BuildTwinHuffman.
bool ReferenceHuffman(const uint8_t* counts, const uint8_t* vals, bool dc, kernels::TwinHuffman* h) {
  std::memset(h, 0, sizeof(*h));
  int total = 0, maxlen = 0;
  for (int l = 1; l <= 16; ++l) total += counts[l - 1], maxlen = counts[l - 1] ? l : maxlen;
  if (total > 256) return false;
  for (int i = 0; dc && i < total; ++i)
    if (vals[i] > 15) return false;
  for (int32_t l = 1, code = 0; l <= maxlen; ++l, code <<= 1)
    if ((code += counts[l - 1]) >= (int32_t(1) << l)) return false;
  std::memcpy(h->vals, vals, size_t(total));
  h->count = uint16_t(total);
  int32_t code = 0;
  for (int l = 1, k = 0; l <= 16; ++l) {
    const int n = counts[l - 1];
    h->valoffset[l] = k - code;
    h->maxcode[l] = n ? code + n - 1 : -1;
    for (int i = 0; i < n && l <= kernels::kTwinLookBits; ++i)
      for (int j = 0; j < 1 << (kernels::kTwinLookBits - l); ++j)
        h->look[((code + i) << (kernels::kTwinLookBits - l)) + j] = uint16_t((l << 8) | vals[k + i]);
    code = (code + n) << 1;
    k += n;
  }
  h->maxcode[17] = 0x7FFFFFFF;
  h->defined = 1;
  return true;
}

// BuildTwinHuffman's tables (whole vector runs per code length) equal the reference's byte for byte:
// every DHT table of the photos, and random ones with codes of every length 1..16, full or not, and
// tables libjpeg rejects.
TEST(JpegTwin, HuffmanTablesEqualTheReferenceBuild) {
  ASSERT_FALSE(PhotoFile().empty());
  auto expect_same = [](const uint8_t* counts, const uint8_t* vals, bool dc, const std::string& what) {
    kernels::TwinHuffman a, b;
    std::memset(&a, 0xA5, sizeof a);
    const bool ok = kernels::BuildTwinHuffman(counts, vals, dc, &a);
    ASSERT_EQ(ok, ReferenceHuffman(counts, vals, dc, &b)) << what;
    ASSERT_EQ(std::memcmp(&a, &b, sizeof a), 0) << what;
  };
  Dataset ds(PhotoFile());
  std::vector<uint8_t> scratch;
  size_t tables = 0;
  for (uint64_t i = 0; i < ds.size(); ++i) {
    const Payload p = ds.ReadPayload(i, &scratch);
    for (size_t at = 2; at + 4 <= p.size && p.data[at] == 0xFF && p.data[at + 1] != 0xDA;) {
      const size_t len = size_t(p.data[at + 2]) << 8 | p.data[at + 3];
      for (size_t q = at + 4; p.data[at + 1] == 0xC4 && q + 17 <= at + 2 + len;) {
        int total = 0;
        for (int l = 0; l < 16; ++l) total += p.data[q + 1 + size_t(l)];
        expect_same(p.data + q + 1, p.data + q + 17, (p.data[q] >> 4) == 0, "photo " + std::to_string(i));
        ++tables;
        q += 17 + size_t(total);
      }
      at += 2 + len;
    }
  }
  EXPECT_GE(tables, 4 * ds.size() * 9 / 10);
  std::mt19937 rng(13);
  for (int t = 0; t < 20000; ++t) {
    uint8_t counts[16] = {}, vals[256];
    // Codes handed out length by length from what the shorter ones leave (the all-ones code reserved
    // unless the table is to be rejected).
    const bool overfull = t % 10 == 0;
    int64_t room = 2;
    int total = 0;
    for (int l = 1; l <= 16 && total < 256; ++l, room *= 2) {
      const int64_t most = std::min<int64_t>({room - (overfull ? 0 : 1), 256 - total, 255});
      const int n = most <= 0 || rng() % 3 == 0 ? 0 : int(rng() % uint32_t(most + 1));
      counts[l - 1] = uint8_t(n);
      total += n;
      room -= n;
    }
    const bool dc = t % 4 == 0;
    for (int k = 0; k < 256; ++k) vals[k] = uint8_t(dc && t % 8 ? rng() % 16 : rng());
    expect_same(counts, vals, dc, "random table " + std::to_string(t));
  }
}

// kernels::TwinCopy (vector loops, write prefetch) writes exactly memcpy's bytes: every size to 1 KiB
// and some larger, at every source and destination alignment within a line, nothing outside.
TEST(JpegTwin, TwinCopyEqualsMemcpy) {
  std::mt19937 rng(5);
  std::vector<uint8_t> src(70000), a(src.size() + 256), b(a.size());
  for (uint8_t& v : src) v = uint8_t(rng());
  std::vector<size_t> sizes;
  for (size_t n = 0; n <= 1024; ++n) sizes.push_back(n);
  for (size_t n : {4095, 4096, 4097, 65536, 69000}) sizes.push_back(n);
  for (size_t n : sizes)
    for (size_t so = 0; so < 64; so += n > 1024 ? 13 : 7)
      for (size_t d = 0; d < 64; d += n > 1024 ? 17 : 5) {
        std::fill(a.begin(), a.end(), 0xA5);
        std::fill(b.begin(), b.end(), 0xA5);
        kernels::TwinCopy(a.data() + 64 + d, src.data() + so, n);
        std::memcpy(b.data() + 64 + d, src.data() + so, n);
        ASSERT_TRUE(a == b) << "size " << n << " source +" << so << " destination +" << d;
      }
}

TEST(JpegTwin, AllCifar10ImagesEqualLibjpegTurbo) {
  size_t n = 0;
  for (const char* split : {"train", "test"}) {
    const std::string f = BuildDsc(CifarJpegRoot() + "/" + split, std::string("cifar-") + split, 0);
    ExpectFileEqual(f, &n);
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(n, 60000u);
}

TEST(JpegTwin, AllPhotosAt512EqualLibjpegTurbo) {
  ASSERT_FALSE(PhotoFile().empty()) << "could not unpack " << DSC_PHOTOS;
  size_t n = 0;
  ExpectFileEqual(PhotoFile(), &n);
  EXPECT_EQ(n, 500u);
}

// Fancy upsampling (TurboJPEG's default, LoaderOptions::fancy_upsampling): the CIFAR-10 test split
// and every photo, equal to TurboJPEG without TJFLAG_FASTUPSAMPLE.
TEST(JpegTwin, FancyUpsamplingEqualsLibjpegTurbo) {
  size_t n = 0;
  ExpectFileEqual(BuildDsc(CifarJpegRoot() + "/test", "cifar-test", 0), &n, true);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_FALSE(PhotoFile().empty());
  ExpectFileEqual(PhotoFile(), &n, true);
  EXPECT_EQ(n, 10500u);
}

// The marker finder's SIMD versions (AVX-512 and AVX2, chosen by FindTwinMarkers) list the same
// positions as the scalar reference: on bytes rich in 0xFF / 0x00 / RSTn at every start, end and
// lookahead limit around the 64-byte blocks, and on every photo's payload whole.
TEST(JpegTwin, MarkerFinderSimdEqualsScalar) {
  if (!kernels::UseAvx2()) GTEST_SKIP() << "no AVX2 here (or DSC_FORCE_SCALAR=1): only the scalar path runs";
  struct Limit {
    explicit Limit(bool on) { kernels::LimitToAvx2(on); }
    ~Limit() { kernels::LimitToAvx2(false); }
  };
  auto expect_same = [](const uint8_t* d, size_t i, size_t e, size_t n, const std::string& what) {
    std::vector<uint32_t> want(e - i + 2), got(e - i + 2);
    want.resize(kernels::FindTwinMarkersScalar(d, i, e, n, want.data()));
    for (bool avx2_only : {false, true}) {
      Limit limit(avx2_only);
      std::fill(got.begin(), got.end(), 0xDEADu);
      got.resize(e - i + 2);
      got.resize(kernels::FindTwinMarkers(d, i, e, n, got.data()));
      ASSERT_EQ(got, want) << what << " [" << i << ", " << e << ") n " << n << (avx2_only ? " AVX2" : " AVX-512 if present");
    }
  };
  std::mt19937 rng(7);
  const uint8_t rich[] = {0xFF, 0xFF, 0xFF, 0x00, 0xD0, 0xD7, 0xD9, 0x12};
  size_t listed = 0;
  for (int round = 0; round < 400; ++round) {
    std::vector<uint8_t> d(1 + rng() % 400);
    const int density = 1 + int(rng() % 4);  // from all special bytes to a few
    for (auto& b : d) b = int(rng() % 8) < 2 * density ? rich[rng() % 8] : uint8_t(rng());
    const size_t n = d.size(), i = rng() % n, e = i + rng() % (n - i + 1);
    expect_same(d.data(), i, e, n, "random round " + std::to_string(round));
    expect_same(d.data(), 0, n, n, "random round " + std::to_string(round) + " whole");
    if (HasFatalFailure()) return;
    std::vector<uint32_t> all(n + 2);
    listed += kernels::FindTwinMarkersScalar(d.data(), 0, n, n, all.data());
  }
  EXPECT_GT(listed, 10000u);  // the bytes did hold markers
  // A block full of markers, one of 0xFF 0x00 pairs, and a marker as the last byte of each block.
  std::vector<uint8_t> full(300, 0xFF), pairs(300), edge(300, 0x11);
  for (size_t k = 0; k < pairs.size(); ++k) pairs[k] = k % 2 ? 0x00 : 0xFF;
  for (size_t k = 63; k < edge.size(); k += 64) edge[k] = 0xFF;
  for (const auto* v : {&full, &pairs, &edge})
    for (size_t n : {size_t(64), size_t(65), size_t(128), size_t(129), size_t(300)}) expect_same(v->data(), 0, n, n, "pattern");
  ASSERT_FALSE(PhotoFile().empty());
  Dataset ds(PhotoFile());
  std::vector<uint8_t> scratch;
  for (uint64_t k = 0; k < ds.size(); ++k) {
    const Payload p = ds.ReadPayload(k, &scratch);
    expect_same(p.data, 0, p.size, p.size, "photo " + std::to_string(k));
    if (HasFatalFailure()) return;
  }
}

// Every photo with restart intervals (one MCU row per interval, and a divisor of the row for some):
// sequential = interval by interval = libjpeg-turbo.
TEST(JpegTwin, PhotosWithRestartIntervalsSequentialAndSplit) {
  ASSERT_FALSE(PhotoFile().empty());
  Dataset ds(PhotoFile());
  std::vector<uint8_t> scratch;
  size_t split_units = 0;
  for (uint64_t i = 0; i < ds.size(); ++i) {
    const Payload p = ds.ReadPayload(i, &scratch);
    const std::vector<uint8_t> whole(p.data, p.data + p.size);
    const int mx = McusX(whole);
    unsigned r = unsigned(mx);
    if (i % 2) {  // a divisor of the row: several intervals per row
      for (unsigned d = 4; d >= 2; --d)
        if (mx % int(d) == 0) {
          r = unsigned(mx) / d;
          break;
        }
    }
    const std::vector<uint8_t> rst = Transcode(whole, Recode::kRestart, r);
    ASSERT_FALSE(rst.empty());
    const Twin seq = RunTwin(rst, false), split = RunTwin(rst, true);
    const std::string name = "photo " + std::to_string(i) + " restart " + std::to_string(r);
    ExpectEqual(rst, seq, name + " sequential");
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_EQ(split.r.status, kernels::kTwinOk) << name << ": " << kernels::TwinReasonName(split.r.reason);
    ASSERT_TRUE(split.rgb == seq.rgb) << name << ": split differs from sequential";
    split_units += (seq.h + 7) / 8;
  }
  EXPECT_GT(split_units, 1000u);
}

// The bounds of a payload's restart intervals: from the interval index dsc build appends
// (kernels::AddTwinIntervalIndex), and from a marker scan of the same payload without it.
struct Bounds {
  kernels::TwinParseResult r;
  kernels::TwinFrame f;
  std::vector<uint32_t> begin, end;
  size_t data = 0, size = 0;
  bool indexed = false;
};
Bounds ScanBounds(const std::vector<uint8_t>& jpeg, uint32_t last_unit = ~uint32_t(0)) {
  Bounds b;
  const uint32_t most = uint32_t(jpeg.size() / 2 + 2);
  b.begin.assign(most, 0);
  b.end.assign(most, 0);
  kernels::TwinScan scan;
  scan.unit_begin = b.begin.data();
  scan.unit_end = b.end.data();
  scan.last_unit = last_unit;
  b.r = kernels::ParseTwin(nullptr, 0, jpeg.data(), jpeg.size(), &b.f, nullptr, &scan, most);
  b.data = size_t(scan.data - jpeg.data());
  b.size = scan.size;
  b.indexed = scan.indexed;
  const uint32_t n = std::min(b.f.intervals, last_unit == ~uint32_t(0) ? b.f.intervals : last_unit + 1);
  b.begin.resize(n);
  b.end.resize(n);
  return b;
}

TEST(JpegTwin, IntervalIndexGivesTheBoundsAMarkerScanFinds) {
  ASSERT_FALSE(PhotoFile().empty());
  Dataset ds(PhotoFile());
  std::vector<uint8_t> scratch;
  size_t indexed = 0;
  for (uint64_t i = 0; i < ds.size(); ++i) {
    const Payload p = ds.ReadPayload(i, &scratch);
    const std::vector<uint8_t> whole(p.data, p.data + p.size);
    const std::string name = "photo " + std::to_string(i);
    const Bounds with = ScanBounds(whole);
    ASSERT_EQ(with.r.status, kernels::kTwinOk) << name;
    const uint32_t n = with.f.intervals;
    const uint8_t* lens = kernels::FindTwinIntervalIndex(whole.data(), whole.size(), with.data, n);
    if (n < 2) {  // no restart markers: nothing to index
      EXPECT_EQ(lens, nullptr) << name;
      continue;
    }
    ASSERT_NE(lens, nullptr) << name << ": " << n << " intervals, no index";
    ASSERT_TRUE(with.indexed) << name;
    ++indexed;
    // The same payload without the segment (what a build before the index wrote).
    std::vector<uint8_t> plain(whole);
    const size_t seg = kernels::TwinIndexSegmentSize(n);
    plain.erase(plain.end() - 2 - long(seg), plain.end() - 2);
    // Independent of the twin: the RST markers' positions (libjpeg-turbo's transcoder put them there).
    std::vector<uint32_t> at;
    ASSERT_EQ(kernels::ScanRestartMarkers(plain.data(), plain.size(), &at), n - 1) << name;
    ASSERT_EQ(kernels::ScanRestartMarkers(whole.data(), whole.size(), nullptr), n - 1) << name << ": the index read as markers";
    size_t from = kernels::JpegPrefixLength(plain.data(), plain.size());
    for (uint32_t k = 0; k < n; ++k) {
      const size_t to = k + 1 < n ? at[k] : plain.size() - 2;
      ASSERT_EQ(size_t(lens[2 * k] | lens[2 * k + 1] << 8), to - from) << name << " interval " << k;
      from = to + 2;
    }
    const Bounds without = ScanBounds(plain);
    ASSERT_FALSE(without.indexed);
    EXPECT_EQ(with.begin, without.begin) << name;
    EXPECT_EQ(with.end, without.end) << name;
    EXPECT_EQ(with.size, without.size) << name;
    // A crop's scan, up to an interval in the middle.
    const Bounds half = ScanBounds(whole, n / 2), half_plain = ScanBounds(plain, n / 2);
    ASSERT_TRUE(half.indexed);
    EXPECT_EQ(half.end, half_plain.end) << name;
    EXPECT_EQ(half.size, half_plain.size) << name;
    // Decoders that do not know the segment skip it.
    std::vector<uint8_t> a, b;
    int w, h, w2, h2;
    ASSERT_TRUE(Turbo(whole, &a, &w, &h)) << name;
    ASSERT_TRUE(Turbo(plain, &b, &w2, &h2)) << name;
    ASSERT_TRUE(a == b) << name;
    // The writer's step adds exactly this segment, and only once.
    std::vector<uint8_t> again(plain);
    ASSERT_TRUE(kernels::AddTwinIntervalIndex(&again)) << name;
    EXPECT_TRUE(again == whole) << name;
    EXPECT_FALSE(kernels::AddTwinIntervalIndex(&again)) << name;
    // A length that does not match the data: ignored, the bytes are scanned.
    std::vector<uint8_t> wrong(whole);
    const size_t k = (i * 7) % n, len_at = size_t(lens - whole.data()) + 2 * k;
    wrong[len_at] = uint8_t(wrong[len_at] + 1);
    const Bounds scanned = ScanBounds(wrong);
    EXPECT_FALSE(scanned.indexed) << name << " interval " << k;
    EXPECT_EQ(scanned.end, without.end) << name;
  }
  EXPECT_GT(indexed, 400u);
}

TEST(JpegTwin, IntervalIndexOnlyWhereItDescribesTheBytes) {
  ASSERT_FALSE(PhotoFile().empty());
  Dataset ds(PhotoFile());
  std::vector<uint8_t> scratch;
  const Payload p = ds.ReadPayload(0, &scratch);
  std::vector<uint8_t> plain(p.data, p.data + p.size);
  const Bounds b = ScanBounds(plain);
  ASSERT_GE(b.f.intervals, 2u);
  plain.erase(plain.end() - 2 - long(kernels::TwinIndexSegmentSize(b.f.intervals)), plain.end() - 2);
  // A fill byte before a marker: the lengths would not lead from one interval to the next.
  std::vector<uint8_t> fill(plain);
  fill.insert(fill.begin() + long(b.data + b.end[0]), 0xFF);
  ASSERT_EQ(ScanBounds(fill).r.status, kernels::kTwinOk);
  const std::vector<uint8_t> before = fill;
  EXPECT_FALSE(kernels::AddTwinIntervalIndex(&fill));
  EXPECT_TRUE(fill == before);
  // Without restart markers, and when something other than EOI follows the data.
  const std::vector<uint8_t> none = Transcode(plain, Recode::kRestart, 0);
  ASSERT_FALSE(none.empty());
  std::vector<uint8_t> copy(none);
  EXPECT_FALSE(kernels::AddTwinIntervalIndex(&copy));
  std::vector<uint8_t> com(plain);
  const uint8_t comment[] = {0xFF, 0xFE, 0x00, 0x04, 'h', 'i'};
  com.insert(com.end() - 2, comment, comment + sizeof comment);
  ASSERT_EQ(ScanBounds(com).r.status, kernels::kTwinOk);
  EXPECT_FALSE(kernels::AddTwinIntervalIndex(&com));
  // A damaged identifier: not an index.
  std::vector<uint8_t> idx(plain);
  ASSERT_TRUE(kernels::AddTwinIntervalIndex(&idx));
  idx[idx.size() - 2 - kernels::TwinIndexSegmentSize(b.f.intervals) + 5] ^= 1;
  EXPECT_EQ(kernels::FindTwinIntervalIndex(idx.data(), idx.size(), b.data, b.f.intervals), nullptr);
  EXPECT_FALSE(ScanBounds(idx).indexed);
}

// All sampling layouts the twin supports, at odd sizes (partial MCUs, odd chroma edges), with and
// without restart intervals, from real photo pixels.
TEST(JpegTwin, SamplingLayoutsAtOddSizes) {
  ASSERT_FALSE(PhotoFile().empty());
  Dataset ds(PhotoFile());
  std::vector<uint8_t> scratch;
  std::vector<uint8_t> rgb;
  int pw, ph;
  const Payload p = ds.ReadPayload(3, &scratch);
  ASSERT_TRUE(Turbo(std::vector<uint8_t>(p.data, p.data + p.size), &rgb, &pw, &ph));
  const int layouts[][3][2] = {{{1, 1}, {1, 1}, {1, 1}}, {{2, 1}, {1, 1}, {1, 1}}, {{2, 2}, {1, 1}, {1, 1}},
                               {{1, 2}, {1, 1}, {1, 1}}, {{2, 2}, {2, 1}, {1, 2}}, {{2, 2}, {2, 2}, {1, 1}},
                               {{2, 2}, {1, 2}, {2, 1}}, {{2, 1}, {2, 1}, {1, 1}}};
  const int sizes[][2] = {{1, 1}, {7, 5}, {17, 9}, {33, 31}, {101, 67}, {255, 129}};
  int cases = 0;
  for (const auto& sz : sizes) {
    const int w = sz[0], h = sz[1];
    std::vector<uint8_t> crop(size_t(w) * h * 3);
    for (int y = 0; y < h; ++y) std::memcpy(&crop[size_t(y) * w * 3], &rgb[size_t(y) * pw * 3], size_t(w) * 3);
    for (const auto& l : layouts) {
      for (unsigned restart : {0u, 1u}) {
        const auto jpeg = Encode(crop, w, h, l, JCS_YCbCr, restart);
        ASSERT_FALSE(jpeg.empty());
        const std::string name = std::to_string(w) + "x" + std::to_string(h) + " sampling " + std::to_string(l[0][0]) +
                                 "x" + std::to_string(l[0][1]) + "," + std::to_string(l[1][0]) + "x" +
                                 std::to_string(l[1][1]) + "," + std::to_string(l[2][0]) + "x" + std::to_string(l[2][1]) +
                                 " restart " + std::to_string(restart);
        ExpectEqual(jpeg, RunTwin(jpeg, false), name);
        ASSERT_FALSE(HasFatalFailure());
        ExpectEqual(jpeg, RunTwin(jpeg, true), name + " split");
        ASSERT_FALSE(HasFatalFailure());
        ExpectEqual(jpeg, RunTwin(jpeg, true, true), name + " split fancy", true);
        ASSERT_FALSE(HasFatalFailure());
        ++cases;
      }
    }
    const auto gray = Encode(crop, w, h, nullptr, JCS_GRAYSCALE, unsigned(w + 7) / 8);
    ExpectEqual(gray, RunTwin(gray, true), "gray " + std::to_string(w) + "x" + std::to_string(h));
    ExpectEqual(gray, RunTwin(gray, true, true), "gray fancy " + std::to_string(w) + "x" + std::to_string(h), true);
    ASSERT_FALSE(HasFatalFailure());
  }
  EXPECT_EQ(cases, 6 * 8 * 2);
}

// The CPU loader's planar path (no crop, box upsampling) took Cr's horizontal factor from Cb's: with
// Cb and Cr sampled differently its pixels were wrong (up to 209 levels off libjpeg) and it read past
// the Cr plane (ASan: heap-buffer-overflow), while the GPU twin was right. Such streams now take
// libjpeg's own colour conversion; every layout equals libjpeg.
TEST(JpegTwin, CpuLoaderEqualsLibjpegWhenCbAndCrAreSampledDifferently) {
  ASSERT_FALSE(PhotoFile().empty());
  Dataset photos(PhotoFile());
  std::vector<uint8_t> scratch, rgb;
  int pw, ph;
  const Payload p = photos.ReadPayload(3, &scratch);
  ASSERT_TRUE(Turbo(std::vector<uint8_t>(p.data, p.data + p.size), &rgb, &pw, &ph));
  const int w = 96, h = 80;
  ASSERT_GE(pw, w);
  ASSERT_GE(ph, h);
  std::vector<uint8_t> crop(size_t(w) * h * 3);
  for (int y = 0; y < h; ++y) std::memcpy(&crop[size_t(y) * w * 3], &rgb[size_t(y) * pw * 3], size_t(w) * 3);
  const int layouts[][3][2] = {{{2, 2}, {1, 1}, {1, 1}}, {{2, 2}, {2, 2}, {1, 1}}, {{2, 2}, {2, 1}, {1, 2}},
                               {{2, 1}, {2, 1}, {1, 1}}, {{2, 2}, {1, 2}, {2, 1}}, {{2, 2}, {1, 1}, {2, 2}}};
  const int n = int(sizeof layouts / sizeof layouts[0]);
  // dsc build refuses these streams (TurboJPEG names no subsampling for them), but a file can hold
  // them: written here with the format's builder.
  const std::string path = ScratchDir("-planes") + "/planes.beton";
  std::vector<std::vector<uint8_t>> want(n);
  {
    writer::AtomicFile out(path);
    writer::FileBuilder fb(&out, 1 << 16, false);
    for (int i = 0; i < n; ++i) {
      writer::Encoded e;
      e.payload = Encode(crop, w, h, layouts[i], JCS_YCbCr);
      ASSERT_FALSE(e.payload.empty());
      int ww, wh;
      ASSERT_TRUE(Libjpeg(e.payload, &want[size_t(i)], &ww, &wh, false));
      e.width = uint16_t(w);
      e.height = uint16_t(h);
      e.encoding = uint8_t(format::Encoding::kJpeg);
      const int32_t labels[2] = {i, 0};  // label i: layout i
      fb.Add(e, labels);
    }
    format::Meta m;
    m.fields = {{format::FieldType::kImage, "image", {}}, {format::FieldType::kLabel, "label", {}}};
    fb.Finish(m);
    out.Commit();
  }
  LoaderOptions o;
  o.order = Order::kSequential;
  o.dtype = DType::kUint8;
  o.layout = Layout::kNHWC;
  o.batch_size = uint32_t(n);
  o.threads = 1;
  Loader l(path, o);
  int seen = 0;
  for (const Batch& b : l.epoch(0)) {
    for (uint32_t j = 0; j < b.size; ++j, ++seen) {
      const int i = b.labels[0][j];
      ASSERT_TRUE(i >= 0 && i < n);
      const uint8_t* got = b.images_as<uint8_t>() + size_t(j) * b.image_bytes();
      EXPECT_TRUE(std::equal(got, got + b.image_bytes(), want[size_t(i)].begin()))
          << "layout " << i << ": " << FirstDiff(std::vector<uint8_t>(got, got + b.image_bytes()), want[size_t(i)], w);
    }
  }
  EXPECT_EQ(seen, n);
}

}  // namespace
}  // namespace dsc::test
