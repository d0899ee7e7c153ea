// TurboJPEG, one handle per thread (a JpegCodec is not thread-safe; give each thread its own).
// Calls return false and fill error() instead of throwing so that callers can name the file or sample.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dsc::kernels {

struct JpegInfo {
  int width = 0;
  int height = 0;
  int subsampling = 0;  // TJSAMP_*
  int colorspace = 0;   // TJCS_*
  bool is_gray() const;
  bool is_cmyk() const;  // CMYK or YCCK: must be converted before it can be stored as RGB
};

class JpegCodec {
 public:
  JpegCodec();
  ~JpegCodec();
  JpegCodec(const JpegCodec&) = delete;
  JpegCodec& operator=(const JpegCodec&) = delete;

  bool ReadHeader(const uint8_t* data, size_t size, JpegInfo* info);
  // Decodes to interleaved RGB (3 bytes per pixel, rows packed). Grayscale expands to RGB; CMYK is
  // converted (Adobe's inverted CMYK convention). Warnings (e.g. a truncated scan) count as errors, and
  // so does a progressive stream of more than 500 scans (TJFLAG_LIMITSCANS).
  bool DecodeRGB(const uint8_t* data, size_t size, const JpegInfo& info, uint8_t* rgb);
  // Encodes packed pixels with 1 (gray) or 3 (RGB) channels.
  bool Encode(const uint8_t* pixels, int width, int height, int channels, int quality, int subsampling,
              std::vector<uint8_t>* out);
  const std::string& error() const { return error_; }

 private:
  bool Fail(void* handle);
  void* dec_ = nullptr;
  void* enc_ = nullptr;
  std::vector<uint8_t> cmyk_;
  std::string error_;
};

// Parses JPEG markers from SOI up to and including the SOS header; returns that prefix's length (the
// "tables" that `--jpeg-tables shared` stores once per file), or 0 when the stream is not well formed.
size_t JpegPrefixLength(const uint8_t* data, size_t size);

// Every 8x8 block of a Huffman-coded JPEG (baseline or progressive) has its DC coefficient coded with
// at least one bit, so a valid stream of width x height pixels holds at least ceil(width / 8) x
// ceil(height / 8) bits after its header. True (and why) for a stream shorter than that: a few bytes
// whose header claims 13000x13000 are refused from the header, before the pixels are allocated.
// False for arithmetic-coded streams (no such bound) and for headers it cannot walk.
bool JpegShorterThanItsSize(const uint8_t* data, size_t size, int width, int height, std::string* why);

// Parses "444", "422", "420", "gray" (TurboJPEG's TJSAMP_*); returns -1 for anything else.
int ParseSubsampling(const std::string& s);

}  // namespace dsc::kernels
