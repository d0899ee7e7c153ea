#include "format/optional.h"

#include "format/bytes.h"
#include "format/error.h"

namespace dsc::format {

std::string OptionalSectionName(uint32_t id) {
  if (id == kRestartSection) return "restart";
  if (id == kColumnsSectionId) return "columns";
  if (id == kVarSizesSectionId) return "varsizes";
  return "optional-" + std::to_string(id);
}

namespace {
constexpr size_t kRestartFixed = 64;  // bytes before the interval list
constexpr size_t kIntervalBytes = 16;
}  // namespace

std::string EncodeRestartStats(const RestartStats& s) {
  le::Appender a;
  a.u32(s.mode);
  a.u32(s.target);
  a.u64(s.min_mcus);
  a.u64(s.images);
  a.u64(s.transcoded);
  a.u64(s.reencoded);
  a.u64(s.whole_row);
  a.u64(s.untouched);
  a.u32(uint32_t(s.intervals.size()));
  a.u32(0);
  for (const auto& i : s.intervals) {
    a.u32(i.mcus);
    a.u32(0);
    a.u64(i.images);
  }
  return a.bytes();
}

RestartStats DecodeRestartStats(const uint8_t* p, size_t n) {
  if (n < kRestartFixed) throw Error("section too short (" + std::to_string(n) + " bytes)");
  RestartStats s;
  s.mode = le::get32(p);
  s.target = le::get32(p + 4);
  s.min_mcus = le::get64(p + 8);
  s.images = le::get64(p + 16);
  s.transcoded = le::get64(p + 24);
  s.reencoded = le::get64(p + 32);
  s.whole_row = le::get64(p + 40);
  s.untouched = le::get64(p + 48);
  const uint32_t count = le::get32(p + 56);
  if (s.mode != RestartStats::kAuto && s.mode != RestartStats::kFixed) throw Error("unknown mode " + std::to_string(s.mode));
  if (le::get32(p + 60) != 0) throw Error("reserved bytes not zero");
  if (uint64_t(count) * kIntervalBytes != n - kRestartFixed)
    throw Error(std::to_string(count) + " intervals do not fill the section's " + std::to_string(n) + " bytes");
  uint64_t sum = 0;
  for (uint32_t k = 0; k < count; ++k) {
    const uint8_t* e = p + kRestartFixed + kIntervalBytes * k;
    RestartStats::Interval i{le::get32(e), le::get64(e + 8)};
    if (le::get32(e + 4) != 0) throw Error("interval " + std::to_string(k) + ": reserved bytes not zero");
    if (i.mcus == 0 || i.images == 0 || (k > 0 && i.mcus <= s.intervals.back().mcus))
      throw Error("interval " + std::to_string(k) + " is zero or out of order");
    sum += i.images;
    s.intervals.push_back(i);
  }
  if (sum != s.images || s.transcoded > s.images || s.reencoded != s.images - s.transcoded || s.whole_row > s.images)
    throw Error("image counts disagree");
  return s;
}

}  // namespace dsc::format
