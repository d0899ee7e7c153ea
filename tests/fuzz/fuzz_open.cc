// Opening a dsc file: header, footer, sections, meta, block table, index; then the full verify.
#include "format/byte_source.h"
#include "format/error.h"
#include "format/file_view.h"
#include "tests/fuzz/fuzz_targets.h"

DSC_FUZZ_TARGET {
  dsc::format::MemorySource src("fuzz.beton", data, size);
  try {
    auto v = dsc::format::FileView::Open(&src);
    for (uint64_t i = 0; i < v->sample_count() && i < 1000; ++i) (void)v->entry(i);
    (void)v->Extents();
  } catch (const dsc::Error&) {
  }
  (void)dsc::format::VerifyFile(src);
  return 0;
}
