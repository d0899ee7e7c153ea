#include "tools/verify_twin.h"

#include <turbojpeg.h>

#include <cstdio>
#include <utility>

#include "format/error.h"
#include "format/layout.h"
#include "kernels/jpeg_twin.h"

namespace dsc::tools {

TwinCheck::TwinCheck(std::string file, bool fancy) : file_(std::move(file)), fancy_(fancy), tj_(tjInitDecompress()) {
  if (!tj_) throw Error(file_ + ": cannot start libjpeg-turbo for the gpu-twin check");
}

TwinCheck::~TwinCheck() { tjDestroy(tj_); }

void TwinCheck::Check(const Dataset& ds, uint64_t i) {
  const auto parts = ds.ReadPayloadParts(i, &scratch_);
  if (format::Encoding(parts.entry.encoding) != format::Encoding::kJpeg) {
    ++other_;
    return;
  }
  const std::string sample = file_ + ": sample " + std::to_string(i) + ": ";
  int w = 0, h = 0;
  const kernels::TwinParseResult r =
      kernels::DecodeTwinRGB(parts.head.data, parts.head.size, parts.body.data, parts.body.size, false, &twin_, &w, &h, fancy_);
  if (r.status == kernels::kTwinUnsupported) {
    ++unsupported_[kernels::TwinReasonName(r.reason)];
    return;
  }
  if (r.status == kernels::kTwinCorrupt) {
    lines_.push_back(sample + "corrupt for the twin (" + kernels::TwinReasonName(r.reason) + " at byte " +
                        std::to_string(r.offset) + ")");
    ++corrupt_;
    return;
  }
  ++supported_;
  whole_.assign(parts.head.data, parts.head.data + parts.head.size);
  whole_.insert(whole_.end(), parts.body.data, parts.body.data + parts.body.size);
  ref_.assign(twin_.size(), 0);
  const bool decoded = tjDecompress2(tj_, whole_.data(), whole_.size(), ref_.data(), w, 0, h, TJPF_RGB,
                                     (fancy_ ? 0 : TJFLAG_FASTUPSAMPLE) | TJFLAG_ACCURATEDCT) == 0;
  if (decoded && ref_ == twin_) return;
  ++mismatches_;
  if (!decoded) {
    lines_.push_back(sample + "MISMATCH: the twin decodes it, libjpeg-turbo reports " + tjGetErrorStr2(tj_));
    return;
  }
  size_t at = 0;
  while (ref_[at] == twin_[at]) ++at;
  lines_.push_back(sample + "MISMATCH at pixel (" + std::to_string(at / 3 % size_t(w)) + ", " +
                      std::to_string(at / 3 / size_t(w)) + ") channel " + std::to_string(at % 3) + ": twin " +
                      std::to_string(twin_[at]) + ", libjpeg-turbo " + std::to_string(ref_[at]));
}

void TwinCheck::Print() const {
  for (const std::string& line : lines_) std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
  std::printf("%s: gpu-twin: %zu supported (%zu equal to libjpeg-turbo, %zu mismatching), %zu corrupt, %zu not JPEG",
              file_.c_str(), supported_, supported_ - mismatches_, mismatches_, corrupt_, other_);
  size_t n = 0;
  for (const auto& [reason, count] : unsupported_) n += count;
  std::printf(", %zu unsupported%s", n, n ? " (" : "");
  bool first = true;
  for (const auto& [reason, count] : unsupported_) {
    std::printf("%s%s: %zu", first ? "" : ", ", reason.c_str(), count);
    first = false;
  }
  std::printf("%s\n", n ? ")" : "");
}

}  // namespace dsc::tools
