#include "reader/digest.h"

#include <xxhash.h>

#include <cstddef>
#include <new>
#include <string>

#include "format/error.h"

namespace dsc {

struct BatchDigest::State {
  XXH3_state_t* xxh = nullptr;
  uint64_t batches = 0;
  ~State() { XXH3_freeState(xxh); }
  void Bytes(const void* p, size_t n) { XXH3_128bits_update(xxh, p, n); }
  template <typename T>
  void Value(T v) {
    Bytes(&v, sizeof v);
  }
  void Array(const void* p, size_t n, uint64_t batch, const char* what) {
    if (n == 0) return;
    if (!p) throw Error("BatchDigest: batch " + std::to_string(batch) + " has no " + what);
    Bytes(p, n);
  }
};

BatchDigest::BatchDigest() : s_(std::make_unique<State>()) {
  s_->xxh = XXH3_createState();
  if (!s_->xxh) throw std::bad_alloc();
  XXH3_128bits_reset(s_->xxh);
}

BatchDigest::~BatchDigest() = default;

void BatchDigest::Add(const Batch& b) {
  State& s = *s_;
  const size_t n = b.size;
  // Fixed-width header: a field boundary can never shift bytes from one field into another.
  if (b.staged)  // the staged samples' pixels are not in the batch yet
    throw Error("BatchDigest: batch " + std::to_string(b.index) + " holds staged JPEG payloads (decoder gpu): decode them first");
  s.Value<uint64_t>(b.index);
  s.Value<uint32_t>(b.size);
  s.Value<uint8_t>(uint8_t(b.dtype));
  s.Value<uint8_t>(uint8_t(b.layout));
  s.Value<uint8_t>(b.deferred ? 1 : 0);
  s.Value<uint32_t>(b.channels);
  s.Value<uint32_t>(b.height);
  s.Value<uint32_t>(b.width);
  s.Value<uint64_t>(b.label_fields);
  s.Array(b.images, b.image_bytes() * n, b.index, "images");
  for (size_t f = 0; f < b.label_fields; ++f)
    s.Array(f < 2 ? b.labels[f] : nullptr, n * sizeof(int32_t), b.index, "labels");
  s.Array(b.indices, n * sizeof(uint32_t), b.index, "indices");
  s.Array(b.padding, n, b.index, "padding flags");
  for (size_t k = 0; k < b.field_count; ++k) {  // typed fields (format 1.2); none in a classification batch
    const FieldColumn& c = b.fields[k];
    if (c.offsets) s.Array(c.offsets, (n + 1) * sizeof(uint64_t), b.index, "field offsets");
    s.Array(c.data, c.offsets ? size_t(c.offsets[n]) : n * c.elem_bytes, b.index, "field values");
  }
  if (b.deferred) {
    if (n && !b.params) throw Error("BatchDigest: deferred batch " + std::to_string(b.index) + " has no params");
    // Field by field: the struct's own layout (and any padding bytes) is not part of the digest.
    for (size_t i = 0; i < n; ++i) {
      const kernels::SampleParams& p = b.params[i];
      for (int64_t v : {p.src_x, p.src_y, p.src_w, p.src_h}) s.Value<int64_t>(v);
      for (int32_t v : {p.dx, p.dy, p.cut_x, p.cut_y, p.flip}) s.Value<int32_t>(v);
    }
    // The transform list's drawn steps (Batch::steps), likewise field by field.
    s.Value<uint32_t>(b.steps ? b.steps_per_sample : 0);
    for (size_t i = 0; b.steps && i < n * size_t(b.steps_per_sample); ++i) {
      const kernels::TransformStep& t = b.steps[i];
      for (int32_t v : {t.kind, t.i[0], t.i[1], t.i[2], t.i[3], t.mode, t.has_fill}) s.Value<int32_t>(v);
      for (double v : {t.a, t.b}) s.Value<double>(v);
      for (float v : t.g) s.Value<float>(v);
      for (float v : t.fill) s.Value<float>(v);
    }
  }
  ++s.batches;
}

std::string BatchDigest::Hex() const {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits_digest(s_->xxh));
  std::string hex(32, '0');
  static const char kDigits[] = "0123456789abcdef";
  for (size_t i = 0; i < 16; ++i) {
    hex[2 * i] = kDigits[c.digest[i] >> 4];
    hex[2 * i + 1] = kDigits[c.digest[i] & 15];
  }
  return hex;
}

uint64_t BatchDigest::batches() const { return s_->batches; }

}  // namespace dsc
