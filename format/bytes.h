// Little-endian encoding helpers. The format is little-endian by definition (docs/format.md), so these
// spell the byte order out instead of relying on the host's.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

namespace dsc::le {

inline void put16(uint8_t* p, uint16_t v) { p[0] = uint8_t(v); p[1] = uint8_t(v >> 8); }
inline void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}
inline void put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}
inline uint16_t get16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
inline uint32_t get32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
inline uint64_t get64(const uint8_t* p) { return uint64_t(get32(p)) | uint64_t(get32(p + 4)) << 32; }

// Appends values to a growing byte string (used for the meta section).
class Appender {
 public:
  void u8(uint8_t v) { s_.push_back(char(v)); }
  void u32(uint32_t v) { uint8_t b[4]; put32(b, v); s_.append(reinterpret_cast<char*>(b), 4); }
  void u64(uint64_t v) { uint8_t b[8]; put64(b, v); s_.append(reinterpret_cast<char*>(b), 8); }
  void str(const std::string& v) { u32(uint32_t(v.size())); s_.append(v); }
  const std::string& bytes() const { return s_; }

 private:
  std::string s_;
};

}  // namespace dsc::le
