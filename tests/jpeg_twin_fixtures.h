// What the JPEG twin tests share: TurboJPEG and libjpeg references, lossless transcodes (restart
// intervals, progressive, arithmetic), the twin run on a stream, and the dsc files of real images.
#pragma once
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

using kernels::DecodeTwinRGB;
using kernels::TwinParseResult;

// libjpeg's API set up as tjDecompress2 sets it for TJFLAG_ACCURATEDCT (and TJFLAG_FASTUPSAMPLE unless
// `fancy`), for the sampling layouts TurboJPEG refuses to name (tjDecompressHeader3 fails on them).
// false on a warning.
inline bool Libjpeg(const std::vector<uint8_t>& jpeg, std::vector<uint8_t>* rgb, int* w, int* h, bool fancy);

// TurboJPEG's decode, box upsampling (TJFLAG_FASTUPSAMPLE) or with `fancy` its default fancy
// upsampling; false on an error or a warning (tjDecompress2 fails on both).
inline bool Turbo(const std::vector<uint8_t>& jpeg, std::vector<uint8_t>* rgb, int* w, int* h, bool fancy = false) {
  thread_local tjhandle tj = tjInitDecompress();
  int sub, cs;
  if (tjDecompressHeader3(tj, jpeg.data(), jpeg.size(), w, h, &sub, &cs) != 0)
    return std::strstr(tjGetErrorStr2(tj), "subsampling") ? Libjpeg(jpeg, rgb, w, h, fancy) : false;
  rgb->assign(size_t(*w) * *h * 3, 0);
  return tjDecompress2(tj, jpeg.data(), jpeg.size(), rgb->data(), *w, 0, *h, TJPF_RGB,
                       (fancy ? 0 : TJFLAG_FASTUPSAMPLE) | TJFLAG_ACCURATEDCT) == 0;
}

// MCUs per row, from TurboJPEG's header reading.
inline int McusX(const std::vector<uint8_t>& jpeg) {
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

inline Twin RunTwin(const uint8_t* head, size_t hn, const uint8_t* body, size_t bn, bool split, bool fancy = false) {
  Twin t;
  t.r = DecodeTwinRGB(head, hn, body, bn, split, &t.rgb, &t.w, &t.h, fancy);
  return t;
}
inline Twin RunTwin(const std::vector<uint8_t>& jpeg, bool split, bool fancy = false) {
  return RunTwin(nullptr, 0, jpeg.data(), jpeg.size(), split, fancy);
}

// First differing byte as "pixel (x, y) channel c: twin v, libjpeg-turbo u".
inline std::string FirstDiff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, int w) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (a[i] != b[i])
      return "pixel (" + std::to_string(i / 3 % w) + ", " + std::to_string(i / 3 / w) + ") channel " +
             std::to_string(i % 3) + ": twin " + std::to_string(a[i]) + ", libjpeg-turbo " + std::to_string(b[i]);
  return a.size() == b.size() ? "" : "sizes differ";
}

// Expects the twin (sequential and, when asked, interval by interval) to equal TurboJPEG (with the
// same upsampling).
inline void ExpectEqual(const std::vector<uint8_t>& whole, const Twin& t, const std::string& name, bool fancy = false) {
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
inline void JErrExit(j_common_ptr c) { longjmp(reinterpret_cast<JErr*>(c->err)->jump, 1); }

inline bool Libjpeg(const std::vector<uint8_t>& jpeg, std::vector<uint8_t>* rgb, int* w, int* h, bool fancy) {
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
inline std::vector<uint8_t> Transcode(const std::vector<uint8_t>& in, Recode how, unsigned restart = 0) {
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
inline std::vector<uint8_t> Encode(const std::vector<uint8_t>& rgb, int w, int h, const int (*samp)[2], J_COLOR_SPACE jpeg_cs,
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
inline std::string BuildDsc(const std::string& tree, const std::string& name, int max_resolution) {
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
inline std::string PhotoTree() { return PhotosTree(DSC_PHOTOS); }

// The photos' dsc file (built with --max-resolution 512, shared tables).
inline const std::string& PhotoFile() {
  static const std::string f = [] {
    const std::string tree = PhotoTree();
    return tree.empty() ? std::string() : BuildDsc(tree, "photos512", 512);
  }();
  return f;
}

// Runs every sample of a dsc file through the twin (from its two pieces) and TurboJPEG.
inline void ExpectFileEqual(const std::string& file, size_t* count, bool fancy = false) {
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

}  // namespace dsc::test
