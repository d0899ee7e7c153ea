// Crops of a JPEG without restart markers decoded from entry points (kernels/jpeg_seek.h): each
// rectangle twice with one decoder and cache, so that the second builds its stream from the entry
// points the first walked. Damaged scans must end in a decode error, never a read outside the input.
#include <vector>

#include "kernels/jpeg_decoder.h"
#include "kernels/jpeg_seek.h"
#include "tests/fuzz/fuzz_targets.h"

DSC_FUZZ_TARGET {
  dsc::kernels::JpegDecoder dec;
  dsc::kernels::JpegSeekCache cache(1 << 20);
  dec.set_seek(&cache, 0);
  int w = 0, h = 0;
  if (!dec.ReadHeader(data, size, &w, &h) || w <= 0 || h <= 0 || uint64_t(w) * uint64_t(h) > (1u << 20)) return 0;
  std::vector<uint8_t> buf(size_t(w) * size_t(h) * 3);
  // Rectangles from the input's last bytes: the same input gives the same crops.
  const uint8_t a = size ? data[size - 1] : 0, b = size > 1 ? data[size - 2] : 0;
  const int x = a % w, y = b % h, rw = 1 + (a * 7 + b) % (w - x), rh = 1 + (a + b * 5) % (h - y);
  const int rects[3][4] = {{x, y, rw, rh}, {0, h / 2, w, h - h / 2}, {w / 3, 0, w - w / 3, 1 + h / 4}};
  for (const auto& r : rects)
    for (int again = 0; again < 2; ++again) {
      dsc::kernels::DecodedRegion reg;
      if (!dec.ReadHeader(data, size, &w, &h)) return 0;
      (void)dec.DecodeRegion(r[0], r[1], r[2], r[3], r[2], r[3], buf.data(), size_t(w) * 3, buf.size(), &reg, (a & 1) != 0);
    }
  return 0;
}
