// Opening an FFCV .beton file (format/ffcv.h): header, descriptors, metadata and allocation tables, the
// loader's view of it (its typed fields read and checked as the loader reads them) and the full
// structural verify.
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
    // Its other fields through the typed-field accessors, read and checked as the loader reads them.
    std::vector<uint8_t> scratch;
    const auto& fields = v->meta().fields;
    for (uint64_t i = 0; v->typed() && i < v->sample_count() && i < 64; ++i) {
      for (size_t k = 0; k < fields.size(); ++k) {
        if (dsc::format::IsFixedField(fields[k].type)) {
          const uint8_t* p = v->FixedValue(k, i, &scratch);
          (void)v->ReadValueProblem(k, i, p, v->layout().width[k]);
        } else if (dsc::format::IsVarField(fields[k].type)) {
          const auto r = v->VarValue(k, i);
          const uint8_t* p = r.size ? src.Read(r.offset, r.size, &scratch) : nullptr;
          (void)v->ReadValueProblem(k, i, p, r.size);
        }
      }
    }
  } catch (const dsc::Error&) {
  }
  (void)dsc::format::ffcv::Verify(src);
  return 0;
}
