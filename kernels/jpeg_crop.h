// Decoding only the restart intervals a crop needs. libjpeg-turbo 2.1 cannot seek inside a scan
// (jpeg_skip_scanlines still entropy-decodes what it skips, jpeg_crop_scanline still reads whole rows),
// so for a baseline JPEG whose restart intervals never span two MCU rows this builds a second, valid
// JPEG holding just the intervals that cover a rectangle: the same tables, a frame the size of those
// intervals, and the intervals' entropy-coded bytes with their RST markers renumbered. Every interval
// starts with reset DC predictors, so its blocks decode exactly as in the whole image.
//
// Pure byte work, no libjpeg: kernels/jpeg_decoder.cc feeds the result to libjpeg.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dsc::kernels {

// A JPEG stream stored in up to two pieces read one after the other (reader/dataset.h's shared table
// set, then the rest); head may be empty.
struct JpegPieces {
  const uint8_t* head = nullptr;
  size_t head_size = 0;
  const uint8_t* body = nullptr;
  size_t body_size = 0;
  size_t size() const { return head_size + body_size; }
};

// What the header says about the restart intervals of a stream that qualifies: Huffman-coded
// sequential (SOF0/SOF1), 8-bit, one scan holding every component (or a grayscale image), a restart
// interval that divides the MCUs of a row.
struct RestartLayout {
  int width = 0, height = 0;
  int mcu_w = 0, mcu_h = 0;          // MCU size in image pixels
  int mcus_per_row = 0, mcu_rows = 0;
  int interval = 0;                  // MCUs per restart interval
  int intervals_per_row = 0;
  size_t sof = 0;                    // offset of the SOF marker's 0xFF (pieces read as one stream)
  size_t sos = 0;                    // offset of the SOS marker's 0xFF
  size_t entropy = 0;                // offset of the first entropy-coded byte, inside the body
};

// Parses the markers up to the first scan. False when the stream does not qualify (or is malformed):
// the caller then decodes it as usual. Never reads outside the pieces.
bool ParseRestartLayout(const JpegPieces& p, RestartLayout* layout);
// The same for a stream with or without restart intervals (interval and intervals_per_row are then 0;
// kernels/jpeg_seek.h crops those).
bool ParseScanLayout(const JpegPieces& p, RestartLayout* layout);

// The pieces' bytes before the SOF marker at `sof` (the start of an assembled stream, read in place).
JpegPieces PiecesBefore(const JpegPieces& p, size_t sof);

// A rectangle of whole restart intervals: interval columns [col0, col1) of MCU rows [row0, row1).
struct IntervalSpan {
  int col0 = 0, col1 = 0, row0 = 0, row1 = 0;
  // The assembled image's place in the original, in pixels (its size clips at the right/bottom edge,
  // so that partial MCUs there stay partial and the MCU count of a row equals the intervals').
  int x = 0, y = 0, width = 0, height = 0;
  bool whole_image = false;
};

// The intervals covering pixels [x, x + w) x [y, y + h) widened by `margin` MCUs on every side
// (clipped to the image). The rectangle must lie inside the image.
IntervalSpan CoverRect(const RestartLayout& l, int x, int y, int w, int h, int margin);

// Builds JPEGs of interval spans. One per decoder thread; its buffers are reused.
class IntervalAssembler {
 public:
  // The assembled stream is read as three pieces: `prefix` (up to two pieces of the original, from
  // its start to the SOF marker, not copied), then `data()` (the SOF with the new size, the rest of
  // the header, the intervals' bytes with renumbered RST markers, EOI). False when the entropy-coded
  // data does not hold the intervals the header promises (missing or misnumbered RST markers, another
  // marker first): the caller decodes the original instead, and libjpeg reports what is wrong.
  bool Assemble(const JpegPieces& p, const RestartLayout& l, const IntervalSpan& s);
  const uint8_t* data() const { return out_.data(); }
  size_t size() const { return out_.size(); }
  JpegPieces prefix;

  // Finds where restart intervals begin in entropy-coded data: starts[t] and ends[t] for every
  // interval t <= last (ends exclude the RST marker). Stops at the first other marker or the end of
  // the data. Returns the number of intervals found whose end is known (at most last + 1; an interval
  // cut off by the end of the data counts, libjpeg reports it when decoding).
  size_t FindIntervals(const uint8_t* data, size_t size, size_t last);
  const std::vector<size_t>& starts() const { return starts_; }
  const std::vector<size_t>& ends() const { return ends_; }

 private:
  std::vector<uint8_t> out_;
  std::vector<size_t> starts_, ends_;
};

}  // namespace dsc::kernels
