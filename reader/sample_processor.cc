#include "reader/sample_processor.h"

#include <zstd.h>

#include <chrono>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "format/error.h"
#include "format/layout.h"
#include "kernels/color.h"
#include "kernels/crop_resize.h"
#include "kernels/normalize_row.h"
#include "kernels/transform_ops.h"
#include "reader/decode_rgb.h"
#include "reader/gpu_stage.h"
#include "reader/mmap_guard.h"
#include "reader/trace.h"

namespace dsc {

namespace {
// NHWC output through a per-channel table (float32 or IEEE-half bits): out[3x + c] = table[256c + v].
template <typename T>
void LookupInterleaved(const uint8_t* rgb, size_t w, const T* table, T* out) {
  for (size_t x = 0; x < w * 3; x += 3) {
    out[x] = table[rgb[x]];
    out[x + 1] = table[256 + rgb[x + 1]];
    out[x + 2] = table[512 + rgb[x + 2]];
  }
}

uint64_t NowNs() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}
}  // namespace

namespace {
// Samples of a sampled plane along n pixels: ceil(n / 2^shift), as libjpeg sizes them.
size_t Sampled(uint32_t n, int shift) { return (size_t(n) + (size_t(1) << shift) - 1) >> shift; }
}  // namespace

size_t SampleFormBytes(SampleForm f, uint32_t w, uint32_t h) {
  const size_t plane = size_t(w) * h;
  if (f == SampleForm::kRgb) return 3 * plane;
  if (f == SampleForm::kGray) return plane;
  const int k = int(f) - int(SampleForm::kYcc444);
  return plane + 2 * Sampled(w, k & 1) * Sampled(h, k >> 1);
}

SampleForm PackPlanes(const kernels::JpegPlanes& jp, uint32_t w, uint32_t h, uint8_t* out) {
  const SampleForm form = jp.components == 1 ? SampleForm::kGray
                                             : SampleForm(int(SampleForm::kYcc444) + jp.hshift[1] + 2 * jp.vshift[1]);
  for (int c = 0; c < jp.components; ++c) {
    const size_t cw = Sampled(w, jp.hshift[c]), ch = Sampled(h, jp.vshift[c]);
    for (size_t y = 0; y < ch; ++y, out += cw) std::memcpy(out, jp.plane[c] + y * jp.stride[c], cw);
  }
  return form;
}

kernels::JpegPlanes ViewPlanes(SampleForm form, const uint8_t* bytes, uint32_t w, uint32_t h) {
  kernels::JpegPlanes jp;
  jp.width = int(w);
  jp.height = int(h);
  jp.components = form == SampleForm::kGray ? 1 : 3;
  const int k = form == SampleForm::kGray ? 0 : int(form) - int(SampleForm::kYcc444);
  for (int c = 0; c < jp.components; ++c) {
    jp.hshift[c] = c ? k & 1 : 0;
    jp.vshift[c] = c ? k >> 1 : 0;
    jp.stride[c] = Sampled(w, jp.hshift[c]);
    jp.plane[c] = bytes;
    bytes += jp.stride[c] * Sampled(h, jp.vshift[c]);
  }
  return jp;
}

SampleProcessor::SampleProcessor(const Dataset& ds, const kernels::AugmentSpec& spec, const OutputFormat& out, bool stats,
                                 Tracer* tracer, uint32_t track, bool defer)
    : ds_(ds), spec_(spec), full_(spec), defer_(defer), out_(out), stats_(stats || tracer), tracer_(tracer), track_(track),
      jpeg_(std::make_unique<kernels::JpegDecoder>()), zstd_(ZSTD_createDCtx()) {
  // A test hook: a loader made slow on purpose (dsc train's input-bound verdict is tested with it).
  if (const char* d = std::getenv("DSC_TEST_DECODE_DELAY_US")) test_delay_us_ = std::strtoul(d, nullptr, 10);
  if (defer) {
    spec_.flip = false;
    spec_.translate = spec_.cutout = 0;
    spec_.normalize = false;
  }
  if (out.channels == 1) {  // everything below writes RGB; WriteGray makes the one channel
    gray_ = true;
    gray_out_ = out;
    out_.dtype = DType::kUint8;
    out_.layout = Layout::kNHWC;
    out_.channels = 3;
    gray_rgb_.resize(size_t(out.width) * out.height * 3);
  }
  row_.resize(size_t(out.width) * 3);
  mirrored_.resize(size_t(out.width) * 3);
  if (out.twin) twin_ = std::make_unique<TwinStageWorker>(out.fancy_upsampling, out.image);
  jpeg_->set_fast_idct(out.fast_idct);
}

SampleProcessor::~SampleProcessor() { ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(zstd_)); }

void SampleProcessor::Process(uint64_t index, uint64_t seed, uint64_t epoch, uint8_t* dst, StageStats* st,
                              kernels::SampleParams* applied, uint8_t* fallback, SampleForm* form) {
  if (form) {
    if (!WritesForms(defer_, out_)) throw Error("internal: planes asked of a processor that does not write finished uint8 NHWC");
    *form = SampleForm::kRgb;
  }
  if (mmap_guard::RunGuarded([&] {
        if (!gray_) return ProcessUnguarded(index, seed, epoch, dst, st, applied, fallback, form);
        ProcessUnguarded(index, seed, epoch, gray_rgb_.data(), st, applied, fallback, nullptr);
        WriteGray(index, dst);
      }))
    return;
  // A SIGBUS jumped out of the middle of a decode: libjpeg's and zstd's state is unknown, start afresh.
  jpeg_ = std::make_unique<kernels::JpegDecoder>();
  jpeg_->set_fast_idct(out_.fast_idct);
  ZSTD_DCtx_reset(static_cast<ZSTD_DCtx*>(zstd_), ZSTD_reset_session_and_parameters);
  throw ds_.Unreadable(index);
}

void SampleProcessor::WriteGray(uint64_t index, uint8_t* dst) {
  const size_t n = size_t(gray_out_.width) * gray_out_.height;
  const uint8_t* rgb = gray_rgb_.data();
  const bool own = ds_.entry(index, gray_out_.image).channels == 1;  // decoded to R = G = B: exact
  auto value = [&](size_t i) { return own ? rgb[3 * i] : kernels::Gray(rgb[3 * i], rgb[3 * i + 1], rgb[3 * i + 2]); };
  switch (gray_out_.dtype) {
    case DType::kUint8:
      for (size_t i = 0; i < n; ++i) dst[i] = value(i);
      return;
    case DType::kFloat32: {
      float* o = reinterpret_cast<float*>(dst);
      for (size_t i = 0; i < n; ++i) o[i] = gray_out_.table[value(i)];  // channel 0's normalisation
      return;
    }
    case DType::kFloat16: {
      uint16_t* o = reinterpret_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) o[i] = gray_out_.half[value(i)];
      return;
    }
  }
}

void SampleProcessor::PrepareChunk(const uint32_t* samples, size_t n, StageStats* st) {
  chunk_.assign(samples, samples + n);
  chunk_slot_.assign(n, -1);
  chunk_next_ = 0;
  if (twin_ || spec_.crop != kernels::CropMode::kNone || out_.fancy_upsampling || n < 2) return;
  const uint64_t t0 = stats_ ? NowNs() : 0;
  int members = 0;
  bool finished = false;
  try {
    finished = mmap_guard::RunGuarded([&] { members = DecodeGroup(); });
  } catch (const std::exception&) {  // out of memory, say: each sample's own decode meets it too
  }
  if (!finished) group_jpeg_.reset();  // a fault left it mid-decode; Process names the sample
  if (!finished || members == 0) {
    chunk_slot_.assign(n, -1);
    return;
  }
  if (stats_ && st) {
    const uint64_t t1 = NowNs();
    st->decode_ns += t1 - t0;
    if (tracer_) tracer_->Add(track_, "decode group", t0, t1);  // its samples' own decode spans are empty
  }
}

int SampleProcessor::DecodeGroup() {
  int members = 0, table = -1;
  group_bytes_.clear();
  group_sizes_.clear();
  group_channels_.clear();
  // The members' payloads are scattered over the file: ask for their first bytes (an inline JPEG's
  // header, then its data) all at once rather than miss the cache on each in turn. A prefetch never
  // faults, whatever the index says.
  if (const uint8_t* base = ds_.mapped()) {
    for (size_t i = 0; i < chunk_.size() && i < kMaxGroupImages; ++i) {
      const format::IndexEntry e = ds_.entry(chunk_[i], out_.image);
      for (uint32_t o = 0; o < e.size && o < 1024; o += 64) __builtin_prefetch(base + e.offset + o);
    }
  }
  for (size_t i = 0; i < chunk_.size() && size_t(members) < kMaxGroupImages; ++i) {
    // What Process would decode through DecodePlanes: a JPEG of the output's size under the pixel
    // limit, here one whose header is the same bytes for every member: the file's shared table set,
    // or an inline header (FFCV's files, --jpeg-tables inline) equal to the first member's. Judged
    // from the index first: reading a payload that is not grouped copies it for nothing where the
    // source is not mapped (a URL: 10% of a cold epoch of raw samples).
    const format::IndexEntry ie = ds_.entry(chunk_[i], out_.image);
    if (format::Encoding(ie.encoding) != format::Encoding::kJpeg || ie.width != out_.width ||
        ie.height != out_.height || uint64_t(ie.width) * ie.height > out_.max_pixels ||
        group_bytes_.size() + ie.size > kMaxGroupBytes)
      continue;
    const Dataset::Parts parts = ds_.ReadPayloadParts(chunk_[i], &scratch_, true, out_.image);
    const format::IndexEntry& e = parts.entry;
    Payload head = parts.head, body = parts.body;
    if (!head.size) {
      const size_t h = kernels::JpegPrefixLength(body.data, body.size);
      if (h == 0 || h >= body.size) continue;
      head = {body.data, h};
      body = {body.data + h, body.size - h};
    }
    if (table < 0) {
      table = e.jpeg_table;
      group_head_.assign(head.data, head.data + head.size);
    } else if (e.jpeg_table != table ||
               (table == 0 && (head.size != group_head_.size() || std::memcmp(head.data, group_head_.data(), head.size) != 0))) {
      continue;
    }
    group_bytes_.insert(group_bytes_.end(), body.data, body.data + body.size);
    group_sizes_.push_back(body.size);
    group_channels_.push_back(e.channels);
    chunk_slot_[i] = members++;
  }
  if (members < 2) return 0;
  group_bodies_.resize(size_t(members));
  for (size_t m = 0, at = 0; m < size_t(members); at += group_sizes_[m++]) group_bodies_[m] = group_bytes_.data() + at;
  if (!group_jpeg_) group_jpeg_ = std::make_unique<kernels::JpegDecoder>();
  if (!group_jpeg_->DecodePlanesGroup(group_head_.data(), group_head_.size(), group_bodies_.data(), group_sizes_.data(),
                                      members) ||
      group_jpeg_->group_width() != int(out_.width) || group_jpeg_->group_height() != int(out_.height))
    return 0;
  // A member whose index says another channel count is left to Process, which reports it.
  for (int& slot : chunk_slot_)
    if (slot >= 0 && group_channels_[size_t(slot)] != group_jpeg_->group_components()) slot = -1;
  return members;
}

void SampleProcessor::ProcessUnguarded(uint64_t index, uint64_t seed, uint64_t epoch, uint8_t* dst, StageStats* st,
                                       kernels::SampleParams* applied, uint8_t* fallback, SampleForm* form) {
  // Decoded by PrepareChunk with the chunk's others, when this is the sample it expects next.
  int grouped = -1;
  if (chunk_next_ < chunk_.size()) {
    if (chunk_[chunk_next_] == index) grouped = chunk_slot_[chunk_next_++];
    else chunk_.clear();  // not the prepared order: every sample decoded alone
  }
  current_ = {index, seed, epoch};
  const uint64_t t0 = stats_ ? NowNs() : 0;
  const Dataset::Parts parts = ds_.ReadPayloadParts(index, &scratch_, true, out_.image);
  const format::IndexEntry& e = parts.entry;
  const Payload p = parts.head.size ? Payload{nullptr, parts.head.size + parts.body.size} : parts.body;
  const uint64_t t1 = stats_ ? NowNs() : 0;
  if (test_delay_us_) std::this_thread::sleep_for(std::chrono::microseconds(test_delay_us_));  // counted as decode
  auto fail = [&](const std::string& why) {
    return Error(ds_.path() + ": sample " + std::to_string(index) + ": " + why);
  };
  CheckPixelLimit(ds_, index, e, out_.max_pixels);
  // Without a crop the image is the output. The loader checks every entry when it is made; a remote
  // worker serves any output size a request names, and the planes path below writes output rows from
  // the decoded image's without looking.
  if (spec_.crop == kernels::CropMode::kNone && (e.width != out_.width || e.height != out_.height))
    throw fail("a " + std::to_string(e.width) + "x" + std::to_string(e.height) + " image for a " +
               std::to_string(out_.width) + "x" + std::to_string(out_.height) + " output without a crop");
  kernels::CropRect rect;
  kernels::SampleParams params;
  // Drawn with every transform enabled, so deferring changes where the work happens, not the result.
  kernels::MakeParams(full_, e.width, e.height, seed, epoch, index, &rect, &params);
  if (defer_) {
    if (applied) {
      *applied = params;  // what is left: flip / translate / cutout over the whole output image
      applied->src_x = applied->src_y = 0;
      applied->src_w = int64_t(out_.width) << 16;
      applied->src_h = int64_t(out_.height) << 16;
    }
    params.flip = 0;
    params.dx = params.dy = 0;
    params.cut_x = params.cut_y = -1;
  } else if (applied) {
    *applied = params;
  }
  if (fallback && twin_) {  // Decoder::kGpu: the batch's last worker stages what the GPU takes
    kernels::TwinCropInput crop;
    if (spec_.crop != kernels::CropMode::kNone) MakeTwinCropInput(e, rect, params, &crop);
    *fallback = twin_->Check(parts, e.width, e.height, spec_.crop != kernels::CropMode::kNone ? &crop : nullptr, index);
    if (*fallback == 0) {
      if (stats_) {
        const uint64_t t2 = NowNs();
        st->twin_stage_ns += t2 - t1;
        Account(st, t0, t1, t2, p.size);
      }
      return;
    }
    ++st->twin_fallback[*fallback];
  }
  const uint8_t* src = nullptr;
  int sw = e.width, sh = e.height, stride = e.width * 3;
  kernels::DecodedRegion region;  // what the buffer holds: the whole image unless a JPEG crop says otherwise
  region.width = e.width;
  region.height = e.height;
  const size_t raw = size_t(e.width) * e.height * 3;
  switch (format::Encoding(e.encoding)) {
    case format::Encoding::kRaw:
      src = p.data;  // straight from the mapping: no copy
      break;
    case format::Encoding::kRawZstd: {
      // The frame's own size must match the index before anything is allocated for it.
      if (ZSTD_getFrameContentSize(p.data, p.size) != raw)
        throw fail("zstd frame size disagrees with the index (" + std::to_string(e.width) + "x" + std::to_string(e.height) + ")");
      if (pixels_.size() < raw) pixels_.resize(raw);
      size_t r = ZSTD_decompressDCtx(static_cast<ZSTD_DCtx*>(zstd_), pixels_.data(), raw, p.data, p.size);
      if (ZSTD_isError(r) || r != raw) throw fail(std::string("corrupt zstd payload: ") + (ZSTD_isError(r) ? ZSTD_getErrorName(r) : "short"));
      src = pixels_.data();
      break;
    }
    case format::Encoding::kJpeg: {
      if (grouped >= 0) {  // the planes DecodePlanes would give (PrepareChunk checked what Process checks below)
        const uint64_t t2 = stats_ ? NowNs() : 0;
        EmitPlanes(params, group_jpeg_->GroupPlanes(grouped), dst, form);
        kernels::StreamFence();
        if (stats_) Account(st, t0, t1, t2, p.size);
        return;
      }
      int w, h;
      if (!jpeg_->ReadHeader(parts.head.data, parts.head.size, parts.body.data, parts.body.size, &w, &h))
        throw fail("corrupt JPEG: " + jpeg_->error());
      if (w != e.width || h != e.height) throw fail("JPEG size disagrees with the index");
      // FFCV's index has no channel count: it decodes any JPEG to RGB, a grayscale one too.
      if (jpeg_->components() != e.channels && !(ds_.view().ffcv() && jpeg_->components() == 1))
        throw fail("JPEG has " + std::to_string(jpeg_->components()) + " component(s), index says " +
                   std::to_string(e.channels) + " channel(s)");
      if (spec_.crop == kernels::CropMode::kNone && !out_.fancy_upsampling && jpeg_->CanDecodePlanes()) {
        kernels::JpegPlanes planes;
        if (!jpeg_->DecodePlanes(&planes)) throw fail("corrupt JPEG: " + jpeg_->error());
        const uint64_t t2 = stats_ ? NowNs() : 0;
        EmitPlanes(params, planes, dst, form);
        kernels::StreamFence();
        if (stats_) Account(st, t0, t1, t2, p.size);
        return;
      }
      uint8_t* buf = DecodeBuffer(size_t(w), size_t(h));
      stride = int(DecodeStride(size_t(w)));
      if (spec_.crop == kernels::CropMode::kNone) {
        if (!jpeg_->DecodeRGB(buf, size_t(stride), out_.fancy_upsampling)) throw fail("corrupt JPEG: " + jpeg_->error());
      } else {
        int min_w, min_h;
        kernels::CropDecodeMinSize(spec_, w, h, rect, int(out_.width), int(out_.height), out_.dct_scaling, &min_w, &min_h);
        if (!jpeg_->DecodeRegion(rect.x, rect.y, rect.w, rect.h, min_w, min_h, buf, size_t(stride),
                                 size_t(stride) * size_t(h), &region, out_.fancy_upsampling))
          throw fail("corrupt JPEG: " + jpeg_->error());
        kernels::RebaseParams(region.x, region.y, region.scale_num, &params);
        sw = region.width;
        sh = region.height;
      }
      src = buf;
      break;
    }
  }
  const uint64_t t2 = stats_ ? NowNs() : 0;
  if (spec_.crop != kernels::CropMode::kNone) {
    // Pillow's resize of the crop to the output, flipped by mirroring its horizontal axis; translate,
    // cutout and the output format then run on the resized image as on an uncropped one.
    const size_t bytes = size_t(out_.width) * out_.height * 3;
    if (resized_.size() < bytes) resized_.resize(bytes);
    // Without translate or cutout each resized row is the output row: emitted as soon as it is
    // resampled (kernels::ResampleRowSink), while it is still in the cache.
    struct Emit final : kernels::ResampleRowSink {
      SampleProcessor* self;
      uint8_t* dst;
      Emit(SampleProcessor* s, uint8_t* d) : self(s), dst(d) {}
      void Row(int y, const uint8_t* rgb) override { self->EmitRow(rgb, y, dst); }
    } emit(this, dst);
    const bool direct = params.dx == 0 && params.dy == 0 && params.cut_x < 0 && !transforms_;
    try {
      kernels::CropResizeAxes(spec_, e.width, e.height, params, region, params.flip != 0, &axis_h_, &axis_v_);
      kernels::ResampleRgbAxes(src, sw, sh, size_t(stride), axis_h_, axis_v_, resized_.data(), &resample_scratch_,
                               direct ? &emit : nullptr);
    } catch (const Error& ex) {  // a geometry the resampler refuses: name the sample
      throw fail(ex.what());
    }
    if (direct) {
      kernels::StreamFence();  // streaming stores are visible before the batch is published
      if (stats_) Account(st, t0, t1, t2, p.size);
      return;
    }
    params.flip = 0;
    src = resized_.data();
    sw = int(out_.width);
    sh = int(out_.height);
    stride = sw * 3;
    if (transforms_) ApplyTransforms(resized_.data(), sw, sh, index, seed, epoch);
  } else if (transforms_) {
    // The decoded image (or the mapping itself, for raw payloads) packed into a buffer of our own.
    const size_t row = size_t(sw) * 3;
    if (transformed_.size() < row * size_t(sh)) transformed_.resize(row * size_t(sh));
    for (int y = 0; y < sh; ++y) std::memcpy(transformed_.data() + size_t(y) * row, src + size_t(y) * size_t(stride), row);
    ApplyTransforms(transformed_.data(), sw, sh, index, seed, epoch);
    src = transformed_.data();
    stride = int(row);
  }
  WriteRows(params, src, sw, sh, stride, dst);
  kernels::StreamFence();  // streaming stores are visible before the batch is published
  if (stats_) Account(st, t0, t1, t2, p.size);
}

void SampleProcessor::set_transforms(const kernels::TransformList* t) {
  if (t && defer_) throw Error("internal: list transforms on a deferring processor");
  transforms_ = t && !t->empty() ? t : nullptr;
  planar_transforms_ = transforms_ && transforms_->OnPlanes();
}

void SampleProcessor::ApplyTransforms(uint8_t* rgb, int w, int h, uint64_t index, uint64_t seed, uint64_t epoch) {
  try {
    transforms_->Apply(kernels::ImageU8{rgb, w, h}, seed, epoch, index, transform_scratch_);
  } catch (const Error& ex) {  // a transform that cannot apply to this image (a crop larger than it, ...)
    throw Error(ds_.path() + ": sample " + std::to_string(index) + ": " + ex.what());
  }
}

void SampleProcessor::MakeTwinCropInput(const format::IndexEntry& e, const kernels::CropRect& rect,
                                        const kernels::SampleParams& params, kernels::TwinCropInput* in) const {
  in->spec = &spec_;
  in->img_w = int(e.width);
  in->img_h = int(e.height);
  in->rect = rect;
  in->params = params;
  kernels::CropDecodeMinSize(spec_, in->img_w, in->img_h, rect, int(out_.width), int(out_.height), out_.dct_scaling,
                             &in->min_w, &in->min_h);
  in->fancy = out_.fancy_upsampling;
}

bool SampleProcessor::TwinCropInputFor(uint64_t index, uint64_t seed, uint64_t epoch, kernels::TwinCropInput* in) const {
  if (spec_.crop == kernels::CropMode::kNone) return false;
  const format::IndexEntry e = ds_.entry(index, out_.image);
  kernels::CropRect rect;
  kernels::SampleParams params;
  kernels::MakeParams(full_, e.width, e.height, seed, epoch, index, &rect, &params);
  MakeTwinCropInput(e, rect, params, in);
  return true;
}

kernels::SampleParams SampleProcessor::DrawParams(uint64_t index, uint64_t seed, uint64_t epoch) const {
  const format::IndexEntry e = ds_.entry(index, out_.image);
  kernels::CropRect rect;
  kernels::SampleParams params;
  kernels::MakeParams(full_, e.width, e.height, seed, epoch, index, &rect, &params);
  return params;
}

void SampleProcessor::FinishRgb(const BytePiece* pieces, size_t n, uint8_t* dst) {
  if (defer_ || gray_) throw Error("internal: FinishRgb on a deferring or one-channel processor");
  const size_t total = size_t(out_.width) * out_.height;
  size_t at = 0;  // pixels written
  uint8_t split[3];
  size_t held = 0;  // bytes of a pixel split between two pieces, in `split`
  for (size_t i = 0; i < n && at < total; ++i) {
    const uint8_t* p = pieces[i].data;
    size_t left = pieces[i].size;
    if (held) {
      const size_t c = std::min(3 - held, left);
      std::memcpy(split + held, p, c);
      held += c, p += c, left -= c;
      if (held < 3) continue;
      EmitPixels(split, at++, 1, dst);
      held = 0;
    }
    const size_t whole = std::min(left / 3, total - at);
    if (whole) EmitPixels(p, at, whole, dst);
    at += whole;
    left -= whole * 3;
    if (at < total && left) {  // fewer than 3 bytes: the start of a pixel the next piece completes
      std::memcpy(split, p + whole * 3, left);
      held = left;
    }
  }
  if (at != total) throw Error("internal: a remote sample of fewer bytes than its image");
  kernels::StreamFence();
}

void SampleProcessor::FinishDeferredPlanes(uint64_t index, uint64_t seed, uint64_t epoch, SampleForm form,
                                           const uint8_t* bytes, uint8_t* dst, kernels::SampleParams* applied) {
  if (defer_ || form == SampleForm::kRgb || uint8_t(form) >= kSampleForms)
    throw Error("internal: FinishDeferredPlanes on a deferring processor or for RGB rows");
  const kernels::SampleParams params = DrawParams(index, seed, epoch);
  if (applied) *applied = params;
  WritePlanes(params, ViewPlanes(form, bytes, out_.width, out_.height), dst);
  kernels::StreamFence();
}

void SampleProcessor::EmitPlanes(const kernels::SampleParams& p, const kernels::JpegPlanes& jp, uint8_t* dst,
                                 SampleForm* form) {
  // Planes where they are fewer bytes than RGB rows: a 4:4:4 JPEG is as large either way, so it
  // travels as rows (converted here, not on the loader's machine).
  const bool full_chroma = jp.components == 3 && jp.hshift[1] == 0 && jp.vshift[1] == 0 && jp.hshift[2] == 0 &&
                           jp.vshift[2] == 0;
  if (transforms_) {  // the RGB image for the transforms, then the rest as for any decoded image
    if (form) *form = SampleForm::kRgb;
    const size_t w = out_.width, h = out_.height, n = w * h;
    if (transformed_.size() < 3 * n) transformed_.resize(3 * n);
    // Transforms that run on planes (colour jitter) take the converted planes as they are, and the
    // output rows are assembled from them: no packing and unpacking of every pixel.
    uint8_t* pl = planar_transforms_ ? transformed_.data() : nullptr;
    if (pl && jp.components == 3) {  // the whole image in one call (kernels::YccRowsToPlanes)
      ycc_rows_.resize(h);
      for (size_t y = 0; y < h; ++y) {
        kernels::YccRow& q = ycc_rows_[y];
        q = kernels::YccRow{};
        q.y = jp.plane[0] + y * jp.stride[0];
        q.cb = jp.plane[1] + (y >> jp.vshift[1]) * jp.stride[1];
        q.cr = jp.plane[2] + (y >> jp.vshift[2]) * jp.stride[2];
        q.hshift = jp.hshift[1], q.w = int(w);
      }
      kernels::YccRowsToPlanes(ycc_rows_.data(), h, pl, pl + n, pl + 2 * n, w);
    } else {  // row by row: into the planes, or converted and packed
      if (!pl && planar_.size() < 3 * w) planar_.resize(3 * w);
      for (size_t y = 0; y < h; ++y) {
        const uint8_t* Y = jp.plane[0] + y * jp.stride[0];
        uint8_t* r = pl ? pl + y * w : planar_.data();
        uint8_t* g = pl ? r + n : r + w;
        uint8_t* b = pl ? g + n : g + w;
        if (jp.components == 3) {
          kernels::ColorConvertRow(Y, jp.plane[1] + (y >> jp.vshift[1]) * jp.stride[1],
                                   jp.plane[2] + (y >> jp.vshift[2]) * jp.stride[2], w, jp.hshift[1], r, g, b);
        } else {
          std::memcpy(r, Y, w);
          std::memcpy(g, Y, w);
          std::memcpy(b, Y, w);
        }
        if (!pl) kernels::InterleaveRow(r, g, b, w, transformed_.data() + y * 3 * w, false);
      }
    }
    if (pl) {
      try {
        transforms_->ApplyPlanes(kernels::PlanesU8{{pl, pl + n, pl + 2 * n}, int(w), int(h)}, current_.seed,
                                 current_.epoch, current_.index, transform_scratch_);
      } catch (const Error& ex) {
        throw Error(ds_.path() + ": sample " + std::to_string(current_.index) + ": " + ex.what());
      }
      const bool planar_out = out_.dtype == DType::kFloat32 && out_.layout == Layout::kNCHW;
      if (kernels::YccRowIsFast(w, 0) && (planar_out || out_.dtype == DType::kUint8)) {
        // The fused kernels read the planes as RGB rows (YccRow::rgb): shift, cut, fill, mirror and
        // normalise or interleave in one pass over the image.
        ycc_rows_.resize(h);
        for (size_t y = 0; y < h; ++y) {
          const OutputRow g = RowOf(p, int(y));
          kernels::YccRow& q = ycc_rows_[y];
          q = kernels::YccRow{};
          if (g.inside) q.y = pl + size_t(g.ty) * w, q.cb = q.y + n, q.cr = q.y + 2 * n;
          q.rgb = true, q.w = int(w);
          q.shift = g.shift, q.lo = g.lo, q.hi = g.hi, q.cut_from = g.cut_from, q.cut_to = g.cut_to;
        }
        if (planar_out) {
          float* f = reinterpret_cast<float*>(dst);
          kernels::YccRowsToFloat(ycc_rows_.data(), h, spec_.fill, out_.scale, out_.bias, p.flip != 0, f, f + n,
                                  f + 2 * n, w);
        } else {
          kernels::YccRowsToRgb(ycc_rows_.data(), h, spec_.fill, p.flip != 0, dst, 3 * w);
        }
        return;
      }
      WritePlaneRows(p, [pl, w](int ty) { return pl + size_t(ty) * w; }, n, dst);
      return;
    }
    ApplyTransforms(transformed_.data(), int(w), int(h), current_.index, current_.seed, current_.epoch);
    WriteRows(p, transformed_.data(), int(w), int(h), int(3 * w), dst);
    return;
  }
  if (form && !full_chroma) {
    *form = PackPlanes(jp, out_.width, out_.height, dst);
    return;
  }
  if (form) *form = SampleForm::kRgb;
  WritePlanes(p, jp, dst);
}

void SampleProcessor::Account(StageStats* st, uint64_t t0, uint64_t t1, uint64_t t2, size_t bytes) {
  const uint64_t t3 = NowNs();
  st->read_ns += t1 - t0;
  st->decode_ns += t2 - t1;
  st->augment_ns += t3 - t2;
  st->samples += 1;
  st->payload_bytes += bytes;
  if (tracer_) {
    tracer_->Add(track_, "read", t0, t1);
    tracer_->Add(track_, "decode", t1, t2);
    tracer_->Add(track_, "augment", t2, t3);
  }
}

void SampleProcessor::WritePlanes(const kernels::SampleParams& p, const kernels::JpegPlanes& jp, uint8_t* dst) {
  const int ow = int(out_.width), oh = int(out_.height);
  const size_t w = size_t(ow), plane = size_t(ow) * size_t(oh);
  // planar_: the converted source row (3 x w), then the three output rows being assembled (3 x w).
  if (planar_.size() < 6 * w) planar_.resize(6 * w);
  uint8_t* src_rgb = planar_.data();
  const bool mirror = p.flip != 0;  // a flipped row is built mirrored (RowOf)
  const bool planar_out = out_.dtype == DType::kFloat32 && out_.layout == Layout::kNCHW;
  // From YCbCr: each row converted, shifted, cut and normalised (float32 NCHW) or interleaved (the
  // others) in one pass where the CPU has a vector path for it (kernels::YccRowsToFloat / YccRowsToRgb,
  // the whole image in one call); else converted to planes, assembled, then normalised or interleaved.
  const bool fused = jp.components == 3 && kernels::YccRowIsFast(w, jp.hshift[1]);
  // An output row's source row and bounds (RowOf), for the fused kernels.
  auto ycc_row = [&](const OutputRow& g) {
    kernels::YccRow q;
    if (g.inside) {
      q.y = jp.plane[0] + size_t(g.ty) * jp.stride[0];
      q.cb = jp.plane[1] + size_t(g.ty >> jp.vshift[1]) * jp.stride[1];
      q.cr = jp.plane[2] + size_t(g.ty >> jp.vshift[2]) * jp.stride[2];
    }
    q.hshift = jp.hshift[1];
    q.w = ow;
    q.shift = g.shift, q.lo = g.lo, q.hi = g.hi, q.cut_from = g.cut_from, q.cut_to = g.cut_to;
    return q;
  };
  if (fused && (planar_out || out_.dtype == DType::kUint8)) {  // the whole image in one call
    ycc_rows_.resize(size_t(oh));
    for (int y = 0; y < oh; ++y) ycc_rows_[size_t(y)] = ycc_row(RowOf(p, y));
    if (planar_out) {
      float* f = reinterpret_cast<float*>(dst);
      kernels::YccRowsToFloat(ycc_rows_.data(), size_t(oh), spec_.fill, out_.scale, out_.bias, mirror, f, f + plane,
                              f + 2 * plane, w);
    } else {  // uint8 NHWC, straight into the batch
      kernels::YccRowsToRgb(ycc_rows_.data(), size_t(oh), spec_.fill, mirror, dst, 3 * w);
    }
    return;
  }
  if (fused) {  // another dtype or layout: each row through row_
    for (int y = 0; y < oh; ++y) {
      kernels::YccRowToRgb(ycc_row(RowOf(p, y)), spec_.fill, mirror, row_.data());
      EmitRow(row_.data(), y, dst);
    }
    return;
  }
  // Each source row converted to planes (src_rgb) as it is needed.
  WritePlaneRows(
      p,
      [&](int ty) {
        const uint8_t* Y = jp.plane[0] + size_t(ty) * jp.stride[0];
        if (jp.components == 3) {
          kernels::ColorConvertRow(Y, jp.plane[1] + size_t(ty >> jp.vshift[1]) * jp.stride[1],
                                   jp.plane[2] + size_t(ty >> jp.vshift[2]) * jp.stride[2], w, jp.hshift[1], src_rgb,
                                   src_rgb + w, src_rgb + 2 * w);
        } else {
          for (int c = 0; c < 3; ++c) std::memcpy(src_rgb + c * w, Y, w);
        }
        return static_cast<const uint8_t*>(src_rgb);
      },
      w, dst);
}

template <typename RowAt>
void SampleProcessor::WritePlaneRows(const kernels::SampleParams& p, RowAt row_at, size_t pstride, uint8_t* dst) {
  const int ow = int(out_.width), oh = int(out_.height);
  const size_t w = size_t(ow), plane = size_t(ow) * size_t(oh);
  if (planar_.size() < 6 * w) planar_.resize(6 * w);
  uint8_t* out_rgb = planar_.data() + 3 * w;  // WritePlanes converts source rows into the first 3 * w
  const bool mirror = p.flip != 0;
  const bool planar_out = out_.dtype == DType::kFloat32 && out_.layout == Layout::kNCHW;
  for (int y = 0; y < oh; ++y) {
    const OutputRow g = RowOf(p, y);
    const int shift = g.shift, lo = g.lo, hi = g.hi, cut_from = g.cut_from, cut_to = g.cut_to;
    const uint8_t* src = g.inside ? row_at(g.ty) : nullptr;
    // The output row's three planes: the source row itself unless it is shifted or cut.
    const uint8_t* planes = src;
    size_t ps = pstride;
    if (!g.inside || shift != 0 || cut_to > cut_from) {
      planes = out_rgb;
      ps = w;
      for (size_t c = 0; c < 3; ++c) {
        uint8_t* row = out_rgb + c * w;
        if (!g.inside) {
          std::memset(row, spec_.fill[c], w);
        } else {
          std::memset(row, spec_.fill[c], size_t(lo));
          std::memset(row + hi, spec_.fill[c], size_t(ow - hi));
          std::memcpy(row + lo, src + c * pstride + (lo - shift), size_t(hi - lo));
        }
        if (cut_to > cut_from) std::memset(row + cut_from, spec_.fill[c], size_t(cut_to - cut_from));
      }
    }
    if (planar_out) {
      for (size_t c = 0; c < 3; ++c)
        kernels::NormalizePlaneRow(planes + c * ps, w, reinterpret_cast<float*>(dst) + c * plane + size_t(y) * w,
                                   out_.scale[c], out_.bias[c], mirror);
    } else {  // interleaved (and mirrored) once, straight into a uint8 batch
      const bool direct = out_.dtype == DType::kUint8;
      uint8_t* rgb = direct ? dst + size_t(y) * w * 3 : row_.data();
      kernels::InterleaveRow(planes, planes + ps, planes + 2 * ps, w, rgb, mirror);
      if (!direct) EmitRow(rgb, y, dst);
    }
  }
}

size_t SampleProcessor::DecodeStride(size_t width) { return (width * 3 + 31) / 32 * 32; }

uint8_t* SampleProcessor::DecodeBuffer(size_t width, size_t height) {
  // libjpeg-turbo's SIMD colour conversion switches to non-temporal stores when a row is 32-byte
  // aligned; reading those rows straight back then runs from memory instead of the cache. Rows
  // therefore start 16 bytes past a 32-byte boundary: the stride
  // is a multiple of 32 and the base is offset by 16.
  const size_t need = DecodeStride(width) * height + 64;
  if (decode_buf_.size() < need) decode_buf_.resize(need);
  const uintptr_t base = reinterpret_cast<uintptr_t>(decode_buf_.data());
  return decode_buf_.data() + ((32 - base % 32) % 32) + 16;
}

void SampleProcessor::WriteRows(const kernels::SampleParams& p, const uint8_t* src, int sw, int sh, int stride,
                                uint8_t* dst) {
  const int ow = int(out_.width), oh = int(out_.height);
  if (sw != ow || sh != oh) throw Error("internal: a " + std::to_string(sw) + "x" + std::to_string(sh) + " image for a " +
                                        std::to_string(ow) + "x" + std::to_string(oh) + " output");
  WriteRowsAt(p, [src, stride](int ty) { return src + size_t(ty) * size_t(stride); }, dst);
}

// Where output row y of a sample with parameters p comes from (OutputPixel, kernels/augment.h): a
// flipped row is built mirrored (out[x] = row[ow - 1 - x], which makes the translate a plain shift by
// -dx, and mirrors the cutout) and reversed when it is written.
inline SampleProcessor::OutputRow SampleProcessor::RowOf(const kernels::SampleParams& p, int y) const {
  const int ow = int(out_.width), oh = int(out_.height);
  OutputRow g;
  g.shift = p.flip ? -p.dx : p.dx;
  g.ty = y - p.dy;
  g.inside = g.ty >= 0 && g.ty < oh;
  if (g.inside) {  // 0 <= x - shift < ow
    g.lo = g.shift > 0 ? std::min(g.shift, ow) : 0;
    g.hi = g.shift < 0 ? std::max(ow + g.shift, 0) : ow;
  }
  if (p.cut_x >= 0 && y >= p.cut_y && y < p.cut_y + spec_.cutout) {
    g.cut_from = p.cut_x;
    g.cut_to = std::min(ow, p.cut_x + spec_.cutout);
    if (p.flip) {
      const int f = ow - g.cut_to, t = ow - g.cut_from;
      g.cut_from = f;
      g.cut_to = t;
    }
  }
  return g;
}

template <typename RowAt>
void SampleProcessor::WriteRowsAt(const kernels::SampleParams& p, RowAt row_at, uint8_t* dst) {
  const int ow = int(out_.width), oh = int(out_.height);
  const bool mirror = p.flip != 0;
  uint8_t* row = row_.data();
  for (int y = 0; y < oh; ++y) {
    const OutputRow g = RowOf(p, y);
    const bool cut = g.cut_to > g.cut_from;
    if (g.inside && g.shift == 0 && !cut) {  // the source row as it is: no copy to assemble it
      const uint8_t* s = row_at(g.ty);
      if (mirror) EmitMirroredRow(s, y, dst);
      else EmitRow(s, y, dst);
      continue;
    }
    // Assembled (mirrored when flipped) and reversed after normalisation, where reversing is a few
    // vector permutes.
    for (int x = 0; x < g.lo; ++x) std::memcpy(row + x * 3, spec_.fill, 3);
    for (int x = std::max(g.hi, g.lo); x < ow; ++x) std::memcpy(row + x * 3, spec_.fill, 3);
    if (g.hi > g.lo) std::memcpy(row + g.lo * 3, row_at(g.ty) + (g.lo - g.shift) * 3, size_t(g.hi - g.lo) * 3);
    for (int x = g.cut_from; x < g.cut_to; ++x) std::memcpy(row + x * 3, spec_.fill, 3);
    if (mirror) EmitMirroredRow(row, y, dst);
    else EmitRow(row, y, dst);
  }
}

void SampleProcessor::EmitMirroredRow(const uint8_t* rgb, int y, uint8_t* dst) {
  const size_t w = out_.width, plane = size_t(out_.width) * out_.height;
  if (out_.dtype == DType::kFloat32 && out_.layout == Layout::kNCHW) {
    float* r = reinterpret_cast<float*>(dst) + size_t(y) * w;
    kernels::NormalizeRowPlanar(rgb, w, r, r + plane, r + 2 * plane, out_.scale, out_.bias, /*reverse=*/true);
    return;
  }
  if (out_.dtype == DType::kUint8) {  // straight into the batch
    kernels::MirrorRgbRow(rgb, w, dst + size_t(y) * w * 3);
    return;
  }
  kernels::MirrorRgbRow(rgb, w, mirrored_.data());  // rgb may be row_
  EmitRow(mirrored_.data(), y, dst);
}

void SampleProcessor::EmitPixels(const uint8_t* rgb, size_t at, size_t n, uint8_t* dst) {
  const size_t plane = size_t(out_.width) * out_.height;
  const float* t = out_.table;
  switch (out_.dtype) {
    case DType::kUint8:
      std::memcpy(dst + at * 3, rgb, n * 3);
      return;
    case DType::kFloat32: {
      float* o = reinterpret_cast<float*>(dst);
      if (out_.layout == Layout::kNCHW) {
        float* r = o + at;
        kernels::NormalizeRowPlanar(rgb, n, r, r + plane, r + 2 * plane, out_.scale, out_.bias);
      } else {
        LookupInterleaved(rgb, n, t, o + at * 3);
      }
      return;
    }
    case DType::kFloat16: {
      const uint16_t* h = out_.half;
      uint16_t* o = reinterpret_cast<uint16_t*>(dst);
      if (out_.layout == Layout::kNCHW) {
        uint16_t* r = o + at;
        for (size_t x = 0; x < n; ++x) {
          r[x] = h[rgb[x * 3]];
          r[x + plane] = h[256 + rgb[x * 3 + 1]];
          r[x + 2 * plane] = h[512 + rgb[x * 3 + 2]];
        }
      } else {
        LookupInterleaved(rgb, n, h, o + at * 3);
      }
      return;
    }
  }
}

}  // namespace dsc
