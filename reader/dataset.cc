#include "reader/dataset.h"

#include <cstring>

#include "format/error.h"
#include "reader/file_source.h"
#include "reader/mmap_guard.h"

namespace dsc {

Dataset::Dataset(const std::string& path, DatasetOptions options)
    : Dataset(OpenSource(path, options), options) {}

Dataset::Dataset(std::unique_ptr<format::ByteSource> source, DatasetOptions options)
    : source_(std::move(source)), options_(options) {
  // Open reads the header, footer, metadata and index through the mapping: a file that shrank since
  // it was mapped must give an error here too, not SIGBUS. (A fault leaks what Open had allocated:
  // a rare error path, and the process lives on.)
  const bool opened = mmap_guard::RunGuarded([&] { view_ = format::FileView::Open(source_.get()); });
  if (!opened) throw Error(path() + ": bytes no longer readable while opening it (file truncated or I/O error)");
  checked_.reset(new std::atomic<uint8_t>[view_->block_count()]);
  for (size_t b = 0; b < view_->block_count(); ++b) checked_[b].store(0, std::memory_order_relaxed);
}

void Dataset::CheckBlockOnce(uint32_t b) const {
  if (checked_[b].load(std::memory_order_acquire)) return;
  view_->CheckBlock(b);  // throws on mismatch; racing threads may both check, which is harmless
  checked_[b].store(1, std::memory_order_release);
}

Error Dataset::Unreadable(uint64_t i) const {
  return Error(path() + ": sample " + std::to_string(i) +
               ": bytes no longer readable (file truncated or I/O error); on a network file system, the "
               "use_pread option reads with pread instead of mapping the file");
}

format::IndexEntry Dataset::FurtherEntry(uint64_t i, uint32_t image) const {
  format::IndexEntry e = view_->entry(i);
  const format::FileView::VarRef v = view_->VarValue(image, i);
  const format::ImageDescriptor d = format::DecodeImageDescriptor(view_->FixedValue(image, i));
  e.offset = v.offset;
  e.size = v.size;
  e.width = d.width;
  e.height = d.height;
  e.encoding = d.encoding;
  e.channels = d.channels;
  e.jpeg_table = 0;
  return e;
}

uint32_t Dataset::ImageField(const std::string& name) const {
  const auto& fields = meta().fields;
  if (name.empty()) return 0;
  std::string images;
  for (size_t f = 0; f < fields.size(); ++f) {
    if (fields[f].type != format::FieldType::kImage) continue;
    if (fields[f].name == name) return uint32_t(f);
    images += (images.empty() ? "'" : ", '") + fields[f].name + "'";
  }
  throw OptionError("image: " + path() + " has no image field '" + name + "'; its image fields: " + images);
}

template <typename ReadBody>
Dataset::Parts Dataset::ReadParts(uint64_t i, bool touch, uint32_t image, const ReadBody& read_body) const {
  const format::IndexEntry e = Touch(i, image);
  Parts parts;
  parts.entry = e;
  if (e.jpeg_table) {
    const std::string& t = view_->jpeg_table(e.jpeg_table);
    parts.head = {reinterpret_cast<const uint8_t*>(t.data()), t.size()};
  }
  parts.body = {read_body(e), e.size};  // in place when mapped
  if (touch && source_->mapped()) {
    // Fault the pages in now, so the time storage takes shows in the read stage, not in decode.
    uint8_t sum = 0;
    for (size_t o = 0; o < e.size; o += 4096) sum ^= static_cast<const volatile uint8_t*>(parts.body.data)[o];
    if (e.size) sum ^= static_cast<const volatile uint8_t*>(parts.body.data)[e.size - 1];
    asm volatile("" : : "r"(sum));  // the reads are kept
  }
  return parts;
}

Dataset::Parts Dataset::ReadPayloadParts(uint64_t i, std::vector<uint8_t>* scratch, bool touch, uint32_t image) const {
  return ReadParts(i, touch, image, [&](const format::IndexEntry& e) { return source_->Read(e.offset, e.size, scratch); });
}

Dataset::Parts Dataset::ReadPayloadParts(uint64_t i, format::ReadBuffer* buf, bool touch, uint32_t image) const {
  return ReadParts(i, touch, image, [&](const format::IndexEntry& e) { return source_->ReadHeld(e.offset, e.size, buf); });
}

format::IndexEntry Dataset::Touch(uint64_t i, uint32_t image) const {
  if (i >= size()) throw Error(path() + ": sample " + std::to_string(i) + " out of range (" + std::to_string(size()) + " samples)");
  const format::IndexEntry e = entry(i, image);
  if (options_.verify) {
    bool readable = true;
    try {
      // Guarded: when verifying, a truncated mapped file faults here first.
      readable = mmap_guard::RunGuarded([&] { CheckBlockOnce(e.block); });
    } catch (const Error& err) {
      throw Error(std::string(err.what()) + " (reading sample " + std::to_string(i) + ")");
    }
    if (!readable) throw Unreadable(i);
  }
  return e;
}

Payload Dataset::ReadPayload(uint64_t i, std::vector<uint8_t>* scratch, uint32_t image) const {
  const format::IndexEntry e = Touch(i, image);
  if (e.jpeg_table == 0) {
    return {source_->Read(e.offset, e.size, scratch), e.size};  // in place when mapped
  }
  const std::string& t = view_->jpeg_table(e.jpeg_table);
  scratch->resize(t.size() + e.size);
  std::memcpy(scratch->data(), t.data(), t.size());
  std::vector<uint8_t> tmp;  // stays empty when mapped
  std::memcpy(scratch->data() + t.size(), source_->Read(e.offset, e.size, &tmp), e.size);
  return {scratch->data(), scratch->size()};
}

}  // namespace dsc
