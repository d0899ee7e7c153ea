// Shared by the two CIFAR sources: CIFAR stores each image as three 32x32 planes (R, G, B).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dsc::writer {

constexpr int kCifarSide = 32;
constexpr size_t kCifarPixels = 32 * 32 * 3;

// Planar CHW (CIFAR's layout) to interleaved HWC.
inline void CifarPlanarToHwc(const uint8_t* planar, uint8_t* hwc) {
  const size_t plane = kCifarSide * kCifarSide;
  for (size_t i = 0; i < plane; ++i)
    for (size_t c = 0; c < 3; ++c) hwc[i * 3 + c] = planar[c * plane + i];
}

// Class names from a text file, one per line, blank lines dropped; empty when the file is missing.
std::vector<std::string> ReadNameLines(const std::string& path);

}  // namespace dsc::writer
