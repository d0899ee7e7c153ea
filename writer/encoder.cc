#include "writer/encoder.h"

#include <turbojpeg.h>
#include <zstd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "format/error.h"
#include "format/layout.h"
#include "kernels/jpeg_twin.h"
#include "kernels/png_codec.h"
#include "kernels/resize.h"

namespace dsc::writer {

using format::Encoding;

void EncodeOptions::Validate() const {
  if (encoding != "default" && encoding != "jpeg" && encoding != "raw" && encoding != "raw-zstd" && encoding != "auto")
    throw OptionError("--encoding must be default, jpeg, raw, raw-zstd or auto, not '" + encoding + "'");
  if (quality < 1 || quality > 100) throw OptionError("--quality must be in 1..100");
  if (kernels::ParseSubsampling(subsampling) < 0) throw OptionError("--subsampling must be 444, 422, 420 or gray");
  if (max_resolution < 0 || max_resolution > 65535) throw OptionError("--max-resolution must be in 0..65535");
  if (!(center_crop == 0 || (center_crop > 0 && center_crop <= 1))) throw OptionError("--center-crop must be in (0, 1]");
  if (max_pixels < 1) throw OptionError("--max-pixels must be at least 1");
  if (restart_interval != "auto" && restart_interval != "none") {
    size_t used = 0;
    long n = 0;
    try {
      n = std::stol(restart_interval, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != restart_interval.size() || n < 1 || n > 65535)
      throw OptionError("--restart-interval must be auto, none or a number of MCUs in 1..65535, not '" + restart_interval + "'");
  }
}

kernels::RestartPolicy EncodeOptions::restart_policy() const {
  kernels::RestartPolicy p;
  p.target = kernels::kDefaultRestartTarget;
  if (restart_interval != "auto" && restart_interval != "none") p.fixed = std::stoi(restart_interval);
  return p;
}

std::string EncodeOptions::Describe() const {
  std::ostringstream s;
  s << "center_crop=" << center_crop << "\n"
    << "encoding=" << encoding << "\n"
    << "max_resolution=" << max_resolution << "\n"
    << "quality=" << quality << "\n"
    << "reencode=" << (reencode ? 1 : 0) << "\n"
    << "restart_interval=" << restart_interval << "\n"
    << "subsampling=" << subsampling << "\n"
    << "zstd_level=" << zstd_level << "\n";
  return s.str();
}

Encoder::Encoder(const EncodeOptions& options)
    : opt_(options), subsampling_(kernels::ParseSubsampling(options.subsampling)) {
  if (opt_.restart_enabled()) policy_ = opt_.restart_policy();
}

BuildGeometry GeometryOf(const EncodeOptions& o, int w, int h) {
  BuildGeometry g{w, h, 0, 0, w, h, w, h};
  if (o.center_crop > 0) {
    const int side = std::max(1, int(std::lround(o.center_crop * std::min(w, h))));
    g.x = (w - side) / 2;
    g.y = (h - side) / 2;
    g.w = g.h = side;
  }
  kernels::FitLongestSide(g.w, g.h, o.max_resolution, &g.out_w, &g.out_h);
  return g;
}

// rgb_ always holds 3 channels, gray sources included (decoded with R = G = B), so crop and resize
// work on RGB and a gray image stays gray.
bool Encoder::Transform(int* w, int* h) {
  const int channels = 3;
  const BuildGeometry g = GeometryOf(opt_, *w, *h);
  if (g.crops()) {
    tmp_.resize(size_t(g.w) * g.h * channels);
    kernels::CropCopy(rgb_.data(), *w, channels, g.x, g.y, g.w, g.h, tmp_.data());
    rgb_.swap(tmp_);
  }
  if (g.out_w != g.w || g.out_h != g.h) {
    tmp_.resize(size_t(g.out_w) * g.out_h * channels);
    kernels::ResizeArea(rgb_.data(), g.w, g.h, channels, tmp_.data(), g.out_w, g.out_h);
    rgb_.swap(tmp_);
  }
  *w = g.out_w;
  *h = g.out_h;
  return g.changes();
}

// A codec's error text, as the sample's error, unless it says an allocation failed: libjpeg,
// TurboJPEG, libpng and zstd report that as text, and it is the machine failing (stopping the build
// even with --skip-invalid, as bad_alloc does), not the sample. libjpeg said "corrupt JPEG:
// Insufficient memory (case 4)" and --skip-invalid skipped a valid image under memory pressure.
[[noreturn]] static void ThrowCodecError(const std::string& where, const char* what, const std::string& why) {
  for (const char* oom : {"Insufficient memory", "Memory allocation failure", "Out of memory", "out of memory",
                          "Allocation error"}) {
    if (why.find(oom) != std::string::npos) throw EnvironmentError(where + ": out of memory (" + why + ")");
  }
  throw Error(where + ": " + what + ": " + why);
}

void Encoder::EncodeJpeg(int w, int h, int channels, const std::string& where, Encoded* out) {
  const uint8_t* px = rgb_.data();
  if (channels == 1) {  // rgb_ holds a grayscale image expanded to RGB; keep one channel
    tmp_.resize(size_t(w) * h);
    for (size_t i = 0; i < tmp_.size(); ++i) tmp_[i] = rgb_[i * 3];
    px = tmp_.data();
  }
  if (opt_.restart_enabled()) {
    // libjpeg directly (TurboJPEG 2.1 has no restart option), set up as tjCompress2 sets itself up.
    kernels::RestartResult r;
    if (!restart_.Encode(px, w, h, channels, opt_.quality, subsampling_, policy_, &out->payload, &r))
      ThrowCodecError(where, "JPEG encode failed", restart_.error());
    SetRestart(r, Encoded::kReencoded, out);
  } else if (!codec_.Encode(px, w, h, channels, opt_.quality, subsampling_, &out->payload)) {
    ThrowCodecError(where, "JPEG encode failed", codec_.error());
  } else {
    SetRestart(kernels::RestartResult(), Encoded::kReencoded, out);
  }
  out->encoding = uint8_t(Encoding::kJpeg);
  // --subsampling gray encodes one component whatever the source: the index says what is stored.
  out->channels = uint8_t(subsampling_ == TJSAMP_GRAY ? 1 : channels);
  out->jpeg_prefix = kernels::JpegPrefixLength(out->payload.data(), out->payload.size());
}

void Encoder::SetRestart(const kernels::RestartResult& r, uint8_t how, Encoded* out) {
  out->restart = r.interval ? how : uint8_t(Encoded::kNoRestart);
  out->restart_interval = r.interval;
  out->mcus_per_row = r.mcus_per_row;
  // The interval index lets a crop or the GPU stager skip the marker scan (docs/format.md).
  if (r.interval) kernels::AddTwinIntervalIndex(&out->payload);
}

void Encoder::StoreTranscoded(const kernels::RestartResult& r, int channels, Encoded* out) {
  SetRestart(r, Encoded::kTranscoded, out);
  out->encoding = uint8_t(Encoding::kJpeg);
  // The stored stream keeps the source's components (a lossless transcode, or the bytes as they
  // were): --subsampling applies only when encoding, so the index says the source's count.
  out->channels = uint8_t(channels);
  out->jpeg_prefix = kernels::JpegPrefixLength(out->payload.data(), out->payload.size());
}

void Encoder::StoreRaw(int w, int h, bool zstd, const std::string& where, Encoded* out) {
  const size_t n = size_t(w) * h * 3;
  out->channels = 3;
  out->jpeg_prefix = 0;
  out->restart = Encoded::kNoRestart;
  out->restart_interval = out->mcus_per_row = 0;
  if (!zstd) {
    out->payload.assign(rgb_.begin(), rgb_.begin() + n);
    out->encoding = uint8_t(Encoding::kRaw);
    return;
  }
  out->payload.resize(ZSTD_compressBound(n));
  size_t r = ZSTD_compress(out->payload.data(), out->payload.size(), rgb_.data(), n, opt_.zstd_level);
  if (ZSTD_isError(r)) ThrowCodecError(where, "zstd compression failed", ZSTD_getErrorName(r));
  out->payload.resize(r);
  out->encoding = uint8_t(Encoding::kRawZstd);
}

namespace {

// The width and height in a PNG's IHDR (always the first chunk), or false when it is not there.
bool PngSize(const std::vector<uint8_t>& b, uint64_t* w, uint64_t* h) {
  if (b.size() < 24 || std::memcmp(&b[12], "IHDR", 4) != 0) return false;
  *w = uint64_t(b[16]) << 24 | uint64_t(b[17]) << 16 | uint64_t(b[18]) << 8 | b[19];
  *h = uint64_t(b[20]) << 24 | uint64_t(b[21]) << 16 | uint64_t(b[22]) << 8 | b[23];
  return true;
}

void CheckPixels(const std::string& where, uint64_t w, uint64_t h, uint64_t max_pixels) {
  if (w * h > max_pixels)
    throw Error(where + ": " + std::to_string(w) + "x" + std::to_string(h) + " = " + std::to_string(w * h) +
                " pixels, more than --max-pixels " + std::to_string(max_pixels));
}

}  // namespace

void Encoder::Encode(const SourceItem& item, Encoded* out) {
  const std::string& enc = opt_.encoding;
  int w, h, channels = 3;
  bool must_change = false, tried_transcode = false;
  kernels::JpegInfo info;
  kernels::RestartResult transcoded;
  // PNG files are pixel sources too: stored raw by default (lossless in, lossless out).
  const bool png = !item.is_pixels && kernels::IsPng(item.bytes.data(), item.bytes.size());
  if (!item.is_pixels && item.bytes.empty()) throw Error(item.where + ": empty file (0 bytes), not an image");
  if (item.is_pixels) {
    w = item.width;
    h = item.height;
    rgb_.assign(item.bytes.begin(), item.bytes.end());
  } else if (png) {
    uint64_t pw, ph;
    if (PngSize(item.bytes, &pw, &ph)) CheckPixels(item.where, pw, ph, opt_.max_pixels);
    std::string err;
    if (!kernels::DecodePngRGB(item.bytes.data(), item.bytes.size(), opt_.max_pixels, &rgb_, &w, &h, &err))
      ThrowCodecError(item.where, "corrupt PNG", err);
  } else {
    if (!codec_.ReadHeader(item.bytes.data(), item.bytes.size(), &info)) {
      // A valid JPEG whose chroma sampling TurboJPEG 2.1 does not decode (cjpeg -sample 4x2, mixed
      // chroma factors): say so rather than call it unreadable.
      if (codec_.error().find("Could not determine subsampling type") != std::string::npos)
        throw Error(item.where + ": a JPEG with chroma sampling factors TurboJPEG cannot decode (4:4:4, 4:2:2, 4:2:0, "
                    "4:4:0, 4:1:1 and gray are supported); re-encode it, e.g. with cjpeg -sample 2x2");
      ThrowCodecError(item.where, "not a readable JPEG", codec_.error());
    }
    if (info.width > 65535 || info.height > 65535) throw Error(item.where + ": image larger than 65535 pixels on a side");
    CheckPixels(item.where, uint64_t(info.width), uint64_t(info.height), opt_.max_pixels);
    if (std::string why; kernels::JpegShorterThanItsSize(item.bytes.data(), item.bytes.size(), info.width, info.height, &why))
      throw Error(item.where + ": corrupt JPEG: " + why);
    w = info.width;
    h = info.height;
    channels = info.is_gray() ? 1 : 3;
    must_change = opt_.reencode || info.is_cmyk();
    // A JPEG stored as a restart-indexed transcode needs no pixels: reading its coefficients
    // entropy-decodes every scan with warnings as errors, which proves the data as a decode does.
    if (!must_change && !GeometryOf(opt_, w, h).changes() && (enc == "default" || enc == "jpeg") && opt_.restart_enabled()) {
      if (!restart_.Transcode(item.bytes.data(), item.bytes.size(), policy_, &out->payload, &transcoded))
        ThrowCodecError(item.where, "corrupt JPEG", restart_.error());
      tried_transcode = true;
      if (transcoded.interval > 0) {
        out->width = out->source_width = uint16_t(w);
        out->height = out->source_height = uint16_t(h);
        return StoreTranscoded(transcoded, channels, out);
      }
    }
    rgb_.resize(size_t(w) * h * 3);
    // Decoding every source JPEG proves it is readable before it is stored, even when passed through.
    if (!codec_.DecodeRGB(item.bytes.data(), item.bytes.size(), info, rgb_.data()))
      ThrowCodecError(item.where, "corrupt JPEG", codec_.error());
  }
  out->source_width = uint16_t(w);
  out->source_height = uint16_t(h);
  must_change |= Transform(&w, &h);
  out->width = uint16_t(w);
  out->height = uint16_t(h);

  const bool pixel_source = item.is_pixels || png;
  const bool pass_through_ok = !pixel_source && !must_change;
  if (enc == "raw" || (enc == "default" && pixel_source)) return StoreRaw(w, h, false, item.where, out);
  if (enc == "raw-zstd") return StoreRaw(w, h, true, item.where, out);
  if (pass_through_ok) {
    if (opt_.restart_enabled() && !tried_transcode &&
        !restart_.Transcode(item.bytes.data(), item.bytes.size(), policy_, &out->payload, &transcoded))
      ThrowCodecError(item.where, "corrupt JPEG", restart_.error());
    if (transcoded.interval == 0) out->payload = item.bytes;
    StoreTranscoded(transcoded, channels, out);
  } else {
    EncodeJpeg(w, h, channels, item.where, out);
  }
  // auto: raw whenever raw is not larger than the JPEG (FFCV's "smart" mode).
  if (enc == "auto" && size_t(w) * h * 3 <= out->payload.size()) StoreRaw(w, h, false, item.where, out);
}

}  // namespace dsc::writer
