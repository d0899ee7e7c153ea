#include "kernels/jpeg_twin_batch.h"

#include <cstring>
#include <vector>

namespace dsc::kernels {

namespace {
size_t Align(size_t v) { return (v + 63) & ~size_t(63); }
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
  last_head_ = nullptr;
  append_rgb_ = 0;
}

TwinParseResult TwinBatchStager::Add(const uint8_t* head, size_t head_size, const uint8_t* body, size_t body_size,
                                     uint64_t rgb) {
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
  TwinImage im;
  TwinParseResult r;
  uint64_t at = h_->bytes_used;
  // Whether the image's bytes ending at `end` and the arrays Finish appends (this image included) fit.
  auto fits = [&](uint64_t end, uint32_t units) {
    return Align(end) + Align((images_.size() + 1) * sizeof(TwinImage)) + (units_.size() + units) * sizeof(TwinUnit) <= cap_;
  };
  if (head_size && head == last_head_ && head_size == last_head_size_) {
    im.frame = last_frame_;
    im.tables = last_tables_;
    if (im.frame.intervals > room) return full;
    r = ScanTwinEntropy(im.frame, body, body_size, 0, head_size, &scan, buf_ + at);
    if (r.status != kTwinOk) return r;
    if (!fits(at + scan.size, im.frame.intervals)) return full;
  } else {
    auto* tables = reinterpret_cast<TwinTables*>(buf_ + at);
    r = ParseTwin(head, head_size, body, body_size, &im.frame, tables, &scan, room < most ? room : uint32_t(most),
                  buf_ + at + Align(sizeof(TwinTables)));
    if (r.status == kTwinUnsupported && r.reason == kReasonTooLarge) return full;
    if (r.status != kTwinOk) return r;
    if (!fits(at + Align(sizeof(TwinTables)) + scan.size, im.frame.intervals)) return full;  // nothing kept
    im.tables = at;
    at += Align(sizeof(TwinTables));
    ++h_->table_sets;
    // Reusable for the next payloads when the scan starts exactly where the head ends.
    if (head_size && scan.data == body) {
      last_head_ = head, last_head_size_ = head_size, last_frame_ = im.frame, last_tables_ = im.tables;
    } else {
      last_head_ = nullptr;
    }
  }
  const TwinFrame& f = im.frame;
  im.first_unit = uint32_t(units_.size());
  im.units = f.intervals;
  im.data = at;  // the scan copied its bytes here
  h_->bytes_used = Align(at + scan.size);
  const uint32_t per = f.restart_interval ? f.restart_interval : f.total_mcus();
  for (uint32_t u = 0; u < f.intervals; ++u) {
    TwinUnit t;
    t.image = uint32_t(images_.size());
    t.first_mcu = u * per;
    t.mcus = f.total_mcus() - t.first_mcu < per ? f.total_mcus() - t.first_mcu : per;
    t.begin = scan.unit_begin[u];
    t.end = scan.unit_end[u];
    units_.push_back(t);
  }
  im.coef_block = h_->total_blocks;
  h_->total_blocks += f.total_blocks;
  const uint64_t rgb_size = uint64_t(f.width) * f.height * 3;
  if (rgb == kAppend) rgb = append_rgb_;
  im.rgb = rgb;
  append_rgb_ = rgb + rgb_size;
  if (rgb + rgb_size > h_->rgb_bytes) h_->rgb_bytes = rgb + rgb_size;
  images_.push_back(im);
  return r;
}

bool TwinBatchStager::Finish() {
  const size_t ib = images_.size() * sizeof(TwinImage), ub = units_.size() * sizeof(TwinUnit);
  const size_t images_at = h_->bytes_used, units_at = Align(images_at + ib);
  if (units_at + ub > cap_) return false;
  std::memcpy(buf_ + images_at, images_.data(), ib);
  std::memcpy(buf_ + units_at, units_.data(), ub);
  h_->images = uint32_t(images_.size());
  h_->units = uint32_t(units_.size());
  h_->images_at = images_at;
  h_->units_at = units_at;
  h_->bytes_used = Align(units_at + ub);
  return true;
}

void DecodeTwinBatchCpu(const uint8_t* buf, int16_t* coef, uint8_t* planes, uint8_t* rgb, int* status) {
  const auto& h = *reinterpret_cast<const TwinBatchHeader*>(buf);
  for (uint32_t i = 0; i < h.images; ++i) status[i] = kReasonNone;
  for (uint32_t u = 0; u < h.units; ++u) TwinDecodeUnit(buf, u, coef, status);
  for (uint64_t b = 0; b < h.total_blocks; ++b) TwinIdctBatchBlock(buf, b, coef, planes, status);
  for (uint32_t i = 0; i < h.images; ++i) {
    const TwinImage& im = TwinImages(buf)[i];
    for (uint32_t p = 0; p < uint32_t(im.frame.width) * im.frame.height; ++p) TwinBatchPixel(buf, i, p, planes, rgb);
  }
}

}  // namespace dsc::kernels
