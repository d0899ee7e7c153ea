#include "kernels/jpeg_decoder.h"

#include <csetjmp>
#include <cstdio>
#include <vector>
// jpeglib.h needs FILE and size_t declared first.
#include <jerror.h>
#include <jpeglib.h>

namespace dsc::kernels {

struct JpegDecoder::State {
  jpeg_decompress_struct cinfo;
  struct Err {
    jpeg_error_mgr mgr;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
  } err;
  std::vector<JSAMPROW> rows;  // reused: whole-image reads let libjpeg upsample in place
};

namespace {

void ErrorExit(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegDecoder::State*>(c->client_data);
  (*c->err->format_message)(c, e->err.message);
  std::longjmp(e->err.jump, 1);
}

void EmitMessage(j_common_ptr c, int level) {
  if (level < 0) ErrorExit(c);  // a warning: corrupt or truncated data
}

}  // namespace

JpegDecoder::JpegDecoder() : s_(new State()) {
  s_->cinfo.err = jpeg_std_error(&s_->err.mgr);
  s_->err.mgr.error_exit = ErrorExit;
  s_->err.mgr.emit_message = EmitMessage;
  s_->cinfo.client_data = s_.get();
  jpeg_create_decompress(&s_->cinfo);
}

JpegDecoder::~JpegDecoder() { jpeg_destroy_decompress(&s_->cinfo); }

bool JpegDecoder::ReadHeader(const uint8_t* data, size_t size, int* width, int* height) {
  jpeg_decompress_struct* c = &s_->cinfo;
  if (setjmp(s_->err.jump)) {
    error_ = s_->err.message;
    jpeg_abort_decompress(c);
    return false;
  }
  jpeg_abort_decompress(c);
  jpeg_mem_src(c, data, static_cast<unsigned long>(size));
  jpeg_read_header(c, TRUE);
  c->out_color_space = JCS_RGB;  // also expands grayscale; CMYK is refused at start
  *width = int(c->image_width);
  *height = int(c->image_height);
  return true;
}

bool JpegDecoder::DecodeRGB(uint8_t* out, size_t stride) {
  jpeg_decompress_struct* c = &s_->cinfo;
  if (setjmp(s_->err.jump)) {
    error_ = s_->err.message;
    jpeg_abort_decompress(c);
    return false;
  }
  c->scale_num = 8;
  c->scale_denom = 8;
  jpeg_start_decompress(c);
  // Hand libjpeg every row at once (as TurboJPEG does): reading one row per call makes it go through
  // an extra buffer, which cost up to 2.5x on 32x32 images here.
  auto& rows = s_->rows;
  if (rows.size() < c->output_height) rows.resize(c->output_height);
  for (JDIMENSION r = 0; r < c->output_height; ++r) rows[r] = out + size_t(r) * stride;
  while (c->output_scanline < c->output_height)
    jpeg_read_scanlines(c, rows.data() + c->output_scanline, c->output_height - c->output_scanline);
  jpeg_finish_decompress(c);
  return true;
}

bool JpegDecoder::DecodeRegion(int x, int y, int w, int h, int min_w, int min_h, uint8_t* out, size_t stride,
                               size_t capacity, DecodedRegion* region) {
  jpeg_decompress_struct* c = &s_->cinfo;
  if (setjmp(s_->err.jump)) {
    error_ = s_->err.message;
    jpeg_abort_decompress(c);
    return false;
  }
  int k = 1;
  while (k < 8 && (w * k < min_w * 8 || h * k < min_h * 8)) ++k;
  c->scale_num = unsigned(k);
  c->scale_denom = 8;
  jpeg_start_decompress(c);
  // The region in scaled coordinates, rounded outwards.
  const int sx0 = x * k / 8, sy0 = y * k / 8;
  int sx1 = ((x + w) * k + 7) / 8, sy1 = ((y + h) * k + 7) / 8;
  if (sx1 > int(c->output_width)) sx1 = int(c->output_width);
  if (sy1 > int(c->output_height)) sy1 = int(c->output_height);
  JDIMENSION xoff = JDIMENSION(sx0), cw = JDIMENSION(sx1 - sx0);
  jpeg_crop_scanline(c, &xoff, &cw);  // widens to an iMCU boundary
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
  region->x = int(xoff);
  region->y = sy0;
  region->width = int(cw);
  region->height = int(rows);
  region->scale_num = k;
  return true;
}

}  // namespace dsc::kernels
