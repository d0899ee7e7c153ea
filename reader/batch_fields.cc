#include "reader/batch_fields.h"

#include <cstring>
#include <string>

#include "format/error.h"
#include "format/mask_runs.h"
#include "kernels/geometry.h"
#include "kernels/mask_codec.h"

namespace dsc {

std::vector<size_t> SelectFields(const format::FileView& v, const std::vector<std::string>& names, uint32_t image) {
  const auto& fs = v.meta().fields;
  std::vector<size_t> out;
  if (names.empty()) {
    for (size_t f = 0; f < fs.size(); ++f)
      if ((format::IsFixedField(fs[f].type) || format::IsVarField(fs[f].type)) && (image == 0 || fs[f].type != format::FieldType::kMask))
        out.push_back(f);
    return out;
  }
  for (const std::string& n : names) {
    size_t f = 0;
    while (f < fs.size() && fs[f].name != n) ++f;
    std::string have;
    for (const auto& x : fs)
      if (format::IsFixedField(x.type) || format::IsVarField(x.type)) have += (have.empty() ? "" : ", ") + x.name;
    if (f < fs.size() && fs[f].type == format::FieldType::kImage)
      throw OptionError("fields: '" + n + "' is an image field: a loader decodes one, chosen with image='" + n +
                        "' (one loader per image field, or dsc.Views in Python)");
    if (f < fs.size() && fs[f].type == format::FieldType::kMask && image != 0)
      throw OptionError("fields: mask '" + n + "' follows the first image '" + fs[0].name + "' only; this loader decodes '" +
                        fs[image].name + "'");
    if (f == fs.size() || !(format::IsFixedField(fs[f].type) || format::IsVarField(fs[f].type)))
      throw OptionError("fields: '" + n + "' is not a typed field of " + v.name() + " (it has: " + (have.empty() ? "none" : have) +
                        "; the image and labels come as Batch::images and ::labels)");
    for (size_t g : out)
      if (g == f) throw OptionError("fields: '" + n + "' named twice");
    out.push_back(f);
  }
  return out;
}

BoxGeometry SelectBoxes(const format::FileView& v, const std::vector<size_t>& fields, const std::vector<std::string>& names,
                        const kernels::AugmentSpec& spec, uint64_t seed) {
  BoxGeometry g;
  g.spec = spec;
  g.seed = seed;
  const auto& fs = v.meta().fields;
  for (size_t k = 0; k < fields.size(); ++k)
    if (fs[fields[k]].type == format::FieldType::kMask) g.masks.push_back(k);
  if (names.empty()) return g;
  for (size_t n = 0; n < names.size(); ++n) {
    size_t k = 0;
    while (k < fields.size() && fs[fields[k]].name != names[n]) ++k;
    if (k == fields.size())
      throw OptionError("boxes: '" + names[n] + "' is not a typed field the loader delivers (see fields=)");
    const format::Field& f = fs[fields[k]];
    if (n == 0) {
      if (f.type != format::FieldType::kVarArray || f.dtype != format::DType::kFloat32 || f.dims.size() != 1 || f.dims[0] != 4)
        throw OptionError("boxes: '" + f.name + "' must be a variable float32 array of boxes [N, 4] (x, y, w, h)");
      g.boxes = k;
    } else {
      if (!format::IsVarField(f.type) || f.type != format::FieldType::kVarArray)
        throw OptionError("boxes: '" + f.name + "' must be a variable array with one row per box");
      if (k == g.boxes) throw OptionError("boxes: '" + f.name + "' named twice");
      g.companions.push_back(k);
    }
  }
  return g;
}

void SelectPoints(const format::FileView& v, const std::vector<size_t>& fields, const std::vector<std::string>& names,
                  BoxGeometry* g) {
  const auto& fs = v.meta().fields;
  for (const std::string& n : names) {
    size_t k = 0;
    while (k < fields.size() && fs[fields[k]].name != n) ++k;
    if (k == fields.size()) throw OptionError("points: '" + n + "' is not a typed field the loader delivers (see fields=)");
    const format::Field& f = fs[fields[k]];
    const bool array = f.type == format::FieldType::kVarArray || f.type == format::FieldType::kArray;
    if (!array || f.dtype != format::DType::kFloat32 || f.dims.empty() || (f.dims.back() != 2 && f.dims.back() != 3))
      throw OptionError("points: '" + n + "' must be a float32 array whose last dimension is 2 (x, y) or 3 (x, y, v)");
    if (k == g->boxes) throw OptionError("points: '" + n + "' is the box field");
    for (size_t c : g->companions)
      if (c == k) throw OptionError("points: '" + n + "' is a companion of the boxes, which drop its rows");
    for (size_t q : g->points)
      if (q == k) throw OptionError("points: '" + n + "' named twice");
    g->points.push_back(k);
  }
}

namespace {

// Keeps, per sample, the rows `kept[j]` of a variable column (rows of `row` bytes), in place.
void KeepRows(const std::vector<std::vector<uint32_t>>& kept, size_t row, std::vector<uint8_t>* data,
              std::vector<uint64_t>* offsets) {
  uint64_t at = 0;
  const size_t len = kept.size();
  for (size_t j = 0; j < len; ++j) {
    const uint64_t start = (*offsets)[j];
    (*offsets)[j] = at;
    for (uint32_t r : kept[j]) {  // ascending, so each move is to or before its source
      std::memmove(data->data() + at, data->data() + start + uint64_t(r) * row, row);
      at += row;
    }
  }
  (*offsets)[len] = at;
  data->resize(size_t(at));
}

void ApplyGeometry(const format::FileView& v, const std::vector<size_t>& fields, uint32_t len, BatchBuffer* b,
                   const BoxGeometry& g, uint64_t epoch) {
  auto& boxes = b->field_data[g.boxes];
  auto& offsets = b->field_offsets[g.boxes];
  std::vector<std::vector<uint32_t>> kept(len);
  std::vector<float> mapped;
  for (uint32_t j = 0; j < len; ++j) {
    const uint64_t index = b->indices[j];
    const format::IndexEntry e = v.entry(index);
    const size_t n = size_t(offsets[j + 1] - offsets[j]) / 16;
    for (size_t c : g.companions) {
      const auto& co = b->field_offsets[c];
      const uint64_t bytes = co[j + 1] - co[j], row = b->field_columns[c].elem_bytes;
      if (row == 0 || bytes != n * row)
        throw Error(v.name() + ": sample " + std::to_string(index) + ": field '" + v.meta().fields[fields[c]].name +
                    "' has " + std::to_string(row ? bytes / row : 0) + " rows for " + std::to_string(n) + " boxes");
    }
    if (n == 0) continue;
    kernels::CropRect rect;
    kernels::SampleParams p;
    // The same draw the sample's image had (MakeParams is a pure function of seed, epoch and index).
    kernels::MakeParams(g.spec, e.width, e.height, g.seed, epoch, index, &rect, &p);
    const bool crop = g.spec.crop != kernels::CropMode::kNone;
    const int out_w = crop ? g.spec.out_w : e.width, out_h = crop ? g.spec.out_h : e.height;
    mapped.resize(4 * n);
    std::vector<uint32_t> idx(n);
    const float* in = reinterpret_cast<const float*>(boxes.data() + offsets[j]);
    const size_t m = kernels::TransformBoxes(p, out_w, out_h, in, n, mapped.data(), idx.data());
    std::memcpy(boxes.data() + offsets[j], mapped.data(), 16 * m);  // kept boxes first, in order
    kept[j].assign(idx.begin(), idx.begin() + long(m));
  }
  // The box column keeps its first m rows per sample (already mapped and packed); the others the kept ones.
  std::vector<std::vector<uint32_t>> first(len);
  for (uint32_t j = 0; j < len; ++j)
    for (uint32_t r = 0; r < kept[j].size(); ++r) first[j].push_back(r);
  KeepRows(first, 16, &boxes, &offsets);
  b->field_columns[g.boxes].data = boxes.data();
  for (size_t c : g.companions) {
    KeepRows(kept, b->field_columns[c].elem_bytes, &b->field_data[c], &b->field_offsets[c]);
    b->field_columns[c].data = b->field_data[c].data();
  }
}

// Maps point column k's points of every sample through the parameters its image was drawn with.
void ApplyPoints(const format::FileView& v, uint32_t len, BatchBuffer* b, const BoxGeometry& g, uint64_t epoch, size_t k) {
  const FieldColumn& c = b->field_columns[k];
  const size_t dim = size_t(c.shape[c.ndim - 1]);  // 2 or 3 (SelectPoints)
  float* data = reinterpret_cast<float*>(b->field_data[k].data());
  const bool crop = g.spec.crop != kernels::CropMode::kNone;
  for (uint32_t j = 0; j < len; ++j) {
    const uint64_t index = b->indices[j];
    const format::IndexEntry e = v.entry(index);
    // A fixed column holds elem_bytes per sample; a variable one its rows between the offsets.
    const uint64_t begin = c.offsets ? c.offsets[j] : uint64_t(j) * c.elem_bytes;
    const uint64_t end = c.offsets ? c.offsets[j + 1] : begin + c.elem_bytes;
    if (begin == end) continue;
    kernels::CropRect rect;
    kernels::SampleParams p;
    kernels::MakeParams(g.spec, e.width, e.height, g.seed, epoch, index, &rect, &p);  // the draw its image had
    const int out_w = crop ? g.spec.out_w : e.width, out_h = crop ? g.spec.out_h : e.height;
    for (float* q = data + begin / 4; q < data + end / 4; q += dim) {
      float xy[2] = {q[0], q[1]};
      uint8_t visible = 1;
      kernels::TransformPoints(p, out_w, out_h, xy, 1, &visible);
      q[0] = xy[0];
      q[1] = xy[1];
      if (dim == 3 && !visible) q[2] = 0.0f;
    }
  }
}

// Decodes mask column k's values (runs or PNGs) (read into b->field_data[k] with offsets) and replaces them with the
// masks as the batch's images were drawn: [len, H, W(, C)] uint8.
void ApplyMaskGeometry(const format::FileView& v, const std::vector<size_t>& fields, uint32_t len, BatchBuffer* b,
                       const BoxGeometry& g, uint64_t epoch, size_t k) {
  const format::Field& fd = v.meta().fields[fields[k]];
  const int ch = int(fd.dims[0]);
  const bool crop = g.spec.crop != kernels::CropMode::kNone;
  int out_w = crop ? g.spec.out_w : 0, out_h = crop ? g.spec.out_h : 0;
  if (!crop && len > 0) {  // the loader refuses files of mixed sizes without a crop: sample 0's size is every one's
    out_w = v.entry(b->indices[0]).width;
    out_h = v.entry(b->indices[0]).height;
  }
  const size_t plane = size_t(out_w) * size_t(out_h) * size_t(ch);
  std::vector<uint8_t>& px = b->mask_pixels;
  auto& out = b->field_data[k];
  out.resize(plane * len);
  const auto& png = b->field_stored[k];
  const auto& off = b->field_offsets[k];
  for (uint32_t j = 0; j < len; ++j) {
    const uint64_t index = b->indices[j];
    const format::IndexEntry e = v.entry(index);
    const std::string at = v.name() + ": sample " + std::to_string(index) + ": mask '" + fd.name + "'";
    const uint8_t* value = png.data() + off[j];
    const size_t size = size_t(off[j + 1] - off[j]);
    uint32_t rw = 0, rh = 0;
    // Runs of the image's size are checked whole by their decode; anything else by MaskProblem first
    // (a PNG's header against the channels, a size against the image's).
    const bool runs_fit = format::MaskRunsSize(value, size, &rw, &rh) && rw == e.width && rh == e.height;
    if (!runs_fit) {
      const std::string why = format::MaskProblem(fd, value, size, e.width, e.height);
      if (!why.empty()) throw Error(at + ": " + why);
    }
    int w = 0, h = 0;
    std::string err;
    if (!kernels::DecodeMask(value, size, ch, uint64_t(e.width) * e.height, &px, &w, &h, &err)) throw Error(at + ": " + err);
    kernels::CropRect rect;
    kernels::SampleParams p;
    kernels::MakeParams(g.spec, e.width, e.height, g.seed, epoch, index, &rect, &p);  // the draw its image had
    kernels::TransformMask(p, out_w, out_h, px.data(), w, h, w * ch, ch, 0, out.data() + plane * j);
  }
  auto& shape = b->field_shapes[k];
  shape = {uint32_t(out_h), uint32_t(out_w)};
  if (ch == 3) shape.push_back(3);
  FieldColumn& c = b->field_columns[k];
  c.data = b->field_data[k].data();
  c.offsets = nullptr;
  c.shape = shape.data();
  c.ndim = shape.size();
  c.elem_bytes = plane;
}

}  // namespace

void FillFieldColumns(const format::FileView& v, const std::vector<size_t>& fields, uint32_t len, BatchBuffer* b,
                      const BoxGeometry& geo, uint64_t epoch) {
  const auto& fs = v.meta().fields;
  const auto& layout = v.layout();
  b->field_data.resize(fields.size());
  b->field_offsets.resize(fields.size());
  b->field_columns.resize(fields.size());
  b->field_shapes.resize(fields.size());
  b->field_stored.resize(fields.size());
  std::vector<uint8_t> scratch;
  for (size_t k = 0; k < fields.size(); ++k) {
    const size_t f = fields[k];
    const format::Field& fd = fs[f];
    const size_t w = size_t(layout.width[f]);
    auto& data = fd.type == format::FieldType::kMask ? b->field_stored[k] : b->field_data[k];
    auto& offsets = b->field_offsets[k];
    FieldColumn& c = b->field_columns[k];
    c.name = fd.name.c_str();
    c.type = uint8_t(fd.type);
    c.dtype = uint8_t(fd.dtype);
    c.shape = fd.dims.data();
    c.ndim = fd.dims.size();
    c.elem_bytes = w;
    // A value read now that no open checked (an FFCV file's: ReadValueProblem) is checked as it is read.
    auto check = [&](uint64_t i, const uint8_t* p, uint64_t n) {
      if (const std::string why = v.ReadValueProblem(f, i, p, n); !why.empty())
        throw Error(v.name() + ": sample " + std::to_string(i) + ": field '" + fd.name + "': " + why);
    };
    if (format::IsFixedField(fd.type)) {
      data.resize(size_t(len) * w);
      for (uint32_t j = 0; j < len; ++j) {
        const uint8_t* p = v.FixedValue(f, b->indices[j], &scratch);
        check(b->indices[j], p, w);
        std::memcpy(data.data() + size_t(j) * w, p, w);
      }
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
        const uint8_t* p = r.size ? v.source().Read(r.offset, r.size, &scratch) : nullptr;
        check(b->indices[j], p, r.size);
        if (r.size) std::memcpy(data.data() + offsets[j], p, r.size);
      }
      c.offsets = offsets.data();
    }
    c.data = data.data();
  }
  if (geo.active()) ApplyGeometry(v, fields, len, b, geo, epoch);
  for (size_t k : geo.points) ApplyPoints(v, len, b, geo, epoch, k);
  for (size_t k : geo.masks) ApplyMaskGeometry(v, fields, len, b, geo, epoch, k);
}

}  // namespace dsc
