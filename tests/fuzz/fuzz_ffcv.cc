// Opening an FFCV .beton file (format/ffcv.h): header, descriptors, metadata and allocation tables, the
// loader's view of it and the full structural verify.
#include "format/byte_source.h"
#include "format/error.h"
#include "format/ffcv.h"
#include "format/file_view.h"
#include "tests/fuzz/fuzz_targets.h"

DSC_FUZZ_TARGET {
  dsc::format::MemorySource src("fuzz.beton", data, size);
  try {
    auto f = dsc::format::ffcv::File::Open(&src);
    for (uint64_t i = 0; i < f->sample_count() && i < 1000; ++i)
      for (size_t k = 0; k < f->fields().size(); ++k)
        if (f->fields()[k].variable()) (void)f->span(i, k);
    (void)dsc::format::ffcv::Extents(*f);
    auto v = dsc::format::ffcv::OpenView(&src);
    for (uint64_t i = 0; i < v->sample_count() && i < 1000; ++i) (void)v->entry(i);
  } catch (const dsc::Error&) {
  }
  (void)dsc::format::ffcv::Verify(src);
  return 0;
}
