// Turns one source sample into the payload stored in the file: raw pixels, zstd-compressed pixels, a
// JPEG passed through byte for byte, or a JPEG re-encoded after resizing / cropping.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/jpeg_codec.h"
#include "kernels/jpeg_transcode.h"
#include "kernels/limits.h"
#include "writer/source.h"

namespace dsc::writer {

struct EncodeOptions {
  // "default": pixel sources store raw, JPEG sources pass through; or "jpeg", "raw", "raw-zstd", "auto".
  std::string encoding = "default";
  int quality = 90;
  std::string subsampling = "420";
  int max_resolution = 0;    // longest side; 0 = unlimited
  double center_crop = 0;    // 0 = off; else crop a centred square of side RATIO x the shorter side
  bool reencode = false;     // re-encode JPEG sources even when nothing requires it
  int zstd_level = 3;
  // JPEG payloads of more than a few MCUs get restart markers (docs/format.md): "auto" (an interval
  // dividing the MCU row, near kernels::kDefaultRestartTarget), "none" (pass-through byte for byte, as
  // before format 1.1) or N (every N MCUs).
  std::string restart_interval = "auto";
  // Larger images are refused from their header, before any pixel memory is allocated. A resource
  // limit, not a content option: not recorded in the file.
  uint64_t max_pixels = kernels::kDefaultMaxPixels;

  // Throws dsc::Error for an invalid combination.
  void Validate() const;
  // The canonical "key=value\n" lines recorded in the file (sorted by key).
  std::string Describe() const;
  // The restart policy, or nullopt-like `enabled == false` for "none".
  bool restart_enabled() const { return restart_interval != "none"; }
  kernels::RestartPolicy restart_policy() const;
};

// What a build does to a w x h source image: keeps the centred square of --center-crop (x, y, w, h in
// source pixels; the whole image when off) and fits it into --max-resolution (out_w x out_h). Masks
// follow their image through the same geometry.
struct BuildGeometry {
  int src_w = 0, src_h = 0, x = 0, y = 0, w = 0, h = 0, out_w = 0, out_h = 0;
  bool crops() const { return w != src_w || h != src_h; }
  bool changes() const { return crops() || out_w != w || out_h != h; }
};
BuildGeometry GeometryOf(const EncodeOptions& options, int w, int h);

struct Encoded {
  std::vector<uint8_t> payload;
  uint16_t width = 0, height = 0;
  uint16_t source_width = 0, source_height = 0;  // before the build's crop and resize
  uint8_t encoding = 0;       // format::Encoding
  uint8_t channels = 3;
  size_t jpeg_prefix = 0;     // JPEG only: length of the tables prefix (SOI..SOS header); 0 if unknown
  // Restart markers (JPEG only): how the payload got them, its interval and MCU row length.
  enum Restart : uint8_t { kNoRestart = 0, kTranscoded = 1, kReencoded = 2 };
  uint8_t restart = kNoRestart;
  int restart_interval = 0;
  int mcus_per_row = 0;
};

// One per thread (owns a TurboJPEG handle and scratch buffers).
class Encoder {
 public:
  explicit Encoder(const EncodeOptions& options);
  // Throws dsc::Error naming item.where when the sample cannot be decoded or encoded.
  void Encode(const SourceItem& item, Encoded* out);

 private:
  bool Transform(int* w, int* h);  // applies crop / resize to the RGB in rgb_; true when changed
  // The payload in out->payload is the source or its transcode (r.interval > 0): fills the rest.
  void StoreTranscoded(const kernels::RestartResult& r, int channels, Encoded* out);
  void EncodeJpeg(int w, int h, int channels, const std::string& where, Encoded* out);
  void StoreRaw(int w, int h, bool zstd, const std::string& where, Encoded* out);
  // Records how out->payload (final by now) got restart markers, and appends its interval index.
  static void SetRestart(const kernels::RestartResult& r, uint8_t how, Encoded* out);

  EncodeOptions opt_;
  int subsampling_;
  kernels::JpegCodec codec_;
  kernels::JpegRestartWriter restart_;
  kernels::RestartPolicy policy_;
  std::vector<uint8_t> rgb_, tmp_;
};

}  // namespace dsc::writer
