// The GPU JPEG decoder's host twin (kernels/jpeg_twin.h) against libjpeg-turbo's TurboJPEG
// (tjDecompress2, TJPF_RGB, FASTUPSAMPLE | ACCURATEDCT): every real CIFAR-10 image and every photo of
// imagenet-photos-500 through dsc files (shared tables), the photos again with restart intervals decoded
// sequentially and interval by interval, every sampling layout at odd sizes, unsupported streams
// classified, corrupt ones reported without a crash.
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
#include "tests/test_util.h"
#include "writer/atomic_file.h"
#include "writer/build.h"
#include "writer/file_builder.h"

namespace dsc::test {
namespace {

using kernels::DecodeTwinRGB;
using kernels::TwinParseResult;

// libjpeg's API set up as tjDecompress2 sets it for TJFLAG_ACCURATEDCT (and TJFLAG_FASTUPSAMPLE unless
// `fancy`), for the sampling layouts TurboJPEG refuses to name (tjDecompressHeader3 fails on them).
// false on a warning.
bool Libjpeg(const std::vector<uint8_t>& jpeg, std::vector<uint8_t>* rgb, int* w, int* h, bool fancy);

// TurboJPEG's decode, box upsampling (TJFLAG_FASTUPSAMPLE) or with `fancy` its default fancy
// upsampling; false on an error or a warning (tjDecompress2 fails on both).
bool Turbo(const std::vector<uint8_t>& jpeg, std::vector<uint8_t>* rgb, int* w, int* h, bool fancy = false) {
  thread_local tjhandle tj = tjInitDecompress();
  int sub, cs;
  if (tjDecompressHeader3(tj, jpeg.data(), jpeg.size(), w, h, &sub, &cs) != 0)
    return std::strstr(tjGetErrorStr2(tj), "subsampling") ? Libjpeg(jpeg, rgb, w, h, fancy) : false;
  rgb->assign(size_t(*w) * *h * 3, 0);
  return tjDecompress2(tj, jpeg.data(), jpeg.size(), rgb->data(), *w, 0, *h, TJPF_RGB,
                       (fancy ? 0 : TJFLAG_FASTUPSAMPLE) | TJFLAG_ACCURATEDCT) == 0;
}

// MCUs per row, from TurboJPEG's header reading.
int McusX(const std::vector<uint8_t>& jpeg) {
  thread_local tjhandle tj = tjInitDecompress();
  int w, h, sub, cs;
  if (tjDecompressHeader3(tj, jpeg.data(), jpeg.size(), &w, &h, &sub, &cs) != 0) return 0;
  return (w + tjMCUWidth[sub] - 1) / tjMCUWidth[sub];
}

struct Twin {
  TwinParseResult r;
  int w = 0, h = 0;
  std::vector<uint8_t> rgb;
};

Twin RunTwin(const uint8_t* head, size_t hn, const uint8_t* body, size_t bn, bool split, bool fancy = false) {
  Twin t;
  t.r = DecodeTwinRGB(head, hn, body, bn, split, &t.rgb, &t.w, &t.h, fancy);
  return t;
}
Twin RunTwin(const std::vector<uint8_t>& jpeg, bool split, bool fancy = false) {
  return RunTwin(nullptr, 0, jpeg.data(), jpeg.size(), split, fancy);
}

// First differing byte as "pixel (x, y) channel c: twin v, libjpeg-turbo u".
std::string FirstDiff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, int w) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (a[i] != b[i])
      return "pixel (" + std::to_string(i / 3 % w) + ", " + std::to_string(i / 3 / w) + ") channel " +
             std::to_string(i % 3) + ": twin " + std::to_string(a[i]) + ", libjpeg-turbo " + std::to_string(b[i]);
  return a.size() == b.size() ? "" : "sizes differ";
}

// Expects the twin (sequential and, when asked, interval by interval) to equal TurboJPEG (with the
// same upsampling).
void ExpectEqual(const std::vector<uint8_t>& whole, const Twin& t, const std::string& name, bool fancy = false) {
  std::vector<uint8_t> ref;
  int w, h;
  ASSERT_TRUE(Turbo(whole, &ref, &w, &h, fancy)) << name << ": libjpeg-turbo fails on a test input";
  ASSERT_EQ(t.r.status, kernels::kTwinOk) << name << ": " << kernels::TwinReasonName(t.r.reason) << " at byte "
                                          << t.r.offset;
  ASSERT_EQ(t.w, w) << name;
  ASSERT_EQ(t.h, h) << name;
  ASSERT_TRUE(t.rgb == ref) << name << ": " << FirstDiff(t.rgb, ref, w);
}

// ---- libjpeg helpers: transcode (restart intervals, progressive, arithmetic) and encode ----------

struct JErr {
  jpeg_error_mgr mgr;
  jmp_buf jump;
};
void JErrExit(j_common_ptr c) { longjmp(reinterpret_cast<JErr*>(c->err)->jump, 1); }

bool Libjpeg(const std::vector<uint8_t>& jpeg, std::vector<uint8_t>* rgb, int* w, int* h, bool fancy) {
  jpeg_decompress_struct d;
  JErr e;
  d.err = jpeg_std_error(&e.mgr);
  e.mgr.error_exit = JErrExit;
  jpeg_create_decompress(&d);
  if (setjmp(e.jump)) {
    jpeg_destroy_decompress(&d);
    return false;
  }
  jpeg_mem_src(&d, jpeg.data(), jpeg.size());
  jpeg_read_header(&d, TRUE);
  d.out_color_space = JCS_RGB;
  d.do_fancy_upsampling = fancy ? TRUE : FALSE;
  d.dct_method = JDCT_ISLOW;
  jpeg_start_decompress(&d);
  *w = int(d.output_width);
  *h = int(d.output_height);
  rgb->assign(size_t(*w) * *h * 3, 0);
  while (d.output_scanline < d.output_height) {
    JSAMPROW row = rgb->data() + size_t(d.output_scanline) * *w * 3;
    jpeg_read_scanlines(&d, &row, 1);
  }
  jpeg_finish_decompress(&d);
  const bool warned = e.mgr.num_warnings != 0;
  jpeg_destroy_decompress(&d);
  return !warned;
}

enum class Recode { kRestart, kProgressive, kArithmetic };

// Lossless transcode with libjpeg's coefficient API. For kRestart, `restart` MCUs per interval.
std::vector<uint8_t> Transcode(const std::vector<uint8_t>& in, Recode how, unsigned restart = 0) {
  jpeg_decompress_struct src;
  jpeg_compress_struct dst;
  JErr e1, e2;
  src.err = jpeg_std_error(&e1.mgr);
  e1.mgr.error_exit = JErrExit;
  dst.err = jpeg_std_error(&e2.mgr);
  e2.mgr.error_exit = JErrExit;
  unsigned char* out = nullptr;
  unsigned long out_size = 0;
  jpeg_create_decompress(&src);
  jpeg_create_compress(&dst);
  std::vector<uint8_t> result;
  if (setjmp(e1.jump) || setjmp(e2.jump)) {
    jpeg_destroy_decompress(&src);
    jpeg_destroy_compress(&dst);
    free(out);
    return {};
  }
  jpeg_mem_src(&src, in.data(), in.size());
  jpeg_read_header(&src, TRUE);
  jvirt_barray_ptr* coefs = jpeg_read_coefficients(&src);
  jpeg_copy_critical_parameters(&src, &dst);
  if (how == Recode::kRestart) dst.restart_interval = restart;
  if (how == Recode::kProgressive) jpeg_simple_progression(&dst);
  if (how == Recode::kArithmetic) dst.arith_code = TRUE;
  jpeg_mem_dest(&dst, &out, &out_size);
  jpeg_write_coefficients(&dst, coefs);
  jpeg_finish_compress(&dst);
  jpeg_finish_decompress(&src);
  result.assign(out, out + out_size);
  jpeg_destroy_decompress(&src);
  jpeg_destroy_compress(&dst);
  free(out);
  return result;
}

// Encodes rgb (w x h) with explicit sampling factors per component ({h, v} x 3), or grayscale / CMYK /
// RGB colour spaces.
std::vector<uint8_t> Encode(const std::vector<uint8_t>& rgb, int w, int h, const int (*samp)[2], J_COLOR_SPACE jpeg_cs,
                            unsigned restart = 0) {
  jpeg_compress_struct c;
  JErr e;
  c.err = jpeg_std_error(&e.mgr);
  e.mgr.error_exit = JErrExit;
  unsigned char* out = nullptr;
  unsigned long out_size = 0;
  jpeg_create_compress(&c);
  if (setjmp(e.jump)) {
    char msg[JMSG_LENGTH_MAX];
    c.err->format_message(reinterpret_cast<j_common_ptr>(&c), msg);
    std::printf("libjpeg encode: %s\n", msg);
    jpeg_destroy_compress(&c);
    free(out);
    return {};
  }
  jpeg_mem_dest(&c, &out, &out_size);
  c.image_width = JDIMENSION(w);
  c.image_height = JDIMENSION(h);
  const bool cmyk = jpeg_cs == JCS_CMYK;
  c.input_components = cmyk ? 4 : 3;
  c.in_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_colorspace(&c, jpeg_cs);
  jpeg_set_quality(&c, 85, TRUE);
  if (samp)
    for (int i = 0; i < 3; ++i) {
      c.comp_info[i].h_samp_factor = samp[i][0];
      c.comp_info[i].v_samp_factor = samp[i][1];
    }
  c.restart_interval = restart;
  jpeg_start_compress(&c, TRUE);
  const int n = c.input_components;
  std::vector<uint8_t> row(size_t(w) * n);
  while (c.next_scanline < c.image_height) {
    const uint8_t* s = rgb.data() + size_t(c.next_scanline) * w * 3;
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < n; ++k) row[size_t(x) * n + k] = k < 3 ? s[x * 3 + k] : uint8_t(x * 7);
    JSAMPROW r = row.data();
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  std::vector<uint8_t> result(out, out + out_size);
  jpeg_destroy_compress(&c);
  free(out);
  return result;
}

// ---- Data -------------------------------------------------------------------------------------------

// Built once per test process, in its scratch folder (never reused from an older build: the writer may
// have changed).
std::string BuildDsc(const std::string& tree, const std::string& name, int max_resolution) {
  static const std::string dir = ScratchDir("-twin-files");
  const std::string out = dir + "/" + name + ".beton";
  static std::set<std::string> built;
  if (!built.insert(out).second) return out;
  writer::BuildOptions o;
  o.log = [](const std::string&) {};
  o.encode.max_resolution = max_resolution;
  writer::Build(tree, out, o);
  return out;
}

// Unpacked once into the build tree; concurrent test processes each unpack privately and rename.
std::string PhotoTree() { return PhotosTree(DSC_PHOTOS); }

// The photos' dsc file (built with --max-resolution 512, shared tables).
const std::string& PhotoFile() {
  static const std::string f = [] {
    const std::string tree = PhotoTree();
    return tree.empty() ? std::string() : BuildDsc(tree, "photos512", 512);
  }();
  return f;
}

struct Sample {
  std::vector<uint8_t> whole;   // head + body
  Dataset::Parts parts;
};

// Runs every sample of a dsc file through the twin (from its two pieces) and TurboJPEG.
void ExpectFileEqual(const std::string& file, size_t* count, bool fancy = false) {
  Dataset ds(file);
  std::vector<uint8_t> scratch, whole;
  for (uint64_t i = 0; i < ds.size(); ++i) {
    const auto parts = ds.ReadPayloadParts(i, &scratch);
    whole.assign(parts.head.data, parts.head.data + parts.head.size);
    whole.insert(whole.end(), parts.body.data, parts.body.data + parts.body.size);
    const Twin t = RunTwin(parts.head.data, parts.head.size, parts.body.data, parts.body.size, false, fancy);
    ExpectEqual(whole, t, file + " sample " + std::to_string(i) + (fancy ? " fancy" : ""), fancy);
    if (::testing::Test::HasFatalFailure()) return;
    ++*count;
  }
}

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
