// The loader's JPEG decoder: libjpeg-turbo's libjpeg API, one instance per thread, reused for every
// image (no per-image allocation). Errors never call exit(): error_exit is overridden to longjmp back,
// and warnings (a truncated scan, corrupt data) count as errors so damaged samples are never passed
// off as images. Supports decoding only a region, with DCT-domain downscaling, for crop transforms.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/limits.h"

namespace dsc::kernels {

class JpegSeekCache;
struct JpegPieces;
struct IntervalSpan;

// A JPEG decoded to its component planes (no upsampling, no colour conversion): plane 0 is luma (or
// gray), 1 and 2 are Cb and Cr, subsampled by 2^hshift horizontally and 2^vshift vertically.
struct JpegPlanes {
  int components = 0;  // 1 (gray) or 3 (YCbCr)
  int width = 0, height = 0;
  const uint8_t* plane[3] = {nullptr, nullptr, nullptr};
  size_t stride[3] = {0, 0, 0};
  int hshift[3] = {0, 0, 0}, vshift[3] = {0, 0, 0};
};

struct DecodedRegion {
  int x = 0, y = 0;        // top-left of the buffer in scaled image coordinates
  int width = 0, height = 0;
  int scale_num = 8;       // the image was scaled by scale_num / 8
};

// Decompression-bomb limits of JpegDecoder: a progressive stream of more scans is refused (each scan
// is a pass over the whole coefficient buffer; TurboJPEG's TJFLAG_LIMITSCANS uses the same number), and
// libjpeg may allocate at most this much for its whole-image buffers (progressive coefficients need
// about 6 bytes a pixel at 4:4:4; this is twice that for the largest image the writer accepts).
constexpr int kMaxJpegScans = 500;
constexpr long kMaxJpegDecoderMemory = long(2 * 6 * kDefaultMaxPixels);

// The DCT scale k (the image is decoded at k/8) for a w x h crop that will be resized to at least
// min_w x min_h: among the k that keep the scaled crop at least that size, the cheapest.
int ChooseDctScale(int w, int h, int min_w, int min_h);

class JpegDecoder {
 public:
  JpegDecoder();
  ~JpegDecoder();
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  // Parses the header. On false, error() says why.
  bool ReadHeader(const uint8_t* data, size_t size, int* width, int* height);
  // The same for a stream stored in two pieces (shared tables, then the rest): libjpeg reads the
  // first piece, then the second, so the pieces are never copied together. Both must outlive the decode.
  bool ReadHeader(const uint8_t* head, size_t head_size, const uint8_t* body, size_t body_size, int* width,
                  int* height);
  // After ReadHeader: the frame's component count (1 gray, 3 colour, 4 CMYK), which the index's
  // channels must equal (the decode expands gray to RGB, so a wrong index would go unnoticed).
  int components() const;
  // Decodes the whole image (after ReadHeader) to RGB rows `stride` bytes apart. `fancy`: libjpeg's
  // default triangle-filter chroma upsampling; otherwise box upsampling (TurboJPEG's FASTUPSAMPLE).
  bool DecodeRGB(uint8_t* out, size_t stride, bool fancy = true);
  // libjpeg's fast integer IDCT (TurboJPEG's TJFLAG_FASTDCT, how FFCV decodes) for DecodeRGB and
  // DecodeCrop from now on, instead of the accurate one. DecodePlanes keeps the accurate IDCT.
  void set_fast_idct(bool fast);
  // After ReadHeader: whether DecodePlanes handles this image (YCbCr or gray, chroma subsampled by 1 or 2).
  bool CanDecodePlanes() const;
  // Decodes to planes owned by the decoder (valid until the next call). Much faster than DecodeRGB on
  // small images: libjpeg skips upsampling and colour conversion, which the caller fuses with its own pass.
  bool DecodePlanes(JpegPlanes* out);
  // Decodes n images that share one header (`head`: SOI to the end of the SOS header, as a file's
  // shared JPEG tables; `bodies[i]`: image i's entropy-coded data and EOI) in one pass, as one image
  // of their stacked height with a restart marker between them: libjpeg derives its Huffman tables and
  // sets itself up once instead of once per image (on CIFAR-size images that set-up costs about as
  // much as the decode). A restart resets every predictor and planes are not upsampled, so image i's
  // planes (GroupPlanes) equal its own DecodePlanes' byte for byte. Only for a baseline 8-bit Huffman
  // header with one scan of every component, no restart interval, planes-decodable sampling and at
  // most kGroupMaxMcus MCUs a image; false for anything else, and for any error in the data (error()
  // says which): the caller then decodes each image alone, and that decode names the damaged one.
  // Overwrites the planes.
  static constexpr int kGroupMaxMcus = 64;
  bool DecodePlanesGroup(const uint8_t* head, size_t head_size, const uint8_t* const* bodies, const size_t* body_sizes,
                         int n);
  // After DecodePlanesGroup: the header's image size and component count, and image i's planes.
  int group_width() const { return group_w_; }
  int group_height() const { return group_h_; }
  int group_components() const { return group_tall_.components; }
  JpegPlanes GroupPlanes(int i) const;
  // Decodes (after ReadHeader) the part of the image covering the rectangle (x, y, w, h) of the
  // original, scaled by k/8 with k = ChooseDctScale(w, h, min_w, min_h). The buffer receives
  // region->height rows of region->width RGB pixels, `stride` bytes apart (stride >= 3 x the image
  // width); `capacity` is its size.
  // When the stream has restart intervals that never span two MCU rows (kernels/jpeg_crop.h), only
  // the intervals covering the rectangle are entropy-decoded; the pixels are the same as decoding the
  // whole image at that scale and cropping (with fancy upsampling, one MCU of margin is decoded so
  // the rectangle's pixels are too). Other streams are decoded from the top down to the rectangle.
  bool DecodeRegion(int x, int y, int w, int h, int min_w, int min_h, uint8_t* out, size_t stride, size_t capacity,
                    DecodedRegion* region, bool fancy = true);
  // Whether DecodeRegion may decode only restart intervals (on by default; off: always the whole
  // rows down to the rectangle, for comparisons).
  void set_interval_crop(bool on) { interval_crop_ = on; }
  // Whether the last DecodeRegion decoded only the restart intervals covering its rectangle.
  bool last_region_used_intervals() const { return used_intervals_; }
  // Entry points for crops of streams without restart intervals (kernels/jpeg_seek.h): DecodeRegion
  // then decodes only the MCU chunks covering its rectangle, from image `key`'s entry points in `cache`
  // (walking to, and adding, those it lacks), with the same pixels. Kept until set again; nullptr:
  // such streams decode from the top as before. The cache must outlive the decodes.
  void set_seek(JpegSeekCache* cache, uint64_t key) {
    seek_cache_ = cache;
    seek_key_ = key;
  }
  // Whether the last DecodeRegion decoded from entry points, and whether it had to walk codes first.
  bool last_region_used_seek() const { return used_seek_; }
  bool last_region_walked() const { return walked_; }
  const std::string& error() const { return error_; }

  struct State;  // libjpeg's state, kept out of this header

 private:
  // Reads the header of the stream made of up to three pieces read in turn.
  bool ReadPieces(const uint8_t* a, size_t na, const uint8_t* b, size_t nb, const uint8_t* c, size_t nc);
  // How many bytes of the pieces libjpeg has consumed.
  size_t StreamPosition() const;
  // Decodes the rectangle (original pixels) at scale k/8 from the image read last, which holds the
  // original's pixels from (ox, oy) on.
  // Reads the stream an interval or seek assembler built for `span` and decodes the rectangle from it.
  bool DecodeAssembled(const JpegPieces& prefix, const uint8_t* data, size_t size, const IntervalSpan& span,
                       int k, int x, int y, int w, int h, uint8_t* out, size_t stride, size_t capacity,
                       DecodedRegion* region, bool fancy);
  bool DecodeScaled(int k, int x, int y, int w, int h, int ox, int oy, uint8_t* out, size_t stride, size_t capacity,
                    DecodedRegion* region, bool fancy);

  std::unique_ptr<State> s_;
  std::string error_;
  std::vector<uint8_t> group_stream_;  // the stacked stream DecodePlanesGroup builds
  JpegPlanes group_tall_;
  int group_w_ = 0, group_h_ = 0, group_padded_h_ = 0, group_n_ = 0;
  bool interval_crop_ = true;
  bool used_intervals_ = false;
  JpegSeekCache* seek_cache_ = nullptr;
  uint64_t seek_key_ = 0;
  bool used_seek_ = false, walked_ = false;
};

}  // namespace dsc::kernels
