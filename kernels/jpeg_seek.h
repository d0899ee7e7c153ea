// Crops of JPEGs without restart markers (FFCV's files, photos as cameras write them) that decode only
// the MCUs they cover. Without markers a scan can only be entropy-decoded from its start, so the first
// crop of an image walks its Huffman codes (no IDCT) down to the crop's bottom and records where the
// decoder stands every kSeekChunkMcus MCUs: the bit, and each component's DC predictor. Later crops of
// that image build, from those entry points, a JPEG of just the MCUs they need: the chunks' bits copied
// (shifted to whatever bit they now start at), a restart marker before each row's run, and the first DC
// difference of each component re-encoded against the reset predictor. Every other code is copied as
// it is, so the MCUs decode to the coefficients, and pixels, of the whole image (kernels/jpeg_crop.h's
// argument, which this reuses: same prefix, same rectangle of chunks, same decode).
//
// Pure byte and bit work, no libjpeg; kernels/jpeg_decoder.cc feeds the result to libjpeg.
#pragma once
#include <atomic>
#include <memory>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kernels/jpeg_crop.h"
#include "kernels/jpeg_twin.h"

namespace dsc::kernels {

// MCUs between entry points: a RandomResizedCrop of a photo then decodes about as many MCUs as with
// dsc's own restart interval (also 4: bench/RESULTS.md).
constexpr int kSeekChunkMcus = 4;

// Where the entropy decoder stands at the start of a chunk: the byte of the entropy-coded data
// (counted as stored, stuffed zeros included) holding the next bit, how many of that byte's bits are
// already used, and each frame component's DC predictor.
struct SeekEntry {
  uint32_t offset = 0;
  int16_t dc[3] = {0, 0, 0};
  uint8_t bit = 0;
  uint8_t unused = 0;
};

// Entry points of many images (keyed by the caller: sample and field), shared by one loader's decode
// threads. Bounded by a byte budget: once it is spent no image is added, and an image already held
// grows only within it. The images held keep their entries for the loader's lifetime (with a random
// order, which image comes next is as likely as any, so keeping beats replacing).
class JpegSeekCache {
 public:
  explicit JpegSeekCache(uint64_t budget) : budget_(budget) {}
  // Copies the first min(want, held) entries of image `key` into *out; returns how many are held.
  size_t Get(uint64_t key, size_t want, std::vector<SeekEntry>* out) const;
  // Offers entries [0, n) of image `key` (from Get's plus new ones); kept if they are more than held
  // and the budget allows.
  void Put(uint64_t key, const SeekEntry* entries, size_t n);
  // Whether a new image of n entries would fit.
  bool HasRoom(size_t n) const {
    return bytes_.load(std::memory_order_relaxed) + kPerImage + n * sizeof(SeekEntry) <= budget_;
  }
  uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  uint64_t budget() const { return budget_; }
  size_t images() const;
  // What an image costs besides its entries (the map node and vector), counted against the budget.
  static constexpr uint64_t kPerImage = 64;

 private:
  struct Shard {
    mutable std::mutex mu;
    std::unordered_map<uint64_t, std::vector<SeekEntry>> map;
  };
  static constexpr int kShards = 16;
  Shard shards_[kShards];
  std::atomic<uint64_t> bytes_{0};
  const uint64_t budget_;
};

// Builds crops of one stream at a time. One per decoder thread; its buffers are reused.
class SeekAssembler {
 public:
  SeekAssembler();
  ~SeekAssembler();
  // Parses the header of a stream without restart intervals (Huffman sequential, 8-bit, one scan of
  // every component, tables as ParseTwin accepts them). False when it does not qualify: the caller
  // decodes it as before. *layout receives its geometry, with entry-point chunks standing in for
  // restart intervals (interval kSeekChunkMcus, the last chunk of a row possibly shorter): a span of
  // them is what CoverRect gives.
  bool Prepare(const JpegPieces& p, RestartLayout* layout);
  // After Prepare: a JPEG of span `s` (prefix and data() as IntervalAssembler's), using image `key`'s
  // entries in `cache` and walking (and offering it) what they lack. False when the cache has neither
  // the image nor room for it, or the scan's data ends or holds a code its tables lack before the
  // span's last MCU, or a DC value has no code: the caller decodes the original, and libjpeg reports
  // what is wrong.
  bool Assemble(const JpegPieces& p, const IntervalSpan& s, JpegSeekCache* cache, uint64_t key);
  const uint8_t* data() const { return out_.data(); }
  size_t size() const { return size_; }
  JpegPieces prefix;
  // Whether the last Assemble walked codes (the image's entries were missing or too few).
  bool walked() const { return walked_; }

  // Walks the scan from entry points[size - 1] until entry `last` is known (points holds entries
  // 0..size-1, entry 0 being the scan's start). False when the data ends or is corrupt first.
  bool Walk(const uint8_t* data, size_t size, size_t last, std::vector<SeekEntry>* points);

  struct AcSkip;  // an AC table as Walk reads it

 private:
  // Copies entropy-coded data[from, ...) into unstuffed_ without its stuffed zeros, up to the first
  // marker or `until` (stuffed offset, exclusive); returns the bytes written. ff_ gets the unstuffed
  // positions of the 0xFF data bytes.
  size_t Unstuff(const uint8_t* data, size_t size, size_t from, size_t until);
  size_t EntryIndex(int row, int chunk) const { return size_t(row) * size_t(chunks_per_row_) + size_t(chunk); }
  uint32_t EntryMcu(size_t e) const;

  RestartLayout layout_;
  TwinFrame frame_;
  TwinTables tables_;
  uint16_t dc_code_[4][16];  // each DC table's code and length for categories 0..15 (length 0: none)
  uint8_t dc_len_[4][16];
  int chunks_per_row_ = 0;
  const uint8_t* entropy_ = nullptr;  // the scan's data, to the end of the body
  size_t entropy_size_ = 0;
  std::vector<SeekEntry> points_;
  std::vector<uint8_t> unstuffed_, out_;
  size_t size_ = 0;  // of out_'s bytes, the stream's
  std::vector<uint32_t> ff_;
  static constexpr size_t kKeptSkips = 4;
  std::vector<std::unique_ptr<AcSkip>> skips_;
  bool walked_ = false;
};

}  // namespace dsc::kernels
