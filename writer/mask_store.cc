#include "writer/mask_store.h"

#include <string>

#include "format/error.h"
#include "kernels/png_codec.h"

namespace dsc::writer {

void StoreMasks(const SourceItem& item, const Encoded& image, uint64_t max_pixels, std::vector<std::vector<uint8_t>>* out) {
  out->resize(item.masks.size());
  std::vector<uint8_t> px;
  for (size_t k = 0; k < item.masks.size(); ++k) {
    const MaskInput& m = item.masks[k];
    const std::string at = item.where + ": mask '" + m.field + "'" + (m.where.empty() ? "" : " (" + m.where + ")");
    int w = m.width, h = m.height;
    std::string err;
    if (!m.is_pixels) {
      if (!kernels::IsPng(m.bytes.data(), m.bytes.size())) throw Error(at + ": not a PNG (masks are stored losslessly, as PNG)");
      // Decoding proves the stream and gives its size and colour type; the bytes are then kept as given.
      if (!kernels::DecodePngMask(m.bytes.data(), m.bytes.size(), m.channels, max_pixels, &px, &w, &h, &err))
        throw Error(at + ": " + err);
    } else if (w < 1 || h < 1 || m.bytes.size() != size_t(w) * size_t(h) * size_t(m.channels)) {
      throw Error(at + ": " + std::to_string(m.bytes.size()) + " bytes for " + std::to_string(w) + "x" + std::to_string(h) +
                  "x" + std::to_string(m.channels) + " pixels");
    }
    if (w != image.width || h != image.height)
      throw Error(at + ": " + std::to_string(w) + "x" + std::to_string(h) + " but its image is " + std::to_string(image.width) +
                  "x" + std::to_string(image.height));
    if (!m.is_pixels) {
      (*out)[k] = m.bytes;
    } else if (!kernels::EncodePng(m.bytes.data(), w, h, m.channels, size_t(w) * size_t(m.channels), &(*out)[k], &err)) {
      throw Error(at + ": PNG encode failed: " + err);
    }
  }
}

}  // namespace dsc::writer
