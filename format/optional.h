// Optional sections (format 1.1, docs/format.md "Optional sections"): the ids this build knows and
// the content of each. A reader ignores ids it does not know, after checking their checksums.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dsc::format {

enum OptionalId : uint32_t {
  kRestartSection = 1,  // "restart": what the writer's restart markers did (RestartStats)
  // Typed fields (format 1.2, format/fields.h): required with incompat bit 0, refused without it.
  kColumnsSectionId = 2,   // "columns": the fixed-width fields' values
  kVarSizesSectionId = 3,  // "varsizes": each sample's variable-field lengths
};

// "restart" for known ids, "optional-ID" for the others: the name `dsc info` and `dsc verify` use.
std::string OptionalSectionName(uint32_t id);

// Section 1: restart markers added to JPEG payloads by the writer (`dsc build --restart-interval`).
// Readers need none of it to decode (every payload carries its own DRI marker); it says what was done.
struct RestartStats {
  enum Mode : uint32_t { kAuto = 0, kFixed = 1 };
  uint32_t mode = kAuto;
  uint32_t target = 0;       // auto: the target interval T in MCUs; fixed: N
  uint64_t min_mcus = 0;     // JPEGs of at most this many MCUs were left as they were
  uint64_t images = 0;       // JPEG payloads that carry restart markers
  uint64_t transcoded = 0;   // ... of which pass-through sources, transcoded losslessly
  uint64_t reencoded = 0;    // ... of which re-encoded (resize, crop, --reencode)
  uint64_t whole_row = 0;    // ... of which have whole-MCU-row intervals (vertical cropping only)
  uint64_t untouched = 0;    // JPEG payloads without markers (too small)
  struct Interval {
    uint32_t mcus = 0;       // restart interval in MCUs
    uint64_t images = 0;
  };
  std::vector<Interval> intervals;  // ascending by mcus; images sum to `images`
};

std::string EncodeRestartStats(const RestartStats& s);
// Throws dsc::Error describing the first inconsistency (the caller adds file and section names).
RestartStats DecodeRestartStats(const uint8_t* p, size_t n);

}  // namespace dsc::format
