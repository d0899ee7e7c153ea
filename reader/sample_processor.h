// Turns one stored sample into its slot of a batch: read payload, decode, augment, normalise, write
// in the output dtype and layout. One per worker thread; all scratch memory is reused across
// samples, so the hot path does not allocate. Its output writers (planes, rows, one channel) are in
// reader/sample_output.cc.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/augment.h"
#include "kernels/color.h"
#include "kernels/jpeg_decoder.h"
#include "kernels/jpeg_twin_crop.h"
#include "kernels/resample.h"
#include "kernels/transforms.h"
#include "kernels/limits.h"
#include "reader/dataset.h"
#include "reader/executor.h"
#include "reader/loader.h"

namespace dsc {

struct OutputFormat {
  DType dtype = DType::kFloat32;
  Layout layout = Layout::kNCHW;
  uint32_t width = 0, height = 0;
  const float* table = nullptr;      // normalisation table (3 x 256)
  const uint16_t* half = nullptr;    // the same table as IEEE half bits
  bool fancy_upsampling = false;     // see LoaderOptions
  float scale[3] = {1, 1, 1}, bias[3] = {0, 0, 0};  // the table's coefficients (kernels::Normalize)
  uint64_t max_pixels = kernels::kDefaultMaxPixels;  // LoaderOptions::max_pixels
  bool dct_scaling = true;           // LoaderOptions::dct_scaling
  bool twin = false;                 // LoaderOptions::Decoder::kGpu (reader/gpu_stage.h)
  bool fast_idct = false;            // LoaderOptions::fast_idct (then fancy_upsampling too)
  uint32_t image = 0;                // the image field decoded (LoaderOptions::image as a field index)
  uint8_t channels = 3;              // LoaderOptions::channels, resolved: 1 or 3
  kernels::JpegSeekCache* seek = nullptr;  // LoaderOptions::jpeg_index_budget's entry points (crops only)
};

class TwinStageWorker;  // reader/gpu_stage.h

// SampleForm (reader/executor.h) <-> planes. PackPlanes writes a w x h image's decoded planes (its
// size: the planes path takes only images of the output's size) in their form's layout and returns
// the form; ViewPlanes gives the planes of such bytes, pointing into them.
SampleForm PackPlanes(const kernels::JpegPlanes& planes, uint32_t w, uint32_t h, uint8_t* out);
kernels::JpegPlanes ViewPlanes(SampleForm form, const uint8_t* bytes, uint32_t w, uint32_t h);

class SampleProcessor {
 public:
  // With `defer`, only decoding and crop/resize happen here (see LoaderOptions::defer_augment).
  SampleProcessor(const Dataset& ds, const kernels::AugmentSpec& spec, const OutputFormat& out, bool stats,
                  class Tracer* tracer = nullptr, uint32_t track = 0, bool defer = false);
  ~SampleProcessor();
  SampleProcessor(const SampleProcessor&) = delete;
  SampleProcessor& operator=(const SampleProcessor&) = delete;
  // Writes sample `index` (augmented for `epoch` with `seed`) to `dst`. Throws dsc::Error naming the
  // file and sample when the payload cannot be decoded, is over the pixel limit, or its mapped bytes
  // are no longer readable (file truncated while open: reader/mmap_guard.h).
  // `applied` receives the sample's parameters (see Batch::params). With `fallback` (a processor
  // made with OutputFormat::twin), a payload the GPU decoder takes is left undecoded (*fallback = 0);
  // any other is decoded and *fallback says why (Batch::fallback). With `form` (remote workers; a
  // processor that writes finished uint8 NHWC: WritesForms), a sample that decodes to planes is written
  // to `dst` as its planes, un-augmented (SampleForm, reader/executor.h), and *form says which; any
  // other sample as its RGB rows, *form = kRgb.
  void Process(uint64_t index, uint64_t seed, uint64_t epoch, uint8_t* dst, StageStats* stats,
               kernels::SampleParams* applied = nullptr, uint8_t* fallback = nullptr, SampleForm* form = nullptr);
  // The list transforms (kernels/transforms.h) to run on each sample after decode and crop, with the
  // sample's own stream; `t` must outlive the processor. Not with `defer`.
  void set_transforms(const kernels::TransformList* t);
  static bool WritesForms(bool defer, const OutputFormat& out) {
    return !defer && out.dtype == DType::kUint8 && out.layout == Layout::kNHWC && out.channels == 3;
  }
  // Called before Process of a batch chunk's samples, with them in the order Process will take them:
  // decodes together the small JPEGs among them that share the file's JPEG header (no crop, box
  // upsampling: kernels::JpegDecoder::DecodePlanesGroup: the header and Huffman tables are set up once),
  // and Process then writes those planes instead of decoding. The bytes delivered are the same; when
  // the group cannot be decoded (damaged data, a fault in the mapping) every sample is left to Process,
  // which names a damaged one as before. At most kMaxGroupImages images and kMaxGroupBytes of payload.
  static constexpr size_t kMaxGroupImages = 256, kMaxGroupBytes = 4 << 20;
  void PrepareChunk(const uint32_t* samples, size_t n, StageStats* stats);
  // The per-thread staging scratch with OutputFormat::twin, else nullptr.
  TwinStageWorker* twin() { return twin_.get(); }
  // With a crop transform: sample `index`'s crop as Process draws and decodes it (for the GPU
  // decoder's staging), and true; false without a crop transform.
  bool TwinCropInputFor(uint64_t index, uint64_t seed, uint64_t epoch, kernels::TwinCropInput* in) const;
  // The rest of Process for a sample a remote worker finished as uint8 RGB (cropped, resized, flipped,
  // translated and cut, as a uint8 NHWC loader delivers it): the output format into `dst`. Its 3 x
  // width x height bytes lie in order across n pieces (a reply's receive buffers, read where they lie:
  // only a pixel split between two pieces is copied). Same bytes as Process, since normalisation is a
  // function of the uint8 value (kernels::Normalize). The applied parameters are the reply's, not
  // drawn again here. Throws dsc::Error when the pieces hold fewer bytes. Not for a deferring processor.
  void FinishRgb(const BytePiece* pieces, size_t n, uint8_t* dst);
  // A sample that came as planes (un-augmented: SampleForm, reader/executor.h): `bytes` holds its
  // SampleFormBytes(form, width, height) (form is not kRgb), as Process wrote them; the whole of the
  // augmentation and the output format into `dst`. Same bytes as Process.
  void FinishDeferredPlanes(uint64_t index, uint64_t seed, uint64_t epoch, SampleForm form, const uint8_t* bytes,
                            uint8_t* dst, kernels::SampleParams* applied = nullptr);

 private:
  // Sample `index`'s parameters as Process draws them (Batch::params of a batch that does not defer).
  kernels::SampleParams DrawParams(uint64_t index, uint64_t seed, uint64_t epoch) const;
  void ProcessUnguarded(uint64_t index, uint64_t seed, uint64_t epoch, uint8_t* dst, StageStats* stats,
                        kernels::SampleParams* applied, uint8_t* fallback, SampleForm* form);
  // One channel (OutputFormat::channels 1): the sample's finished uint8 RGB in gray_rgb_ to `dst` in
  // gray_out_'s dtype: a grayscale image's own values, a colour one's kernels::Gray.
  void WriteGray(uint64_t index, uint8_t* dst);
  // PrepareChunk's work, in a guarded region: the group's members; 0 when there is no group.
  int DecodeGroup();
  void WriteRows(const kernels::SampleParams& p, const uint8_t* src, int sw, int sh, int stride, uint8_t* dst);
  // WriteRows for an image of the output's size whose row ty is row_at(ty).
  template <typename RowAt>
  void WriteRowsAt(const kernels::SampleParams& p, RowAt row_at, uint8_t* dst);
  // Output row y before mirroring: pixel x is source row ty's pixel x - shift inside [lo, hi) (empty
  // unless `inside`), fill elsewhere and in [cut_from, cut_to).
  struct OutputRow {
    bool inside = false;
    int ty = 0, shift = 0, lo = 0, hi = 0, cut_from = 0, cut_to = 0;
  };
  OutputRow RowOf(const kernels::SampleParams& p, int y) const;
  // The fused path: YCbCr planes -> RGB, translate/flip/cutout, normalise, one output row at a time.
  void WritePlanes(const kernels::SampleParams& p, const kernels::JpegPlanes& planes, uint8_t* dst);
  // Output rows from planar RGB rows: source row ty's r plane row is row_at(ty), its g and b rows
  // `pstride` and 2 * pstride bytes on; each output row assembled (shift, cut, fill), then normalised or
  // interleaved.
  template <typename RowAt>
  void WritePlaneRows(const kernels::SampleParams& p, RowAt row_at, size_t pstride, uint8_t* dst);
  // Decoded planes into dst: packed as they are when the caller takes planes (`form`), else WritePlanes.
  void EmitPlanes(const kernels::SampleParams& p, const kernels::JpegPlanes& planes, uint8_t* dst, SampleForm* form);
  void EmitRow(const uint8_t* rgb, int y, uint8_t* dst) { EmitPixels(rgb, size_t(y) * out_.width, out_.width, dst); }
  // Pixels [at, at + n) of the output image (in row order) from n interleaved RGB pixels.
  void EmitPixels(const uint8_t* rgb, size_t at, size_t n, uint8_t* dst);
  void MakeTwinCropInput(const format::IndexEntry& e, const kernels::CropRect& rect, const kernels::SampleParams& params,
                         kernels::TwinCropInput* in) const;
  void EmitMirroredRow(const uint8_t* rgb, int y, uint8_t* dst);  // emits rgb reversed
  void Account(StageStats* st, uint64_t t0, uint64_t t1, uint64_t t2, size_t bytes);
  static size_t DecodeStride(size_t width);
  uint8_t* DecodeBuffer(size_t width, size_t height);

  // Runs the list transforms on a packed w x h RGB image (rows w * 3 bytes apart).
  void ApplyTransforms(uint8_t* rgb, int w, int h, uint64_t index, uint64_t seed, uint64_t epoch);

  const Dataset& ds_;
  const kernels::TransformList* transforms_ = nullptr;
  kernels::TransformScratch transform_scratch_;
  std::vector<uint8_t> transformed_;  // an uncropped sample's pixels, packed (or planar), for the transforms
  bool planar_transforms_ = false;     // transforms_->OnPlanes(): a JPEG's pixels stay planes for them
  struct {
    uint64_t index = 0, seed = 0, epoch = 0;
  } current_;  // the sample Process is writing (EmitPlanes runs its transforms)
  kernels::AugmentSpec spec_;  // the transforms this processor applies
  kernels::AugmentSpec full_;  // every transform asked for (differs from spec_ when deferring)
  bool defer_;
  OutputFormat out_;  // with one output channel: uint8 NHWC RGB into gray_rgb_, then WriteGray
  bool gray_ = false;
  OutputFormat gray_out_;
  std::vector<uint8_t> gray_rgb_;
  bool stats_;
  class Tracer* tracer_;
  uint32_t track_;
  unsigned long test_delay_us_ = 0;  // DSC_TEST_DECODE_DELAY_US: a per-sample sleep, for tests only
  std::unique_ptr<kernels::JpegDecoder> jpeg_;  // recreated after a fault left it mid-decode
  void* zstd_ = nullptr;  // ZSTD_DCtx
  format::ReadBuffer payload_;  // the sample's bytes when not read in place
  std::vector<uint8_t> pixels_, row_, mirrored_, decode_buf_, planar_;
  std::vector<kernels::YccRow> ycc_rows_;  // an image's rows for the fused YCbCr kernels (WritePlanes)
  std::vector<uint8_t> resized_, resample_scratch_;  // crop modes: the resized image, the resampler's rows
  kernels::ResampleAxis axis_h_, axis_v_;
  std::unique_ptr<TwinStageWorker> twin_;  // OutputFormat::twin
  // PrepareChunk: the chunk's samples in Process order, each one's image in the group (-1: decoded
  // alone), the next to come; the group's header, bodies (copied: a pread's scratch is reused) and
  // decoder (its own, so that a sample decoded alone in between does not overwrite the group's planes).
  std::vector<uint32_t> chunk_;
  std::vector<int> chunk_slot_;
  size_t chunk_next_ = 0;
  std::vector<uint8_t> group_head_, group_bytes_, group_channels_;
  std::vector<size_t> group_sizes_;
  std::vector<const uint8_t*> group_bodies_;
  std::unique_ptr<kernels::JpegDecoder> group_jpeg_;
};

}  // namespace dsc
