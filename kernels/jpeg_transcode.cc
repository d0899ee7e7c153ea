#include "kernels/jpeg_transcode.h"

#include <turbojpeg.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
// jpeglib.h needs FILE and size_t declared first.
#include <jerror.h>
#include <jpeglib.h>

#include "kernels/jpeg_codec.h"
#include "kernels/jpeg_decoder.h"

namespace dsc::kernels {

int PickRestartInterval(const RestartPolicy& p, int per_row, int rows) {
  if (per_row < 1 || rows < 1 || int64_t(per_row) * rows <= p.min_mcus) return 0;
  if (p.fixed > 0) return p.fixed;
  int best = per_row;
  for (int d = 2; d < per_row; ++d) {
    if (per_row % d) continue;
    const int gap = std::abs(d - p.target), best_gap = std::abs(best - p.target);
    if (gap < best_gap || (gap == best_gap && d > best)) best = d;
  }
  return std::min(best, 65535);  // DRI holds 16 bits; a row of more MCUs than that is not 1 interval
}

void McuGrid(int width, int height, int components, int max_h_samp, int max_v_samp, int* per_row, int* rows,
             int* mcu_width, int* mcu_height) {
  const int mw = components == 1 ? 8 : 8 * max_h_samp, mh = components == 1 ? 8 : 8 * max_v_samp;
  if (mcu_width) *mcu_width = mw;
  if (mcu_height) *mcu_height = mh;
  *per_row = (width + mw - 1) / mw;
  *rows = (height + mh - 1) / mh;
}

struct JpegRestartWriter::State {
  jpeg_decompress_struct d;
  jpeg_compress_struct c;
  jpeg_destination_mgr dest;
  jpeg_progress_mgr progress;
  std::vector<uint8_t>* out = nullptr;
  struct Err {
    jpeg_error_mgr mgr;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
  } err;
  std::vector<JSAMPROW> rows;
  bool created = false;
};

namespace {

using State = JpegRestartWriter::State;

void ErrorExit(j_common_ptr c) {
  auto* s = static_cast<State*>(c->client_data);
  (*c->err->format_message)(c, s->err.message);
  std::longjmp(s->err.jump, 1);
}

void EmitMessage(j_common_ptr c, int level) {
  if (level < 0) ErrorExit(c);  // a warning: corrupt or truncated data is an error here
}

void Progress(j_common_ptr c) {
  if (!c->is_decompressor) return;
  auto* d = reinterpret_cast<j_decompress_ptr>(c);
  if (d->input_scan_number <= kMaxJpegScans) return;
  auto* s = static_cast<State*>(c->client_data);
  std::snprintf(s->err.message, sizeof s->err.message, "progressive JPEG with more than %d scans", kMaxJpegScans);
  std::longjmp(s->err.jump, 1);
}

// The destination: the caller's vector, grown by doubling.
void InitDest(j_compress_ptr c) {
  auto* s = static_cast<State*>(c->client_data);
  s->out->resize(std::max<size_t>(s->out->capacity(), 1 << 16));
  c->dest->next_output_byte = s->out->data();
  c->dest->free_in_buffer = s->out->size();
}

boolean EmptyDest(j_compress_ptr c) {
  auto* s = static_cast<State*>(c->client_data);
  const size_t used = s->out->size();
  s->out->resize(used * 2);
  c->dest->next_output_byte = s->out->data() + used;
  c->dest->free_in_buffer = s->out->size() - used;
  return TRUE;
}

void TermDest(j_compress_ptr c) {
  auto* s = static_cast<State*>(c->client_data);
  s->out->resize(s->out->size() - c->dest->free_in_buffer);
}

}  // namespace

JpegRestartWriter::JpegRestartWriter() : s_(new State()) {
  State& s = *s_;
  s.d.err = s.c.err = jpeg_std_error(&s.err.mgr);
  s.err.mgr.error_exit = ErrorExit;
  s.err.mgr.emit_message = EmitMessage;
  s.progress.progress_monitor = Progress;
  s.dest.init_destination = InitDest;
  s.dest.empty_output_buffer = EmptyDest;
  s.dest.term_destination = TermDest;
  Fresh();
}

// Fresh libjpeg objects for every image: libjpeg-turbo keeps a compressor's Huffman tables across
// images (jpeg_set_defaults does not replace tables that exist), so the optimised tables of one
// transcode would leak into the next encode, and the output would depend on which thread encoded
// what before. Creating the objects costs microseconds.
void JpegRestartWriter::Fresh() {
  State& s = *s_;
  if (s.created) {
    jpeg_destroy_compress(&s.c);
    jpeg_destroy_decompress(&s.d);
  }
  jpeg_create_decompress(&s.d);
  jpeg_create_compress(&s.c);
  s.created = true;
  s.d.client_data = s.c.client_data = &s;
  s.d.progress = &s.progress;
  s.c.dest = &s.dest;
}

JpegRestartWriter::~JpegRestartWriter() {
  jpeg_destroy_compress(&s_->c);
  jpeg_destroy_decompress(&s_->d);
}

namespace {

// The bodies run under the setjmp of their caller (JpegRestartWriter::Run): libjpeg's error_exit
// longjmps out of them, so they hold only trivially destructible locals.
void TranscodeBody(State& s, const uint8_t* jpeg, size_t size, const RestartPolicy& policy, std::vector<uint8_t>* out,
                   RestartResult* r) {
  jpeg_mem_src(&s.d, jpeg, static_cast<unsigned long>(size));
  jpeg_read_header(&s.d, TRUE);
  int max_h = 1, max_v = 1;
  for (int i = 0; i < s.d.num_components; ++i) {
    max_h = std::max(max_h, s.d.comp_info[i].h_samp_factor);
    max_v = std::max(max_v, s.d.comp_info[i].v_samp_factor);
  }
  McuGrid(int(s.d.image_width), int(s.d.image_height), s.d.num_components, max_h, max_v, &r->mcus_per_row, &r->mcu_rows,
          &r->mcu_width, &r->mcu_height);
  const int interval = PickRestartInterval(policy, r->mcus_per_row, r->mcu_rows);
  if (interval == 0) {
    jpeg_abort_decompress(&s.d);
    return;
  }
  jvirt_barray_ptr* coefs = jpeg_read_coefficients(&s.d);
  jpeg_copy_critical_parameters(&s.d, &s.c);  // no jpeg_copy_markers: APPn and COM are dropped
  s.c.optimize_coding = TRUE;
  s.c.restart_interval = unsigned(interval);
  s.out = out;
  jpeg_write_coefficients(&s.c, coefs);
  jpeg_finish_compress(&s.c);
  jpeg_finish_decompress(&s.d);
  r->interval = interval;
}

void EncodeBody(State& s, const uint8_t* pixels, int width, int height, int channels, int quality, int subsampling,
                const RestartPolicy& policy, std::vector<uint8_t>* out, RestartResult* r) {
  const bool gray = channels == 1 || subsampling == TJSAMP_GRAY;
  const int samp = gray ? TJSAMP_GRAY : subsampling;
  McuGrid(width, height, gray ? 1 : 3, tjMCUWidth[samp] / 8, tjMCUHeight[samp] / 8, &r->mcus_per_row, &r->mcu_rows,
          &r->mcu_width, &r->mcu_height);
  s.rows.resize(size_t(height));
  for (int y = 0; y < height; ++y) s.rows[size_t(y)] = const_cast<JSAMPROW>(pixels + size_t(y) * width * channels);
  s.c.image_width = JDIMENSION(width);
  s.c.image_height = JDIMENSION(height);
  s.c.input_components = channels;
  s.c.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  // What tjCompress2 sets (libjpeg-turbo 2.1 turbojpeg.c, setCompDefaults) with no flags.
  jpeg_set_defaults(&s.c);
  jpeg_set_quality(&s.c, quality, TRUE);
  s.c.dct_method = JDCT_FASTEST;
  jpeg_set_colorspace(&s.c, gray ? JCS_GRAYSCALE : JCS_YCbCr);
  s.c.comp_info[0].h_samp_factor = tjMCUWidth[samp] / 8;
  s.c.comp_info[0].v_samp_factor = tjMCUHeight[samp] / 8;
  for (int i = 1; i < s.c.num_components; ++i) s.c.comp_info[i].h_samp_factor = s.c.comp_info[i].v_samp_factor = 1;
  r->interval = PickRestartInterval(policy, r->mcus_per_row, r->mcu_rows);
  s.c.restart_interval = unsigned(r->interval);
  s.out = out;
  jpeg_start_compress(&s.c, TRUE);
  while (s.c.next_scanline < s.c.image_height)
    jpeg_write_scanlines(&s.c, &s.rows[s.c.next_scanline], s.c.image_height - s.c.next_scanline);
  jpeg_finish_compress(&s.c);
}

}  // namespace

template <typename Body>
bool JpegRestartWriter::Run(const Body& body) {
  Fresh();
  // libjpeg reports errors through error_exit, which longjmps here.
  if (setjmp(s_->err.jump)) {
    error_ = s_->err.message;
    jpeg_abort_compress(&s_->c);
    jpeg_abort_decompress(&s_->d);
    return false;
  }
  body();
  return true;
}

bool JpegRestartWriter::Transcode(const uint8_t* jpeg, size_t size, const RestartPolicy& policy,
                                  std::vector<uint8_t>* out, RestartResult* r) {
  *r = RestartResult();
  return Run([&] { TranscodeBody(*s_, jpeg, size, policy, out, r); });
}

bool JpegRestartWriter::Encode(const uint8_t* pixels, int width, int height, int channels, int quality,
                               int subsampling, const RestartPolicy& policy, std::vector<uint8_t>* out,
                               RestartResult* r) {
  *r = RestartResult();
  return Run([&] { EncodeBody(*s_, pixels, width, height, channels, quality, subsampling, policy, out, r); });
}

size_t ScanRestartMarkers(const uint8_t* d, size_t n, std::vector<uint32_t>* at) {
  size_t found = 0;
  const size_t start = JpegPrefixLength(d, n);  // table bytes before the scan may hold FF D0..D7
  if (start == 0) return 0;
  const uint8_t* p = d + start;
  const uint8_t* end = d + n;
  // In entropy-coded data a 0xFF is followed by 0x00 (stuffing), a fill 0xFF or a RST marker; any other
  // marker (EOI, or the interval index's APP15 before it) ends the scan. memchr makes the scan run at
  // memory speed.
  while (p + 1 < end && (p = static_cast<const uint8_t*>(std::memchr(p, 0xFF, size_t(end - p - 1))))) {
    if (p[1] == 0xFF) {
      ++p;
      continue;
    }
    if (p[1] != 0x00 && (p[1] & 0xF8) != 0xD0) break;
    if (p[1] != 0x00) {
      ++found;
      if (at) at->push_back(uint32_t(p - d));
    }
    p += 2;
  }
  return found;
}

}  // namespace dsc::kernels
