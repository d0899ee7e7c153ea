#include "format/file_view.h"

#include <algorithm>
#include <cstring>

#include "format/bytes.h"
#include "format/checksum.h"
#include "format/error.h"
#include "format/ffcv.h"

namespace dsc::format {

std::string Describe(const Problem& p) {
  std::string s = p.section;
  if (p.block >= 0) s += ": block " + std::to_string(p.block);
  if (p.sample >= 0) s += ": sample " + std::to_string(p.sample);
  return s + ": " + p.message;
}

namespace {

bool AllZero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i]) return false;
  return true;
}

std::string Num(uint64_t v) { return std::to_string(v); }


}  // namespace

// Runs the checks in file order. In open mode (out == nullptr) the first problem throws; in verify
// mode problems are collected and checking goes on as far as the structure can still be trusted.
class Inspector {
 public:
  Inspector(const ByteSource& src, std::vector<Problem>* out, bool deep, const AfterBlock* after_block = nullptr)
      : src_(src), out_(out), deep_(deep), after_block_(after_block) {}

  // Returns false when the structure is too damaged to continue.
  bool Run(FileView* v) {
    const uint64_t size = src_.size();
    // The magic before the size: a short text file is not a short dsc file.
    if (size >= 8 && std::memcmp(src_.Read(0, 8, &scratch_), kHeaderMagic.data(), 8) != 0) {
      return Fail({"header", -1, -1, "bad magic (not a dsc file)"});
    }
    if (size < kPageSize + kFooterSize) {
      return Fail({"header", -1, -1, "truncated: file is " + Num(size) + " bytes, smaller than a header and footer"});
    }
    const uint8_t* h = src_.Read(0, kPageSize, &scratch_);
    Header hd = DecodeHeader(h);
    if (hd.version_major != kVersionMajor)
      return Fail({"header", -1, -1, "unsupported format version " + Num(hd.version_major) + "." +
                                         Num(hd.version_minor) + " (this build reads 1.x)"});
    if (HeaderChecksum(h) != hd.header_checksum) return Fail({"header", -1, -1, "header checksum mismatch"});
    if (hd.incompat_flags & ~(kTypedFieldsFlag | kFurtherImagesFlag))
      return Fail({"header", -1, -1, "unsupported feature flags " + Num(hd.incompat_flags)});
    const bool typed = (hd.incompat_flags & kTypedFieldsFlag) != 0;
    const bool images = (hd.incompat_flags & kFurtherImagesFlag) != 0;
    if (typed && hd.version_minor < kTypedMinor)
      Add({"header", -1, -1, "typed fields (incompat bit 0) in a version 1." + Num(hd.version_minor) + " file"});
    if (images && (!typed || hd.version_minor < kImagesMinor))
      Add({"header", -1, -1, "further images (incompat bit 1) in a version 1." + Num(hd.version_minor) + " file" +
                                 (typed ? "" : " without typed fields (bit 0)")});
    if (hd.page_size != kPageSize) return Fail({"header", -1, -1, "unsupported page size " + Num(hd.page_size)});
    if (hd.block_size < kPageSize || (hd.block_size & (hd.block_size - 1)) || hd.block_size > (uint64_t(1) << 31))
      return Fail({"header", -1, -1, "block size " + Num(hd.block_size) + " is not a power of two from " + Num(kPageSize) + " to 2^31"});
    if (!CheckOptionalTable(h, hd)) return false;
    if (hd.file_size != size) {
      return Fail({"footer", -1, -1,
                   (hd.file_size > size ? "truncated: header says " : "size mismatch: header says ") +
                       Num(hd.file_size) + " bytes, file has " + Num(size)});
    }
    const uint64_t footer_off = size - kFooterSize;
    {
      const uint8_t* f = src_.Read(footer_off, kFooterSize, &scratch_);
      Footer ft = DecodeFooter(f);
      if (footer_off % kPageSize != 0) Add({"footer", -1, -1, "footer is not page-aligned"});
      if (std::memcmp(f, kFooterMagic.data(), 8) != 0) Add({"footer", -1, -1, "bad footer magic (truncated or damaged)"});
      else if (FooterChecksum(f) != StoredFooterChecksum(f)) Add({"footer", -1, -1, "footer checksum mismatch"});
      else if (ft.file_size != size || ft.sample_count != hd.sample_count ||
               ft.header_checksum != hd.header_checksum || ft.version_major != hd.version_major ||
               ft.version_minor != hd.version_minor)
        Add({"footer", -1, -1, "footer disagrees with the header"});
      else if (!AllZero(f + 36, 20)) Add({"footer", -1, -1, "reserved footer bytes are not zero"});
    }
    // Section bounds: in order, page-aligned, inside the file, sizes consistent with the counts.
    uint64_t prev_end = kPageSize;
    // Which rule a section's place breaks, if any: the message says which, not only "out of bounds".
    auto misplaced = [&](uint64_t offset, uint64_t sz, bool data) -> std::string {
      if (data && offset != kPageSize) return "the data section starts at PAGE";
      if (offset % kPageSize != 0) return "not page-aligned";
      if (offset < prev_end) return "overlaps the section before it (which ends at " + Num(prev_end) + ")";
      if (offset > footer_off || sz > footer_off - offset) return "runs into the footer (at " + Num(footer_off) + ")";
      return "";
    };
    for (int i = 0; i < kSectionCount; ++i) {
      const SectionRef& s = hd.sections[i];
      if (const std::string why = misplaced(s.offset, s.size, i == kData); !why.empty())
        return Fail({SectionName(i), -1, -1, std::string(SectionName(i)) + " section out of bounds (offset " +
                                                 Num(s.offset) + " size " + Num(s.size) + ", file size " + Num(size) + "): " + why});
      prev_end = s.offset + s.size;
    }
    for (const OptionalRef& s : hd.optional) {
      if (const std::string why = misplaced(s.offset, s.size, false); !why.empty())
        return Fail({OptionalSectionName(s.id), -1, -1, OptionalSectionName(s.id) + " section out of bounds (offset " +
                                                            Num(s.offset) + " size " + Num(s.size) + ", file size " + Num(size) + "): " + why});
      prev_end = s.offset + s.size;
    }
    if (hd.sample_count > UINT32_MAX || hd.sections[kIndex].size != hd.sample_count * kIndexEntrySize)
      return Fail({"index", -1, -1, "index size " + Num(hd.sections[kIndex].size) + " does not match " +
                                        Num(hd.sample_count) + " samples"});
    if (hd.block_count > UINT32_MAX || hd.sections[kBlocks].size != hd.block_count * kBlockEntrySize)
      return Fail({"blocks", -1, -1, "block table size does not match " + Num(hd.block_count) + " blocks"});

    // Metadata sections: checksums, then zero padding up to the next section.
    bool meta_ok = true;
    for (int i : {kIndex, kMeta, kBlocks}) {
      const SectionRef& s = hd.sections[i];
      const uint8_t* p = src_.Read(s.offset, s.size, &scratch_);
      if (Checksum(p, s.size) != s.checksum) {
        meta_ok = false;
        if (!Add({SectionName(i), -1, -1, std::string(SectionName(i)) + " checksum mismatch"})) return false;
      }
      uint64_t end = i < kBlocks ? hd.sections[i + 1].offset : hd.optional.empty() ? footer_off : hd.optional[0].offset;
      CheckPadding(SectionName(i), s.offset + s.size, end);
    }
    if (!meta_ok) return false;
    // Optional sections: every one checksum-verified, known ones decoded, unknown ones ignored.
    for (size_t k = 0; k < hd.optional.size(); ++k) {
      const OptionalRef& s = hd.optional[k];
      const std::string name = OptionalSectionName(s.id);
      const uint8_t* p = src_.Read(s.offset, s.size, &scratch_);
      if (Checksum(p, s.size) != s.checksum) {
        Add({name, -1, -1, name + " checksum mismatch"});
      } else if (s.id == kRestartSection) {
        try {
          v->restart_ = DecodeRestartStats(p, s.size);
        } catch (const Error& e) {
          Add({name, -1, -1, e.what()});
        }
      }
      CheckPadding(name, s.offset + s.size, k + 1 < hd.optional.size() ? hd.optional[k + 1].offset : footer_off);
    }

    v->src_ = &src_;
    v->header_ = hd;
    const SectionRef& ms = hd.sections[kMeta];
    try {
      v->meta_ = DecodeMeta(src_.Read(ms.offset, ms.size, &scratch_), ms.size, typed, images);
    } catch (const Error& e) {
      std::string why = e.what();
      if (why.rfind("meta: ", 0) == 0) why.erase(0, 6);  // the section is named once
      return Fail({"meta", -1, -1, why});
    }
    if (v->meta_.fields.size() != hd.field_count)
      return Fail({"meta", -1, -1, "field count disagrees with the header"});
    if (!CheckTyped(v)) return false;
    if (!CheckBlocks(v)) return false;
    if (!CheckIndex(v)) return false;
    if (deep_) CheckBlockContents(*v);
    // Values located through entries already found broken would only repeat those findings.
    if (deep_ && v->typed() && (out_ == nullptr || out_->empty())) {
      while (var_next_ < v->sample_count()) CheckVarValues(*v, var_next_++, &var_problems_);  // those past the last block
      out_->insert(out_->end(), var_problems_.begin(), var_problems_.end());
    }
    return out_ == nullptr || out_->empty();
  }

 private:
  // The optional-section table in the header page (format 1.1). A 1.0 file has none: the whole rest of
  // the page is zero. Returns false when the table cannot be trusted.
  bool CheckOptionalTable(const uint8_t* h, const Header& hd) {
    const uint32_t n = hd.optional_count;
    if (n == 0) {
      if (!AllZero(h + kOptionalTableAt, kPageSize - kOptionalTableAt)) Add({"header", -1, -1, "reserved header bytes are not zero"});
      return true;
    }
    if (n > kMaxOptionalSections)
      return Fail({"header", -1, -1, "optional section table: " + Num(n) + " entries, at most " + Num(kMaxOptionalSections)});
    if (OptionalTableChecksum(h, n) != hd.optional_checksum) return Fail({"header", -1, -1, "optional section table checksum mismatch"});
    if (hd.version_minor < 1) Add({"header", -1, -1, "optional sections in a version 1.0 file"});
    if (le::get32(h + kOptionalTableAt + 12) != 0) Add({"header", -1, -1, "optional section table: reserved bytes not zero"});
    const size_t used = kOptionalEntriesAt + kOptionalEntrySize * n;
    if (!AllZero(h + used, kPageSize - used)) Add({"header", -1, -1, "reserved header bytes are not zero"});
    for (uint32_t i = 0; i < n; ++i) {
      std::string why;
      if (!OptionalEntryZeroOk(h, i)) why = "reserved bytes not zero";
      else if (hd.optional[i].id == 0 || (i > 0 && hd.optional[i].id <= hd.optional[i - 1].id)) why = "id zero or out of order";
      if (!why.empty()) return Fail({"header", -1, -1, "optional section " + Num(i) + ": " + why});
    }
    return true;
  }

  void CheckPadding(const std::string& section, uint64_t from, uint64_t to) {
    const uint64_t pad = to - from;
    if (pad && !AllZero(src_.Read(from, pad, &scratch_), pad)) Add({section, -1, -1, "padding after the section is not zero"});
  }

  bool CheckBlocks(FileView* v) {
    const Header& hd = v->header_;
    const SectionRef& bs = hd.sections[kBlocks];
    const uint8_t* p = src_.Read(bs.offset, bs.size, &scratch_);
    uint64_t next_offset = kPageSize, next_sample = 0, data_end = kPageSize;
    // The header's sections were checked to lie inside the file, so this sum cannot wrap.
    const uint64_t data_limit = hd.sections[kData].offset + hd.sections[kData].size;
    std::string sums;
    v->blocks_.resize(hd.block_count);
    for (uint64_t b = 0; b < hd.block_count; ++b) {
      const uint8_t* e = p + b * kBlockEntrySize;
      BlockEntry be = DecodeBlockEntry(e);
      v->blocks_[b] = be;
      std::string why;
      if (!BlockEntryZeroOk(e)) why = "reserved bytes not zero";
      else if (be.offset % kPageSize != 0 || be.offset < next_offset) why = "offset " + Num(be.offset) + " out of order or not page-aligned";
      else if (b == 0 && be.offset != kPageSize)  // else the bytes before it were covered by no checksum
        why = "the first block is at offset " + Num(be.offset) + ", not at the data section's start " + Num(kPageSize);
      else if (be.offset > data_limit || be.size > data_limit - be.offset) why = "extends past the data section";
      else if (be.first_sample != next_sample) why = "first sample " + Num(be.first_sample) + ", expected " + Num(next_sample);
      else if (be.sample_count == 0 || be.sample_count > hd.sample_count - next_sample) why = "bad sample count " + Num(be.sample_count);
      else if (be.size > hd.block_size && be.sample_count != 1) why = "oversized block holds more than one sample";
      if (!why.empty()) return Fail({"blocks", int64_t(b), -1, why});
      next_offset = RoundUpToPage(be.offset + be.size);
      next_sample += be.sample_count;
      data_end = be.offset + be.size;
      uint8_t c[8];
      le::put64(c, be.checksum);
      sums.append(reinterpret_cast<char*>(c), 8);
    }
    if (next_sample != hd.sample_count)
      return Fail({"blocks", -1, -1, "blocks hold " + Num(next_sample) + " samples, header says " + Num(hd.sample_count)});
    if (data_end - kPageSize != hd.sections[kData].size)
      return Fail({"data", -1, -1, "data section size disagrees with the block table"});
    if (Checksum(sums.data(), sums.size()) != hd.sections[kData].checksum)
      return Fail({"data", -1, -1, "data section checksum (over the block checksums) mismatch"});
    return true;
  }

  bool CheckIndex(FileView* v) {
    const Header& hd = v->header_;
    const SectionRef& is = hd.sections[kIndex];
    // Always a private copy, also of a mapped file: the entries are validated once, here, and a file
    // rewritten in place under a shared mapping must not change them afterwards. Reading an entry then
    // never touches the mapping either, so it cannot fault (SIGBUS) if the file shrinks.
    v->index_copy_.resize(is.size);
    const uint8_t* p = src_.Read(is.offset, is.size, &v->index_copy_);
    if (is.size != 0 && p != v->index_copy_.data()) std::memcpy(v->index_copy_.data(), p, is.size);  // empty: data() may be null
    p = v->index_copy_.data();
    v->index_ = p;
    const Meta& m = v->meta_;
    const size_t labels = m.label_field_count();
    const size_t tables = m.jpeg_tables.size();
    uint32_t block = 0;
    uint64_t next_payload = 0;  // payloads tile their block's content, in sample order
    const size_t vars = v->layout_.var.size();
    for (uint64_t i = 0; i < hd.sample_count; ++i) {
      IndexEntry e = DecodeIndexEntry(p + i * kIndexEntrySize);
      while (block + 1 < v->blocks_.size() && i >= uint64_t(v->blocks_[block].first_sample) + v->blocks_[block].sample_count) ++block;
      std::string why;
      const BlockEntry& be = v->blocks_[block];
      if (i == be.first_sample) next_payload = be.offset;
      const bool last_in_block = i + 1 == uint64_t(be.first_sample) + be.sample_count;
      // The sample's extent: its payload and, in a typed file, its variable values right after it.
      uint64_t extra = 0;
      std::string var_why;
      for (size_t k = 0; k < vars; ++k) {
        const uint32_t len = v->varsizes_[i * vars + k];
        extra += len;  // at most 64 × (2^32 - 1): no wrap
        const int f = v->layout_.var[k];
        const uint64_t w = IsFurtherImage(m, size_t(f)) ? 1 : v->layout_.width[size_t(f)];  // an image: any bytes
        if (var_why.empty() && len % w != 0)
          var_why = "field '" + m.fields[size_t(f)].name + "': " + Num(len) + " bytes, not a whole number of " + Num(w) + "-byte rows";
      }
      if (e.block != block) why = "stored in block " + Num(e.block) + ", expected " + Num(block);
      else if (e.offset < be.offset || e.size > be.size || e.offset - be.offset > be.size - e.size) why = "payload outside its block";
      else if (extra > be.size - (e.offset - be.offset) - e.size) why = "variable fields (" + Num(extra) + " bytes) run past its block";
      else if (e.offset != next_payload)
        why = "payload at offset " + Num(e.offset) + ", expected " + Num(next_payload) + " (a block's payloads are contiguous, in sample order)";
      else if (last_in_block && e.offset + e.size + extra != be.offset + be.size)
        why = "the block's last payload ends at " + Num(e.offset + e.size + extra) + ", its content at " + Num(be.offset + be.size);
      else if (!var_why.empty()) why = var_why;
      else if (!IsKnownEncoding(e.encoding)) why = "unknown encoding " + Num(e.encoding);
      else if (e.channels != 1 && e.channels != 3) why = "bad channel count " + Num(e.channels);
      else if (e.width == 0 || e.height == 0) why = "zero width or height";
      else if (Encoding(e.encoding) != Encoding::kJpeg && e.channels != 3) why = "raw payload must have 3 channels";
      else if (Encoding(e.encoding) == Encoding::kRaw && e.size != uint64_t(e.width) * e.height * 3) why = "raw payload size does not match its dimensions";
      else if (e.jpeg_table > tables || (e.jpeg_table && Encoding(e.encoding) != Encoding::kJpeg)) why = "bad JPEG table reference " + Num(e.jpeg_table);
      else if (labels < 2 && e.label[1] != 0) why = "unused label slot not zero";
      else {
        for (size_t f = 0; f < labels; ++f) {
          size_t classes = m.fields[f + 1].classes.size();
          if (e.label[f] < 0 || (classes && size_t(e.label[f]) >= classes))
            why = "label " + std::to_string(e.label[f]) + " of field '" + m.fields[f + 1].name + "' out of range";
        }
      }
      if (!why.empty() && !Add({"index", -1, int64_t(i), why})) return false;
      next_payload = e.offset + e.size + extra;  // in range: the extent ends inside the block, or `why` said not
    }
    return true;
  }

  // Typed fields (format 1.2): the columns and varsizes sections are there exactly when incompat bit 0
  // is, of exactly the size the schema and the sample count give; every fixed value keeps its field's
  // rules. Both are copied, so reads after open never touch the mapping.
  bool CheckTyped(FileView* v) {
    const Header& hd = v->header_;
    const OptionalRef* cols = nullptr;
    const OptionalRef* sizes = nullptr;
    for (const OptionalRef& s : hd.optional) {
      if (s.id == kColumnsSectionId) cols = &s;
      if (s.id == kVarSizesSectionId) sizes = &s;
    }
    if (!v->typed()) {
      if (cols || sizes) return Fail({cols ? "columns" : "varsizes", -1, -1, "typed-field section in a file without typed fields (incompat bit 0)"});
      return true;
    }
    if (!cols || !sizes) return Fail({"header", -1, -1, "typed fields without their columns and varsizes sections"});
    const Meta& m = v->meta_;
    v->layout_ = FieldLayout::Of(m);
    const FieldLayout& l = v->layout_;
    const uint64_t n = hd.sample_count;
    if (cols->size != l.ColumnsSize(n))
      return Fail({"columns", -1, -1, "columns section has " + Num(cols->size) + " bytes, the schema needs " + Num(l.row_bytes) + " per sample"});
    if (sizes->size != l.VarSizesSize(n))
      return Fail({"varsizes", -1, -1, "varsizes section has " + Num(sizes->size) + " bytes, the schema needs " + Num(4 * l.var.size()) + " per sample"});
    // The sizes matched sections inside the file, so these allocations are bounded by its length.
    v->columns_.resize(cols->size);
    if (cols->size) std::memcpy(v->columns_.data(), src_.Read(cols->offset, cols->size, &scratch_), cols->size);
    const uint8_t* vs = src_.Read(sizes->offset, sizes->size, &scratch_);
    v->varsizes_.resize(sizes->size / 4);
    for (size_t k = 0; k < v->varsizes_.size(); ++k) v->varsizes_[k] = le::get32(vs + 4 * k);
    v->fixed_.assign(m.fields.size(), {});
    for (int f : l.fixed) {
      v->fixed_[size_t(f)] = {v->columns_.data() + l.ColumnStart(size_t(f), n), l.width[size_t(f)], false};
      const Field& fd = m.fields[size_t(f)];
      if (IsFurtherImage(m, size_t(f))) {  // its descriptor against its payload's length, as an index entry's
        const size_t k = size_t(l.slot[size_t(f)]), vars = l.var.size();
        for (uint64_t i = 0; i < n; ++i) {
          const std::string why = ImageDescriptorProblem(v->FixedValue(size_t(f), i, nullptr), v->varsizes_[i * vars + k]);
          if (!why.empty() && !Add({"columns", -1, int64_t(i), "field '" + fd.name + "': " + why})) return false;
        }
        continue;
      }
      if (fd.dtype != DType::kBool && fd.classes.empty()) continue;
      const uint64_t w = l.width[size_t(f)];
      for (uint64_t i = 0; i < n; ++i) {
        const std::string why = ValueProblem(fd, w, v->FixedValue(size_t(f), i, nullptr), w);  // in memory
        if (!why.empty() && !Add({"columns", -1, int64_t(i), "field '" + fd.name + "': " + why})) return false;
      }
    }
    return true;
  }

  // Sample i's variable values against their fields' rules (text is UTF-8, bool bytes 0 or 1, ...),
  // into `found`: reads the payload pages, so `dsc verify` only.
  void CheckVarValues(const FileView& v, uint64_t i, std::vector<Problem>* found) {
    const FieldLayout& l = v.layout_;
    for (int f : l.var) {
      const Field& fd = v.meta_.fields[size_t(f)];
      if (!ValueChecked(fd)) continue;
      const FileView::VarRef r = v.VarValue(size_t(f), i);
      const uint8_t* p = src_.Read(r.offset, r.size, &scratch_);
      const std::string why = fd.type == FieldType::kMask ? MaskProblem(fd, p, r.size, v.entry(i).width, v.entry(i).height)
                                                          : ValueProblem(fd, l.width[size_t(f)], p, r.size);
      if (!why.empty()) found->push_back({"data", int64_t(v.entry(i).block), int64_t(i), "field '" + fd.name + "': " + why});
    }
  }
  // Any bytes; an image's payload is checked as the first image's are (block checksums).
  static bool ValueChecked(const Field& fd) {
    return !(fd.type == FieldType::kBytes || fd.type == FieldType::kImage || (fd.type == FieldType::kVarArray && fd.dtype != DType::kBool));
  }
  // Where the last byte CheckVarValues reads of sample i ends (0: it reads none).
  static uint64_t VarValuesEnd(const FileView& v, uint64_t i) {
    uint64_t end = 0;
    for (int f : v.layout_.var) {
      if (!ValueChecked(v.meta_.fields[size_t(f)])) continue;
      const FileView::VarRef r = v.VarValue(size_t(f), i);
      end = std::max(end, r.offset + r.size);
    }
    return end;
  }

  void CheckBlockContents(const FileView& v) {
    const Header& hd = v.header_;
    if (v.blocks_.empty()) {  // no block: the empty data section's padding, up to the index, is all there is
      const uint64_t pad = hd.sections[kIndex].offset - kPageSize;
      if (pad && !AllZero(src_.Read(kPageSize, pad, &scratch_), pad)) Add({"data", -1, -1, "padding of the empty data section is not zero"});
    }
    // A URL's next blocks are asked for while this one is checked, and each is released once checked
    // (the source's fetchers work beside this thread, within its cache budget); local files ignore both.
    constexpr size_t kAhead = 8;
    const size_t n = v.blocks_.size();
    auto end_of = [&](size_t b) { return b + 1 < n ? v.blocks_[b + 1].offset : hd.sections[kIndex].offset; };
    auto ask = [&](size_t b) {
      if (b < n) src_.WillNeed(v.blocks_[b].offset, end_of(b) - v.blocks_[b].offset);
    };
    for (size_t b = 0; b < kAhead - 1; ++b) ask(b);
    for (size_t b = 0; b < n; ++b) {
      ask(b + kAhead - 1);
      const BlockEntry& be = v.blocks_[b];
      const uint8_t* p = src_.ReadHeld(be.offset, be.size, &held_);
      if (Checksum(p, be.size) != be.checksum) Add({"data", int64_t(b), -1, "checksum mismatch (offset " + Num(be.offset) + ")"});
      const uint64_t end = end_of(b);
      const uint64_t pad = end - (be.offset + be.size);
      if (pad && !AllZero(src_.ReadHeld(be.offset + be.size, pad, &held_), pad))
        Add({"data", int64_t(b), -1, "padding after the block is not zero"});
      SamplesUpTo(v, end);
      src_.DontNeed(be.offset, end - be.offset);
    }
    held_ = {};
  }

  // The checks that read samples' bytes (variable values here, the caller's after_block) run while the
  // block pass still holds the blocks those bytes lie in: a URL's blocks are fetched once, not once per
  // pass. Their findings wait in var_problems_ and count only if the blocks hold no damage (findings
  // through damaged bytes would only repeat it).
  void SamplesUpTo(const FileView& v, uint64_t end) {
    if (!out_ || !out_->empty()) return;
    if (v.typed())
      while (var_next_ < v.sample_count() && VarValuesEnd(v, var_next_) <= end) CheckVarValues(v, var_next_++, &var_problems_);
    if (after_block_ && *after_block_) (*after_block_)(end);
  }

  // Records a problem; in open mode throws. Returns true in verify mode so checking can go on.
  bool Add(Problem p) {
    if (!out_) throw Error(src_.name() + ": " + Describe(p));
    out_->push_back(std::move(p));
    return true;
  }
  bool Fail(Problem p) {
    Add(std::move(p));
    return false;
  }

  const ByteSource& src_;
  std::vector<Problem>* out_;
  bool deep_;
  const AfterBlock* after_block_;
  uint64_t var_next_ = 0;  // the first sample whose variable values are not checked yet
  std::vector<Problem> var_problems_;
  std::vector<uint8_t> scratch_;
  ReadBuffer held_;  // a block read in place (a URL's cached copy is not copied again)
};

std::unique_ptr<FileView> FileView::Open(const ByteSource* src) {
  if (ffcv::IsFfcv(*src)) return ffcv::OpenView(src);
  std::unique_ptr<FileView> v(new FileView());
  Inspector(*src, nullptr, false).Run(v.get());
  return v;
}

std::vector<SectionExtent> FileView::Extents() const {
  if (ffcv_) return ffcv::Extents(*ffcv_);
  const Header& h = header_;
  const uint64_t footer_off = h.file_size - kFooterSize;
  std::vector<SectionExtent> out;
  out.push_back({"header", 0, kPageSize, h.optional.empty() ? kHeaderUsed : kOptionalEntriesAt + kOptionalEntrySize * h.optional.size()});
  for (int i = 0; i < kSectionCount; ++i) {
    uint64_t end = i + 1 < kSectionCount ? h.sections[i + 1].offset : h.optional.empty() ? footer_off : h.optional[0].offset;
    out.push_back({SectionName(i), h.sections[i].offset, end - h.sections[i].offset, h.sections[i].size});
  }
  for (size_t k = 0; k < h.optional.size(); ++k) {
    uint64_t end = k + 1 < h.optional.size() ? h.optional[k + 1].offset : footer_off;
    out.push_back({OptionalSectionName(h.optional[k].id), h.optional[k].offset, end - h.optional[k].offset, h.optional[k].size});
  }
  out.push_back({"footer", footer_off, kFooterSize, kFooterSize});
  return out;
}

void FileView::CheckBlock(size_t b) const {
  if (ffcv_) return;  // FFCV has no checksums: ffcv::Verify checks its structure
  std::vector<uint8_t> scratch;
  const BlockEntry& be = blocks_[b];
  const uint8_t* p = src_->Read(be.offset, be.size, &scratch);
  if (Checksum(p, be.size) != be.checksum)
    throw Error(name() + ": data: block " + std::to_string(b) + ": checksum mismatch (offset " +
                std::to_string(be.offset) + ")");
}

std::vector<Problem> VerifyFile(const ByteSource& src, const AfterBlock& after_block,
                                const std::function<void(uint64_t n)>& after_samples) {
  if (ffcv::IsFfcv(src)) return ffcv::Verify(src, 100, after_samples);
  std::vector<Problem> problems;
  std::unique_ptr<FileView> v(new FileView());
  try {
    Inspector(src, &problems, true, &after_block).Run(v.get());
  } catch (const Error& e) {  // I/O failure while reading
    problems.push_back({"file", -1, -1, e.what()});
  }
  return problems;
}

}  // namespace dsc::format
