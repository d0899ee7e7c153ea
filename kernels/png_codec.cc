#include "kernels/png_codec.h"

#include <png.h>

#include <csetjmp>
#include <cstring>

namespace dsc::kernels {

bool IsPng(const uint8_t* data, size_t size) {
  static const uint8_t kSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  return size >= 8 && std::memcmp(data, kSig, 8) == 0;
}

namespace {

// Everything the decode touches after setjmp lives here, reached through a pointer that never
// changes, so nothing is indeterminate after libpng longjmps back; the destructor frees libpng's state
// on every path.
struct PngRead {
  png_structp png = nullptr;
  png_infop info = nullptr;
  const uint8_t* data = nullptr;
  size_t size = 0, pos = 0;
  std::string message;
  std::vector<png_bytep> rows;
  ~PngRead() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

void OnError(png_structp png, png_const_charp msg) {
  static_cast<PngRead*>(png_get_error_ptr(png))->message = msg;
  png_longjmp(png, 1);
}

void OnWarning(png_structp, png_const_charp) {}  // e.g. an unknown ancillary chunk: not a reason to fail

void ReadBytes(png_structp png, png_bytep out, size_t n) {
  auto* r = static_cast<PngRead*>(png_get_io_ptr(png));
  if (n > r->size - r->pos) png_error(png, "truncated PNG");
  std::memcpy(out, r->data + r->pos, n);
  r->pos += n;
}

// True, with r->message set, when the header fails the size checks. It and SetMessage are out of line
// so that no std::string lives in the frame that called setjmp (gcc flags the inlined string internals
// with -Wclobbered at -O1); neither calls libpng, so nothing longjmps over their strings.
[[gnu::noinline]] bool RefuseHeader(PngRead* r, png_uint_32 w, png_uint_32 h, uint64_t row_bits, uint64_t max_pixels) {
  const std::string size = std::to_string(w) + "x" + std::to_string(h);
  if (w == 0 || h == 0 || w > 65535 || h > 65535) {
    r->message = "unsupported PNG size " + size;
    return true;
  }
  if (uint64_t(w) * h > max_pixels) {
    r->message = size + " = " + std::to_string(uint64_t(w) * h) + " pixels, more than --max-pixels " + std::to_string(max_pixels);
    return true;
  }
  // Deflate expands at most 1032:1, so a file too small to hold the rows its header declares is
  // truncated: refused here, before a max_pixels-sized buffer is allocated and zero-filled for it.
  const uint64_t raw = uint64_t(h) * (1 + (row_bits + 7) / 8);
  if (raw / 1032 > r->size) {
    r->message = "truncated PNG: " + size + " needs " + std::to_string(raw) + " bytes of image data, more than its " +
                 std::to_string(r->size) + " bytes can hold";
    return true;
  }
  return false;
}

[[gnu::noinline]] void SetMessage(PngRead* r, const char* message) { r->message = message; }

// Returns false with r->message set on any libpng error. Pixel memory is only allocated once the
// header has passed the size checks. `mask` 0: RGB as PIL's convert("RGB"); 1 or 3: a mask's values.
bool Decode(PngRead* r, uint64_t max_pixels, int mask, std::vector<uint8_t>* rgb, int* width, int* height) {
  if (setjmp(png_jmpbuf(r->png))) return false;
  png_set_read_fn(r->png, r, ReadBytes);
  png_read_info(r->png, r->info);
  const png_uint_32 w = png_get_image_width(r->png, r->info), h = png_get_image_height(r->png, r->info);
  const uint64_t row_bits = uint64_t(w) * png_get_channels(r->png, r->info) * png_get_bit_depth(r->png, r->info);
  if (RefuseHeader(r, w, h, row_bits, max_pixels)) return false;
  const int color = png_get_color_type(r->png, r->info);
  const int out_channels = mask == 1 ? 1 : 3;
  if (mask == 1 && (color & PNG_COLOR_MASK_COLOR) && color != PNG_COLOR_TYPE_PALETTE) {
    SetMessage(r, "an RGB PNG for a 1-channel mask");
    return false;
  }
  if (mask == 3 && !(color & PNG_COLOR_MASK_COLOR)) {
    SetMessage(r, "a gray PNG for a 3-channel mask");
    return false;
  }
  // What PIL's convert("RGB") does: 16-bit samples keep their high byte, alpha (an alpha channel or a
  // tRNS chunk) is dropped without compositing, and no gamma correction is applied. A 1-channel mask
  // keeps palette indices (unpacked from 1, 2 or 4 bits, not scaled).
  png_set_strip_16(r->png);
  if (mask == 1 && color == PNG_COLOR_TYPE_PALETTE) {
    png_set_packing(r->png);
  } else {
    png_set_palette_to_rgb(r->png);
    png_set_expand_gray_1_2_4_to_8(r->png);
  }
  if (out_channels == 3) png_set_gray_to_rgb(r->png);
  png_set_strip_alpha(r->png);
  png_set_interlace_handling(r->png);
  png_read_update_info(r->png, r->info);
  if (png_get_channels(r->png, r->info) != png_byte(out_channels) || png_get_bit_depth(r->png, r->info) != 8 ||
      png_get_rowbytes(r->png, r->info) != size_t(w) * size_t(out_channels)) {
    SetMessage(r, "unexpected PNG layout after conversion");
    return false;
  }
  const size_t row = size_t(w) * size_t(out_channels);
  rgb->resize(row * h);
  r->rows.resize(h);
  for (png_uint_32 y = 0; y < h; ++y) r->rows[y] = rgb->data() + size_t(y) * row;
  png_read_image(r->png, r->rows.data());
  png_read_end(r->png, nullptr);
  *width = int(w);
  *height = int(h);
  return true;
}

bool DecodePng(const uint8_t* data, size_t size, uint64_t max_pixels, int mask, std::vector<uint8_t>* rgb, int* width,
               int* height, std::string* error) {
  PngRead r;
  r.data = data;
  r.size = size;
  r.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &r, OnError, OnWarning);
  if (r.png) r.info = png_create_info_struct(r.png);
  if (!r.png || !r.info) {
    *error = "out of memory";
    return false;
  }
  if (!Decode(&r, max_pixels, mask, rgb, width, height)) {
    *error = r.message;
    return false;
  }
  return true;
}

// The encoder's state, reached through one pointer for the same setjmp reason as PngRead's.
struct PngWrite {
  png_structp png = nullptr;
  png_infop info = nullptr;
  std::vector<uint8_t>* out = nullptr;
  std::string message;
  ~PngWrite() { png_destroy_write_struct(&png, info ? &info : nullptr); }
};

void OnWriteError(png_structp png, png_const_charp msg) {
  static_cast<PngWrite*>(png_get_error_ptr(png))->message = msg;
  png_longjmp(png, 1);
}

void WriteBytes(png_structp png, png_bytep data, size_t n) {
  auto* w = static_cast<PngWrite*>(png_get_io_ptr(png));
  w->out->insert(w->out->end(), data, data + n);
}

void FlushNothing(png_structp) {}

bool Encode(PngWrite* w, const uint8_t* px, int width, int height, int channels, size_t stride) {
  if (setjmp(png_jmpbuf(w->png))) return false;
  png_set_write_fn(w->png, w, WriteBytes, FlushNothing);
  // Fixed settings: the bytes depend on the pixels (and this libpng/zlib) only.
  png_set_compression_level(w->png, 6);
  png_set_filter(w->png, PNG_FILTER_TYPE_BASE, PNG_ALL_FILTERS);
  png_set_IHDR(w->png, w->info, png_uint_32(width), png_uint_32(height), 8, channels == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_BASE, PNG_FILTER_TYPE_BASE);
  png_write_info(w->png, w->info);
  for (int y = 0; y < height; ++y) png_write_row(w->png, const_cast<png_bytep>(px + size_t(y) * stride));
  png_write_end(w->png, nullptr);
  return true;
}

}  // namespace

bool DecodePngRGB(const uint8_t* data, size_t size, uint64_t max_pixels, std::vector<uint8_t>* rgb, int* width,
                  int* height, std::string* error) {
  return DecodePng(data, size, max_pixels, 0, rgb, width, height, error);
}

bool DecodePngMask(const uint8_t* data, size_t size, int channels, uint64_t max_pixels, std::vector<uint8_t>* out,
                   int* width, int* height, std::string* error) {
  if (channels != 1 && channels != 3) {
    *error = "a mask has 1 or 3 channels";
    return false;
  }
  return DecodePng(data, size, max_pixels, channels, out, width, height, error);
}

bool EncodePng(const uint8_t* pixels, int width, int height, int channels, size_t stride, std::vector<uint8_t>* out,
               std::string* error) {
  if ((channels != 1 && channels != 3) || width < 1 || height < 1 || width > 65535 || height > 65535) {
    *error = "cannot encode a " + std::to_string(width) + "x" + std::to_string(height) + "x" + std::to_string(channels) + " PNG";
    return false;
  }
  out->clear();
  PngWrite w;
  w.out = out;
  w.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &w, OnWriteError, OnWarning);
  if (w.png) w.info = png_create_info_struct(w.png);
  if (!w.png || !w.info) {
    *error = "out of memory";
    return false;
  }
  if (!Encode(&w, pixels, width, height, channels, stride)) {
    *error = w.message;
    return false;
  }
  return true;
}

}  // namespace dsc::kernels
