#include "writer/mask_store.h"

#include <string>

#include "format/error.h"
#include "format/mask_runs.h"
#include "kernels/geometry.h"
#include "kernels/mask_codec.h"
#include "kernels/png_codec.h"

namespace dsc::writer {

void StoreMasks(const SourceItem& item, const Encoded& image, const EncodeOptions& options,
                std::vector<std::vector<uint8_t>>* out) {
  out->resize(item.masks.size());
  const uint64_t max_pixels = options.max_pixels;
  std::vector<uint8_t> px, moved;
  for (size_t k = 0; k < item.masks.size(); ++k) {
    const MaskInput& m = item.masks[k];
    const std::string at = item.where + ": mask '" + m.field + "'" + (m.where.empty() ? "" : " (" + m.where + ")");
    int w = m.width, h = m.height;
    std::string err;
    if (!m.is_pixels) {
      if (!kernels::IsPng(m.bytes.data(), m.bytes.size())) throw Error(at + ": not a PNG (a mask is given as a PNG or as pixels)");
      // Decoding proves the stream and gives its size, colour type and the values to store.
      if (!kernels::DecodePngMask(m.bytes.data(), m.bytes.size(), m.channels, max_pixels, &px, &w, &h, &err))
        throw Error(at + ": " + err);
    } else if (w < 1 || h < 1 || m.bytes.size() != size_t(w) * size_t(h) * size_t(m.channels)) {
      throw Error(at + ": " + std::to_string(m.bytes.size()) + " bytes for " + std::to_string(w) + "x" + std::to_string(h) +
                  "x" + std::to_string(m.channels) + " pixels");
    }
    if (w != image.source_width || h != image.source_height)
      throw Error(at + ": " + std::to_string(w) + "x" + std::to_string(h) + " but its image is " +
                  std::to_string(image.source_width) + "x" + std::to_string(image.source_height));
    const uint8_t* pixels = m.is_pixels ? m.bytes.data() : px.data();
    const BuildGeometry g = GeometryOf(options, w, h);
    if (g.changes()) {  // the image's crop and resize, nearest-neighbour: values are never blended
      kernels::SampleParams p;
      p.src_x = int64_t(g.x) << 16;
      p.src_y = int64_t(g.y) << 16;
      p.src_w = int64_t(g.w) << 16;
      p.src_h = int64_t(g.h) << 16;
      moved.resize(size_t(g.out_w) * size_t(g.out_h) * size_t(m.channels));
      kernels::TransformMask(p, g.out_w, g.out_h, pixels, w, h, w * m.channels, m.channels, 0, moved.data());
      pixels = moved.data();
      w = g.out_w;
      h = g.out_h;
    }
    // Runs when they are no bigger than the pixels (they decode with a fill per run); else a PNG given
    // and stored as it is kept as given, and pixels become a PNG.
    if (!m.is_pixels && !g.changes()) {
      format::EncodeMaskRuns(pixels, uint32_t(w), uint32_t(h), m.channels, size_t(w) * size_t(m.channels), &(*out)[k]);
      if ((*out)[k].size() > size_t(w) * size_t(h) * size_t(m.channels)) (*out)[k] = m.bytes;
    } else if (!kernels::EncodeMask(pixels, w, h, m.channels, size_t(w) * size_t(m.channels), &(*out)[k], &err)) {
      throw Error(at + ": mask encode failed: " + err);
    }
  }
}

}  // namespace dsc::writer
