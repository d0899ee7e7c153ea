#include "kernels/jpeg_codec.h"

#include <turbojpeg.h>

#include <cstring>

namespace dsc::kernels {

bool JpegInfo::is_gray() const { return colorspace == TJCS_GRAY; }
bool JpegInfo::is_cmyk() const { return colorspace == TJCS_CMYK || colorspace == TJCS_YCCK; }

JpegCodec::JpegCodec() : dec_(tjInitDecompress()), enc_(tjInitCompress()) {}

JpegCodec::~JpegCodec() {
  if (dec_) tjDestroy(dec_);
  if (enc_) tjDestroy(enc_);
}

bool JpegCodec::Fail(void* handle) {
  error_ = tjGetErrorStr2(handle);
  // libjpeg-turbo 2.1 can leave a handle unusable after an error (later calls fail with stale
  // errors), so a failed handle is replaced before the next call.
  if (handle == dec_) {
    tjDestroy(dec_);
    dec_ = tjInitDecompress();
  } else {
    tjDestroy(enc_);
    enc_ = tjInitCompress();
  }
  return false;
}

bool JpegCodec::ReadHeader(const uint8_t* data, size_t size, JpegInfo* info) {
  if (tjDecompressHeader3(dec_, data, static_cast<unsigned long>(size), &info->width, &info->height,
                          &info->subsampling, &info->colorspace) != 0)
    return Fail(dec_);
  return true;
}

bool JpegCodec::DecodeRGB(const uint8_t* data, size_t size, const JpegInfo& info, uint8_t* rgb) {
  const unsigned long n = static_cast<unsigned long>(size);
  // A progressive stream of many tiny scans costs a full pass over the coefficients per scan (a
  // decompression bomb); TurboJPEG refuses more than 500, as the loader's decoder does.
  const int flags = TJFLAG_LIMITSCANS;
  if (!info.is_cmyk()) {
    if (tjDecompress2(dec_, data, n, rgb, info.width, 0, info.height, TJPF_RGB, flags) != 0) return Fail(dec_);
    return true;
  }
  cmyk_.resize(size_t(info.width) * info.height * 4);
  if (tjDecompress2(dec_, data, n, cmyk_.data(), info.width, 0, info.height, TJPF_CMYK, flags) != 0)
    return Fail(dec_);
  const size_t px = size_t(info.width) * info.height;
  for (size_t i = 0; i < px; ++i) {
    // TurboJPEG hands back the stored (Adobe, inverted) values: channel = 255 - ink, so R = C * K / 255.
    const uint8_t* s = &cmyk_[i * 4];
    for (int c = 0; c < 3; ++c) rgb[i * 3 + c] = uint8_t((s[c] * s[3] + 127) / 255);
  }
  return true;
}

bool JpegCodec::Encode(const uint8_t* pixels, int width, int height, int channels, int quality,
                       int subsampling, std::vector<uint8_t>* out) {
  unsigned char* buf = nullptr;
  unsigned long len = 0;
  const int pf = channels == 1 ? TJPF_GRAY : TJPF_RGB;
  const int samp = channels == 1 ? TJSAMP_GRAY : subsampling;
  if (tjCompress2(enc_, pixels, width, 0, height, pf, &buf, &len, samp, quality, 0) != 0) {
    if (buf) tjFree(buf);
    return Fail(enc_);
  }
  out->assign(buf, buf + len);
  tjFree(buf);
  return true;
}

namespace {

// Walks the markers from SOI to the end of the first SOS header: returns that length (0 when the
// stream is not well formed) and the SOFn marker on the way (0 if none).
size_t WalkHeader(const uint8_t* d, size_t n, uint8_t* sof) {
  *sof = 0;
  if (n < 4 || d[0] != 0xFF || d[1] != 0xD8) return 0;
  size_t pos = 2;
  while (pos + 4 <= n) {
    if (d[pos] != 0xFF) return 0;
    uint8_t marker = d[pos + 1];
    if (marker == 0xFF) { ++pos; continue; }  // fill byte
    size_t len = size_t(d[pos + 2]) << 8 | d[pos + 3];
    if (len < 2 || pos + 2 + len > n) return 0;
    if (marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC && !*sof) *sof = marker;
    pos += 2 + len;
    if (marker == 0xDA) return pos < n ? pos : 0;
  }
  return 0;
}

}  // namespace

size_t JpegPrefixLength(const uint8_t* d, size_t n) {
  uint8_t sof;
  return WalkHeader(d, n, &sof);
}

bool JpegShorterThanItsSize(const uint8_t* d, size_t n, int width, int height, std::string* why) {
  uint8_t sof;
  const size_t head = WalkHeader(d, n, &sof);
  const bool arithmetic = sof >= 0xC9 && sof != 0xCC;  // SOF9..SOF11, SOF13..SOF15
  if (!head || !sof || arithmetic || width <= 0 || height <= 0) return false;  // the decoder says what is wrong
  const uint64_t blocks = uint64_t(width + 7) / 8 * (uint64_t(height + 7) / 8);
  const uint64_t have = uint64_t(n - head) * 8;
  if (blocks <= have) return false;
  *why = "its header declares " + std::to_string(width) + "x" + std::to_string(height) + " pixels, " + std::to_string(blocks) +
         " blocks of 8x8 that need at least " + std::to_string((blocks + 7) / 8) + " bytes of coded data, and only " +
         std::to_string(n - head) + " bytes follow the header (cut short, or a false size)";
  return true;
}

int ParseSubsampling(const std::string& s) {
  if (s == "444") return TJSAMP_444;
  if (s == "422") return TJSAMP_422;
  if (s == "420") return TJSAMP_420;
  if (s == "gray") return TJSAMP_GRAY;
  return -1;
}

}  // namespace dsc::kernels
