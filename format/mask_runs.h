// Masks stored as runs (docs/format.md "Typed fields", type 8): each row a sequence of (length, value)
// runs. Masks are piecewise constant, so this decodes with a fill per run, where a PNG needs an inflate
// of every pixel and an unfilter of every row (about as costly as decoding the crop's JPEG).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dsc::format {

inline constexpr uint8_t kMaskRunsMagic[4] = {'M', 'R', 'L', 'E'};
inline constexpr size_t kMaskRunsHeader = 12;  // magic, u16 width, u16 height, u8 channels, 3 zero bytes

bool IsMaskRuns(const uint8_t* v, size_t size);

// Walks a run stream of `channels` bytes per pixel: the header, every row's runs summing to exactly
// the width, and the end of the stream after the last row. With `pixels` non-null, writes width x
// height x channels bytes there (the caller sized it from *width and *height, see MaskRunsSize). Never
// reads past `size` or writes past the header's size. Empty when valid, else why not.
std::string WalkMaskRuns(const uint8_t* v, size_t size, int channels, uint8_t* pixels);

// The header's width and height; false when `v` has no run header.
bool MaskRunsSize(const uint8_t* v, size_t size, uint32_t* width, uint32_t* height);

// Appends the runs of width x height pixels of `channels` bytes, rows `stride` bytes apart, to *out
// (cleared first): maximal runs, so the same pixels always give the same bytes.
void EncodeMaskRuns(const uint8_t* pixels, uint32_t width, uint32_t height, int channels, size_t stride,
                    std::vector<uint8_t>* out);

}  // namespace dsc::format
