// JPEG payloads with restart markers (docs/format.md "Restart-indexed JPEG payloads"): a lossless
// transcode of an existing JPEG (libjpeg's coefficient API: the DCT coefficients are copied, so the
// decoded pixels are those of the source) and an encoder of pixels, both writing a DRI interval chosen
// so that no interval spans two MCU rows. libjpeg directly: TurboJPEG 2.1 has no restart option.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dsc::kernels {

// How the writer picks a restart interval (`dsc build --restart-interval`).
struct RestartPolicy {
  int fixed = 0;       // > 0: every `fixed` MCUs whatever the row length (--restart-interval N)
  int target = 4;      // auto: the divisor of MCUs-per-row nearest this (measured: bench/RESULTS.md)
  int min_mcus = 64;   // images of at most this many MCUs get no markers (CIFAR's 32x32 stay as they are)
};
constexpr int kDefaultRestartTarget = 4;

// The interval, in MCUs, for an image of `per_row` x `rows` MCUs, or 0 for none (small image).
// Auto: among the divisors of per_row other than 1, the one nearest the target (ties: the larger), so
// intervals tile each row; a row whose only divisors are 1 and itself gets the whole row.
int PickRestartInterval(const RestartPolicy& p, int per_row, int rows);

// MCU geometry as a baseline writer lays it out: a one-component image has 8x8 MCUs, otherwise
// 8 x the largest sampling factors.
void McuGrid(int width, int height, int components, int max_h_samp, int max_v_samp, int* per_row, int* rows,
             int* mcu_width = nullptr, int* mcu_height = nullptr);

struct RestartResult {
  int interval = 0;      // MCUs per interval written (0: none)
  int mcus_per_row = 0;
  int mcu_rows = 0;
  int mcu_width = 0, mcu_height = 0;  // pixels
};

// One per thread. Calls return false and fill error() on failure (corrupt data and warnings alike).
class JpegRestartWriter {
 public:
  JpegRestartWriter();
  ~JpegRestartWriter();
  JpegRestartWriter(const JpegRestartWriter&) = delete;
  JpegRestartWriter& operator=(const JpegRestartWriter&) = delete;

  // Lossless transcode of `jpeg` to a Huffman-optimised baseline JPEG with restart markers picked by
  // `policy`. Only the markers that set how pixels decode are written (JFIF or Adobe, from the colour
  // space; quantisation and Huffman tables); APPn (EXIF, ICC) and COM are dropped, as the loader
  // ignores them. A progressive source becomes baseline. When the policy picks no interval, *out is
  // left alone and result->interval is 0.
  bool Transcode(const uint8_t* jpeg, size_t size, const RestartPolicy& policy, std::vector<uint8_t>* out,
                 RestartResult* result);
  // Encodes packed pixels (1 = gray or 3 = RGB channels) exactly as TurboJPEG's tjCompress2 does
  // (quality, TJSAMP_* subsampling, standard Huffman tables, fast DCT), with the policy's restart
  // interval (none when it picks none: then the bytes equal tjCompress2's).
  bool Encode(const uint8_t* pixels, int width, int height, int channels, int quality, int subsampling,
              const RestartPolicy& policy, std::vector<uint8_t>* out, RestartResult* result);
  const std::string& error() const { return error_; }

  struct State;

 private:
  template <typename Body>
  bool Run(const Body& body);
  void Fresh();
  std::unique_ptr<State> s_;
  std::string error_;
};

// Offsets of the RST markers (FFD0..FFD7) after the SOS header of a baseline JPEG, found by
// scanning: what a crop-aware reader does before it assembles the intervals it needs. Returns the
// number found; offsets (of each marker's FF byte) are appended to *at when non-null.
size_t ScanRestartMarkers(const uint8_t* jpeg, size_t size, std::vector<uint32_t>* at);

}  // namespace dsc::kernels
