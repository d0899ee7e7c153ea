#include "kernels/jpeg_twin_batch.h"

#include <cstring>
#include <vector>

namespace dsc::kernels {

namespace {
// Field by field, so that the destination's padding keeps the zeros it was given.
void CopySpan(const ResampleSpan& s, ResampleSpan* d) {
  d->filter = s.filter;
  d->mirror = s.mirror;
  d->in_size = s.in_size, d->out_size = s.out_size, d->o0 = s.o0, d->n = s.n, d->shift = s.shift;
  d->in0 = s.in0, d->in1 = s.in1;
}
size_t Align(size_t v) { return (v + 63) & ~size_t(63); }
// The last restart interval (in the image's numbering) a crop plan needs.
uint32_t LastUnit(const TwinFrame& f, const TwinCropPlan& p) {
  return uint32_t(p.row1 - 1) * (f.mcus_x / f.restart_interval) + uint32_t(p.col1 - 1);
}
// How far ahead of a crop's copy its bytes are prefetched: 4 KiB, into L2, whose miss queue is deeper
// than L1's, so more of the payload's stream from memory is in flight (the fastest distance and level).
constexpr uintptr_t kCropPrefetch = 4096;
// Copies the crop's intervals of each row to `to`, one row after another. With bounds from the interval
// index (which the scan took on trust), false unless every interval copied ends on its RSTn and the one
// before each row's first does too: read after the copy, the markers are in cache.
bool CopyCropRows(const TwinFrame& whole, const TwinCropPlan& plan, const TwinScan& scan, uint8_t* to) {
  const uint32_t per_row = whole.mcus_x / whole.restart_interval, w = uint32_t(plan.col1 - plan.col0);
  // The rows stream from memory and the hardware prefetcher stops at page edges: every line from the
  // first row's start to the last row's end is prefetched once, ahead of the copy (the gaps between rows,
  // the intervals outside the crop, included: a stream with holes prefetched worse).
  const uintptr_t last = reinterpret_cast<uintptr_t>(scan.data + scan.unit_end[uint32_t(plan.row1 - 1) * per_row + uint32_t(plan.col1 - 1)]);
  uintptr_t ahead = reinterpret_cast<uintptr_t>(scan.data + scan.unit_begin[uint32_t(plan.row0) * per_row + uint32_t(plan.col0)]) & ~uintptr_t(63);
  for (int row = plan.row0; row < plan.row1; ++row) {
    const uint32_t t0 = uint32_t(row) * per_row + uint32_t(plan.col0);
    const uint32_t from = scan.unit_begin[t0], end = scan.unit_end[t0 + w - 1];
    const uintptr_t want = reinterpret_cast<uintptr_t>(scan.data + end) + kCropPrefetch;
    for (const uintptr_t t = want < last ? want : last; ahead <= t; ahead += 64)
      __builtin_prefetch(reinterpret_cast<const void*>(ahead), 0, 2);  // prefetcht1: to L2
    TwinCopy(to, scan.data + from, end - from);
    to += end - from;
    if (!scan.indexed) continue;
    if (t0 > 0 && !TwinIndexedIntervalOk(scan, t0 - 1, whole.intervals)) return false;
    for (uint32_t t = t0; t < t0 + w; ++t)
      if (!TwinIndexedIntervalOk(scan, t, whole.intervals)) return false;
  }
  return true;
}
}  // namespace

TwinBatchStager::TwinBatchStager(uint8_t* buf, size_t capacity, uint32_t max_images, uint32_t max_units)
    : buf_(buf), cap_(capacity), h_(reinterpret_cast<TwinBatchHeader*>(buf)), max_images_(max_images),
      max_units_(max_units) {
  images_.reserve(max_images);
  units_.reserve(max_units);
  Reset();
}

void TwinBatchStager::Reset(uint8_t* buf, size_t capacity) {
  buf_ = buf;
  cap_ = capacity;
  h_ = reinterpret_cast<TwinBatchHeader*>(buf);
  Reset();
}

void TwinBatchStager::Reset() {
  std::memset(h_, 0, sizeof(*h_));
  h_->bytes_used = Align(sizeof(TwinBatchHeader));
  images_.clear();
  units_.clear();
  crops_.clear();
  last_head_ = nullptr;
  append_rgb_ = 0;
}

TwinParseResult TwinBatchStager::Add(const uint8_t* head, size_t head_size, const uint8_t* body, size_t body_size,
                                     uint64_t rgb, const TwinCropInput* crop) {
  TwinParseResult full;
  full.status = kTwinUnsupported;
  full.reason = kReasonTooLarge;
  // Room for the tables, the entropy bytes and this image's share of the arrays Finish appends.
  if (images_.size() >= max_images_ || h_->bytes_used + Align(sizeof(TwinTables)) + Align(body_size) > cap_) return full;
  const uint32_t room = max_units_ - uint32_t(units_.size());
  const size_t most = body_size / 2 + 2;  // every interval but the last ends with a 2-byte marker
  if (begin_.size() < most) begin_.resize(most), end_.resize(most);
  TwinScan scan;
  scan.unit_begin = begin_.data();
  scan.unit_end = end_.data();
  if (crop) {
    scan.header_only = true;  // the header first; the intervals once the crop is planned
    scan.trust_index = true;  // and those are checked as they are copied: CopyCropRows
  }
  // The arrays reach the device as bytes: zeroed first, so that their structs' padding is not
  // whatever the stack held (staged batches are then the same bytes for the same payloads).
  TwinImage im;
  std::memset(static_cast<void*>(&im), 0, sizeof im);
  TwinParseResult r;
  uint64_t at = h_->bytes_used;
  const size_t crops = crops_.size() + (crop ? 1 : 0);
  // Whether the image's bytes ending at `end` and the arrays Finish appends (this image included) fit.
  auto fits = [&](uint64_t end, uint32_t units) {
    const uint64_t units_end = Align(end) + Align((images_.size() + 1) * sizeof(TwinImage)) +
                               (units_.size() + units) * sizeof(TwinUnit);
    return (crops ? Align(units_end) + crops * sizeof(TwinCrop) : units_end) <= cap_;
  };
  // A crop's entropy bytes are copied afterwards, only its intervals'.
  uint8_t* const copy_to = crop ? nullptr : buf_ + at;
  TwinCropPlan plan;
  auto unsupported = [](int reason) {
    TwinParseResult u;
    u.status = kTwinUnsupported;
    u.reason = reason;
    return u;
  };
  bool parsed_head = false;
  // Where the scan's entropy data lies (for a crop's rescan without the index): piece[scan_start...).
  const uint8_t* piece = body;
  size_t piece_size = body_size, scan_start = 0, piece_base = head_size;
  if (head_size && head == last_head_ && head_size == last_head_size_) {
    im.frame = last_frame_;
    im.tables = last_tables_;
    if (crop) {
      if (const int why = PlanTwinCrop(*crop, im.frame, &plan)) return unsupported(why);
      scan.header_only = false;
      scan.last_unit = LastUnit(im.frame, plan);
    } else if (im.frame.intervals > room) {
      return full;
    }
    r = ScanTwinEntropy(im.frame, body, body_size, 0, head_size, &scan, copy_to);
    if (r.status != kTwinOk) return r;
  } else {
    auto* tables = reinterpret_cast<TwinTables*>(buf_ + at);
    const uint32_t bound = crop ? uint32_t(most) : room < most ? room : uint32_t(most);
    r = ParseTwin(head, head_size, body, body_size, &im.frame, tables, &scan, bound,
                  copy_to ? copy_to + Align(sizeof(TwinTables)) : nullptr);
    if (r.status == kTwinUnsupported && r.reason == kReasonTooLarge) return full;
    if (r.status != kTwinOk) return r;
    if (crop) {
      if (const int why = PlanTwinCrop(*crop, im.frame, &plan)) return unsupported(why);
      // Scans again up to the crop's last interval, from where ParseTwin found the scan's data.
      const bool in_body = body_size && scan.data >= body && scan.data < body + body_size;
      piece = in_body ? body : head;
      piece_size = in_body ? body_size : head_size;
      scan_start = size_t(scan.data - piece);
      piece_base = in_body ? head_size : 0;
      scan.header_only = false;
      scan.last_unit = LastUnit(im.frame, plan);
      r = ScanTwinEntropy(im.frame, piece, piece_size, scan_start, piece_base, &scan);
      if (r.status != kTwinOk) return r;
    }
    im.tables = at;
    at += Align(sizeof(TwinTables));
    parsed_head = true;
  }
  TwinSetFancy(&im.frame, fancy_);  // on the whole image (libjpeg's choice depends on its width)
  const TwinFrame whole = im.frame;
  if (crop) im.frame = TwinCropFrame(whole, plan);
  if (im.frame.intervals > room) return full;
  // The image's entropy bytes in the buffer: the whole scan (copied by the scan), or a crop's intervals,
  // copied here a row at a time (a row's intervals are contiguous bytes) before anything is kept.
  size_t bytes = scan.size;
  if (crop) {
    const uint32_t per_row = whole.mcus_x / whole.restart_interval;
    for (;;) {
      bytes = 0;
      for (int row = plan.row0; row < plan.row1; ++row) {
        const uint32_t t0 = uint32_t(row) * per_row + uint32_t(plan.col0), t1 = uint32_t(row) * per_row + uint32_t(plan.col1);
        bytes += scan.unit_end[t1 - 1] - scan.unit_begin[t0];
      }
      if (!fits(at + bytes, im.frame.intervals)) return full;  // nothing kept
      if (CopyCropRows(whole, plan, scan, buf_ + at)) break;
      // Bounds from an index that does not describe the bytes: found by a scan instead.
      scan.ignore_index = true;
      r = ScanTwinEntropy(whole, piece, piece_size, scan_start, piece_base, &scan);
      if (r.status != kTwinOk) return r;
    }
  } else if (!fits(at + bytes, im.frame.intervals)) {
    return full;  // nothing kept
  }
  if (parsed_head) {
    ++h_->table_sets;
    // Reusable for the next payloads when the scan starts exactly where the head ends.
    if (head_size && scan.data == body) {
      last_head_ = head, last_head_size_ = head_size, last_frame_ = whole, last_tables_ = im.tables;
    } else {
      last_head_ = nullptr;
    }
  }
  const TwinFrame& f = im.frame;
  im.first_unit = uint32_t(units_.size());
  im.units = f.intervals;
  im.data = at;
  h_->bytes_used = Align(at + bytes);
  const uint32_t per = f.restart_interval ? f.restart_interval : f.total_mcus();
  if (crop) {
    // Each row's intervals (copied above, one row after another); unit u of the crop frame is interval
    // (row0 + u / w, col0 + u % w) of the image, w intervals a row.
    const uint32_t per_row = whole.mcus_x / whole.restart_interval, w = uint32_t(plan.col1 - plan.col0);
    uint32_t off = 0, u = 0;
    for (int row = plan.row0; row < plan.row1; ++row) {
      const uint32_t t0 = uint32_t(row) * per_row + uint32_t(plan.col0);
      const uint32_t from = scan.unit_begin[t0], to = scan.unit_end[t0 + w - 1];
      for (uint32_t c = 0; c < w; ++c, ++u) {
        TwinUnit t;
        t.image = uint32_t(images_.size());
        t.first_mcu = u * per;
        t.mcus = per;
        t.begin = off + scan.unit_begin[t0 + c] - from;
        t.end = off + scan.unit_end[t0 + c] - from;
        units_.push_back(t);
      }
      off += to - from;
    }
  } else {
    for (uint32_t u = 0; u < f.intervals; ++u) {
      TwinUnit t;
      t.image = uint32_t(images_.size());
      t.first_mcu = u * per;
      t.mcus = f.total_mcus() - t.first_mcu < per ? f.total_mcus() - t.first_mcu : per;
      t.begin = scan.unit_begin[u];
      t.end = scan.unit_end[u];
      units_.push_back(t);
    }
  }
  im.coef_block = h_->total_blocks;
  h_->total_blocks += f.total_blocks;
  im.crop = kTwinNoCrop;
  uint64_t out_size = uint64_t(f.width) * f.height * 3;
  if (crop) {
    out_size = uint64_t(plan.h.n) * uint64_t(plan.v.n) * 3;
    TwinCrop c;
    std::memset(static_cast<void*>(&c), 0, sizeof c);
    CopySpan(plan.h, &c.h);
    CopySpan(plan.v, &c.v);
    c.ksize_h = plan.ksize_h;
    c.ksize_v = plan.ksize_v;
    c.image = uint32_t(images_.size());
    c.src_x = uint32_t(plan.region.x - plan.x0);
    c.src_y = uint32_t(plan.region.y - plan.y0);
    c.sw = uint32_t(plan.region.width);
    c.sh = uint32_t(plan.region.height);
    c.taps = h_->tap_ints;
    h_->tap_ints += uint64_t(plan.h.n) * uint64_t(2 + plan.ksize_h) + uint64_t(plan.v.n) * uint64_t(2 + plan.ksize_v);
    im.crop = uint32_t(crops_.size());
    im.rgb = h_->decoded_bytes;  // the decoded intervals, resized from there into `rgb`
    h_->decoded_bytes += Align(uint64_t(f.width) * f.height * 3);
    if (rgb == kAppend) rgb = append_rgb_;
    c.out = rgb;
    const uint32_t pixels = uint32_t(plan.h.n) * uint32_t(plan.v.n), entries = uint32_t(plan.h.n + plan.v.n);
    if (pixels > h_->max_crop_pixels) h_->max_crop_pixels = pixels;
    if (entries > h_->max_crop_entries) h_->max_crop_entries = entries;
    crops_.push_back(c);
  } else {
    if (rgb == kAppend) rgb = append_rgb_;
    im.rgb = rgb;
  }
  append_rgb_ = rgb + out_size;
  if (rgb + out_size > h_->rgb_bytes) h_->rgb_bytes = rgb + out_size;
  images_.push_back(im);
  return r;
}

bool TwinBatchStager::Finish() {
  const size_t ib = images_.size() * sizeof(TwinImage), ub = units_.size() * sizeof(TwinUnit);
  const size_t cb = crops_.size() * sizeof(TwinCrop);
  const size_t images_at = h_->bytes_used, units_at = Align(images_at + ib), crops_at = Align(units_at + ub);
  if (crops_at + cb > cap_) return false;
  TwinCopy(buf_ + images_at, reinterpret_cast<const uint8_t*>(images_.data()), ib);
  TwinCopy(buf_ + units_at, reinterpret_cast<const uint8_t*>(units_.data()), ub);
  if (cb) TwinCopy(buf_ + crops_at, reinterpret_cast<const uint8_t*>(crops_.data()), cb);
  h_->images = uint32_t(images_.size());
  h_->units = uint32_t(units_.size());
  h_->crops = uint32_t(crops_.size());
  h_->images_at = images_at;
  h_->units_at = units_at;
  h_->crops_at = crops_at;
  h_->bytes_used = Align(crops_at + cb);
  return true;
}

void DecodeTwinBatchCpu(const uint8_t* buf, int16_t* coef, uint8_t* planes, uint8_t* rgb, int* status,
                        uint8_t* decoded, int32_t* taps) {
  const auto& h = *reinterpret_cast<const TwinBatchHeader*>(buf);
  for (uint32_t i = 0; i < h.images; ++i) status[i] = kReasonNone;
  for (uint32_t u = 0; u < h.units; ++u) TwinDecodeUnit(buf, u, coef, status);
  for (uint64_t b = 0; b < h.total_blocks; ++b) TwinIdctBatchBlock(buf, b, coef, planes, status);
  for (uint32_t i = 0; i < h.images; ++i) {
    const TwinImage& im = TwinImages(buf)[i];
    for (uint32_t p = 0; p < uint32_t(im.frame.width) * im.frame.height; ++p)
      TwinBatchPixel(buf, i, p, planes, rgb, decoded);
  }
  for (uint32_t c = 0; c < h.crops; ++c) {
    const TwinCrop& k = TwinCrops(buf)[c];
    for (uint32_t e = 0; e < uint32_t(k.h.n + k.v.n); ++e) TwinCropTaps(buf, c, e, taps, status);
    for (uint32_t p = 0; p < uint32_t(k.h.n) * uint32_t(k.v.n); ++p) TwinCropPixel(buf, c, p, decoded, taps, rgb);
  }
}

}  // namespace dsc::kernels
