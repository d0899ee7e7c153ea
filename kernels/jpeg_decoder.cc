#include "kernels/jpeg_decoder.h"

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <vector>
// jpeglib.h needs FILE and size_t declared first.
#include <jerror.h>
#include <jpeglib.h>

#include "kernels/jpeg_crop.h"
#include "kernels/jpeg_seek.h"

namespace dsc::kernels {

// libjpeg reports errors by calling error_exit, which must not return: ours longjmps back here. The
// setjmp has to sit in the frame of the function that calls libjpeg, hence a macro.
#define DSC_JPEG_RETURN_FALSE_ON_ERROR(c) \
  if (setjmp(s_->err.jump)) {             \
    error_ = s_->err.message;             \
    jpeg_abort_decompress(c);             \
    return false;                         \
  }

struct JpegDecoder::State {
  jpeg_decompress_struct cinfo;
  jpeg_source_mgr src;  // reads pieces[0], pieces[1], ... in turn
  jpeg_progress_mgr progress;  // enforces kMaxJpegScans
  struct Piece {
    const uint8_t* data;
    size_t size;
  } pieces[3] = {};
  int next_piece = 0;
  JpegPieces stream;  // the stream given to ReadHeader (the crop path reads it again)
  IntervalAssembler intervals;
  SeekAssembler seek;
  struct Err {
    jpeg_error_mgr mgr;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
  } err;
  std::vector<JSAMPROW> rows;  // reused: whole-image reads let libjpeg upsample in place
  std::vector<uint8_t> planes[3];
  std::vector<JSAMPROW> plane_rows[3];
  J_DCT_METHOD dct = JDCT_ISLOW;  // set_fast_idct
};

void JpegDecoder::set_fast_idct(bool fast) { s_->dct = fast ? JDCT_IFAST : JDCT_ISLOW; }

namespace {

void ErrorExit(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegDecoder::State*>(c->client_data);
  (*c->err->format_message)(c, e->err.message);
  std::longjmp(e->err.jump, 1);
}

void EmitMessage(j_common_ptr c, int level) {
  if (level < 0) ErrorExit(c);  // a warning: corrupt or truncated data
}

// libjpeg calls this while it absorbs a multi-scan file (as TurboJPEG's TJFLAG_LIMITSCANS does).
void Progress(j_common_ptr c) {
  if (!c->is_decompressor) return;
  auto* d = reinterpret_cast<j_decompress_ptr>(c);
  if (d->input_scan_number <= kMaxJpegScans) return;
  auto* e = reinterpret_cast<JpegDecoder::State*>(c->client_data);
  std::snprintf(e->err.message, sizeof e->err.message, "progressive JPEG with more than %d scans", kMaxJpegScans);
  std::longjmp(e->err.jump, 1);
}

void InitSource(j_decompress_ptr) {}
void TermSource(j_decompress_ptr) {}

boolean FillInput(j_decompress_ptr c) {
  auto* s = reinterpret_cast<JpegDecoder::State*>(c->client_data);
  static const JOCTET kEoi[2] = {0xFF, JPEG_EOI};
  while (s->next_piece < 3) {
    const JpegDecoder::State::Piece& p = s->pieces[s->next_piece++];
    if (p.size == 0) continue;
    c->src->next_input_byte = p.data;
    c->src->bytes_in_buffer = p.size;
    return TRUE;
  }
  WARNMS(c, JWRN_JPEG_EOF);  // becomes an error (EmitMessage): the stream is truncated
  c->src->next_input_byte = kEoi;
  c->src->bytes_in_buffer = 2;
  return TRUE;
}

void SkipInput(j_decompress_ptr c, long n) {
  while (n > 0) {
    if (size_t(n) <= c->src->bytes_in_buffer) {
      c->src->next_input_byte += n;
      c->src->bytes_in_buffer -= size_t(n);
      return;
    }
    n -= long(c->src->bytes_in_buffer);
    c->src->bytes_in_buffer = 0;
    FillInput(c);
  }
}

}  // namespace

JpegDecoder::JpegDecoder() : s_(new State()) {
  s_->cinfo.err = jpeg_std_error(&s_->err.mgr);
  s_->err.mgr.error_exit = ErrorExit;
  s_->err.mgr.emit_message = EmitMessage;
  s_->cinfo.client_data = s_.get();
  jpeg_create_decompress(&s_->cinfo);
  s_->cinfo.mem->max_memory_to_use = kMaxJpegDecoderMemory;  // past it libjpeg fails (no backing store)
  s_->progress.progress_monitor = Progress;
  s_->cinfo.progress = &s_->progress;
  s_->src.init_source = InitSource;
  s_->src.fill_input_buffer = FillInput;
  s_->src.skip_input_data = SkipInput;
  s_->src.resync_to_restart = jpeg_resync_to_restart;
  s_->src.term_source = TermSource;
}

JpegDecoder::~JpegDecoder() { jpeg_destroy_decompress(&s_->cinfo); }

bool JpegDecoder::ReadHeader(const uint8_t* data, size_t size, int* width, int* height) {
  return ReadHeader(nullptr, 0, data, size, width, height);  // the body: the crop path looks for the scan there
}

bool JpegDecoder::ReadHeader(const uint8_t* head, size_t head_size, const uint8_t* body, size_t body_size,
                             int* width, int* height) {
  s_->stream = {head, head_size, body, body_size};
  const bool ok = ReadPieces(head, head_size, body, body_size, nullptr, 0);
  *width = int(s_->cinfo.image_width);
  *height = int(s_->cinfo.image_height);
  return ok;
}

int JpegDecoder::components() const { return s_->cinfo.num_components; }

bool JpegDecoder::ReadPieces(const uint8_t* a, size_t na, const uint8_t* b, size_t nb, const uint8_t* c3, size_t nc) {
  jpeg_decompress_struct* c = &s_->cinfo;
  DSC_JPEG_RETURN_FALSE_ON_ERROR(c);
  jpeg_abort_decompress(c);
  // The last image's modules are freed now, but libjpeg-turbo 2.1's jpeg_skip_scanlines with merged
  // upsampling (4:2:0 / 4:2:2, box upsampling) reads and writes cinfo->cconvert, which that mode never
  // sets: after a 4:4:4, gray or fancy-upsampled image it wrote into the freed colour converter (heap
  // corruption: batches that differed from run to run, a valid sample failing as "bad Huffman code").
  // A decoder that has decoded nothing has these null, and libjpeg checks for that.
  c->cconvert = nullptr;
  c->cquantize = nullptr;
  c->raw_data_out = FALSE;
  s_->pieces[0] = {a, na};
  s_->pieces[1] = {b, nb};
  s_->pieces[2] = {c3, nc};
  s_->next_piece = 0;
  s_->src.next_input_byte = nullptr;
  s_->src.bytes_in_buffer = 0;  // libjpeg asks FillInput for the first piece
  c->src = &s_->src;
  jpeg_read_header(c, TRUE);
  c->out_color_space = JCS_RGB;  // also expands grayscale; CMYK is refused at start
  return true;
}

bool JpegDecoder::DecodeRGB(uint8_t* out, size_t stride, bool fancy) {
  jpeg_decompress_struct* c = &s_->cinfo;
  DSC_JPEG_RETURN_FALSE_ON_ERROR(c);
  c->scale_num = 8;
  c->scale_denom = 8;
  c->do_fancy_upsampling = fancy ? TRUE : FALSE;
  c->dct_method = s_->dct;
  jpeg_start_decompress(c);
  // Hand libjpeg every row at once (as TurboJPEG does): reading one row per call makes it go through
  // an extra buffer, a large cost on small images.
  auto& rows = s_->rows;
  if (rows.size() < c->output_height) rows.resize(c->output_height);
  for (JDIMENSION r = 0; r < c->output_height; ++r) rows[r] = out + size_t(r) * stride;
  while (c->output_scanline < c->output_height)
    jpeg_read_scanlines(c, rows.data() + c->output_scanline, c->output_height - c->output_scanline);
  jpeg_finish_decompress(c);
  return true;
}

bool JpegDecoder::CanDecodePlanes() const {
  const jpeg_decompress_struct* c = &s_->cinfo;
  const bool ycc = c->jpeg_color_space == JCS_YCbCr && c->num_components == 3;
  const bool gray = c->jpeg_color_space == JCS_GRAYSCALE && c->num_components == 1;
  if (!ycc && !gray) return false;
  if (ycc && (c->comp_info[0].h_samp_factor != c->max_h_samp_factor || c->comp_info[0].v_samp_factor != c->max_v_samp_factor))
    return false;  // luma must be full resolution
  // Cb and Cr sampled alike: the row conversion (kernels::ColorConvertRow) takes one chroma shift for
  // both; with two (legal, if rare) libjpeg converts instead. Cr at Cb's shift was wrong pixels and a
  // read past the end of the Cr plane.
  if (ycc && (c->comp_info[1].h_samp_factor != c->comp_info[2].h_samp_factor ||
              c->comp_info[1].v_samp_factor != c->comp_info[2].v_samp_factor))
    return false;
  for (int i = 0; i < c->num_components; ++i) {
    const int hr = c->max_h_samp_factor / c->comp_info[i].h_samp_factor, vr = c->max_v_samp_factor / c->comp_info[i].v_samp_factor;
    if ((hr != 1 && hr != 2) || (vr != 1 && vr != 2) || hr * c->comp_info[i].h_samp_factor != c->max_h_samp_factor ||
        vr * c->comp_info[i].v_samp_factor != c->max_v_samp_factor)
      return false;
  }
  return true;
}

bool JpegDecoder::DecodePlanes(JpegPlanes* out) {
  jpeg_decompress_struct* c = &s_->cinfo;
  DSC_JPEG_RETURN_FALSE_ON_ERROR(c);
  c->scale_num = 8;
  c->scale_denom = 8;
  c->raw_data_out = TRUE;
  c->out_color_space = c->jpeg_color_space;
  jpeg_start_decompress(c);
  const int group = c->max_v_samp_factor * DCTSIZE;  // image rows per jpeg_read_raw_data call
  const int calls = int((c->output_height + unsigned(group) - 1) / unsigned(group));
  out->components = c->num_components;
  out->width = int(c->output_width);
  out->height = int(c->output_height);
  for (int i = 0; i < c->num_components; ++i) {
    const jpeg_component_info& ci = c->comp_info[i];
    // Rows start 16 bytes past a 32-byte boundary (see the reader's note on libjpeg-turbo's
    // non-temporal stores); the stride is a multiple of 32.
    const size_t stride = (size_t(ci.width_in_blocks) * DCTSIZE + 31) / 32 * 32;
    const size_t rows = size_t(calls) * ci.v_samp_factor * DCTSIZE;
    auto& buf = s_->planes[i];
    if (buf.size() < stride * rows + 64) buf.resize(stride * rows + 64);
    uint8_t* base = buf.data() + (32 - reinterpret_cast<uintptr_t>(buf.data()) % 32) % 32 + 16;
    auto& ptrs = s_->plane_rows[i];
    if (ptrs.size() < rows) ptrs.resize(rows);
    for (size_t r = 0; r < rows; ++r) ptrs[r] = base + r * stride;
    out->plane[i] = base;
    out->stride[i] = stride;
    out->hshift[i] = c->max_h_samp_factor / ci.h_samp_factor == 2;
    out->vshift[i] = c->max_v_samp_factor / ci.v_samp_factor == 2;
  }
  for (int k = 0; c->output_scanline < c->output_height; ++k) {
    JSAMPARRAY arrays[3];
    for (int i = 0; i < c->num_components; ++i)
      arrays[i] = s_->plane_rows[i].data() + size_t(k) * c->comp_info[i].v_samp_factor * DCTSIZE;
    jpeg_read_raw_data(c, arrays, JDIMENSION(group));
  }
  jpeg_finish_decompress(c);
  c->raw_data_out = FALSE;
  return true;
}

bool JpegDecoder::DecodePlanesGroup(const uint8_t* head, size_t head_size, const uint8_t* const* bodies,
                                    const size_t* body_sizes, int n) {
  group_n_ = 0;
  auto refuse = [&](const char* why) {
    error_ = std::string("not decodable as a group: ") + why;
    return false;
  };
  if (n < 1) return refuse("no image");
  // The header's markers: one SOF0/SOF1, no DRI, and the SOS header ending it.
  size_t pos = 2, sof = 0, sos = 0;
  if (head_size < 4 || head[0] != 0xFF || head[1] != 0xD8) return refuse("no SOI");
  while (!sos) {
    if (pos + 4 > head_size || head[pos] != 0xFF) return refuse("malformed header");
    const uint8_t m = head[pos + 1];
    if (m == 0xFF) {
      ++pos;
      continue;
    }
    const size_t len = size_t(head[pos + 2]) << 8 | head[pos + 3];
    if (len < 2 || pos + 2 + len > head_size) return refuse("malformed header");
    if (m == 0xDD) return refuse("a restart interval of its own");
    if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
      if ((m != 0xC0 && m != 0xC1) || sof) return refuse("not baseline Huffman");
      sof = pos;
    }
    if (m == 0xDA) sos = pos;
    pos += 2 + len;
  }
  if (!sof || pos != head_size) return refuse("header not SOF ... SOS");
  const uint8_t* f = head + sof;
  const size_t sof_len = size_t(f[2]) << 8 | f[3];
  const int comps = sof_len >= 8 ? f[9] : 0;
  if (sof_len < 8 || f[4] != 8 || (comps != 1 && comps != 3) || sof_len != 8 + 3 * size_t(comps)) return refuse("not 8-bit gray or YCbCr");
  if (head[sos + 4] != comps) return refuse("not one scan of every component");
  const int h = f[5] << 8 | f[6], w = f[7] << 8 | f[8];
  int hmax = 1, vmax = 1;
  for (int c = 0; c < comps; ++c) {
    const int hs = f[11 + 3 * c] >> 4, vs = f[11 + 3 * c] & 15;
    if (c > 0 ? hs != 1 || vs != 1 : hs < 1 || hs > 2 || vs < 1 || vs > 2 || (comps == 1 && (hs != 1 || vs != 1)))
      return refuse("sampling other than luma 1 or 2, chroma 1");
    hmax = std::max(hmax, hs), vmax = std::max(vmax, vs);
  }
  if (w < 1 || h < 1) return refuse("no size");
  const int mcu_w = 8 * hmax, mcu_h = 8 * vmax;
  const int mcus = (w + mcu_w - 1) / mcu_w * ((h + mcu_h - 1) / mcu_h), padded_h = (h + mcu_h - 1) / mcu_h * mcu_h;
  if (mcus > kGroupMaxMcus) return refuse("images too large");
  if (int64_t(n) * padded_h > 65500) return refuse("too many images");  // libjpeg's largest dimension
  // SOI..SOF with the stacked height, the rest of the header with a DRI of one image's MCUs before
  // SOS, then each body without its EOI and with RSTn after it, and one EOI.
  std::vector<uint8_t>& o = group_stream_;
  o.assign(head, head + sof + 5);
  const int tall = n * padded_h;
  o.push_back(uint8_t(tall >> 8));
  o.push_back(uint8_t(tall & 0xFF));
  o.insert(o.end(), head + sof + 7, head + sos);
  const uint8_t dri[6] = {0xFF, 0xDD, 0, 4, uint8_t(mcus >> 8), uint8_t(mcus & 0xFF)};
  o.insert(o.end(), dri, dri + 6);
  o.insert(o.end(), head + sos, head + head_size);
  for (int i = 0; i < n; ++i) {
    const uint8_t* b = bodies[i];
    const size_t k = body_sizes[i];
    if (k < 2 || b[k - 2] != 0xFF || b[k - 1] != 0xD9) return refuse("a body that does not end in EOI");
    o.insert(o.end(), b, b + k - 2);
    o.push_back(0xFF);
    o.push_back(i + 1 < n ? uint8_t(0xD0 + i % 8) : uint8_t(0xD9));
  }
  int tw, th;
  if (!ReadHeader(o.data(), o.size(), &tw, &th)) return false;
  if (!CanDecodePlanes()) return refuse("planes not decodable");
  if (!DecodePlanes(&group_tall_)) return false;
  group_w_ = w, group_h_ = h, group_padded_h_ = padded_h, group_n_ = n;
  return true;
}

JpegPlanes JpegDecoder::GroupPlanes(int i) const {
  JpegPlanes p = group_tall_;
  p.height = group_h_;
  for (int c = 0; c < p.components; ++c)
    p.plane[c] += size_t(i) * size_t(group_padded_h_ >> p.vshift[c]) * p.stride[c];
  return p;
}

size_t JpegDecoder::StreamPosition() const {
  if (s_->next_piece == 0) return 0;
  size_t before = 0;
  for (int i = 0; i < s_->next_piece - 1; ++i) before += s_->pieces[i].size;
  return before + size_t(s_->src.next_input_byte - s_->pieces[s_->next_piece - 1].data);
}

int ChooseDctScale(int w, int h, int min_w, int min_h) {
  // Decode time at scale k/8 relative to 8/8: TurboJPEG 2.1, box upsampling, the 500 photos, one core
  // (bench/run_crop_bench.sh, bench/RESULTS.md). Entropy decoding is the same at every scale; the
  // rest is the IDCT (SIMD at 8/8, 4/8, 2/8; scalar at 3/8, 5/8, 6/8, 7/8, which makes those three
  // slower than a full-size decode) and the upsampling and colour conversion of fewer pixels.
  static constexpr int kCost[9] = {0, 74, 82, 90, 88, 112, 123, 149, 100};
  int k = 1;
  while (k < 8 && (w * k < min_w * 8 || h * k < min_h * 8)) ++k;  // the smallest that keeps the size
  int best = 8;  // ties go to the larger scale: the better picture for the resampler
  for (int j = 7; j >= k; --j)
    if (kCost[j] < kCost[best]) best = j;
  return best;
}

bool JpegDecoder::DecodeRegion(int x, int y, int w, int h, int min_w, int min_h, uint8_t* out, size_t stride,
                               size_t capacity, DecodedRegion* region, bool fancy) {
  const int k = ChooseDctScale(w, h, min_w, min_h);
  used_intervals_ = used_seek_ = walked_ = false;
  const jpeg_decompress_struct* c = &s_->cinfo;
  RestartLayout l;
  // The header as libjpeg read it must agree with ours (same scan, same interval, data where we think).
  if (interval_crop_ && x >= 0 && y >= 0 && w > 0 && h > 0 && x + w <= int(c->image_width) &&
      y + h <= int(c->image_height) && ParseRestartLayout(s_->stream, &l) && !c->progressive_mode &&
      !c->arith_code && c->comps_in_scan == c->num_components && int(c->restart_interval) == l.interval &&
      int(c->image_width) == l.width && int(c->image_height) == l.height && StreamPosition() == l.entropy) {
    // Fancy upsampling reads the chroma samples next to a block's: one MCU of margin keeps them.
    const IntervalSpan span = CoverRect(l, x, y, w, h, fancy ? 1 : 0);
    IntervalAssembler& a = s_->intervals;
    if (!span.whole_image && a.Assemble(s_->stream, l, span)) {
      used_intervals_ = true;
      return DecodeAssembled(a.prefix, a.data(), a.size(), span, k, x, y, w, h, out, stride, capacity, region, fancy);
    }
  } else if (interval_crop_ && seek_cache_ && x >= 0 && y >= 0 && w > 0 && h > 0 && x + w <= int(c->image_width) &&
             y + h <= int(c->image_height) && !c->progressive_mode && !c->arith_code &&
             c->comps_in_scan == c->num_components && c->restart_interval == 0 && s_->seek.Prepare(s_->stream, &l) &&
             int(c->image_width) == l.width && int(c->image_height) == l.height && StreamPosition() == l.entropy) {
    const IntervalSpan span = CoverRect(l, x, y, w, h, fancy ? 1 : 0);
    SeekAssembler& a = s_->seek;
    const bool assembled = !span.whole_image && a.Assemble(s_->stream, span, seek_cache_, seek_key_);
    walked_ = a.walked();
    if (assembled) {
      used_seek_ = true;
      return DecodeAssembled(a.prefix, a.data(), a.size(), span, k, x, y, w, h, out, stride, capacity, region, fancy);
    }
  }
  return DecodeScaled(k, x, y, w, h, 0, 0, out, stride, capacity, region, fancy);
}

bool JpegDecoder::DecodeAssembled(const JpegPieces& prefix, const uint8_t* data, size_t size, const IntervalSpan& span,
                                  int k, int x, int y, int w, int h, uint8_t* out, size_t stride, size_t capacity,
                                  DecodedRegion* region, bool fancy) {
  if (!ReadPieces(prefix.head, prefix.head_size, prefix.body, prefix.body_size, data, size)) return false;
  const jpeg_decompress_struct* c = &s_->cinfo;
  if (int(c->image_width) != span.width || int(c->image_height) != span.height) {
    error_ = "an assembled crop's frame disagrees with its span";
    return false;
  }
  return DecodeScaled(k, x, y, w, h, span.x, span.y, out, stride, capacity, region, fancy);
}

bool JpegDecoder::DecodeScaled(int k, int x, int y, int w, int h, int ox, int oy, uint8_t* out, size_t stride,
                               size_t capacity, DecodedRegion* region, bool fancy) {
  jpeg_decompress_struct* c = &s_->cinfo;
  DSC_JPEG_RETURN_FALSE_ON_ERROR(c);
  c->do_fancy_upsampling = fancy ? TRUE : FALSE;
  c->dct_method = s_->dct;
  c->scale_num = unsigned(k);
  c->scale_denom = 8;
  jpeg_start_decompress(c);
  // The region in scaled coordinates, rounded outwards, relative to the decoded image, which starts
  // at (ox, oy) of the original: multiples of 8, so they scale to whole pixels.
  const int sox = ox * k / 8, soy = oy * k / 8;
  const int sx0 = x * k / 8 - sox, sy0 = y * k / 8 - soy;
  const int sx1 = std::min(((x + w) * k + 7) / 8 - sox, int(c->output_width));
  const int sy1 = std::min(((y + h) * k + 7) / 8 - soy, int(c->output_height));
  if (sx0 < 0 || sy0 < 0 || sx1 <= sx0 || sy1 <= sy0) {
    jpeg_abort_decompress(c);
    error_ = "crop rectangle outside the decoded image";
    return false;
  }
  // jpeg_crop_scanline widens to iMCU boundaries. Its fancy upsampling treats the cut columns as
  // image edges: one iMCU more on each side keeps those columns out of the rectangle.
  const int pad = fancy ? c->max_h_samp_factor * k : 0;
  JDIMENSION xoff = JDIMENSION(std::max(sx0 - pad, 0));
  JDIMENSION cw = JDIMENSION(std::min(sx1 + pad, int(c->output_width))) - xoff;
  jpeg_crop_scanline(c, &xoff, &cw);
  const size_t rows = size_t(sy1 - sy0);
  if (size_t(cw) * 3 > stride || stride * rows > capacity) {
    jpeg_abort_decompress(c);
    error_ = "decoded region larger than the buffer";
    return false;
  }
  if (sy0 > 0) jpeg_skip_scanlines(c, JDIMENSION(sy0));
  auto& ptrs = s_->rows;
  if (ptrs.size() < rows) ptrs.resize(rows);
  for (size_t r = 0; r < rows; ++r) ptrs[r] = out + r * stride;
  size_t done = 0;
  while (done < rows) done += jpeg_read_scanlines(c, ptrs.data() + done, JDIMENSION(rows - done));
  jpeg_abort_decompress(c);  // the rest of the image is not needed
  region->x = int(xoff) + sox;
  region->y = sy0 + soy;
  region->width = int(cw);
  region->height = int(rows);
  region->scale_num = k;
  return true;
}

}  // namespace dsc::kernels
