#include "kernels/jpeg_crop.h"

#include <algorithm>
#include <cstring>

namespace dsc::kernels {

namespace {

// Byte i of the pieces read as one stream (i < p.size()).
uint8_t At(const JpegPieces& p, size_t i) { return i < p.head_size ? p.head[i] : p.body[i - p.head_size]; }

int DivUp(int a, int b) { return (a + b - 1) / b; }

}  // namespace

bool ParseScanLayout(const JpegPieces& p, RestartLayout* l) {
  *l = RestartLayout();
  const size_t n = p.size();
  if (n < 4 || At(p, 0) != 0xFF || At(p, 1) != 0xD8) return false;
  bool have_sof = false;
  int restart = 0, components = 0, max_h = 1, max_v = 1;
  size_t i = 2;
  for (;;) {
    if (i >= n || At(p, i) != 0xFF) return false;  // libjpeg would skip garbage with a warning: leave it to it
    while (i < n && At(p, i) == 0xFF) ++i;         // fill bytes
    if (i + 3 > n) return false;
    const uint8_t m = At(p, i);
    const size_t marker = i - 1;
    const size_t len = size_t(At(p, i + 1)) << 8 | At(p, i + 2);
    const size_t seg = i + 3, end = i + 1 + len;
    // Standalone markers (SOI, EOI, RSTn, TEM) have no length: none belongs before the first scan.
    if (m == 0x00 || m == 0x01 || (m >= 0xD0 && m <= 0xD9) || len < 2 || end > n) return false;
    if (m == 0xC0 || m == 0xC1) {  // baseline or extended sequential, Huffman
      if (have_sof || len < 8 || At(p, seg) != 8) return false;
      l->height = At(p, seg + 1) << 8 | At(p, seg + 2);
      l->width = At(p, seg + 3) << 8 | At(p, seg + 4);
      components = At(p, seg + 5);
      if ((components != 1 && components != 3) || len != 8 + 3 * size_t(components)) return false;
      for (int c = 0; c < components; ++c) {
        const int hv = At(p, seg + 6 + 3 * size_t(c) + 1), h = hv >> 4, v = hv & 15;
        if (h < 1 || h > 4 || v < 1 || v > 4) return false;
        max_h = std::max(max_h, h);
        max_v = std::max(max_v, v);
      }
      l->sof = marker;
      have_sof = true;
    } else if ((m >= 0xC2 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC)) {
      return false;  // progressive, lossless, hierarchical or arithmetic-coded
    } else if (m == 0xDD) {
      if (len != 4) return false;
      restart = At(p, seg) << 8 | At(p, seg + 1);
    } else if (m == 0xDA) {
      // One scan with every component: a sequential image's only scan.
      if (!have_sof || len < 3 || At(p, seg) != components || len != 6 + 2 * size_t(components)) return false;
      l->sos = marker;
      l->entropy = end;
      break;
    }
    i = end;
  }
  if (restart < 0 || l->width <= 0 || l->height <= 0 || l->entropy < p.head_size) return false;
  if (components == 1) {
    // A one-component scan is not interleaved: its MCU is one block whatever the sampling factors.
    l->mcu_w = l->mcu_h = 8;
  } else {
    l->mcu_w = 8 * max_h;
    l->mcu_h = 8 * max_v;
  }
  l->mcus_per_row = DivUp(l->width, l->mcu_w);
  l->mcu_rows = DivUp(l->height, l->mcu_h);
  l->interval = restart;
  l->intervals_per_row = restart ? l->mcus_per_row / restart : 0;
  return true;
}

bool ParseRestartLayout(const JpegPieces& p, RestartLayout* l) {
  // Intervals spanning rows would need two pieces of a row joined.
  return ParseScanLayout(p, l) && l->interval > 0 && l->mcus_per_row % l->interval == 0;
}

IntervalSpan CoverRect(const RestartLayout& l, int x, int y, int w, int h, int margin) {
  const int x0 = std::clamp(x - margin * l.mcu_w, 0, l.width - 1), x1 = std::clamp(x + w + margin * l.mcu_w, x0 + 1, l.width);
  const int y0 = std::clamp(y - margin * l.mcu_h, 0, l.height - 1), y1 = std::clamp(y + h + margin * l.mcu_h, y0 + 1, l.height);
  IntervalSpan s;
  s.col0 = x0 / l.mcu_w / l.interval;
  s.col1 = DivUp(DivUp(x1, l.mcu_w), l.interval);
  s.row0 = y0 / l.mcu_h;
  s.row1 = DivUp(y1, l.mcu_h);
  s.x = s.col0 * l.interval * l.mcu_w;
  s.y = s.row0 * l.mcu_h;
  s.width = (s.col1 == l.intervals_per_row ? l.width : s.col1 * l.interval * l.mcu_w) - s.x;
  s.height = (s.row1 == l.mcu_rows ? l.height : s.row1 * l.mcu_h) - s.y;
  s.whole_image = s.col0 == 0 && s.col1 == l.intervals_per_row && s.row0 == 0 && s.row1 == l.mcu_rows;
  return s;
}

size_t IntervalAssembler::FindIntervals(const uint8_t* data, size_t size, size_t last) {
  // Grown as markers are found, not sized from the header's claim: memory stays within the data's size.
  starts_.assign(1, 0);
  ends_.clear();
  size_t i = 0;
  for (;;) {
    const size_t t = ends_.size();  // the interval being read
    const void* f = i < size ? std::memchr(data + i, 0xFF, size - i) : nullptr;
    if (f == nullptr || static_cast<const uint8_t*>(f) + 1 >= data + size) {
      ends_.push_back(size);  // no EOI: the interval runs to the end of the data
      return ends_.size();
    }
    i = size_t(static_cast<const uint8_t*>(f) - data);
    const uint8_t b = data[i + 1];
    if (b == 0x00) {  // a stuffed 0xFF data byte
      i += 2;
      continue;
    }
    if (b == 0xFF) {  // fill byte before a marker
      i += 1;
      continue;
    }
    if (b < 0xD0 || b > 0xD7) {  // EOI or another marker: the scan ends here
      ends_.push_back(i);
      return ends_.size();
    }
    if (size_t(b - 0xD0) != t % 8) return t;  // misnumbered: which interval follows is unknown
    ends_.push_back(i);
    if (t == last) return ends_.size();
    starts_.push_back(i + 2);
    i += 2;
  }
}

bool IntervalAssembler::Assemble(const JpegPieces& p, const RestartLayout& l, const IntervalSpan& s) {
  if (s.col0 < 0 || s.col0 >= s.col1 || s.col1 > l.intervals_per_row || s.row0 < 0 || s.row0 >= s.row1 ||
      s.row1 > l.mcu_rows || s.width <= 0 || s.height <= 0)
    return false;
  const size_t ipr = size_t(l.intervals_per_row);
  const size_t last = size_t(s.row1 - 1) * ipr + size_t(s.col1 - 1);
  const size_t skip = l.entropy - p.head_size;  // ParseRestartLayout put the scan's data in the body
  const uint8_t* ent = p.body + skip;
  if (FindIntervals(ent, p.body_size - skip, last) < last + 1) return false;

  const size_t header = l.entropy - l.sof;
  size_t total = header + 2;  // + EOI
  for (int r = s.row0; r < s.row1; ++r)
    for (int c = s.col0; c < s.col1; ++c) {
      const size_t t = size_t(r) * ipr + size_t(c);
      total += ends_[t] - starts_[t] + 2;  // + its RST marker (one fewer than intervals, EOI counted)
    }
  total -= 2;
  out_.resize(total);
  uint8_t* o = out_.data();
  for (size_t i = l.sof; i < l.entropy; ++i) *o++ = At(p, i);  // the header from the SOF on: a few hundred bytes
  // The SOF's size fields: marker (2), length (2), precision (1), height (2), width (2).
  out_[5] = uint8_t(s.height >> 8);
  out_[6] = uint8_t(s.height);
  out_[7] = uint8_t(s.width >> 8);
  out_[8] = uint8_t(s.width);
  unsigned rst = 0;
  for (int r = s.row0; r < s.row1; ++r)
    for (int c = s.col0; c < s.col1; ++c) {
      const size_t t = size_t(r) * ipr + size_t(c);
      if (r != s.row0 || c != s.col0) {  // RST0, RST1, ... before every interval but the first
        *o++ = 0xFF;
        *o++ = uint8_t(0xD0 + (rst++ & 7));
      }
      std::memcpy(o, ent + starts_[t], ends_[t] - starts_[t]);
      o += ends_[t] - starts_[t];
    }
  *o++ = 0xFF;
  *o++ = 0xD9;
  prefix = PiecesBefore(p, l.sof);
  return true;
}

JpegPieces PiecesBefore(const JpegPieces& p, size_t sof) {
  JpegPieces r;
  r.head = p.head;
  r.head_size = std::min(p.head_size, sof);
  r.body = p.body;
  r.body_size = sof - r.head_size;
  return r;
}

}  // namespace dsc::kernels
