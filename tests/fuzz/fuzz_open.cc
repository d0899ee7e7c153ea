// Opening a dsc file: header, footer, sections, meta, block table, index; then the full verify.
#include <vector>

#include "format/byte_source.h"
#include "format/error.h"
#include "format/file_view.h"
#include "tests/fuzz/fuzz_targets.h"

DSC_FUZZ_TARGET {
  dsc::format::MemorySource src("fuzz.beton", data, size);
  try {
    auto v = dsc::format::FileView::Open(&src);
    for (uint64_t i = 0; i < v->sample_count() && i < 1000; ++i) (void)v->entry(i);
    // Typed fields (format 1.2): every accessor on every sample stays inside what open validated.
    std::vector<uint8_t> scratch;
    uint64_t sum = 0;
    for (uint64_t i = 0; v->typed() && i < v->sample_count() && i < 1000; ++i) {
      for (int f : v->layout().fixed) sum += v->FixedValue(size_t(f), i)[0];
      for (int f : v->layout().var) {
        const auto r = v->VarValue(size_t(f), i);
        if (r.size) sum += src.Read(r.offset, r.size, &scratch)[r.size - 1];
      }
    }
    (void)sum;
    (void)v->Extents();
  } catch (const dsc::Error&) {
  }
  (void)dsc::format::VerifyFile(src);
  return 0;
}
