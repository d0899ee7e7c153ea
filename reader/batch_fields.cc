#include "reader/batch_fields.h"

#include <cstring>

#include "format/error.h"

namespace dsc {

std::vector<size_t> SelectFields(const format::FileView& v, const std::vector<std::string>& names) {
  const auto& fs = v.meta().fields;
  std::vector<size_t> out;
  if (names.empty()) {
    for (size_t f = 0; f < fs.size(); ++f)
      if (format::IsFixedField(fs[f].type) || format::IsVarField(fs[f].type)) out.push_back(f);
    return out;
  }
  for (const std::string& n : names) {
    size_t f = 0;
    while (f < fs.size() && fs[f].name != n) ++f;
    std::string have;
    for (const auto& x : fs)
      if (format::IsFixedField(x.type) || format::IsVarField(x.type)) have += (have.empty() ? "" : ", ") + x.name;
    if (f == fs.size() || !(format::IsFixedField(fs[f].type) || format::IsVarField(fs[f].type)))
      throw OptionError("fields: '" + n + "' is not a typed field of " + v.name() + " (it has: " + (have.empty() ? "none" : have) +
                        "; the image and labels come as Batch::images and ::labels)");
    for (size_t g : out)
      if (g == f) throw OptionError("fields: '" + n + "' named twice");
    out.push_back(f);
  }
  return out;
}

void FillFieldColumns(const format::FileView& v, const std::vector<size_t>& fields, uint32_t len, BatchBuffer* b) {
  const auto& fs = v.meta().fields;
  const auto& layout = v.layout();
  b->field_data.resize(fields.size());
  b->field_offsets.resize(fields.size());
  b->field_columns.resize(fields.size());
  std::vector<uint8_t> scratch;
  for (size_t k = 0; k < fields.size(); ++k) {
    const size_t f = fields[k];
    const format::Field& fd = fs[f];
    const size_t w = size_t(layout.width[f]);
    auto& data = b->field_data[k];
    auto& offsets = b->field_offsets[k];
    FieldColumn& c = b->field_columns[k];
    c.name = fd.name.c_str();
    c.type = uint8_t(fd.type);
    c.dtype = uint8_t(fd.dtype);
    c.shape = fd.dims.data();
    c.ndim = fd.dims.size();
    c.elem_bytes = w;
    if (format::IsFixedField(fd.type)) {
      data.resize(size_t(len) * w);
      for (uint32_t j = 0; j < len; ++j) std::memcpy(data.data() + size_t(j) * w, v.FixedValue(f, b->indices[j]), w);
      c.offsets = nullptr;
    } else {
      offsets.resize(size_t(len) + 1);
      uint64_t total = 0;
      for (uint32_t j = 0; j < len; ++j) {
        offsets[j] = total;
        total += v.VarValue(f, b->indices[j]).size;
      }
      offsets[len] = total;
      data.resize(size_t(total));
      for (uint32_t j = 0; j < len; ++j) {
        const auto r = v.VarValue(f, b->indices[j]);
        if (r.size) std::memcpy(data.data() + offsets[j], v.source().Read(r.offset, r.size, &scratch), r.size);
      }
      c.offsets = offsets.data();
    }
    c.data = data.data();
  }
}

}  // namespace dsc
