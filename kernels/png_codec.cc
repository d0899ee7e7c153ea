#include "kernels/png_codec.h"

#include <png.h>

#include <cstring>

namespace dsc::kernels {

bool IsPng(const uint8_t* data, size_t size) {
  static const uint8_t kSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  return size >= 8 && std::memcmp(data, kSig, 8) == 0;
}

bool DecodePngRGB(const uint8_t* data, size_t size, std::vector<uint8_t>* rgb, int* width, int* height,
                  std::string* error) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, data, size)) {
    *error = image.message;
    return false;
  }
  if (image.width == 0 || image.height == 0 || image.width > 65535 || image.height > 65535) {
    png_image_free(&image);
    *error = "unsupported PNG size";
    return false;
  }
  image.format = PNG_FORMAT_RGB;
  rgb->resize(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, rgb->data(), 0, nullptr)) {
    *error = image.message;
    png_image_free(&image);
    return false;
  }
  *width = int(image.width);
  *height = int(image.height);
  return true;
}

}  // namespace dsc::kernels
