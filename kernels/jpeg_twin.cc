#include "kernels/jpeg_twin.h"

#include <cstring>
#include <vector>

namespace dsc::kernels {

const char* TwinReasonName(int reason) {
  switch (reason) {
    case kReasonNone: return "ok";
    case kReasonProgressive: return "progressive";
    case kReasonArithmetic: return "arithmetic coding";
    case kReasonLosslessOrHierarchical: return "lossless or hierarchical";
    case kReasonPrecision: return "not 8-bit";
    case kReasonComponents: return "component count (CMYK/YCCK/2)";
    case kReasonColorTransform: return "colour transform (RGB/Adobe)";
    case kReasonSampling: return "sampling factors";
    case kReasonNonInterleaved: return "non-interleaved scan";
    case kReasonMultiScan: return "multiple scans";
    case kReasonDnl: return "DNL marker";
    case kReasonRestartLayout: return "restart intervals not tiling MCU rows";
    case kReasonTooLarge: return "too large";
    case kReasonSplitScan: return "scan split across payload pieces";
    case kReasonDefaultTables: return "no Huffman tables (Motion-JPEG)";
    case kReasonCropScaled: return "DCT-scaled crop";
    case kReasonCropIntervals: return "crop without restart intervals tiling MCU rows";
    case kReasonCropGeometry: return "crop outside the decoded pixels";
    case kReasonBadMarker: return "bad marker segment";
    case kReasonBadTable: return "bad or missing table";
    case kReasonBadHuffmanCode: return "bad Huffman code";
    case kReasonTruncated: return "truncated entropy data";
    case kReasonBadRestart: return "bad restart marker or extraneous data";
    case kReasonCoefficient: return "coefficient out of range";
    case kReasonIdctRange: return "IDCT value out of range";
    default: return "unknown";
  }
}

namespace {

// Builds a decodable table from a DHT's 16 counts and symbols; false for a table libjpeg rejects.
// What libjpeg accepts of a DHT table: at most 256 symbols, DC symbols ≤ 15, and no length whose codes
// overflow it (the all-ones code is reserved).
bool ValidHuffman(const uint8_t* counts, const uint8_t* vals, bool dc) {
  int total = 0, maxlen = 0;
  for (int l = 1; l <= 16; ++l) {
    total += counts[l - 1];
    if (counts[l - 1]) maxlen = l;
  }
  if (total > 256) return false;
  if (dc)
    for (int i = 0; i < total; ++i)
      if (vals[i] > 15) return false;
  int32_t code = 0;
  for (int l = 1; l <= maxlen; ++l) {
    code += counts[l - 1];
    if (code >= (int32_t(1) << l)) return false;
    code <<= 1;
  }
  return true;
}

// The lookup entries of n codes of one length, kSpan = 2^(kTwinLookBits - length) each: contiguous
// runs. A constant span lets the compiler write them as whole vectors (length 9: eight codes a store);
// a run loop of variable length, per code, was most of a photo's table build.
template <int kSpan>
inline void FillLookRuns(uint16_t* look, int length, const uint8_t* vals, int n) {
  for (int i = 0; i < n; ++i) {
    const uint16_t entry = uint16_t((length << 8) | vals[i]);
    for (int j = 0; j < kSpan; ++j) look[i * kSpan + j] = entry;
  }
}

}  // namespace

bool BuildTwinHuffman(const uint8_t* counts, const uint8_t* vals, bool dc, TwinHuffman* h) {
  std::memset(h, 0, sizeof(*h));
  if (!ValidHuffman(counts, vals, dc)) return false;
  int total = 0;
  for (int l = 1; l <= 16; ++l) total += counts[l - 1];
  std::memcpy(h->vals, vals, size_t(total));
  h->count = uint16_t(total);
  int32_t code = 0;
  int k = 0;
  static_assert(kTwinLookBits == 9, "the spans below");
  for (int l = 1; l <= 16; ++l) {
    const int n = counts[l - 1];
    h->valoffset[l] = k - code;
    h->maxcode[l] = n ? code + n - 1 : -1;
    if (n && l <= kTwinLookBits) {
      // Every kTwinLookBits-bit prefix starting with one of these codes maps to it.
      uint16_t* run = h->look + (code << (kTwinLookBits - l));
      switch (l) {
        case 1: FillLookRuns<256>(run, l, vals + k, n); break;
        case 2: FillLookRuns<128>(run, l, vals + k, n); break;
        case 3: FillLookRuns<64>(run, l, vals + k, n); break;
        case 4: FillLookRuns<32>(run, l, vals + k, n); break;
        case 5: FillLookRuns<16>(run, l, vals + k, n); break;
        case 6: FillLookRuns<8>(run, l, vals + k, n); break;
        case 7: FillLookRuns<4>(run, l, vals + k, n); break;
        case 8: FillLookRuns<2>(run, l, vals + k, n); break;
        default: FillLookRuns<1>(run, l, vals + k, n); break;
      }
    }
    code += n;
    k += n;
    code <<= 1;
  }
  h->maxcode[17] = 0x7FFFFFFF;
  h->defined = 1;
  return true;
}

namespace {

// The payload as one byte sequence over its two pieces.
class Stream {
 public:
  Stream(const uint8_t* a, size_t an, const uint8_t* b, size_t bn) : a_(a), an_(an), b_(b), bn_(bn) {}
  size_t size() const { return an_ + bn_; }
  size_t pos() const { return pos_; }
  bool Byte(uint8_t* v) {
    if (pos_ >= size()) return false;
    *v = pos_ < an_ ? a_[pos_] : b_[pos_ - an_];
    ++pos_;
    return true;
  }
  bool U16(uint16_t* v) {
    uint8_t hi, lo;
    if (!Byte(&hi) || !Byte(&lo)) return false;
    *v = uint16_t(hi << 8 | lo);
    return true;
  }
  bool Read(uint8_t* out, size_t n) {
    if (n > size() - pos_) return false;
    if (pos_ >= an_ || pos_ + n <= an_) {  // within one piece: one copy
      std::memcpy(out, pos_ >= an_ ? b_ + (pos_ - an_) : a_ + pos_, n);
      pos_ += n;
      return true;
    }
    for (size_t i = 0; i < n; ++i) Byte(out + i);
    return true;
  }
  bool Skip(size_t n) {
    if (n > size() - pos_) return false;
    pos_ += n;
    return true;
  }
  // The piece holding position pos_ and the offset in it.
  void Locate(const uint8_t** piece, size_t* piece_size, size_t* at) const {
    if (pos_ < an_) {
      *piece = a_, *piece_size = an_, *at = pos_;
    } else {
      *piece = b_, *piece_size = bn_, *at = pos_ - an_;
    }
  }
  bool InFirst() const { return pos_ < an_; }
  void Seek(size_t p) { pos_ = p; }

 private:
  const uint8_t* a_;
  size_t an_;
  const uint8_t* b_;
  size_t bn_, pos_ = 0;
};

}  // namespace

namespace {

// TwinZigzag's table, built once: in ParseTwin's DQT loop the compiler rebuilt the function's local
// table on the stack for every coefficient (a fifth of a header parse).
struct ZigzagTable {
  uint8_t natural[64];
};
const ZigzagTable kZigzag = [] {
  ZigzagTable t{};
  for (int k = 0; k < 64; ++k) t.natural[k] = uint8_t(TwinZigzag(k));
  return t;
}();

TwinParseResult Fail(int reason, size_t offset) {
  TwinParseResult r;
  r.status = reason >= kTwinFirstCorrupt ? kTwinCorrupt : kTwinUnsupported;
  r.reason = reason;
  r.offset = offset;
  return r;
}

}  // namespace

TwinParseResult ParseTwin(const uint8_t* head, size_t head_size, const uint8_t* body, size_t body_size,
                          TwinFrame* frame, TwinTables* tables, TwinScan* scan, uint32_t max_units,
                          uint8_t* copy) {
  Stream s(head, head_size, body, body_size);
  TwinFrame& f = *frame;
  f = TwinFrame();
  // Which tables are defined (1), defined but invalid (2, an error once used) or not (0); with
  // tables == nullptr only this is kept (a check needs no decoding tables).
  uint8_t quant_defined[4] = {0, 0, 0, 0}, huff_defined[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
  if (tables) {
    std::memset(tables->quant_defined, 0, sizeof(tables->quant_defined));
    for (int i = 0; i < 4; ++i) tables->dc[i].defined = tables->ac[i].defined = 0;
  }
  uint8_t m0, m1;
  if (!s.Byte(&m0) || !s.Byte(&m1) || m0 != 0xFF || m1 != 0xD8) return Fail(kReasonBadMarker, 0);
  bool jfif = false, adobe = false, sof = false;
  int adobe_transform = -1;
  uint8_t comp_id[3] = {0, 0, 0};
  int components = 0;
  for (;;) {
    // Next marker: 0xFF (fill 0xFFs), code. libjpeg skips junk before a marker with a warning.
    const size_t at = s.pos();
    uint8_t c;
    if (!s.Byte(&c)) return Fail(kReasonBadMarker, at);
    if (c != 0xFF) return Fail(kReasonBadMarker, at);
    do {
      if (!s.Byte(&c)) return Fail(kReasonBadMarker, at);
    } while (c == 0xFF);
    if (c == 0xD8 || c == 0xD9 || (c >= 0xD0 && c <= 0xD7) || c == 0x01 || c == 0x00) return Fail(kReasonBadMarker, at);
    uint16_t len;
    if (!s.U16(&len) || len < 2) return Fail(kReasonBadMarker, at);
    const size_t seg_end = s.pos() + len - 2;
    if (seg_end > s.size()) return Fail(kReasonBadMarker, at);
    if (c == 0xC0 || c == 0xC1) {  // baseline / extended sequential, Huffman
      if (sof) return Fail(kReasonBadMarker, at);
      sof = true;
      uint8_t p, n;
      uint16_t h, w;
      if (!s.Byte(&p) || !s.U16(&h) || !s.U16(&w) || !s.Byte(&n)) return Fail(kReasonBadMarker, at);
      if (p != 8) return Fail(kReasonPrecision, at);
      if (w == 0) return Fail(kReasonBadMarker, at);
      if (h == 0) return Fail(kReasonDnl, at);
      if (n != 1 && n != 3) return Fail(n == 0 ? kReasonBadMarker : kReasonComponents, at);
      if (len != 8 + 3 * n) return Fail(kReasonBadMarker, at);
      if (w > kTwinMaxDim || h > kTwinMaxDim) return Fail(kReasonTooLarge, at);
      components = n;
      f.width = w;
      f.height = h;
      f.ncomp = n;
      for (int i = 0; i < n; ++i) {
        uint8_t id, hv, tq;
        if (!s.Byte(&id) || !s.Byte(&hv) || !s.Byte(&tq)) return Fail(kReasonBadMarker, at);
        const int hs = hv >> 4, vs = hv & 15;
        if (hs < 1 || hs > 4 || vs < 1 || vs > 4 || tq > 3) return Fail(kReasonBadMarker, at);
        comp_id[i] = id;
        f.comp[i].h = uint8_t(hs);
        f.comp[i].v = uint8_t(vs);
        f.comp[i].quant = tq;
      }
    } else if (c == 0xC2) {
      return Fail(kReasonProgressive, at);
    } else if (c == 0xC3 || c == 0xC5 || c == 0xC6 || c == 0xC7) {
      return Fail(kReasonLosslessOrHierarchical, at);
    } else if (c == 0xCC || (c >= 0xC9 && c <= 0xCF)) {
      return Fail(kReasonArithmetic, at);
    } else if (c == 0xDC) {
      return Fail(kReasonDnl, at);
    } else if (c == 0xC4) {  // DHT: one or more tables
      while (s.pos() < seg_end) {
        uint8_t tc, counts[16] = {}, vals[256];
        if (!s.Byte(&tc) || !s.Read(counts, 16)) return Fail(kReasonBadMarker, at);
        int total = 0;
        for (uint8_t k : counts) total += k;
        if (total > 256 || s.pos() + size_t(total) > seg_end || !s.Read(vals, size_t(total)))
          return Fail(kReasonBadTable, at);
        const int cls = tc >> 4, id = tc & 15;
        if (cls > 1 || id > 3) return Fail(kReasonBadTable, at);
        bool ok;
        if (tables) {
          TwinHuffman* h = cls ? &tables->ac[id] : &tables->dc[id];
          ok = BuildTwinHuffman(counts, vals, cls == 0, h);
          if (!ok) h->defined = 2;
        } else {
          ok = ValidHuffman(counts, vals, cls == 0);
        }
        huff_defined[cls][id] = ok ? 1 : 2;
      }
      if (s.pos() != seg_end) return Fail(kReasonBadMarker, at);
    } else if (c == 0xDB) {  // DQT
      while (s.pos() < seg_end) {
        uint8_t pq;
        if (!s.Byte(&pq)) return Fail(kReasonBadMarker, at);
        const int prec = pq >> 4, id = pq & 15;
        if (prec > 1 || id > 3) return Fail(kReasonBadTable, at);
        uint8_t q[128];
        if (!s.Read(q, prec ? 128 : 64)) return Fail(kReasonBadMarker, at);
        if (tables)
          for (int k = 0; k < 64; ++k)
            tables->quant[id][kZigzag.natural[k]] = prec ? uint16_t(q[2 * k] << 8 | q[2 * k + 1]) : q[k];
        quant_defined[id] = 1;
        if (tables) tables->quant_defined[id] = 1;
      }
      if (s.pos() != seg_end) return Fail(kReasonBadMarker, at);
    } else if (c == 0xDD) {  // DRI
      uint16_t ri;
      if (len != 4 || !s.U16(&ri)) return Fail(kReasonBadMarker, at);
      f.restart_interval = ri;
    } else if (c == 0xE0 || c == 0xEE) {
      uint8_t buf[12] = {};
      const size_t n = len - 2 < 12 ? len - 2 : 12;
      if (!s.Read(buf, n)) return Fail(kReasonBadMarker, at);
      if (c == 0xE0 && len - 2 >= 14 && std::memcmp(buf, "JFIF\0", 5) == 0) {
        // libjpeg warns about a major version other than 1, and dsc's CPU decoder treats its warnings
        // as errors: corrupt here too, so both decoders refuse the sample.
        if (buf[5] != 1) return Fail(kReasonBadMarker, at);
        jfif = true;
      }
      if (c == 0xEE && n >= 12 && std::memcmp(buf, "Adobe", 5) == 0) {
        adobe = true;
        adobe_transform = buf[11];
      }
    } else if (c == 0xDA) {  // SOS
      if (!sof) return Fail(kReasonBadMarker, at);
      uint8_t ns;
      if (!s.Byte(&ns) || ns < 1 || ns > 4 || len != 6 + 2 * ns) return Fail(kReasonBadMarker, at);
      if (ns != components) return Fail(kReasonNonInterleaved, at);
      bool seen[3] = {false, false, false};
      for (int i = 0; i < ns; ++i) {
        uint8_t id, td;
        if (!s.Byte(&id) || !s.Byte(&td)) return Fail(kReasonBadMarker, at);
        int k = 0;
        while (k < components && comp_id[k] != id) ++k;
        if (k == components || seen[k]) return Fail(kReasonBadMarker, at);
        seen[k] = true;
        f.scan_order[i] = uint8_t(k);
        f.comp[k].dc = uint8_t(td >> 4);
        f.comp[k].ac = uint8_t(td & 15);
        if (f.comp[k].dc > 3 || f.comp[k].ac > 3) return Fail(kReasonBadTable, at);
      }
      uint8_t ss, se, a;
      if (!s.Byte(&ss) || !s.Byte(&se) || !s.Byte(&a)) return Fail(kReasonBadMarker, at);
      if (ss != 0 || se != 63 || a != 0) return Fail(kReasonBadMarker, at);  // libjpeg warns
      break;
    } else if (c == 0xD9) {
      return Fail(kReasonBadMarker, at);
    }
    s.Seek(seg_end);
  }
  const size_t sos_end = s.pos();

  // Colour space as libjpeg infers it.
  if (components == 3) {
    if (!jfif) {
      if (adobe && adobe_transform != 1) return Fail(kReasonColorTransform, 0);
      if (!adobe && comp_id[0] == 'R' && comp_id[1] == 'G' && comp_id[2] == 'B') return Fail(kReasonColorTransform, 0);
    }
  }
  // Geometry. A single-component image is one non-interleaved scan: MCU = one block.
  if (components == 1) f.comp[0].h = f.comp[0].v = 1;
  f.hmax = f.comp[0].h;
  f.vmax = f.comp[0].v;
  for (int i = 0; i < components; ++i) {
    TwinComponent& k = f.comp[i];
    if (k.h > 2 || k.v > 2 || k.h > f.hmax || k.v > f.vmax) return Fail(kReasonSampling, 0);
    k.hshift = k.h < f.hmax;
    k.vshift = k.v < f.vmax;
  }
  f.mcus_x = uint16_t((f.width + 8 * f.hmax - 1) / (8 * f.hmax));
  f.mcus_y = uint16_t((f.height + 8 * f.vmax - 1) / (8 * f.vmax));
  uint32_t blocks = 0;
  int per_mcu = 0;
  for (int i = 0; i < components; ++i) {
    TwinComponent& k = f.comp[i];
    k.blocks_w = uint16_t(f.mcus_x * k.h);
    k.blocks_h = uint16_t(f.mcus_y * k.v);
    k.block_offset = blocks;
    blocks += uint32_t(k.blocks_w) * k.blocks_h;
    per_mcu += k.h * k.v;
    if (!quant_defined[k.quant]) return Fail(kReasonBadTable, 0);
    const uint8_t dc = huff_defined[0][k.dc], ac = huff_defined[1][k.ac];
    if (!dc || !ac) return Fail(kReasonDefaultTables, 0);
    if (dc != 1 || ac != 1) return Fail(kReasonBadTable, 0);
  }
  // libjpeg refuses an interleaved scan of more than 10 blocks per MCU (D_MAX_BLOCKS_IN_MCU: 2x2,2x2,2x2
  // sampling is 12) as corrupt; so does the twin, rather than decode what the CPU refuses.
  if (components > 1 && per_mcu > 10) return Fail(kReasonBadMarker, 0);
  f.total_blocks = blocks;
  f.blocks_per_mcu = uint8_t(per_mcu);
  const uint32_t total = f.total_mcus();
  if (f.restart_interval) {
    const uint32_t r = f.restart_interval;
    if (f.mcus_x % r != 0 && r % f.mcus_x != 0) return Fail(kReasonRestartLayout, 0);
    f.intervals = (total + r - 1) / r;
  } else {
    f.intervals = 1;
  }
  if (f.intervals > max_units) return Fail(kReasonTooLarge, 0);

  // The entropy-coded segment: up to the first marker other than RSTn, which must then lead to EOI.
  const uint8_t* piece;
  size_t piece_size, start;
  s.Locate(&piece, &piece_size, &start);
  if (s.InFirst() && body_size) return Fail(kReasonSplitScan, sos_end);
  return ScanTwinEntropy(f, piece, piece_size, start, piece == head ? 0 : head_size, scan, copy);
}

const uint8_t* FindTwinIntervalIndex(const uint8_t* piece, size_t piece_size, size_t start, uint32_t n) {
  if (n < 2 || n > kTwinIndexMaxIntervals) return nullptr;
  const size_t seg = TwinIndexSegmentSize(n), len = seg - 2;
  if (piece_size < start || piece_size - start < seg + 2) return nullptr;
  const uint8_t* s = piece + piece_size - 2 - seg;
  if (s[0] != 0xFF || s[1] != kTwinIndexMarker || s[2] != uint8_t(len >> 8) || s[3] != uint8_t(len & 0xFF) ||
      std::memcmp(s + 4, kTwinIndexId, sizeof kTwinIndexId) != 0 || piece[piece_size - 2] != 0xFF ||
      piece[piece_size - 1] != 0xD9)
    return nullptr;
  return s + 4 + sizeof kTwinIndexId;
}

namespace {
// The scan's unit bounds up to scan->last_unit from the index `lens`: each interval must end on its
// RSTn, the last one at the segment. false when they do not (the caller scans instead).
bool IndexedScan(const TwinFrame& f, const uint8_t* piece, size_t piece_size, size_t start, const uint8_t* lens,
                 TwinScan* scan) {
  const uint32_t n = f.intervals, last = scan->last_unit < n - 1 ? scan->last_unit : n - 1;
  const size_t seg = piece_size - 2 - TwinIndexSegmentSize(n);  // where the data must end
  size_t s = start;
  if (scan->trust_index) {  // the lengths alone; the caller checks the intervals it reads
    // Offsets only grow (n <= kTwinIndexMaxIntervals lengths under 64 KiB: no overflow), so the last
    // interval's end bounds every other: one check after the loop.
    uint32_t* begin = scan->unit_begin;
    uint32_t* end = scan->unit_end;
    size_t e = s;
    for (uint32_t k = 0; k <= last; ++k) {
      e = s + (size_t(lens[2 * k]) | size_t(lens[2 * k + 1]) << 8);
      begin[k] = uint32_t(s - start);
      end[k] = uint32_t(e - start);
      s = e + 2;
    }
    if (last + 1 < n ? e + 2 > seg : e != seg) return false;
    scan->size = end[last];
    scan->indexed = true;
    return true;
  }
  // Every line up to a page ahead of the walk, once (the first page at the start): the payload streams
  // from memory, and a prefetch per marker (one every ~2.5 lines) left the lines between to the copy.
  uintptr_t ahead = reinterpret_cast<uintptr_t>(piece + start) & ~uintptr_t(63);
  for (uint32_t k = 0; k <= last; ++k) {
    const size_t e = s + (size_t(lens[2 * k]) | size_t(lens[2 * k + 1]) << 8);
    for (const uintptr_t to = reinterpret_cast<uintptr_t>(piece + e) + kTwinMarkerPrefetch; ahead <= to; ahead += 64)
      __builtin_prefetch(reinterpret_cast<const void*>(ahead));
    if (k + 1 < n ? e + 2 > seg || piece[e] != 0xFF || piece[e + 1] != 0xD0 + (k & 7) : e != seg) return false;
    scan->unit_begin[k] = uint32_t(s - start);
    scan->unit_end[k] = uint32_t(e - start);
    s = e + 2;
  }
  scan->size = scan->unit_end[last];
  scan->indexed = true;
  return true;
}
}  // namespace

bool AddTwinIntervalIndex(std::vector<uint8_t>* jpeg) {
  const size_t size = jpeg->size();
  if (size > 0xFFFFFFFFu) return false;
  const uint32_t most = uint32_t(size / 2 + 2);
  std::vector<uint32_t> begin(most), end(most);
  TwinFrame f;
  TwinScan scan;
  scan.unit_begin = begin.data();
  scan.unit_end = end.data();
  if (ParseTwin(nullptr, 0, jpeg->data(), size, &f, nullptr, &scan, most).status != kTwinOk) return false;
  const uint32_t n = f.intervals;
  if (!f.restart_interval || n < 2 || n > kTwinIndexMaxIntervals) return false;
  const size_t start = size_t(scan.data - jpeg->data());
  if (FindTwinIntervalIndex(jpeg->data(), size, start, n)) return false;  // has one already
  if (start + end[n - 1] + 2 != size || (*jpeg)[size - 2] != 0xFF || (*jpeg)[size - 1] != 0xD9) return false;
  std::vector<uint8_t> seg(TwinIndexSegmentSize(n));
  const size_t len = seg.size() - 2;
  seg[0] = 0xFF, seg[1] = kTwinIndexMarker, seg[2] = uint8_t(len >> 8), seg[3] = uint8_t(len & 0xFF);
  std::memcpy(seg.data() + 4, kTwinIndexId, sizeof kTwinIndexId);
  for (uint32_t k = 0; k < n; ++k) {
    const uint32_t bytes = end[k] - begin[k];
    if (bytes > 0xFFFF || (k + 1 < n && begin[k + 1] != end[k] + 2)) return false;
    seg[12 + 2 * k] = uint8_t(bytes & 0xFF), seg[13 + 2 * k] = uint8_t(bytes >> 8);
  }
  jpeg->insert(jpeg->end() - 2, seg.begin(), seg.end());
  return true;
}

TwinParseResult ScanTwinEntropy(const TwinFrame& f, const uint8_t* piece, size_t piece_size, size_t start,
                                size_t base, TwinScan* scan, uint8_t* copy) {
  scan->data = piece + start;
  scan->indexed = false;
  if (scan->header_only) {
    scan->size = 0;
    return TwinParseResult();
  }
  size_t i = start;
  if (copy) TwinCopy(copy, piece + start, piece_size - start);
  // The index, when the payload has one: no scan (a header check, last_unit 0, reads one interval
  // anyway, unless the caller reads the intervals itself).
  if ((scan->last_unit > 0 || scan->trust_index) && !scan->ignore_index && f.restart_interval &&
      piece_size <= 0xFFFFFFFFu)
    if (const uint8_t* lens = FindTwinIntervalIndex(piece, piece_size, start, f.intervals))
      if (IndexedScan(f, piece, piece_size, start, lens, scan)) return TwinParseResult();
  uint32_t unit = 0;
  scan->unit_begin[0] = 0;
  size_t end = piece_size;
  bool marker = false;
  uint8_t code = 0;
  size_t after = piece_size;
  if (piece_size > 0xFFFFFFFFu) return Fail(kReasonTooLarge, base + start);
  // Markers are listed a chunk at a time (so that a crop's scan stops near its last interval), then
  // walked: `next` is the first byte not yet consumed (a marker's fill bytes and code are skipped).
  constexpr size_t kChunk = 2048;
  uint32_t found[kChunk + 2];
  size_t next = i;
  bool done = false;
  size_t chunk = 256;  // small at first: a header check stops at the first marker
  while (!done && i < piece_size) {
    const size_t e = piece_size - i < chunk ? piece_size : i + chunk;
    if (chunk < kChunk) chunk *= 2;
    const size_t count = FindTwinMarkers(piece, i, e, piece_size, found);
    for (size_t k = 0; k < count; ++k) {
      const size_t p = found[k];
      if (p < next) continue;  // a fill byte or code already consumed
      size_t q = p + 1;
      while (q < piece_size && piece[q] == 0xFF) ++q;
      if (q >= piece_size) {
        done = true;
        break;
      }
      if (piece[q] == 0x00) {  // fill bytes before a stuffed 0xFF 0x00
        next = q + 1;
        continue;
      }
      if (piece[q] >= 0xD0 && piece[q] <= 0xD7) {
        // A restart: it must be expected and numbered in sequence.
        if (!f.restart_interval || unit + 1 >= f.intervals || piece[q] != 0xD0 + (unit & 7))
          return Fail(kReasonBadRestart, base + p);
        scan->unit_end[unit] = uint32_t(p - start);
        if (unit == scan->last_unit) {
          scan->size = p - start;
          return TwinParseResult();
        }
        ++unit;
        scan->unit_begin[unit] = uint32_t(q + 1 - start);
        next = q + 1;
        continue;
      }
      end = p;
      marker = true;
      code = piece[q];
      after = q + 1;
      done = true;
      break;
    }
    i = next > e ? next : e;
  }
  if (piece_size - start > 0xFFFFFFFFu) return Fail(kReasonTooLarge, base + start);
  scan->size = end - start;
  scan->unit_end[unit] = uint32_t(end - start);
  if (unit + 1 != f.intervals) return Fail(kReasonBadRestart, base + end);
  if (!marker) return Fail(kReasonTruncated, base + end);
  // After the scan: only EOI (APPn / COM may precede it).
  while (code != 0xD9) {
    if (code == 0xDA) return Fail(kReasonMultiScan, base + end);
    if (code == 0xDC) return Fail(kReasonDnl, base + end);
    const bool skippable = (code >= 0xE0 && code <= 0xEF) || code == 0xFE || code == 0xC4 || code == 0xDB || code == 0xDD;
    if (!skippable || after + 2 > piece_size) return Fail(kReasonBadMarker, base + end);
    const size_t len = size_t(piece[after]) << 8 | piece[after + 1];
    if (len < 2 || after + len + 2 > piece_size || piece[after + len] != 0xFF) return Fail(kReasonBadMarker, base + after);
    size_t q = after + len;
    while (q < piece_size && piece[q] == 0xFF) ++q;
    if (q >= piece_size) return Fail(kReasonTruncated, base + q);
    code = piece[q];
    after = q + 1;
  }
  TwinParseResult ok;
  return ok;
}

void TwinSetFancy(TwinFrame* f, bool fancy) {
  for (int c = 0; c < f->ncomp; ++c) {
    TwinComponent& k = f->comp[c];
    const int dw = (int(f->width) * k.h + f->hmax - 1) / f->hmax;
    k.fancy = uint8_t(fancy && (k.hshift ? dw > 2 : k.vshift != 0));
  }
}

TwinParseResult DecodeTwinRGB(const uint8_t* head, size_t head_size, const uint8_t* body, size_t body_size,
                              bool split, std::vector<uint8_t>* rgb, int* width, int* height, bool fancy) {
  TwinFrame f;
  std::vector<TwinTables> tables(1);
  // Every interval but the last ends with a 2-byte marker: the payload size bounds their number.
  const uint32_t max_units = uint32_t((head_size + body_size) / 2 + 2);
  std::vector<uint32_t> begin(max_units), end(max_units);
  TwinScan scan;
  scan.unit_begin = begin.data();
  scan.unit_end = end.data();
  TwinParseResult r = ParseTwin(head, head_size, body, body_size, &f, &tables[0], &scan, max_units);
  if (r.status != kTwinOk) return r;
  TwinSetFancy(&f, fancy);
  *width = f.width;
  *height = f.height;
  std::vector<int16_t> coef(size_t(f.total_blocks) * 64);
  const size_t base = scan.data >= body && scan.data < body + body_size ? head_size + size_t(scan.data - body) : 0;
  int reason;
  if (!split) {
    reason = DecodeEntropy(f, tables[0], scan.data, scan.size, 0, f.total_mcus(), true, coef.data());
  } else {
    reason = kReasonNone;
    const uint32_t r_mcus = f.restart_interval ? f.restart_interval : f.total_mcus();
    for (uint32_t u = 0; u < f.intervals && !reason; ++u) {
      const uint32_t first = u * r_mcus, n = f.total_mcus() - first < r_mcus ? f.total_mcus() - first : r_mcus;
      reason = DecodeEntropy(f, tables[0], scan.data + scan.unit_begin[u], scan.unit_end[u] - scan.unit_begin[u],
                             first, n, false, coef.data());
    }
  }
  if (reason) return Fail(reason, base);
  std::vector<uint8_t> planes(TwinPlaneBytes(f));
  for (uint32_t b = 0; b < f.total_blocks; ++b) {
    int c;
    uint32_t bx, by;
    TwinBlockPosition(f, b, &c, &bx, &by);
    reason = IdctBlock(coef.data() + size_t(b) * 64, tables[0].quant[f.comp[c].quant], TwinBlockOut(f, planes.data(), c, bx, by),
                       TwinPlaneStride(f, c));
    if (reason) return Fail(reason, base);
  }
  rgb->resize(size_t(f.width) * f.height * 3);
  for (uint32_t y = 0; y < f.height; ++y)
    for (uint32_t x = 0; x < f.width; ++x) TwinPixel(f, planes.data(), x, y, rgb->data() + (size_t(y) * f.width + x) * 3);
  return TwinParseResult();
}

}  // namespace dsc::kernels
