// The GPU JPEG decoder's per-element code and its host twin. Every function marked DSC_HD runs both
// here (tests, `dsc verify --decoder gpu-twin`) and inside the CUDA kernels (kernels/cuda/jpeg_decode.cu),
// so the CPU checks the exact arithmetic the GPU executes.
//
// What it decodes, bit for bit equal to libjpeg-turbo's tjDecompress2(TJPF_RGB, TJFLAG_ACCURATEDCT, with
// TJFLAG_FASTUPSAMPLE or, with fancy upsampling, without): sequential Huffman 8-bit JPEGs in one
// interleaved scan (or grayscale), sampling factors 1 or 2 with luma at the maximum, with or without
// restart intervals. Entropy decoding, dequantisation + libjpeg's "islow" integer IDCT with its range
// limit, box or fancy (triangle) chroma upsampling and libjpeg's fixed-point YCbCr -> RGB. Everything else is classified (TwinReason) so the caller decodes
// that sample on the CPU. The device functions use fixed-size tables and bounds-check every read and
// write: corrupt data yields kCorrupt, never an out-of-bounds access.
//
// Split into: a host parser (ParseTwin, plain C++) producing a POD TwinFrame + TwinTables, and the
// device-side stages: DecodeEntropy (one decode unit = a restart interval or a whole image) ->
// IdctBlock (one 8x8 block) -> TwinPixel (one RGB pixel).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/color.h"
#include "kernels/hd.h"

namespace dsc::kernels {

enum TwinStatus : int { kTwinOk = 0, kTwinUnsupported = 1, kTwinCorrupt = 2 };

// Why a payload is not decoded by the twin. Values below kTwinFirstCorrupt are "unsupported" (the
// stream is fine, decode it on the CPU); the rest are "corrupt".
enum TwinReason : int {
  kReasonNone = 0,
  kReasonProgressive,
  kReasonArithmetic,
  kReasonLosslessOrHierarchical,
  kReasonPrecision,        // not 8-bit samples
  kReasonComponents,       // 2 or 4+ components (CMYK, YCCK)
  kReasonColorTransform,   // Adobe transform other than YCbCr, or RGB component ids
  kReasonSampling,         // factors other than 1/2 with luma at the maximum
  kReasonNonInterleaved,   // colour components in separate scans
  kReasonMultiScan,        // more than one scan
  kReasonDnl,              // height given by a DNL marker
  kReasonRestartLayout,    // restart intervals that do not tile MCU rows
  kReasonTooLarge,         // larger than the twin's fixed limits
  kReasonSplitScan,        // scan data spread over both payload pieces
  kReasonDefaultTables,    // no Huffman table given (Motion-JPEG: libjpeg supplies the standard ones)
  kReasonCropScaled,       // a crop the loader decodes DCT-scaled (the twin decodes at full size only)
  kReasonCropIntervals,    // a crop of a stream without restart intervals that tile MCU rows
  kReasonCropGeometry,     // a crop whose resize the resampler refuses, or reads outside its pixels
  kTwinFirstCorrupt,
  kReasonBadMarker = kTwinFirstCorrupt,  // malformed or truncated header / marker segment
  kReasonBadTable,         // missing or invalid Huffman / quantisation table
  kReasonBadHuffmanCode,
  kReasonTruncated,        // entropy data ran out (libjpeg pads with zeros and warns)
  kReasonBadRestart,       // missing, misnumbered or extraneous restart marker, or data after the last MCU
  kReasonCoefficient,      // DC coefficient out of range
  kReasonIdctRange,        // values where libjpeg's C and SIMD IDCTs disagree (only on corrupt data)
  kTwinReasonCount
};
const char* TwinReasonName(int reason);

// Limits of the fixed-size structures (the GPU stages need no allocation).
constexpr int kTwinMaxDim = 16384;
constexpr int kTwinLookBits = 9;

// One Huffman table, decodable without allocation: a kTwinLookBits-bit lookup for short codes
// ((length << 8) | symbol, 0 = longer code) and canonical maxcode/valoffset for the rest.
struct TwinHuffman {
  uint16_t look[1 << kTwinLookBits];
  int32_t maxcode[18];    // largest code of each length, -1 when none; [17] is a sentinel
  int32_t valoffset[17];  // symbol index of a code of length l = code + valoffset[l]
  uint8_t vals[256];
  uint16_t count;         // number of symbols
  uint8_t defined;
};

// Builds a decodable table from a DHT table's 16 code counts (by length) and its symbols; false (and
// *h zeroed) for a table libjpeg rejects: over 256 symbols, a DC symbol over 15, or too many codes of
// a length. Host only (ParseTwin's).
bool BuildTwinHuffman(const uint8_t* counts, const uint8_t* vals, bool dc, TwinHuffman* h);

// The tables a frame's components refer to, as they stand at the start of the scan.
struct TwinTables {
  uint16_t quant[4][64];  // natural (row-major) order
  uint8_t quant_defined[4];
  TwinHuffman dc[4], ac[4];
};

struct TwinComponent {
  uint8_t h, v;          // sampling factors (forced to 1 for a grayscale image)
  uint8_t hshift, vshift;  // 1 when upsampled by 2 in that direction
  uint8_t quant, dc, ac;   // table numbers
  uint16_t blocks_w, blocks_h;  // block grid of this component (whole MCUs)
  uint32_t block_offset;        // first block of this component in the coefficient / plane arrays
  uint8_t fancy;                // upsampled with libjpeg's fancy (triangle) filter: TwinSetFancy
};

// Everything the device stages need about one image, besides its tables and entropy bytes.
struct TwinFrame {
  uint16_t width = 0, height = 0;
  uint8_t ncomp = 0;        // 1 (gray) or 3 (YCbCr)
  uint8_t hmax = 1, vmax = 1;
  uint8_t blocks_per_mcu = 0;
  uint8_t scan_order[3] = {0, 1, 2};  // frame component index of each scan component
  uint16_t mcus_x = 0, mcus_y = 0;
  uint32_t restart_interval = 0;  // MCUs per interval, 0 = none
  uint32_t total_blocks = 0;
  uint32_t intervals = 0;         // decode units: restart intervals, or 1
  TwinComponent comp[3] = {};
  DSC_HD uint32_t total_mcus() const { return uint32_t(mcus_x) * mcus_y; }
};

// ---- Entropy decoding ----------------------------------------------------------------------------

// Reads entropy-coded bits from [p, end): 0xFF 0x00 is a data 0xFF, any other marker (or the end) stops
// the stream, after which zero bits are supplied and counted; consuming one of them means the data was
// truncated (libjpeg pads the same way, with a warning).
struct TwinBits {
  const uint8_t* p;
  const uint8_t* end;
  uint64_t acc;  // next bits, left-aligned
  int nbits;     // valid bits in acc (including padding)
  int pad;       // trailing zero bits of acc that are padding
  bool stopped;  // reached a marker or the end; p points at the marker
};

DSC_HD void TwinBitsInit(TwinBits* b, const uint8_t* p, const uint8_t* end) {
  b->p = p;
  b->end = end;
  b->acc = 0;
  b->nbits = 0;
  b->pad = 0;
  b->stopped = false;
}

DSC_HD void TwinFill(TwinBits* b) {
  while (b->nbits <= 56) {
    if (!b->stopped) {
      if (b->p >= b->end) {
        b->stopped = true;
      } else if (b->p[0] != 0xFF) {
        b->acc |= uint64_t(*b->p++) << (56 - b->nbits);
        b->nbits += 8;
        continue;
      } else {
        // 0xFF: fill bytes (more 0xFF) then 0x00 = a data 0xFF, anything else = a marker.
        const uint8_t* q = b->p + 1;
        while (q < b->end && *q == 0xFF) ++q;
        if (q < b->end && *q == 0x00) {
          b->acc |= uint64_t(0xFF) << (56 - b->nbits);
          b->nbits += 8;
          b->p = q + 1;
          continue;
        }
        b->stopped = true;
      }
    }
    b->nbits += 8;  // zero padding past the end
    b->pad += 8;
  }
}

// Takes n (1..16) bits. Returns false when they would include padding.
DSC_HD bool TwinGetBits(TwinBits* b, int n, uint32_t* v) {
  if (b->nbits < n) TwinFill(b);
  *v = uint32_t(b->acc >> (64 - n));
  b->acc <<= n;
  b->nbits -= n;
  return b->nbits >= b->pad;
}

DSC_HD bool TwinDecodeSymbol(TwinBits* b, const TwinHuffman& h, int* sym) {
  if (b->nbits < 16) TwinFill(b);
  const uint32_t peek = uint32_t(b->acc >> 48);
  const uint16_t e = h.look[peek >> (16 - kTwinLookBits)];
  int len;
  if (e) {
    len = e >> 8;
    *sym = e & 0xFF;
  } else {
    len = kTwinLookBits + 1;
    while (len <= 16 && int32_t(peek >> (16 - len)) > h.maxcode[len]) ++len;
    if (len > 16) return false;
    const int32_t idx = int32_t(peek >> (16 - len)) + h.valoffset[len];
    if (idx < 0 || idx >= int32_t(h.count)) return false;
    *sym = h.vals[idx];
  }
  b->acc <<= len;
  b->nbits -= len;
  return b->nbits >= b->pad;
}

// Natural (row-major) position of the k-th zigzag coefficient.
DSC_HD int TwinZigzag(int k) {
  // Packed 6-bit entries would save nothing on a GPU; a constant table in registers-friendly form.
  constexpr uint8_t z[64] = {0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,
                             12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6,  7,  14, 21, 28,
                             35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
                             58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63};
  return z[k];
}

DSC_HD int TwinExtend(uint32_t v, int s) { return int(v) < (1 << (s - 1)) ? int(v) - (1 << s) + 1 : int(v); }

// Decodes one 8x8 block's coefficients into blk (natural order, zeroed here). *pred is the
// component's DC predictor. Returns a TwinReason (kReasonNone on success).
DSC_HD int TwinDecodeBlock(TwinBits* b, const TwinHuffman& dc, const TwinHuffman& ac, int* pred, int16_t* blk) {
  for (int i = 0; i < 64; ++i) blk[i] = 0;
  int s;
  if (!TwinDecodeSymbol(b, dc, &s)) return b->nbits < b->pad ? kReasonTruncated : kReasonBadHuffmanCode;
  int diff = 0;
  if (s) {
    if (s > 16) return kReasonCoefficient;
    uint32_t v;
    if (!TwinGetBits(b, s, &v)) return kReasonTruncated;
    diff = TwinExtend(v, s);
  }
  const int dcv = *pred + diff;
  if (dcv < -32768 || dcv > 32767) return kReasonCoefficient;
  *pred = dcv;
  blk[0] = int16_t(dcv);
  for (int k = 1; k < 64;) {
    if (!TwinDecodeSymbol(b, ac, &s)) return b->nbits < b->pad ? kReasonTruncated : kReasonBadHuffmanCode;
    const int r = s >> 4, size = s & 15;
    if (size == 0) {
      if (r != 15) break;  // end of block
      k += 16;             // run of 16 zeros
      continue;
    }
    k += r;
    uint32_t v;
    if (!TwinGetBits(b, size, &v)) return kReasonTruncated;
    // A run past the last coefficient (corrupt data) lands on it, as in libjpeg, whose zigzag table
    // has 16 extra entries of 63 for this case; the block then ends.
    blk[TwinZigzag(k > 63 ? 63 : k)] = int16_t(TwinExtend(v, size));
    ++k;
  }
  return kReasonNone;
}

// Block index (into the frame's coefficient array) of block (bx, by) of frame component c.
DSC_HD uint32_t TwinBlockIndex(const TwinFrame& f, int c, uint32_t bx, uint32_t by) {
  return f.comp[c].block_offset + by * f.comp[c].blocks_w + bx;
}

// Decodes MCUs [first_mcu, first_mcu + count) from data[0, size), the DC predictors starting at zero
// (the start of the scan or of a restart interval). With check_restarts, restart markers are expected
// (and verified) after every restart_interval MCUs, as in one sequential pass over the whole scan; for
// an interval decoded on its own, data is exactly that interval's bytes. coef holds
// f.total_blocks * 64 coefficients. Returns a TwinReason.
DSC_HD int DecodeEntropy(const TwinFrame& f, const TwinTables& t, const uint8_t* data, size_t size,
                         uint32_t first_mcu, uint32_t count, bool check_restarts, int16_t* coef) {
  if (first_mcu > f.total_mcus() || count > f.total_mcus() - first_mcu) return kReasonBadRestart;
  TwinBits b;
  TwinBitsInit(&b, data, data + size);
  int pred[3] = {0, 0, 0};
  uint32_t restart_number = 0;
  for (uint32_t i = 0; i < count; ++i) {
    if (check_restarts && f.restart_interval && i && i % f.restart_interval == 0) {
      // The rest of the byte is padding; then exactly the next RSTn marker.
      if (b.nbits - b.pad >= 8) return kReasonBadRestart;
      TwinFill(&b);  // runs up to the marker (the interval's data is at most 7 bits from it)
      if (b.nbits - b.pad >= 8 || b.p + 1 >= b.end || b.p[0] != 0xFF) return kReasonBadRestart;
      const uint8_t* q = b.p + 1;
      while (q < b.end && *q == 0xFF) ++q;
      if (q >= b.end || *q != 0xD0 + (restart_number & 7)) return kReasonBadRestart;
      ++restart_number;
      TwinBitsInit(&b, q + 1, b.end);
      pred[0] = pred[1] = pred[2] = 0;
    }
    const uint32_t mcu = first_mcu + i;
    const uint32_t mx = mcu % f.mcus_x, my = mcu / f.mcus_x;
    for (int sc = 0; sc < f.ncomp; ++sc) {
      const int c = f.scan_order[sc];
      const TwinComponent& k = f.comp[c];
      for (int v = 0; v < k.v; ++v)
        for (int h = 0; h < k.h; ++h) {
          const uint32_t blk = TwinBlockIndex(f, c, mx * k.h + h, my * k.v + v);
          if (blk >= f.total_blocks) return kReasonBadMarker;
          const int r = TwinDecodeBlock(&b, t.dc[k.dc], t.ac[k.ac], &pred[c], coef + size_t(blk) * 64);
          if (r) return r;
        }
    }
  }
  // After the last MCU only padding bits may remain before the marker (or the unit's end). A whole
  // byte more is corrupt data: libjpeg warns "extraneous bytes before marker", an error in the CPU
  // loader, and decoding it as an image would hand garbage to training. (libjpeg misses a byte or
  // two it has already buffered; the twin is that much stricter.)
  TwinFill(&b);
  if (!b.stopped || b.nbits - b.pad >= 8) return kReasonBadRestart;
  return kReasonNone;
}

// ---- IDCT (libjpeg's jidctint.c "islow" arithmetic) ------------------------------------------------

// libjpeg's post-IDCT range limit: the sample is (x + 128) clamped to 0..255 for x in [-512, 511] (the
// table wraps modulo 1024 beyond; the SIMD version saturates instead, so such values are flagged).
DSC_HD uint8_t TwinRangeLimit(int32_t x, bool* flag) {
  if (x < -512 || x > 511) *flag = true;
  const int i = int(x & 1023);
  return uint8_t(i < 128 ? i + 128 : i < 512 ? 255 : i < 896 ? 0 : i - 896);
}

// One 8-point pass of the LL&M IDCT as jidctint.c computes it (13-bit constants), with the descale
// (add `round`, shift right). T is int64_t (libjpeg's JLONG) or, when every input is at most
// kTwinIdct32Max in magnitude (no intermediate can then pass 2^31), int32_t: the same exact integers.
constexpr int32_t kTwinIdct32Max = 12000;
template <typename T>
DSC_HD void TwinIdct8(const T* in, T round, int shift, T* out) {
  const T c0298 = 2446, c0390 = 3196, c0541 = 4433, c0765 = 6270, c0899 = 7373, c1175 = 9633, c1501 = 12299,
          c1847 = 15137, c1961 = 16069, c2053 = 16819, c2562 = 20995, c3072 = 25172;
  // Even part.
  T z2 = in[2], z3 = in[6];
  T z1 = (z2 + z3) * c0541;
  T t2 = z1 - z3 * c1847;
  T t3 = z1 + z2 * c0765;
  z2 = in[0];
  z3 = in[4];
  T t0 = (z2 + z3) * 8192, t1 = (z2 - z3) * 8192;
  const T e10 = t0 + t3, e13 = t0 - t3, e11 = t1 + t2, e12 = t1 - t2;
  // Odd part.
  t0 = in[7];
  t1 = in[5];
  t2 = in[3];
  t3 = in[1];
  z1 = t0 + t3;
  z2 = t1 + t2;
  z3 = t0 + t2;
  T z4 = t1 + t3;
  const T z5 = (z3 + z4) * c1175;
  t0 *= c0298;
  t1 *= c2053;
  t2 *= c3072;
  t3 *= c1501;
  z1 *= -c0899;
  z2 *= -c2562;
  z3 = z3 * -c1961 + z5;
  z4 = z4 * -c0390 + z5;
  t0 += z1 + z3;
  t1 += z2 + z4;
  t2 += z2 + z3;
  t3 += z1 + z4;
  out[0] = (e10 + t3 + round) >> shift;
  out[7] = (e10 - t3 + round) >> shift;
  out[1] = (e11 + t2 + round) >> shift;
  out[6] = (e11 - t2 + round) >> shift;
  out[2] = (e12 + t1 + round) >> shift;
  out[5] = (e12 - t1 + round) >> shift;
  out[3] = (e13 + t0 + round) >> shift;
  out[4] = (e13 - t0 + round) >> shift;
}

// One pass over 8 values in[0..7] (stride apart), in 32-bit arithmetic when that is exact.
DSC_HD void TwinIdctPass(const int32_t* in, int round_bits, int shift, int32_t* out) {
  bool small = true;
  for (int i = 0; i < 8; ++i) small = small && in[i] >= -kTwinIdct32Max && in[i] <= kTwinIdct32Max;
  if (small) {
    TwinIdct8<int32_t>(in, int32_t(1) << round_bits, shift, out);
  } else {
    int64_t a[8], o[8];
    for (int i = 0; i < 8; ++i) a[i] = in[i];
    TwinIdct8<int64_t>(a, int64_t(1) << round_bits, shift, o);
    // Out of int32 only for inputs far outside 16 bits, which are flagged anyway.
    for (int i = 0; i < 8; ++i) out[i] = int32_t(o[i] < -(int64_t(1) << 30) ? -(int64_t(1) << 30) : o[i] > (int64_t(1) << 30) ? (int64_t(1) << 30) : o[i]);
  }
}

// Dequantises and inverse-transforms one block into 8 rows of 8 samples `stride` bytes apart. Returns
// kReasonIdctRange when the block holds values on which libjpeg's C and SIMD IDCTs differ (a
// dequantised coefficient or a first-pass value outside 16 bits, or an output far outside 0..255:
// corrupt or adversarial data), kReasonNone otherwise.
DSC_HD int IdctBlock(const int16_t* blk, const uint16_t* quant, uint8_t* out, size_t stride) {
  constexpr int kConstBits = 13, kPass1Bits = 2;
  int32_t ws[64];
  bool flag = false;
  for (int col = 0; col < 8; ++col) {
    int32_t in[8], o[8];
    for (int r = 0; r < 8; ++r) {
      in[r] = int32_t(blk[r * 8 + col]) * int32_t(quant[r * 8 + col]);
      if (in[r] < -32768 || in[r] > 32767) flag = true;
    }
    TwinIdctPass(in, kConstBits - kPass1Bits - 1, kConstBits - kPass1Bits, o);
    for (int r = 0; r < 8; ++r) {
      if (o[r] < -32768 || o[r] > 32767) flag = true;
      ws[r * 8 + col] = o[r];
    }
  }
  constexpr int kShift2 = kConstBits + kPass1Bits + 3;
  for (int row = 0; row < 8; ++row) {
    int32_t o[8];
    TwinIdctPass(ws + row * 8, kShift2 - 1, kShift2, o);
    for (int c = 0; c < 8; ++c) out[row * stride + c] = TwinRangeLimit(o[c], &flag);
  }
  return flag ? kReasonIdctRange : kReasonNone;
}

// ---- Upsampling and colour ------------------------------------------------------------------------

// Component planes after the IDCT: plane c starts at planes + f.comp[c].block_offset * 64 and is
// blocks_w * 8 samples wide. Its samples are whole blocks, so the image's padding is readable.
DSC_HD size_t TwinPlaneStride(const TwinFrame& f, int c) { return size_t(f.comp[c].blocks_w) * 8; }
DSC_HD size_t TwinPlaneBytes(const TwinFrame& f) { return size_t(f.total_blocks) * 64; }
// Where block (bx, by) of component c writes its 8x8 samples.
DSC_HD uint8_t* TwinBlockOut(const TwinFrame& f, uint8_t* planes, int c, uint32_t bx, uint32_t by) {
  return planes + size_t(f.comp[c].block_offset) * 64 + size_t(by) * 8 * TwinPlaneStride(f, c) + size_t(bx) * 8;
}
// Block number b (0 .. total_blocks) -> its component and grid position.
DSC_HD void TwinBlockPosition(const TwinFrame& f, uint32_t b, int* c, uint32_t* bx, uint32_t* by) {
  int k = 0;
  while (k + 1 < f.ncomp && b >= f.comp[k + 1].block_offset) ++k;
  const uint32_t i = b - f.comp[k].block_offset;
  *c = k;
  *bx = i % f.comp[k].blocks_w;
  *by = i / f.comp[k].blocks_w;
}

// Component c's sample for output pixel (x, y). Box upsampling: the sample covering the pixel (as
// libjpeg-turbo's fast upsampling and its merged h2v1/h2v2 upsampler give). Fancy (k.fancy): libjpeg's
// triangle filter, 3/4 of the nearer sample and 1/4 of the next, per direction, with its rounding
// biases and its edges: the first and last sample columns of the component's downsampled width, and
// rows beyond the first and last, repeat (jdsample.c h2v1/h1v2/h2v2_fancy_upsample). The frame's
// width and height give those edges; a crop frame's inner edges are off by that rule, so a crop
// decodes one interval of margin around what it uses (PlanTwinCrop).
DSC_HD int TwinSample(const TwinFrame& f, const uint8_t* planes, int c, uint32_t x, uint32_t y) {
  const TwinComponent& k = f.comp[c];
  const uint8_t* p = planes + size_t(k.block_offset) * 64;
  const size_t stride = TwinPlaneStride(f, c);
  const int cx = int(x >> k.hshift), cy = int(y >> k.vshift);
  if (!k.fancy) return p[size_t(cy) * stride + size_t(cx)];
  const int dw = (int(f.width) * k.h + f.hmax - 1) / f.hmax, dh = (int(f.height) * k.v + f.vmax - 1) / f.vmax;
  // The other row: above for the first of the two output rows, below for the second.
  const int ny = !k.vshift ? cy : (y & 1) ? (cy + 1 < dh ? cy + 1 : dh - 1) : (cy > 0 ? cy - 1 : 0);
  const uint8_t* r0 = p + size_t(cy) * stride;
  const uint8_t* r1 = p + size_t(ny) * stride;
  if (!k.hshift) return (3 * r0[cx] + r1[cx] + ((y & 1) ? 2 : 1)) >> 2;  // h1v2
  if (!k.vshift) {                                                      // h2v1
    if (!(x & 1)) return cx == 0 ? r0[0] : (3 * r0[cx] + r0[cx - 1] + 1) >> 2;
    return cx == dw - 1 ? r0[cx] : (3 * r0[cx] + r0[cx + 1] + 2) >> 2;
  }
  const int sum = 3 * r0[cx] + r1[cx];  // h2v2: column sums of the two rows, then across
  if (!(x & 1)) return cx == 0 ? (sum * 4 + 8) >> 4 : (3 * sum + 3 * r0[cx - 1] + r1[cx - 1] + 8) >> 4;
  return cx == dw - 1 ? (sum * 4 + 7) >> 4 : (3 * sum + 3 * r0[cx + 1] + r1[cx + 1] + 7) >> 4;
}

// One output pixel: each component's sample (TwinSample) and libjpeg's YCbCr -> RGB.
DSC_HD void TwinPixel(const TwinFrame& f, const uint8_t* planes, uint32_t x, uint32_t y, uint8_t* rgb) {
  int s[3];
  for (int c = 0; c < f.ncomp; ++c) s[c] = TwinSample(f, planes, c, x, y);
  if (f.ncomp == 1) {
    rgb[0] = rgb[1] = rgb[2] = uint8_t(s[0]);
  } else {
    YccToRgb(s[0], s[1], s[2], rgb, rgb + 1, rgb + 2);
  }
}

// ---- Host side -------------------------------------------------------------------------------------

// Where an image's entropy-coded data lies and how it splits into restart intervals.
struct TwinScan {
  const uint8_t* data = nullptr;  // first entropy byte (inside the piece holding the scan)
  size_t size = 0;                // up to the marker ending the scan
  // Byte offsets (from data) where each decode unit starts and ends (end excludes the RST marker).
  // unit_begin/unit_end have frame.intervals entries.
  uint32_t* unit_begin = nullptr;
  uint32_t* unit_end = nullptr;
  // Set by the caller: the scan stops once this unit's end is found (a crop needs no later interval,
  // and, like the CPU path's interval assembly, does not check them); `size` then ends there.
  uint32_t last_unit = ~uint32_t(0);
  // Set by the caller: the scan's first byte is found and nothing of it read (a crop is planned from
  // the header alone; its intervals are found, and checked, when it is staged).
  bool header_only = false;
  // Set by the caller: bounds from the interval index are taken from its lengths alone, without reading
  // the entropy bytes (only the last interval's end is checked, against the segment). The caller reads
  // only the intervals it uses and checks those: TwinIndexedIntervalOk. (A crop of a photo needs a
  // fraction of its bytes; checking every marker streamed the rest from memory.)
  bool trust_index = false;
  // Set by the caller: the index is ignored and the bytes scanned (after TwinIndexedIntervalOk failed).
  bool ignore_index = false;
  // Set by the scan: the bounds came from the payload's interval index (no marker search).
  bool indexed = false;
};

// Whether interval k (of n) of a scan bounded by the index ends on its RSTn, FF D0+(k mod 8); the last
// one's end was checked by the scan. The scan's bytes from unit_end[k] on must be readable.
inline bool TwinIndexedIntervalOk(const TwinScan& s, uint32_t k, uint32_t n) {
  return k + 1 == n || (s.data[s.unit_end[k]] == 0xFF && s.data[s.unit_end[k] + 1] == 0xD0 + (k & 7));
}

struct TwinParseResult {
  int status = kTwinOk;
  int reason = kReasonNone;
  size_t offset = 0;  // byte offset of the problem in the (concatenated) stream
};

// Parses a JPEG stored as head + body (head may be empty; dsc's shared-table payloads keep the table
// set in head: see reader/dataset.h ReadPayloadParts). Fills the frame and tables (with tables ==
// nullptr the tables are only validated, as a support check needs), and the scan's location: the
// entropy data must lie in one piece. `max_units` bounds the interval arrays.
// With `copy`, the scan's entropy bytes are also copied there (in the same pass; room for the body
// size is needed), as the batch stager does.
TwinParseResult ParseTwin(const uint8_t* head, size_t head_size, const uint8_t* body, size_t body_size,
                          TwinFrame* frame, TwinTables* tables, TwinScan* scan, uint32_t max_units,
                          uint8_t* copy = nullptr);

// The second half of ParseTwin: finds the scan's restart intervals in piece[start, piece_size) and checks
// that EOI follows. `base` is the piece's offset in the payload (for error offsets). A caller that has
// parsed a shared head once reuses its frame and tables and runs only this on each body.
TwinParseResult ScanTwinEntropy(const TwinFrame& f, const uint8_t* piece, size_t piece_size, size_t start,
                                size_t base, TwinScan* scan, uint8_t* copy = nullptr);

// The positions p in d[i, e) with d[p] == 0xFF and p + 1 == n or d[p + 1] != 0x00 (a marker's first
// byte or a fill byte; a stuffed 0xFF 0x00 is not listed), ascending, into out, which must hold
// e - i + 2 entries; returns their number. e <= n <= 2^32 - 1; d[e, n) is only looked at for the byte
// after e - 1. FindTwinMarkers picks the AVX-512, AVX2 or scalar version (kernels/cpu.h); all three
// give the same list.
size_t FindTwinMarkers(const uint8_t* d, size_t i, size_t e, size_t n, uint32_t* out);
size_t FindTwinMarkersScalar(const uint8_t* d, size_t i, size_t e, size_t n, uint32_t* out);
// How far ahead the SIMD finders (and the index walk) prefetch: a page, because the hardware prefetcher
// stops at 4 KiB page edges and a payload streams from memory (further ahead gains nothing).
inline constexpr size_t kTwinMarkerPrefetch = 4096;

// memcpy for the stager's payload bytes and arrays: vector loads and stores, the destination prefetched
// for writing a page ahead. glibc's memcpy takes `rep movsb` for copies of a few KiB and up, which is
// slower for the stager's payload-sized copies. Host only.
void TwinCopy(uint8_t* dst, const uint8_t* src, size_t n);

// ---- The interval index (docs/format.md "Restart-indexed JPEG payloads") ---------------------------
// dsc build ends a restart-marked payload with an APP15 segment, right before EOI: "DSCIDX\0", a version
// byte (1), then each restart interval's entropy-coded length in bytes (u16, little-endian), markers
// excluded. ScanTwinEntropy takes interval bounds from it instead of scanning for markers, after checking
// that each bound lands on its RSTn, or with TwinScan::trust_index leaves that check to the caller, for
// the intervals it uses (a segment that does not fit is ignored and the bytes are scanned).
// Decoders that do not know it skip it as any APPn.
constexpr uint8_t kTwinIndexMarker = 0xEF;  // APP15
constexpr uint8_t kTwinIndexId[8] = {'D', 'S', 'C', 'I', 'D', 'X', 0, 1};
constexpr uint32_t kTwinIndexMaxIntervals = (65535 - 2 - 8) / 2;  // a segment's length field is 16 bits
// The segment's bytes for n intervals, marker and length included.
constexpr size_t TwinIndexSegmentSize(uint32_t n) { return 2 + 2 + 8 + 2 * size_t(n); }

// Inserts the segment before the final EOI of a whole JPEG when the twin parses it and it has 2 to
// kTwinIndexMaxIntervals restart intervals, each under 64 KiB, each marker right after its data (no
// fill bytes), and EOI right after the last; returns whether it did (false leaves *jpeg as it was).
bool AddTwinIntervalIndex(std::vector<uint8_t>* jpeg);
// The first length's byte when piece[start, piece_size) (entropy data from its first byte to the
// payload's end) ends with the segment for n intervals and then EOI; else nullptr.
const uint8_t* FindTwinIntervalIndex(const uint8_t* piece, size_t piece_size, size_t start, uint32_t n);

// Sets which components the decode upsamples with libjpeg's fancy filter when `fancy` (TurboJPEG
// without TJFLAG_FASTUPSAMPLE): as libjpeg-turbo chooses, the h2v1 and h2v2 components of an image whose
// downsampled width exceeds 2, and h1v2 ones. Call on the whole image's frame (a crop frame copies it).
void TwinSetFancy(TwinFrame* f, bool fancy);

// Host twin of the whole GPU decode: *rgb receives height x width x 3 bytes. `split`: every restart
// interval decoded on its own (as the GPU's threads do) instead of one sequential pass. Host only
// (allocates its scratch).
TwinParseResult DecodeTwinRGB(const uint8_t* head, size_t head_size, const uint8_t* body, size_t body_size,
                              bool split, std::vector<uint8_t>* rgb, int* width, int* height, bool fancy = false);

}  // namespace dsc::kernels
