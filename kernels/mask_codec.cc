#include "kernels/mask_codec.h"

#include "format/mask_runs.h"
#include "kernels/png_codec.h"

namespace dsc::kernels {

bool DecodeMask(const uint8_t* data, size_t size, int channels, uint64_t max_pixels, std::vector<uint8_t>* out,
                int* width, int* height, std::string* error) {
  if (channels != 1 && channels != 3) {
    *error = "a mask has 1 or 3 channels";
    return false;
  }
  uint32_t w = 0, h = 0;
  if (!format::MaskRunsSize(data, size, &w, &h)) return DecodePngMask(data, size, channels, max_pixels, out, width, height, error);
  if (uint64_t(w) * h > max_pixels) {
    *error = "a " + std::to_string(w) + "x" + std::to_string(h) + " mask is more than " + std::to_string(max_pixels) + " pixels";
    return false;
  }
  out->resize(size_t(w) * h * size_t(channels));
  if (std::string why = format::WalkMaskRuns(data, size, channels, out->data()); !why.empty()) {
    *error = std::move(why);
    return false;
  }
  *width = int(w);
  *height = int(h);
  return true;
}

bool EncodeMask(const uint8_t* pixels, int width, int height, int channels, size_t stride, std::vector<uint8_t>* out,
                std::string* error) {
  if ((channels != 1 && channels != 3) || width < 1 || height < 1 || width > 65535 || height > 65535) {
    *error = "cannot store a " + std::to_string(width) + "x" + std::to_string(height) + "x" + std::to_string(channels) + " mask";
    return false;
  }
  format::EncodeMaskRuns(pixels, uint32_t(width), uint32_t(height), channels, stride, out);
  if (out->size() <= size_t(width) * size_t(height) * size_t(channels)) return true;
  return EncodePng(pixels, width, height, channels, stride, out, error);
}

}  // namespace dsc::kernels
