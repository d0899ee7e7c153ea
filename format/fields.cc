#include "format/fields.h"

#include <cmath>
#include <cstring>
#include <set>
#include <string_view>

#include "format/bytes.h"
#include "format/layout.h"
#include "format/mask_runs.h"

namespace dsc::format {

namespace {
struct DTypeInfo {
  const char* name;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {{"none", 0},    {"int8", 1},    {"int16", 2},   {"int32", 4},   {"int64", 8},
                                 {"uint8", 1},   {"uint16", 2},  {"uint32", 4},  {"uint64", 8},  {"float16", 2},
                                 {"float32", 4}, {"float64", 8}, {"bool", 1}};
constexpr size_t kDTypeCount = sizeof kDTypes / sizeof kDTypes[0];
}  // namespace

size_t DTypeSize(DType t) { return size_t(t) < kDTypeCount ? kDTypes[size_t(t)].size : 0; }
const char* DTypeName(DType t) { return size_t(t) < kDTypeCount ? kDTypes[size_t(t)].name : "unknown"; }
bool ParseDType(const std::string& name, DType* out) {
  for (size_t i = 1; i < kDTypeCount; ++i)
    if (name == kDTypes[i].name) return *out = DType(i), true;
  return false;
}
bool IsIntegerDType(DType t) { return t >= DType::kInt8 && t <= DType::kUInt64; }

const char* FieldTypeName(FieldType t) {
  switch (t) {
    case FieldType::kImage: return "image";
    case FieldType::kLabel: return "label";
    case FieldType::kScalar: return "scalar";
    case FieldType::kArray: return "array";
    case FieldType::kVarArray: return "var_array";
    case FieldType::kBytes: return "bytes";
    case FieldType::kText: return "text";
    case FieldType::kMask: return "mask";
  }
  return "unknown";
}
bool IsFixedField(FieldType t) { return t == FieldType::kScalar || t == FieldType::kArray; }
bool IsVarField(FieldType t) {
  return t == FieldType::kVarArray || t == FieldType::kBytes || t == FieldType::kText || t == FieldType::kMask;
}

namespace {
// Element size × the product of dims, or 0 when a dim is 0 or the product passes kMaxRowWidth.
uint64_t RowWidth(DType t, const std::vector<uint32_t>& dims) {
  uint64_t w = DTypeSize(t);
  for (uint32_t d : dims) {
    if (d == 0 || w > kMaxRowWidth / d) return 0;
    w *= d;
  }
  return w;
}
}  // namespace

std::string SchemaProblem(const Meta& m, bool typed, bool images) {
  const size_t n = m.fields.size();
  if (!typed) {
    if (n < 2 || n > 3) return "field count " + std::to_string(n) + " (expected 2 or 3)";
  } else if (n < 1 || n > kMaxFields) {
    return "field count " + std::to_string(n) + " (expected 1 to " + std::to_string(kMaxFields) + ")";
  }
  std::set<std::string_view> names;
  bool others = false;
  size_t labels = 0;
  for (size_t i = 0; i < n; ++i) {
    const Field& f = m.fields[i];
    const std::string at = "field " + std::to_string(i) + " ('" + f.name + "')";
    const uint8_t t = uint8_t(f.type);
    if (t < 1 || t > (typed ? 8 : 2)) return at + " has unknown type " + std::to_string(t);
    if (i == 0 && f.type != FieldType::kImage) return at + ": the first field must be an image";
    if (i > 0 && f.type == FieldType::kImage && !(typed && images))
      return at + ": the first field must be the only image field (further images are format 1.3's, incompat bit 1)";
    if (f.type == FieldType::kLabel) {
      if (others || ++labels > 2) return at + ": label fields (at most two) come right after the image";
    } else if (i > 0) {
      others = true;
    }
    if (typed) {
      if (f.name.empty() || f.name.size() > kMaxFieldName) return at + ": a name is 1 to 255 bytes";
      if (!names.insert(f.name).second) return at + ": the name is used twice";
    }
    if (f.type == FieldType::kMask) {
      if (f.dtype != DType::kUInt8 || f.dims.size() != 1 || (f.dims[0] != 1 && f.dims[0] != 3))
        return at + ": a mask is uint8 with 1 or 3 channels (dtype uint8, one dim: the channel count)";
      if (!f.classes.empty()) return at + ": class names on a mask";
      continue;
    }
    const bool numeric = f.type == FieldType::kScalar || f.type == FieldType::kArray || f.type == FieldType::kVarArray;
    if (numeric ? DTypeSize(f.dtype) == 0 : f.dtype != DType::kNone) return at + ": bad dtype " + std::to_string(int(f.dtype));
    const size_t max_dims = f.type == FieldType::kArray ? kMaxFixedDims : f.type == FieldType::kVarArray ? kMaxVarDims : 0;
    if (f.dims.size() > max_dims || (f.type == FieldType::kArray && f.dims.empty()))
      return at + ": " + std::to_string(f.dims.size()) + " dims for a " + FieldTypeName(f.type);
    if (numeric && RowWidth(f.dtype, f.dims) == 0) return at + ": a dim is 0 or the row is wider than 16 MiB";
    if (!f.classes.empty() && f.type != FieldType::kLabel && !(f.type == FieldType::kScalar && IsIntegerDType(f.dtype)))
      return at + ": class names on a field that is not an integer label or scalar";
  }
  return "";
}

FieldLayout FieldLayout::Of(const Meta& m) {
  FieldLayout l;
  l.slot.assign(m.fields.size(), -1);
  l.width.assign(m.fields.size(), 0);
  for (size_t i = 0; i < m.fields.size(); ++i) {
    const Field& f = m.fields[i];
    if (IsFurtherImage(m, i)) {  // descriptor column and payload both
      l.fixed.push_back(int(i));
      l.width[i] = kImageDescriptorSize;
      l.row_bytes += kImageDescriptorSize;
      l.slot[i] = int(l.var.size());
      l.var.push_back(int(i));
    } else if (IsFixedField(f.type)) {
      l.slot[i] = int(l.fixed.size());
      l.fixed.push_back(int(i));
      l.width[i] = RowWidth(f.dtype, f.dims);
      l.row_bytes += l.width[i];
    } else if (IsVarField(f.type)) {
      l.slot[i] = int(l.var.size());
      l.var.push_back(int(i));
      l.width[i] = f.type == FieldType::kVarArray ? RowWidth(f.dtype, f.dims) : 1;  // a mask: its PNG's bytes
    }
  }
  return l;
}

uint64_t FieldLayout::ColumnsSize(uint64_t n) const {
  return row_bytes && n > UINT64_MAX / row_bytes ? UINT64_MAX : n * row_bytes;
}

uint64_t FieldLayout::ColumnStart(size_t f, uint64_t n) const {
  uint64_t start = 0;
  for (int k : fixed) {
    if (size_t(k) == f) break;
    start += n * width[size_t(k)];
  }
  return start;
}

uint64_t FieldLayout::VarSizesSize(uint64_t n) const {
  const uint64_t row = 4 * uint64_t(var.size());
  return row && n > UINT64_MAX / row ? UINT64_MAX : n * row;
}

double ElementAsDouble(DType t, const uint8_t* p) {
  switch (t) {
    case DType::kInt8: return double(int8_t(p[0]));
    case DType::kInt16: return double(int16_t(le::get16(p)));
    case DType::kInt32: return double(int32_t(le::get32(p)));
    case DType::kInt64: return double(int64_t(le::get64(p)));
    case DType::kUInt8: case DType::kBool: return double(p[0]);
    case DType::kUInt16: return double(le::get16(p));
    case DType::kUInt32: return double(le::get32(p));
    case DType::kUInt64: return double(le::get64(p));
    case DType::kFloat16: {
      const uint16_t h = le::get16(p);
      const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
      const double sign = h & 0x8000 ? -1.0 : 1.0;
      if (e == 0) return sign * std::ldexp(double(m), -24);
      if (e == 31) return m ? std::nan("") : sign * HUGE_VAL;
      return sign * std::ldexp(double(m | 0x400), e - 25);
    }
    case DType::kFloat32: {
      const uint32_t u = le::get32(p);
      float f;
      std::memcpy(&f, &u, 4);
      return double(f);
    }
    case DType::kFloat64: {
      const uint64_t u = le::get64(p);
      double d;
      std::memcpy(&d, &u, 8);
      return d;
    }
    default: return 0;
  }
}

std::string MaskProblem(const Field& f, const uint8_t* v, uint64_t size, uint32_t image_w, uint32_t image_h) {
  auto sized = [&](uint32_t w, uint32_t h) -> std::string {
    if (image_w && (w != image_w || h != image_h))
      return "a " + std::to_string(w) + "x" + std::to_string(h) + " mask for a " + std::to_string(image_w) + "x" +
             std::to_string(image_h) + " image";
    return "";
  };
  if (IsMaskRuns(v, size_t(size))) {  // walked whole: a few bytes per run, no allocation
    const int channels = f.dims.size() == 1 ? int(f.dims[0]) : 0;
    if (std::string why = WalkMaskRuns(v, size_t(size), channels, nullptr); !why.empty()) return why;
    return sized(le::get16(v + 4), le::get16(v + 6));
  }
  // The PNG signature, then the IHDR chunk: length 13, "IHDR", width, height (big-endian), bit depth,
  // colour type (0 gray, 2 RGB, 3 palette, 4 gray + alpha, 6 RGB + alpha).
  static const uint8_t kSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (size < 33 || std::memcmp(v, kSig, 8) != 0 || std::memcmp(v + 12, "IHDR", 4) != 0) return "neither a PNG nor mask runs";
  auto be32 = [&](size_t at) { return uint32_t(v[at]) << 24 | uint32_t(v[at + 1]) << 16 | uint32_t(v[at + 2]) << 8 | v[at + 3]; };
  const uint32_t w = be32(16), h = be32(20), color = v[25];
  const bool gray = color == 0 || color == 4, rgb = color == 2 || color == 6;
  if (!gray && !rgb && color != 3) return "PNG colour type " + std::to_string(color) + " is not a PNG's";
  if (f.dims.size() == 1 && f.dims[0] == 1 && rgb) return "an RGB PNG for a 1-channel mask";
  if (f.dims.size() == 1 && f.dims[0] == 3 && gray) return "a gray PNG for a 3-channel mask";
  return sized(w, h);
}

void EncodeImageDescriptor(const ImageDescriptor& d, uint8_t* out) {
  le::put16(out, d.width);
  le::put16(out + 2, d.height);
  out[4] = d.encoding;
  out[5] = d.channels;
  out[6] = out[7] = 0;
}

ImageDescriptor DecodeImageDescriptor(const uint8_t* p) { return {le::get16(p), le::get16(p + 2), p[4], p[5]}; }

std::string ImageDescriptorProblem(const uint8_t* p, uint64_t payload_size) {
  const ImageDescriptor d = DecodeImageDescriptor(p);
  if (p[6] || p[7]) return "image descriptor's reserved bytes not zero";
  if (!IsKnownEncoding(d.encoding)) return "unknown image encoding " + std::to_string(d.encoding);
  if (d.channels != 1 && d.channels != 3) return "bad channel count " + std::to_string(d.channels);
  if (d.width == 0 || d.height == 0) return "empty image size " + std::to_string(d.width) + "x" + std::to_string(d.height);
  if (payload_size == 0) return "an image without a payload";
  if (Encoding(d.encoding) == Encoding::kRaw) {
    if (d.channels != 3) return "raw image with " + std::to_string(d.channels) + " channels (raw is RGB)";
    if (payload_size != uint64_t(d.width) * d.height * 3)
      return "raw image payload has " + std::to_string(payload_size) + " bytes, " + std::to_string(d.width) + "x" +
             std::to_string(d.height) + " RGB needs " + std::to_string(uint64_t(d.width) * d.height * 3);
  }
  if (Encoding(d.encoding) == Encoding::kRawZstd && d.channels != 3) return "raw image with " + std::to_string(d.channels) + " channels (raw is RGB)";
  return "";
}

std::string ValueProblem(const Field& f, uint64_t width, const uint8_t* v, uint64_t size) {
  switch (f.type) {
    case FieldType::kMask:
      return MaskProblem(f, v, size, 0, 0);
    case FieldType::kText:
      if (!IsUtf8(std::string_view(reinterpret_cast<const char*>(v), size))) return "not UTF-8";
      return "";
    case FieldType::kVarArray:
      if (width == 0 || size % width != 0)
        return std::to_string(size) + " bytes, not a whole number of " + std::to_string(width) + "-byte rows";
      [[fallthrough]];
    case FieldType::kScalar:
    case FieldType::kArray:
      if (f.dtype == DType::kBool) {
        for (uint64_t i = 0; i < size; ++i)
          if (v[i] > 1) return "bool byte is " + std::to_string(v[i]);
      }
      if (!f.classes.empty()) {  // integer scalars only (SchemaProblem)
        int64_t x = 0;
        switch (DTypeSize(f.dtype)) {
          case 1: x = f.dtype == DType::kInt8 ? int64_t(int8_t(v[0])) : int64_t(v[0]); break;
          case 2: x = f.dtype == DType::kInt16 ? int64_t(int16_t(le::get16(v))) : int64_t(le::get16(v)); break;
          case 4: x = f.dtype == DType::kInt32 ? int64_t(int32_t(le::get32(v))) : int64_t(le::get32(v)); break;
          default: {
            const uint64_t u = le::get64(v);
            x = f.dtype == DType::kUInt64 && u > uint64_t(INT64_MAX) ? -1 : int64_t(u);
          }
        }
        if (x < 0 || uint64_t(x) >= f.classes.size())
          return "value " + std::to_string(x) + " outside its " + std::to_string(f.classes.size()) + " classes";
      }
      return "";
    default:
      return "";
  }
}

}  // namespace dsc::format
