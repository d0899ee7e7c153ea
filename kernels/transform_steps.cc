#include "kernels/transform_steps.h"

#include <cstring>
#include <memory>

namespace dsc::kernels {

void RunStepsCpu(const TransformStep* steps, int per_sample, uint8_t* images, int n, int w, int h,
                 std::vector<uint8_t>* scratch) {
  const size_t bytes = size_t(w) * size_t(h) * 3;
  scratch->resize(bytes);
  auto stats = std::make_unique<StepStats>();
  for (int j = 0; j < per_sample; ++j)
    for (int k = 0; k < n; ++k) {
      const TransformStep& s = steps[size_t(k) * size_t(per_sample) + size_t(j)];
      if (s.kind == kStepNone) continue;
      uint8_t* img = images + size_t(k) * bytes;
      if (StepNeedsStats(s.kind)) {
        uint32_t hist[3][256] = {};
        uint64_t gray = 0;
        for (size_t i = 0; i < size_t(w) * size_t(h); ++i) {
          const uint8_t* p = img + 3 * i;
          for (int c = 0; c < 3; ++c) ++hist[c][p[c]];
          gray += Gray(p[0], p[1], p[2]);
        }
        FinishStats(s, hist, gray, uint64_t(w) * uint64_t(h), stats.get());
      }
      uint8_t* out = scratch->data();
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) StepElement(s, *stats, img, w, h, x, y, out + (size_t(y) * size_t(w) + size_t(x)) * 3);
      std::memcpy(img, out, bytes);
    }
}

}  // namespace dsc::kernels
