#include "remote/codec.h"

#include <algorithm>
#include <cstring>

namespace dsc::remote {

namespace {

enum Field : uint32_t { kCompressed = 1, kImagesSize = 2, kSampleError = 3, kParams = 4, kForms = 5, kImages = 6 };
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) out->push_back(char(uint8_t(v) | 0x80)), v >>= 7;
  out->push_back(char(v));
}
void PutVarintField(uint32_t field, uint64_t v, std::string* out) {
  PutVarint(uint64_t(field) << 3 | kVarint, out);
  PutVarint(v, out);
}
void PutBytesKey(uint32_t field, uint64_t n, std::string* out) {
  PutVarint(uint64_t(field) << 3 | kLengthDelimited, out);
  PutVarint(n, out);
}
void PutBytesField(uint32_t field, const void* p, size_t n, std::string* out) {
  PutBytesKey(field, n, out);
  out->append(static_cast<const char*>(p), n);
}

// A read position in a sequence of pieces.
class Cursor {
 public:
  Cursor(const BytePiece* pieces, size_t n) : pieces_(pieces), n_(n) {}
  bool done() {
    Settle();
    return i_ == n_;
  }
  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      Settle();
      if (i_ == n_) return false;
      const uint8_t b = pieces_[i_].data[off_++];
      *v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  // The next `len` bytes as pieces appended to `out` (none when out is null); false past the end.
  bool Take(uint64_t len, std::vector<BytePiece>* out) {
    while (len) {
      Settle();
      if (i_ == n_) return false;
      const size_t k = size_t(std::min<uint64_t>(len, pieces_[i_].size - off_));
      if (out) out->push_back({pieces_[i_].data + off_, k});
      off_ += k;
      len -= k;
    }
    return true;
  }

 private:
  void Settle() {
    while (i_ < n_ && off_ == pieces_[i_].size) ++i_, off_ = 0;
  }
  const BytePiece* pieces_;
  const size_t n_;
  size_t i_ = 0, off_ = 0;
};

}  // namespace

std::string EncodeReplyHead(bool compressed, uint64_t images_size, const uint8_t* params, size_t params_bytes,
                            const uint8_t* forms, size_t forms_bytes, uint64_t images_bytes) {
  std::string head;
  if (compressed) PutVarintField(kCompressed, 1, &head);
  PutVarintField(kImagesSize, images_size, &head);
  PutBytesField(kParams, params, params_bytes, &head);
  if (forms) PutBytesField(kForms, forms, forms_bytes, &head);
  PutBytesKey(kImages, images_bytes, &head);
  return head;
}

std::string EncodeSampleErrorReply(const std::string& message) {
  std::string out;
  PutBytesField(kSampleError, message.data(), message.size(), &out);
  return out;
}

std::string ParseReply(const BytePiece* pieces, size_t n, ReplyView* out) {
  out->compressed = false;  // the vectors keep their memory: a caller may reuse one view
  out->images_size = 0;
  out->sample_error.clear();
  for (ReplyView::Bytes* f : {&out->params, &out->forms, &out->images}) f->present = false, f->size = 0, f->pieces.clear();
  Cursor r(pieces, n);
  while (!r.done()) {
    uint64_t key, v;
    if (!r.Varint(&key)) return "truncated field key";
    const uint32_t type = uint32_t(key & 7);
    const uint64_t field = key >> 3;
    if (type == kVarint) {
      if (!r.Varint(&v)) return "truncated varint";
      if (field == kCompressed) out->compressed = v != 0;
      if (field == kImagesSize) out->images_size = v;
      continue;
    }
    if (type == kFixed64 || type == kFixed32) {
      if (!r.Take(type == kFixed64 ? 8 : 4, nullptr)) return "truncated fixed field";
      continue;
    }
    if (type != kLengthDelimited || !r.Varint(&v)) return "unexpected wire type";
    if (field == kSampleError) {
      if (v > kMaxSampleErrorBytes) return "error message too long";
      std::vector<BytePiece> parts;
      if (!r.Take(v, &parts)) return "truncated error";
      out->sample_error.clear();
      for (const BytePiece& p : parts) out->sample_error.append(reinterpret_cast<const char*>(p.data), p.size);
      continue;
    }
    ReplyView::Bytes* bytes = field == kParams ? &out->params : field == kForms ? &out->forms : field == kImages ? &out->images : nullptr;
    if (!bytes) {
      if (!r.Take(v, nullptr)) return "truncated field";
      continue;
    }
    bytes->pieces.clear();
    if (!r.Take(v, &bytes->pieces))
      return field == kParams ? "truncated params" : field == kForms ? "truncated forms" : "truncated images";
    bytes->present = true;
    bytes->size = v;
  }
  return "";
}

void CopyPieces(const std::vector<BytePiece>& pieces, uint8_t* out) {
  for (const BytePiece& p : pieces) std::memcpy(out, p.data, p.size), out += p.size;
}

}  // namespace dsc::remote
