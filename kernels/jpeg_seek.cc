#include "kernels/jpeg_seek.h"

#include <algorithm>
#include <cstring>
#include <memory>

namespace dsc::kernels {

namespace {

// 64 bits of unstuffed data from bit `pos` on, left-aligned; the low (pos & 7) bits are zero. Reads
// the 8 bytes from pos / 8: the buffers keep kReadPad readable bytes past their data.
inline uint64_t Peek(const uint8_t* d, uint64_t pos) {
  uint64_t w;
  std::memcpy(&w, d + (pos >> 3), 8);
  return __builtin_bswap64(w) << (pos & 7);
}

// A walk past the data stops at the end of the MCU that crossed it; an MCU reads at most 10 blocks of
// 64 codes of at most 16 + 15 bits.
constexpr size_t kReadPad = 10 * 64 * 31 / 8 + 16;

inline bool Symbol(uint64_t w, const TwinHuffman& h, int* len, int* sym) {
  const uint32_t peek = uint32_t(w >> 48);
  const uint16_t e = h.look[peek >> (16 - kTwinLookBits)];
  if (e) {
    *len = e >> 8;
    *sym = e & 0xFF;
    return true;
  }
  int l = kTwinLookBits + 1;
  while (l <= 16 && int32_t(peek >> (16 - l)) > h.maxcode[l]) ++l;
  if (l > 16) return false;
  const int32_t idx = int32_t(peek >> (16 - l)) + h.valoffset[l];
  if (idx < 0 || idx >= int32_t(h.count)) return false;
  *len = l;
  *sym = h.vals[idx];
  return true;
}

// The DC difference at *pos: advances past its code and bits. False on a code the table lacks.
inline bool WalkDc(const uint8_t* d, uint64_t* pos, const TwinHuffman& dc, int* diff) {
  const uint64_t w = Peek(d, *pos);
  int len, s;
  if (!Symbol(w, dc, &len, &s) || s > 15) return false;
  *diff = 0;
  if (s) *diff = TwinExtend(uint32_t((w << len) >> (64 - s)), s);
  *pos += uint64_t(len + s);
  return true;
}

// A block's AC codes (as libjpeg reads them, a run past the last coefficient included).
inline bool WalkAc(const uint8_t* d, uint64_t* pos, const TwinHuffman& ac) {
  for (int k = 1; k < 64;) {
    int len, s;
    if (!Symbol(Peek(d, *pos), ac, &len, &s)) return false;
    const int r = s >> 4, size = s & 15;
    *pos += uint64_t(len + size);
    if (size == 0) {
      if (r != 15) break;  // end of block
      k += 16;
    } else {
      k += r + 1;
    }
  }
  return true;
}

// A walk's bit reader over unstuffed data: the next `bits` bits left-aligned in acc, at least 32 after
// Refill, so that one code and its extra bits (at most 16 + 15) need no other check.
struct BitReader {
  const uint8_t* p;  // the next byte to load
  uint64_t acc = 0;
  int bits = 0;

  void Refill() {
    if (bits < 32) {
      uint32_t w;
      std::memcpy(&w, p, 4);
      acc |= uint64_t(__builtin_bswap32(w)) << (32 - bits);
      p += 4;
      bits += 32;
    }
  }
  void Skip(int n) {
    acc <<= n;
    bits -= n;
  }
};

}  // namespace

// One AC table as a walk reads it: the entry at a kSkipBits-bit prefix covers the codes that start
// inside it, up to three (a walk needs only how many bits they take and how far they move the
// coefficient index, so short codes are skipped several at a time). Bits 0-4: the bits all take
// (their extra bits included, the last one's may pass the prefix); 5-11: how far they move the index
// (64 or more at an end of block, always the last); 12-18: the same without the last code (the
// codes after the first are this block's only while the index stays below 64); 19-23 and 24-30: the
// first code's bits and move alone. 0: a code longer than the prefix.
struct SeekAssembler::AcSkip {
  static constexpr int kBits = 12;
  uint32_t e[1 << kBits];
  TwinHuffman table;  // what it was built from
};

namespace {

constexpr int kSkipBits = SeekAssembler::AcSkip::kBits;

void BuildAcSkip(const TwinHuffman& h, SeekAssembler::AcSkip* t) {
  // The one code at each prefix: bits (code + extra) and move; 0 when longer than the prefix. (On the
  // stack: static thread-local storage this size keeps a dlopen'ed module, Python's, from loading.)
  uint16_t first[1 << kSkipBits];
  for (uint32_t p = 0; p < (1u << kSkipBits); ++p) {
    int len, s;
    first[p] = 0;
    if (!Symbol(uint64_t(p) << (64 - kSkipBits), h, &len, &s) || len > kSkipBits) continue;
    const int r = s >> 4, size = s & 15;
    const int advance = size ? r + 1 : r == 15 ? 16 : 64;
    first[p] = uint16_t(len | size << 5 | advance << 9);
  }
  for (uint32_t p = 0; p < (1u << kSkipBits); ++p) {
    uint32_t bits = 0, moved = 0, before_last = 0, entry = 0;
    for (int n = 0; n < 3; ++n) {
      const uint16_t f = first[(p << bits) & ((1u << kSkipBits) - 1)];
      const uint32_t len = f & 31, size = (f >> 5) & 15, advance = f >> 9;
      if (!f || bits + len > uint32_t(kSkipBits)) break;  // the next code is not all inside the prefix
      before_last = moved;
      bits += len + size;
      moved += advance;
      if (n == 0) entry = (len + size) << 19 | advance << 24;
      if (advance >= 64 || bits >= uint32_t(kSkipBits)) break;
    }
    t->e[p] = entry ? entry | bits | moved << 5 | before_last << 12 : 0;
  }
  t->table = h;
}

// Writes entropy-coded bits, stuffing a zero after every 0xFF byte.
struct BitWriter {
  uint8_t* o;
  uint64_t acc = 0;  // the low n bits are pending
  int n = 0;         // < 8 between calls

  void Put(uint32_t v, int len) {  // v < 2^len, len <= 32
    acc = (acc << len) | v;
    n += len;
    if (n >= 32) {
      const uint32_t w = uint32_t(acc >> (n - 32)), x = ~w;
      if (((x - 0x01010101u) & ~x & 0x80808080u) == 0) {  // no 0xFF byte: the four at once
        const uint32_t be = __builtin_bswap32(w);
        std::memcpy(o, &be, 4);
        o += 4;
        n -= 32;
      }
    }
    while (n >= 8) {
      const uint8_t b = uint8_t(acc >> (n - 8));
      *o++ = b;
      if (b == 0xFF) *o++ = 0;
      n -= 8;
    }
  }
  // Bits [from, to) of unstuffed data. Seven bytes a step while they hold no 0xFF (the output has room
  // for the eighth byte each store writes).
  void Copy(const uint8_t* d, uint64_t from, uint64_t to) {
    while (to - from >= 56) {
      acc = (acc << 56) | (Peek(d, from) >> 8);  // n < 8: the pending bits stay inside acc
      const uint64_t w = acc << (8 - n);         // the 7 bytes to write, top-aligned (the low byte is junk)
      const uint64_t x = ~w | 0xFF;
      if (((x - 0x0101010101010101ull) & ~x & 0x8080808080808080ull) == 0) {
        const uint64_t be = __builtin_bswap64(w);
        std::memcpy(o, &be, 8);
        o += 7;
      } else {
        for (int k = 0; k < 7; ++k) {
          const uint8_t b = uint8_t(w >> (56 - 8 * k));
          *o++ = b;
          if (b == 0xFF) *o++ = 0;
        }
      }
      from += 56;
    }
    for (; to - from >= 32; from += 32) Put(uint32_t(Peek(d, from) >> 32), 32);
    if (to > from) {
      const int rest = int(to - from);
      Put(uint32_t(Peek(d, from) >> (64 - rest)), rest);
    }
  }
  // Pads the last byte with one bits, as encoders do before a marker.
  void Flush() {
    if (n > 0) Put((1u << (8 - n)) - 1, 8 - n);
  }
};

}  // namespace

size_t JpegSeekCache::Get(uint64_t key, size_t want, std::vector<SeekEntry>* out) const {
  const Shard& s = shards_[key % kShards];
  std::lock_guard<std::mutex> lock(s.mu);
  const auto it = s.map.find(key);
  if (it == s.map.end()) {
    out->clear();
    return 0;
  }
  const size_t n = std::min(want, it->second.size());
  out->assign(it->second.begin(), it->second.begin() + std::ptrdiff_t(n));
  return it->second.size();
}

void JpegSeekCache::Put(uint64_t key, const SeekEntry* entries, size_t n) {
  Shard& s = shards_[key % kShards];
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.map.find(key);
  const size_t held = it == s.map.end() ? 0 : it->second.size();
  if (n <= held) return;
  const uint64_t more = (n - held) * sizeof(SeekEntry) + (held ? 0 : kPerImage);
  // Reserve the bytes first: threads adding to other shards at once never pass the budget together.
  uint64_t used = bytes_.load(std::memory_order_relaxed);
  do {
    if (used + more > budget_) return;
  } while (!bytes_.compare_exchange_weak(used, used + more, std::memory_order_relaxed));
  if (it == s.map.end()) it = s.map.emplace(key, std::vector<SeekEntry>()).first;
  // Exact capacity: the budget counts what is held.
  std::vector<SeekEntry> grown;
  grown.reserve(n);
  grown.assign(entries, entries + n);
  it->second.swap(grown);
}

size_t JpegSeekCache::images() const {
  size_t n = 0;
  for (const Shard& s : shards_) {
    std::lock_guard<std::mutex> lock(s.mu);
    n += s.map.size();
  }
  return n;
}

SeekAssembler::SeekAssembler() = default;
SeekAssembler::~SeekAssembler() = default;

bool SeekAssembler::Prepare(const JpegPieces& p, RestartLayout* layout) {
  if (!ParseScanLayout(p, &layout_) || layout_.interval != 0) return false;
  TwinScan scan;
  scan.header_only = true;
  uint32_t unit = 0;
  scan.unit_begin = scan.unit_end = &unit;
  const TwinParseResult r = ParseTwin(p.head, p.head_size, p.body, p.body_size, &frame_, &tables_, &scan, 1);
  if (r.status != kTwinOk || frame_.restart_interval != 0 || scan.data < p.body || scan.data > p.body + p.body_size)
    return false;
  // Both parsers must see the same frame (ParseTwin forces a grayscale image's factors to 1, as the layout's
  // 8x8 MCU does).
  if (frame_.width != layout_.width || frame_.height != layout_.height || frame_.mcus_x != layout_.mcus_per_row ||
      frame_.mcus_y != layout_.mcu_rows || size_t(scan.data - p.body) + p.head_size != layout_.entropy)
    return false;
  entropy_ = scan.data;
  entropy_size_ = size_t(p.body + p.body_size - scan.data);
  // Each DC table's codes, canonical from its lengths (the decoder's maxcode and valoffset).
  std::memset(dc_len_, 0, sizeof dc_len_);
  for (int t = 0; t < 4; ++t) {
    const TwinHuffman& h = tables_.dc[t];
    if (h.defined != 1) continue;
    int32_t code = 0;
    for (int l = 1; l <= 16; ++l) {
      const int32_t n = h.maxcode[l] >= 0 ? h.maxcode[l] - code + 1 : 0;
      for (int32_t i = 0; i < n; ++i) {
        const int32_t idx = code + i + h.valoffset[l];
        if (idx < 0 || idx >= int32_t(h.count)) continue;
        const int sym = h.vals[idx];
        if (sym < 16) {
          dc_code_[t][sym] = uint16_t(code + i);
          dc_len_[t][sym] = uint8_t(l);
        }
      }
      code = (code + std::max(n, int32_t(0))) << 1;
    }
  }
  chunks_per_row_ = (layout_.mcus_per_row + kSeekChunkMcus - 1) / kSeekChunkMcus;
  layout_.interval = kSeekChunkMcus;
  layout_.intervals_per_row = chunks_per_row_;
  *layout = layout_;
  return true;
}

uint32_t SeekAssembler::EntryMcu(size_t e) const {
  const size_t row = e / size_t(chunks_per_row_), chunk = e % size_t(chunks_per_row_);
  return uint32_t(row * size_t(layout_.mcus_per_row) + chunk * kSeekChunkMcus);
}

size_t SeekAssembler::Unstuff(const uint8_t* data, size_t size, size_t from, size_t until) {
  until = std::min(until, size);
  const size_t most = until > from ? until - from : 0;
  if (unstuffed_.size() < most + kReadPad) unstuffed_.resize(most + kReadPad);
  ff_.clear();
  uint8_t* o = unstuffed_.data();
  size_t i = from;
  while (i < until) {
    const void* f = std::memchr(data + i, 0xFF, until - i);
    const size_t j = f ? size_t(static_cast<const uint8_t*>(f) - data) : until;
    std::memcpy(o, data + i, j - i);
    o += j - i;
    if (j >= until || j + 1 >= size || data[j + 1] != 0x00) break;  // the end, or a marker (fill bytes too)
    ff_.push_back(uint32_t(o - unstuffed_.data()));
    *o++ = 0xFF;
    i = j + 2;
  }
  return size_t(o - unstuffed_.data());
}

bool SeekAssembler::Walk(const uint8_t* data, size_t size, size_t last, std::vector<SeekEntry>* points) {
  const SeekEntry start = points->back();
  if (start.offset > size) return false;
  const size_t len = Unstuff(data, size, start.offset, size);
  const uint8_t* d = unstuffed_.data();
  const uint64_t limit = uint64_t(len) * 8;
  // Skip tables for the scan's AC tables: built once for every image that has the same (an FFCV file's
  // OpenCV-written JPEGs all have the standard ones), a few kept.
  const AcSkip* skip[4] = {};
  for (int c = 0; c < frame_.ncomp; ++c) {
    const int t = frame_.comp[c].ac;
    if (skip[t]) continue;
    const TwinHuffman& h = tables_.ac[t];
    for (const auto& k : skips_)
      if (std::memcmp(&k->table, &h, sizeof h) == 0) skip[t] = k.get();
    if (skip[t]) continue;
    if (skips_.size() == kKeptSkips) skips_.erase(skips_.begin());
    skips_.push_back(std::make_unique<AcSkip>());
    BuildAcSkip(h, skips_.back().get());
    skip[t] = skips_.back().get();
  }
  BitReader br{d};
  br.Refill();
  br.Skip(start.bit);
  int pred[3] = {start.dc[0], start.dc[1], start.dc[2]};
  size_t ff = 0;
  for (size_t e = points->size(); e <= last; ++e) {
    for (uint32_t m = EntryMcu(e - 1), end = EntryMcu(e); m < end; ++m) {
      for (int sc = 0; sc < frame_.ncomp; ++sc) {
        const int c = frame_.scan_order[sc];
        const TwinComponent& k = frame_.comp[c];
        const TwinHuffman& dc = tables_.dc[k.dc];
        const TwinHuffman& ac = tables_.ac[k.ac];
        const AcSkip& as = *skip[k.ac];
        for (int b = 0, nb = k.h * k.v; b < nb; ++b) {
          br.Refill();
          int len, s;
          if (!Symbol(br.acc, dc, &len, &s) || s > 15) return false;
          if (s) pred[c] += TwinExtend(uint32_t((br.acc << len) >> (64 - s)), s);
          br.Skip(len + s);
          for (int i = 1; i < 64;) {
            br.Refill();
            const uint32_t x = as.e[br.acc >> (64 - kSkipBits)];
            if (x) {
              if (i + int((x >> 12) & 127) < 64) {  // every code of the entry is this block's
                br.Skip(int(x & 31));
                i += int((x >> 5) & 127);
              } else {
                br.Skip(int((x >> 19) & 31));
                i += int(x >> 24);
              }
              continue;
            }
            if (!Symbol(br.acc, ac, &len, &s)) return false;
            const int r = s >> 4, size = s & 15;
            br.Skip(len + size);
            if (size == 0) {
              if (r != 15) break;
              i += 16;
            } else {
              i += r + 1;
            }
          }
        }
      }
      // The data ended (libjpeg would pad it with zeros and warn).
      if (uint64_t(br.p - d) * 8 - uint64_t(br.bits) > limit) return false;
    }
    const uint64_t pos = uint64_t(br.p - d) * 8 - uint64_t(br.bits);
    SeekEntry s;
    const uint64_t u = pos >> 3;
    while (ff < ff_.size() && ff_[ff] < u) ++ff;  // each 0xFF data byte before it is stored with a zero after
    const uint64_t offset = start.offset + u + ff;
    for (int c = 0; c < 3; ++c) {
      if (pred[c] < -32768 || pred[c] > 32767) return false;
      s.dc[c] = int16_t(pred[c]);
    }
    if (offset > 0xFFFFFFFFu) return false;
    s.offset = uint32_t(offset);
    s.bit = uint8_t(pos & 7);
    points->push_back(s);
  }
  return true;
}

bool SeekAssembler::Assemble(const JpegPieces& p, const IntervalSpan& s, JpegSeekCache* cache, uint64_t key) {
  walked_ = false;
  if (s.col0 < 0 || s.col0 >= s.col1 || s.col1 > chunks_per_row_ || s.row0 < 0 || s.row0 >= s.row1 ||
      s.row1 > layout_.mcu_rows || s.width <= 0 || s.height <= 0)
    return false;
  const size_t last = EntryIndex(s.row1 - 1, s.col1);
  const size_t held = cache->Get(key, last + 1, &points_);
  if (points_.size() < last + 1) {
    // An image whose entry points cannot all be kept decodes from the top: walking it at every crop
    // would cost more than that.
    if (held == 0 && !cache->HasRoom(size_t(layout_.mcu_rows) * size_t(chunks_per_row_) + 1)) return false;
    if (points_.empty()) points_.push_back(SeekEntry());  // the scan's start: bit 0, predictors 0
    walked_ = true;
    if (!Walk(entropy_, entropy_size_, last, &points_)) return false;
    cache->Put(key, points_.data(), points_.size());
  }

  // Room for the header and a DRI segment, every run stuffed again in the worst case, each re-encoded
  // DC code's growth, the RST markers and EOI.
  const RestartLayout& l = layout_;
  size_t bound = (l.entropy - l.sof) + 6 + 2;
  for (int r = s.row0; r < s.row1; ++r)
    bound += 2 * size_t(points_[EntryIndex(r, s.col1)].offset - points_[EntryIndex(r, s.col0)].offset) + 64;
  if (out_.size() < bound) out_.resize(bound);  // never shrunk: no zero-filling on the next crop
  uint8_t* o = out_.data();
  auto at = [&p](size_t i) { return i < p.head_size ? p.head[i] : p.body[i - p.head_size]; };
  for (size_t i = l.sof; i < l.sos; ++i) *o++ = at(i);  // SOF and any tables after it
  // The SOF's size fields: marker (2), length (2), precision (1), height (2), width (2).
  out_[5] = uint8_t(s.height >> 8);
  out_[6] = uint8_t(s.height);
  out_[7] = uint8_t(s.width >> 8);
  out_[8] = uint8_t(s.width);
  // One restart interval a row of the span, declared last before the scan (no DRI of the stream's can
  // follow and reset it).
  const int run_mcus = (s.width + l.mcu_w - 1) / l.mcu_w;
  const uint8_t dri[6] = {0xFF, 0xDD, 0x00, 0x04, uint8_t(run_mcus >> 8), uint8_t(run_mcus)};
  std::memcpy(o, dri, 6);
  o += 6;
  for (size_t i = l.sos; i < l.entropy; ++i) *o++ = at(i);

  for (int r = s.row0; r < s.row1; ++r) {
    const SeekEntry& a = points_[EntryIndex(r, s.col0)];
    const SeekEntry& b = points_[EntryIndex(r, s.col1)];
    const size_t len = Unstuff(entropy_, entropy_size_, a.offset, size_t(b.offset) + 1);
    // b's byte in the unstuffed copy: its offset less the stuffed zeros before it.
    size_t zeros = 0;
    for (size_t i = 0; i < ff_.size() && a.offset + ff_[i] + i < b.offset; ++i) ++zeros;
    const uint64_t end = (uint64_t(b.offset) - a.offset - zeros) * 8 + b.bit;
    if (end > uint64_t(len) * 8 || end <= a.bit) return false;
    const uint8_t* d = unstuffed_.data();
    // The first MCU: the first block of each component gets its DC value as the difference from the
    // reset predictor; everything else is copied.
    BitWriter w{o};
    uint64_t pos = a.bit, copied = a.bit;
    for (int sc = 0; sc < frame_.ncomp; ++sc) {
      const int c = frame_.scan_order[sc];
      const TwinComponent& k = frame_.comp[c];
      for (int bl = 0, nb = k.h * k.v; bl < nb; ++bl) {
        const uint64_t dc_at = pos;
        int diff;
        if (!WalkDc(d, &pos, tables_.dc[k.dc], &diff)) return false;
        if (bl == 0) {
          const int v = a.dc[c] + diff;
          const unsigned mag = unsigned(v < 0 ? -v : v);
          const int cat = mag ? 32 - __builtin_clz(mag) : 0;
          if (cat > 15 || dc_len_[k.dc][cat] == 0) return false;  // the table has no code for it
          w.Copy(d, copied, dc_at);
          w.Put(dc_code_[k.dc][cat], dc_len_[k.dc][cat]);
          if (cat) w.Put(uint32_t(v < 0 ? v + (1 << cat) - 1 : v) & ((1u << cat) - 1), cat);
          copied = pos;
        }
        if (!WalkAc(d, &pos, tables_.ac[k.ac])) return false;
      }
    }
    if (pos > end) return false;
    w.Copy(d, copied, end);
    w.Flush();
    o = w.o;
    if (r + 1 < s.row1) {
      *o++ = 0xFF;
      *o++ = uint8_t(0xD0 + ((r - s.row0) & 7));
    }
  }
  *o++ = 0xFF;
  *o++ = 0xD9;
  size_ = size_t(o - out_.data());
  prefix = PiecesBefore(p, l.sof);
  return true;
}

}  // namespace dsc::kernels
