// adjust_hue on a 224x224 image's planes, side by side in one process: the per-pixel reference
// (HuePixel, what ColorJitter ran before) against HueLanes (16 AVX-512 or 8 AVX2 lanes; the same bits).
//   taskset -c 1 build/bench/hue_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "kernels/color_jitter.h"
#include "kernels/transform_ops.h"

namespace {

constexpr size_t kPixels = 224 * 224;

std::vector<uint8_t> Noise(uint32_t seed) {
  std::vector<uint8_t> v(3 * kPixels);
  for (uint8_t& b : v) seed = seed * 1664525u + 1013904223u, b = uint8_t(seed >> 24);
  return v;
}

void BM_HuePixel(benchmark::State& state) {
  std::vector<uint8_t> img = Noise(1);
  uint8_t* p[3] = {img.data(), img.data() + kPixels, img.data() + 2 * kPixels};
  for (auto _ : state) {
    for (size_t i = 0; i < kPixels; ++i) {
      const uint8_t in[3] = {p[0][i], p[1][i], p[2][i]};
      uint8_t out[3];
      dsc::kernels::HuePixel(in, 0.1f, out);
      p[0][i] = out[0], p[1][i] = out[1], p[2][i] = out[2];
    }
    benchmark::DoNotOptimize(img.data());
  }
}
BENCHMARK(BM_HuePixel)->Unit(benchmark::kMicrosecond);

void BM_HueLanes(benchmark::State& state) {
  std::vector<uint8_t> img = Noise(1);
  for (auto _ : state) {
    dsc::kernels::HueLanes(img.data(), img.data() + kPixels, img.data() + 2 * kPixels, kPixels, 0.1f);
    benchmark::DoNotOptimize(img.data());
  }
}
BENCHMARK(BM_HueLanes)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
