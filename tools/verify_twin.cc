// `dsc verify --decode --decoder gpu-twin`: the GPU JPEG decoder's host twin (kernels/jpeg_twin.h)
// against libjpeg-turbo (tjDecompress2, TJPF_RGB, ACCURATEDCT, and FASTUPSAMPLE unless `fancy`) on every
// JPEG sample.
#include <turbojpeg.h>

#include <cstdio>
#include <map>
#include <vector>

#include "format/layout.h"
#include "kernels/jpeg_twin.h"
#include "reader/dataset.h"
#include "tools/commands.h"

namespace dsc::tools {

int VerifyGpuTwin(const Dataset& ds, const std::string& file, bool fancy) {
  tjhandle tj = tjInitDecompress();
  std::vector<uint8_t> scratch, whole, ref, twin;
  size_t supported = 0, mismatches = 0, corrupt = 0, other = 0;
  std::map<std::string, size_t> unsupported;
  for (uint64_t i = 0; i < ds.size(); ++i) {
    const auto parts = ds.ReadPayloadParts(i, &scratch);
    if (format::Encoding(parts.entry.encoding) != format::Encoding::kJpeg) {
      ++other;
      continue;
    }
    int w = 0, h = 0;
    const kernels::TwinParseResult r =
        kernels::DecodeTwinRGB(parts.head.data, parts.head.size, parts.body.data, parts.body.size, false, &twin, &w, &h, fancy);
    if (r.status == kernels::kTwinUnsupported) {
      ++unsupported[kernels::TwinReasonName(r.reason)];
      continue;
    }
    if (r.status == kernels::kTwinCorrupt) {
      std::fprintf(stderr, "%s: sample %llu: corrupt for the twin (%s at byte %zu)\n", file.c_str(),
                   (unsigned long long)i, kernels::TwinReasonName(r.reason), r.offset);
      ++corrupt;
      continue;
    }
    ++supported;
    whole.assign(parts.head.data, parts.head.data + parts.head.size);
    whole.insert(whole.end(), parts.body.data, parts.body.data + parts.body.size);
    ref.assign(twin.size(), 0);
    const bool ok = tjDecompress2(tj, whole.data(), whole.size(), ref.data(), w, 0, h, TJPF_RGB,
                                  (fancy ? 0 : TJFLAG_FASTUPSAMPLE) | TJFLAG_ACCURATEDCT) == 0;
    if (!ok || ref != twin) {
      size_t at = 0;
      while (ok && at < ref.size() && ref[at] == twin[at]) ++at;
      if (ok)
        std::fprintf(stderr, "%s: sample %llu: MISMATCH at pixel (%zu, %zu) channel %zu: twin %d, libjpeg-turbo %d\n",
                     file.c_str(), (unsigned long long)i, at / 3 % size_t(w), at / 3 / size_t(w), at % 3, twin[at],
                     ref[at]);
      else
        std::fprintf(stderr, "%s: sample %llu: MISMATCH: the twin decodes it, libjpeg-turbo reports %s\n", file.c_str(),
                     (unsigned long long)i, tjGetErrorStr2(tj));
      ++mismatches;
    }
  }
  tjDestroy(tj);
  std::printf("%s: gpu-twin: %zu supported (%zu equal to libjpeg-turbo, %zu mismatching), %zu corrupt, %zu not JPEG",
              file.c_str(), supported, supported - mismatches, mismatches, corrupt, other);
  size_t n = 0;
  for (const auto& [reason, count] : unsupported) n += count;
  std::printf(", %zu unsupported%s", n, n ? " (" : "");
  bool first = true;
  for (const auto& [reason, count] : unsupported) {
    std::printf("%s%s: %zu", first ? "" : ", ", reason.c_str(), count);
    first = false;
  }
  std::printf("%s\n", n ? ")" : "");
  return mismatches ? kExitBad : kExitOk;
}

}  // namespace dsc::tools
