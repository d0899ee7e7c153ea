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
    const Dataset::Parts parts = ds_.ReadPayloadParts(chunk_[i], &payload_, true, out_.image);
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
  const Dataset::Parts parts = ds_.ReadPayloadParts(index, &payload_, true, out_.image);
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
        jpeg_->set_seek(out_.seek, uint64_t(out_.image) << 48 ^ index);  // the sample's own entry points
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

}  // namespace dsc
