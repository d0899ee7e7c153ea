#include "kernels/jpeg_twin_batch.h"

#include <cstring>
#include <vector>

namespace dsc::kernels {

namespace {
size_t Align(size_t v) { return (v + 255) & ~size_t(255); }
}  // namespace

TwinBatchStager::TwinBatchStager(uint8_t* buf, size_t capacity, uint32_t max_images, uint32_t max_units,
                                 uint32_t max_tables)
    : buf_(buf), cap_(capacity), h_(reinterpret_cast<TwinBatchHeader*>(buf)) {
  std::memset(h_, 0, sizeof(*h_));
  h_->max_images = max_images;
  h_->max_units = max_units;
  h_->max_tables = max_tables;
  h_->images_at = Align(sizeof(TwinBatchHeader));
  h_->units_at = Align(h_->images_at + sizeof(TwinImage) * max_images);
  h_->tables_at = Align(h_->units_at + sizeof(TwinUnit) * max_units);
  h_->bytes_at = Align(h_->tables_at + sizeof(TwinTables) * max_tables);
  Reset();
}

void TwinBatchStager::Reset() {
  h_->images = h_->units = h_->table_sets = 0;
  h_->bytes_used = h_->bytes_at;
  h_->total_blocks = h_->rgb_bytes = 0;
  last_head_ = nullptr;
}

TwinParseResult TwinBatchStager::Add(const uint8_t* head, size_t head_size, const uint8_t* body, size_t body_size) {
  TwinParseResult full;
  full.status = kTwinUnsupported;
  full.reason = kReasonTooLarge;
  if (h_->images >= h_->max_images || h_->bytes_used + body_size > cap_) return full;
  auto* images = reinterpret_cast<TwinImage*>(buf_ + h_->images_at);
  auto* units = reinterpret_cast<TwinUnit*>(buf_ + h_->units_at);
  auto* tables = reinterpret_cast<TwinTables*>(buf_ + h_->tables_at);
  TwinImage& im = images[h_->images];
  const uint32_t room = h_->max_units - h_->units;
  thread_local std::vector<uint32_t> begin, end;
  const size_t most = body_size / 2 + 2;
  if (begin.size() < most) begin.resize(most), end.resize(most);
  TwinScan scan;
  scan.unit_begin = begin.data();
  scan.unit_end = end.data();
  TwinParseResult r;
  if (head_size && head == last_head_ && head_size == last_head_size_) {
    im.frame = last_frame_;
    im.tables = last_tables_;
    if (im.frame.intervals > room) return full;
    r = ScanTwinEntropy(im.frame, body, body_size, 0, head_size, &scan);
  } else {
    if (h_->table_sets >= h_->max_tables) return full;
    r = ParseTwin(head, head_size, body, body_size, &im.frame, &tables[h_->table_sets], &scan,
                  room < most ? room : uint32_t(most));
    if (r.status == kTwinUnsupported && r.reason == kReasonTooLarge) return full;
    if (r.status != kTwinOk) return r;
    im.tables = h_->table_sets++;
    // Reusable for the next payloads when the scan starts exactly where the head ends.
    if (head_size && scan.data == body) {
      last_head_ = head, last_head_size_ = head_size, last_frame_ = im.frame, last_tables_ = im.tables;
    } else {
      last_head_ = nullptr;
    }
  }
  if (r.status != kTwinOk) return r;
  const TwinFrame& f = im.frame;
  im.first_unit = h_->units;
  im.units = f.intervals;
  im.data = h_->bytes_used;
  std::memcpy(buf_ + im.data, scan.data, scan.size);
  h_->bytes_used += scan.size;
  const uint32_t per = f.restart_interval ? f.restart_interval : f.total_mcus();
  for (uint32_t u = 0; u < f.intervals; ++u) {
    TwinUnit& t = units[h_->units + u];
    t.image = h_->images;
    t.first_mcu = u * per;
    t.mcus = f.total_mcus() - t.first_mcu < per ? f.total_mcus() - t.first_mcu : per;
    t.begin = scan.unit_begin[u];
    t.end = scan.unit_end[u];
  }
  h_->units += f.intervals;
  im.coef_block = h_->total_blocks;
  h_->total_blocks += f.total_blocks;
  im.rgb = h_->rgb_bytes;
  h_->rgb_bytes += uint64_t(f.width) * f.height * 3;
  ++h_->images;
  return r;
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
