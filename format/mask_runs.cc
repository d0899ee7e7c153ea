#include "format/mask_runs.h"

#include <cstring>

#include "format/bytes.h"

namespace dsc::format {

bool IsMaskRuns(const uint8_t* v, size_t size) {
  return size >= kMaskRunsHeader && std::memcmp(v, kMaskRunsMagic, 4) == 0;
}

bool MaskRunsSize(const uint8_t* v, size_t size, uint32_t* width, uint32_t* height) {
  if (!IsMaskRuns(v, size)) return false;
  *width = le::get16(v + 4);
  *height = le::get16(v + 6);
  return true;
}

std::string WalkMaskRuns(const uint8_t* v, size_t size, int channels, uint8_t* pixels) {
  if (!IsMaskRuns(v, size)) return "not a run stream";
  const uint32_t w = le::get16(v + 4), h = le::get16(v + 6);
  if (w == 0 || h == 0) return "runs of a " + std::to_string(w) + "x" + std::to_string(h) + " mask";
  if (v[8] != channels) return "runs of " + std::to_string(v[8]) + " channels for a " + std::to_string(channels) + "-channel mask";
  if (v[9] || v[10] || v[11]) return "runs header: reserved bytes are not zero";
  const size_t ch = size_t(channels);
  size_t at = kMaskRunsHeader;
  for (uint32_t y = 0; y < h; ++y) {
    uint8_t* row = pixels ? pixels + size_t(y) * w * ch : nullptr;
    for (uint32_t x = 0; x < w;) {
      // ULEB128 of length - 1: at most 3 bytes, as a row is at most 65535 pixels.
      uint32_t n = 0;
      int shift = 0;
      for (;; shift += 7) {
        if (at >= size) return "runs: row " + std::to_string(y) + " ends early at byte " + std::to_string(at);
        if (shift > 14) return "runs: row " + std::to_string(y) + ": a run length of more than 3 bytes at byte " + std::to_string(at);
        const uint8_t b = v[at++];
        n |= uint32_t(b & 0x7f) << shift;
        if (!(b & 0x80)) break;
      }
      const uint32_t len = n + 1;
      if (len > w - x)
        return "runs: row " + std::to_string(y) + ": a run of " + std::to_string(len) + " past the row's end at byte " + std::to_string(at);
      if (size - at < ch) return "runs: row " + std::to_string(y) + " ends early at byte " + std::to_string(at);
      if (row) {
        uint8_t* p = row + size_t(x) * ch;
        if (ch == 1) {
          std::memset(p, v[at], len);
        } else {
          for (uint32_t i = 0; i < len; ++i, p += ch) std::memcpy(p, v + at, ch);
        }
      }
      at += ch;
      x += len;
    }
  }
  if (at != size) return "runs: " + std::to_string(size - at) + " bytes after the last row";
  return "";
}

void EncodeMaskRuns(const uint8_t* pixels, uint32_t width, uint32_t height, int channels, size_t stride,
                    std::vector<uint8_t>* out) {
  const size_t ch = size_t(channels);
  out->assign(kMaskRunsHeader, 0);
  std::memcpy(out->data(), kMaskRunsMagic, 4);
  le::put16(out->data() + 4, uint16_t(width));
  le::put16(out->data() + 6, uint16_t(height));
  (*out)[8] = uint8_t(channels);
  for (uint32_t y = 0; y < height; ++y) {
    const uint8_t* row = pixels + size_t(y) * stride;
    for (uint32_t x = 0; x < width;) {
      uint32_t len = 1;
      while (x + len < width && std::memcmp(row + size_t(x + len) * ch, row + size_t(x) * ch, ch) == 0) ++len;
      for (uint32_t n = len - 1;; n >>= 7) {
        if (n < 0x80) {
          out->push_back(uint8_t(n));
          break;
        }
        out->push_back(uint8_t(0x80 | (n & 0x7f)));
      }
      out->insert(out->end(), row + size_t(x) * ch, row + size_t(x) * ch + ch);
      x += len;
    }
  }
}

}  // namespace dsc::format
