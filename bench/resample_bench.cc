// Microbenchmark of kernels/resample on one core: the RandomResizedCrop resize step, a 320x320
// (fractional) crop of a 500x375 image to 224x224 with BILINEAR, in one ResampleRgb call.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/augment.h"
#include "kernels/color.h"
#include "kernels/cpu.h"
#include "kernels/normalize_row.h"
#include "kernels/resample.h"
#include "reader/huge_pages.h"

namespace {

using dsc::kernels::ResampleBox;
using dsc::kernels::ResampleFilter;

std::vector<uint8_t> Source(int w, int h) {
  // Deterministic texture: content does not change the integer work, only keeps it honest.
  std::vector<uint8_t> v(size_t(w) * h * 3);
  uint32_t s = 12345;
  for (size_t i = 0; i < v.size(); ++i) {
    s = s * 1664525u + 1013904223u;
    v[i] = uint8_t((i / 3 % w + i / 3 / w) / 4 + (s >> 28));
  }
  return v;
}

template <bool kScalar>
void BM_Crop320To224(benchmark::State& state) {
  const int sw = 500, sh = 375;
  const auto src = Source(sw, sh);
  const ResampleFilter f = ResampleFilter(state.range(0));
  std::vector<uint8_t> dst(224 * 224 * 3), scratch;
  const ResampleBox box{17.25f, 9.5f, 337.25f, 329.5f};
  for (auto _ : state) {
    if (kScalar) dsc::kernels::ResampleRgbScalar(src.data(), sw, sh, dst.data(), 224, 224, f, box, &scratch);
    else dsc::kernels::ResampleRgb(src.data(), sw, sh, dst.data(), 224, 224, f, box, &scratch);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK_TEMPLATE(BM_Crop320To224, false)->Arg(int(ResampleFilter::kBilinear))->Arg(int(ResampleFilter::kBox))
    ->Arg(int(ResampleFilter::kBicubic))->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_Crop320To224, true)->Arg(int(ResampleFilter::kBilinear))->Unit(benchmark::kMicrosecond);

// As above, but every call gets a different box (as RandomResizedCrop does), so no per-geometry cache
// helps: this includes building the coefficient tables each time.
void BM_Crop320To224VaryingBox(benchmark::State& state) {
  const int sw = 500, sh = 375;
  const auto src = Source(sw, sh);
  std::vector<uint8_t> dst(224 * 224 * 3), scratch;
  std::vector<ResampleBox> boxes;
  for (int i = 0; i < 64; ++i) {
    const float x0 = 17.25f + 0.37f * i, y0 = 9.5f + 0.29f * i, side = 320 - 0.41f * i;
    boxes.push_back({x0, y0, x0 + side, y0 + side});
  }
  size_t i = 0;
  for (auto _ : state) {
    dsc::kernels::ResampleRgb(src.data(), sw, sh, dst.data(), 224, 224, ResampleFilter::kBilinear,
                              boxes[i++ % boxes.size()], &scratch);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_Crop320To224VaryingBox)->Unit(benchmark::kMicrosecond);

// The loader's whole RandomResizedCrop step (issue 10's goal: <= 60 us on one core): a 320x320 crop of
// a 500x375 decoded buffer (rows padded to 32 bytes, as the loader's) resized to 224x224 with the axes
// built per sample (the crop moves every call), flipped (mirrored axis), then normalised to float32
// NCHW as reader/sample_processor.cc does it. Arg 0, the normalisation: 0 after the resize, row by row,
// aligned output (streaming stores, as the loader before); 1 none; 2 after the resize, misaligned output
// (cached stores); 3 each row as soon as it is resampled (a ResampleRowSink, as the loader now),
// aligned (streaming stores); 4 as 3, misaligned (cached stores). Arg 1: output slots written in turn:
// 1 (stays in the cache from call to call) or 64 (a batch of 38 MB, as the loader's).
void BM_CropResizeFlipNormalize(benchmark::State& state) {
  const int sw = 500, sh = 375;
  const size_t stride = (sw * 3 + 31) / 32 * 32;
  const auto packed = Source(sw, sh);
  std::vector<uint8_t> src(stride * sh);
  for (int y = 0; y < sh; ++y) std::copy_n(&packed[size_t(y) * sw * 3], sw * 3, &src[y * stride]);
  std::vector<uint8_t> resized(224 * 224 * 3), scratch;
  const int mode = int(state.range(0)), slots = int(state.range(1));
  const size_t slot = 3 * 224 * 224 + 16;  // floats; a multiple of 16 keeps every slot 64-byte aligned
  std::vector<float> out(slot * slots + 32);  // + room to align
  float* o0 = out.data() + (64 - reinterpret_cast<uintptr_t>(out.data()) % 64) % 64 / 4 + (mode == 2 || mode == 4);
  dsc::kernels::AugmentSpec spec;
  spec.normalize = true;
  for (int c = 0; c < 3; ++c) spec.mean[c] = 120, spec.std[c] = 60;
  float scale[3], bias[3];
  dsc::kernels::NormalizeCoefficients(spec, scale, bias);
  struct Sink final : dsc::kernels::ResampleRowSink {
    float* o = nullptr;
    const float *scale = nullptr, *bias = nullptr;
    void Row(int y, const uint8_t* rgb) override {
      float* r = o + y * 224;
      dsc::kernels::NormalizeRowPlanar(rgb, 224, r, r + 224 * 224, r + 2 * 224 * 224, scale, bias);
    }
  } sink;
  sink.scale = scale, sink.bias = bias;
  int i = 0;
  dsc::kernels::ResampleAxis h, v;  // reused, as the loader's
  for (auto _ : state) {
    const int x0 = 17 + i % 50, y0 = 9 + i % 40;
    float* o = o0 + slot * size_t(i % slots);
    ++i;
    dsc::kernels::MakeResampleWindow(ResampleFilter::kBilinear, x0, x0 + 320, float(x0), float(x0 + 320), 224, 0, 224, 0,
                                     /*mirror=*/true, &h);
    dsc::kernels::MakeResampleWindow(ResampleFilter::kBilinear, y0, y0 + 320, float(y0), float(y0 + 320), 224, 0, 224, 0,
                                     false, &v);
    sink.o = o;
    dsc::kernels::ResampleRgbAxes(src.data(), sw, sh, stride, h, v, resized.data(), &scratch, mode >= 3 ? &sink : nullptr);
    for (int y = 0; y < 224 && (mode == 0 || mode == 2); ++y) sink.Row(y, &resized[size_t(y) * 224 * 3]);
    dsc::kernels::StreamFence();
    benchmark::DoNotOptimize(o);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_CropResizeFlipNormalize)->ArgsProduct({{0, 1, 2, 3, 4}, {1, 64}})->Unit(benchmark::kMicrosecond);

// Building one axis' coefficient table (a crop's 320 -> 224, fractional box edges).
void BM_MakeAxis(benchmark::State& state) {
  const ResampleFilter f = ResampleFilter(state.range(0));
  float in0 = 17.25f;
  for (auto _ : state) {
    auto a = dsc::kernels::MakeResampleAxis(f, 500, in0, in0 + 320, 224);
    benchmark::DoNotOptimize(a.k.data());
    in0 = in0 < 100 ? in0 + 0.37f : 17.25f;
  }
}
BENCHMARK(BM_MakeAxis)->Arg(int(ResampleFilter::kBilinear))->Arg(int(ResampleFilter::kBicubic));

// The two passes apart, on a 320x320 image: horizontal only (320x320 -> 224x320) and vertical only
// (320x320 -> 320x224).
void BM_OnePass(benchmark::State& state) {
  const auto src = Source(320, 320);
  const int dw = state.range(0) ? 224 : 320, dh = state.range(0) ? 320 : 224;
  std::vector<uint8_t> dst(size_t(dw) * dh * 3);
  for (auto _ : state) {
    dsc::kernels::ResampleRgb(src.data(), 320, 320, dst.data(), dw, dh, ResampleFilter::kBilinear);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_OnePass)->Arg(1)->Arg(0)->Unit(benchmark::kMicrosecond);

// The trainer's finishing of remote photos (uint8 224x224 NHWC from the wire -> normalised float32
// NCHW): a batch of 64 images (time per batch) into one 38.5 MB buffer in huge pages, as the loader's;
// every other row mirrored. Memory-bound: the yardstick for the trainer's finishing cost per remote
// photo (bench/RESULTS.md, "JPEG kernels and microbenchmarks").
void BM_NormalizeBatch224(benchmark::State& state) {
  constexpr size_t kW = 224, kN = 64, kImage = kW * kW * 3;
  const size_t sources = size_t(state.range(0));  // 1: the source stays in the cache; 24 (370 MB): it does not
  const auto one = Source(int(kW), int(kW));
  std::vector<uint8_t> src(sources * kN * kImage);
  for (size_t n = 0; n < sources * kN; ++n) std::copy(one.begin(), one.end(), src.begin() + long(n * kImage));
  const size_t bytes = kN * kImage * sizeof(float);
  float* out = static_cast<float*>(dsc::AllocateHugePages(bytes, nullptr));
  if (!out) return state.SkipWithError("no memory for the batch");
  const float scale[3] = {0.0171f, 0.0175f, 0.0174f}, bias[3] = {-2.12f, -2.04f, -1.80f};
  size_t k = 0;
  for (auto _ : state) {
    const uint8_t* batch = src.data() + (k++ % sources) * kN * kImage;
    for (size_t n = 0; n < kN; ++n)
      for (size_t y = 0; y < kW; ++y) {
        float* o = out + n * kImage + y * kW;
        dsc::kernels::NormalizeRowPlanar(batch + n * kImage + y * kW * 3, kW, o, o + kW * kW, o + 2 * kW * kW, scale, bias,
                                         (y & 1) != 0);
      }
    dsc::kernels::StreamFence();
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes));
  std::free(out);
}
BENCHMARK(BM_NormalizeBatch224)->Arg(1)->Arg(24)->Unit(benchmark::kMicrosecond);

// The trainer's finishing of remote CIFAR samples with RGB rows (SampleProcessor::FinishRgb): 512
// images of 32x32 uint8 RGB, each normalised to float32 NCHW in one call, into a ring of Arg batches
// of 6 MB in huge pages (the loader's ring is prefetch + 1 = 4), time per image. Arg 0: into one
// 12 KB image, over and over (the kernel's arithmetic alone, every store a cache hit).
void BM_NormalizeCifarRing(benchmark::State& state) {
  constexpr size_t kW = 32, kN = 512, kPixels = kW * kW, kImage = kPixels * 3;
  const size_t batches = size_t(state.range(0));
  const auto one = Source(int(kW), int(kW));
  std::vector<uint8_t> src(16 * kImage);  // 16 different sources, as from a receive buffer (cached)
  for (size_t n = 0; n < 16; ++n) std::copy(one.begin(), one.end(), src.begin() + long(n * kImage));
  const size_t images = batches ? batches * kN : 1;
  float* out = static_cast<float*>(dsc::AllocateHugePages(images * kImage * sizeof(float), nullptr));
  if (!out) return state.SkipWithError("no memory for the ring");
  const float scale[3] = {0.0171f, 0.0175f, 0.0174f}, bias[3] = {-2.12f, -2.04f, -1.80f};
  size_t k = 0;
  for (auto _ : state) {
    for (size_t n = 0; n < kN; ++n, ++k) {
      float* o = out + (k % images) * kImage;
      dsc::kernels::NormalizeRowPlanar(src.data() + (n % 16) * kImage, kPixels, o, o + kPixels, o + 2 * kPixels, scale, bias);
    }
    benchmark::ClobberMemory();
  }
  state.counters["us_per_image"] =
      benchmark::Counter(double(kN), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  std::free(out);
}
BENCHMARK(BM_NormalizeCifarRing)->Arg(0)->Arg(1)->Arg(2)->Arg(4)->Unit(benchmark::kMicrosecond);

// A CIFAR float32 batch from YCbCr planes (the remote client's planes path and the local fused path):
// 512 images of 32x32, 4:2:0, shifted by -4..4, every other one mirrored, a third with a 16x16
// cutout, into one 6 MB batch in huge pages (time per image). Arg 0: one call per row (the per-row
// set-up the per-image call saves); arg 1: one call per image (kernels::YccRowsToFloat); arg 2: a
// uint8 NHWC batch instead, one call per image (kernels::YccRowsToRgb, a uint8 worker's and local
// thread's CIFAR path).
void BM_YccCifarBatch(benchmark::State& state) {
  constexpr int kW = 32, kN = 512;
  constexpr size_t kPlane = size_t(kW) * kW, kImage = 3 * kPlane;
  const bool per_image = state.range(0) != 0, rgb = state.range(0) == 2;
  std::vector<uint8_t> y(kN * kPlane), c(kN * kPlane / 2);
  uint32_t r = 7;
  for (auto* v : {&y, &c})
    for (auto& b : *v) b = uint8_t((r = r * 1664525u + 1013904223u) >> 24);
  float* out = static_cast<float*>(dsc::AllocateHugePages(kN * kImage * sizeof(float), nullptr));
  if (!out) return state.SkipWithError("no memory for the batch");
  const uint8_t fill[3] = {125, 123, 114};
  const float scale[3] = {0.0171f, 0.0175f, 0.0174f}, bias[3] = {-2.12f, -2.04f, -1.80f};
  std::vector<dsc::kernels::YccRow> rows(kW);
  for (auto _ : state) {
    for (int n = 0; n < kN; ++n) {
      const int shift = n % 9 - 4, cut = n % 3 == 0 ? n % 24 : -1;
      for (int j = 0; j < kW; ++j) {
        dsc::kernels::YccRow& q = rows[size_t(j)];
        q.y = y.data() + size_t(n) * kPlane + size_t(j) * kW;
        q.cb = c.data() + size_t(n) * kPlane / 2 + size_t(j / 2) * (kW / 2);
        q.cr = q.cb + kPlane / 4;
        q.hshift = 1, q.w = kW, q.shift = shift;
        q.lo = std::max(0, shift), q.hi = std::min(kW, kW + shift);
        const bool cut_row = cut >= 0 && j >= cut && j < cut + 16;
        q.cut_from = cut_row ? cut : 0, q.cut_to = cut_row ? cut + 16 : 0;
      }
      float* o = out + size_t(n) * kImage;
      if (rgb) {
        uint8_t* o8 = reinterpret_cast<uint8_t*>(out) + size_t(n) * kImage;
        dsc::kernels::YccRowsToRgb(rows.data(), kW, fill, n & 1, o8, 3 * kW);
      } else if (per_image) {
        dsc::kernels::YccRowsToFloat(rows.data(), kW, fill, scale, bias, n & 1, o, o + kPlane, o + 2 * kPlane, kW);
      } else {
        for (int j = 0; j < kW; ++j)
          dsc::kernels::YccRowToFloat(rows[size_t(j)], fill, scale, bias, n & 1, o + j * kW, o + kPlane + j * kW,
                                      o + 2 * kPlane + j * kW);
      }
    }
    dsc::kernels::StreamFence();
    benchmark::ClobberMemory();
  }
  state.counters["us_per_image"] =
      benchmark::Counter(double(state.iterations()) * kN * 1e-6, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  std::free(out);
}
BENCHMARK(BM_YccCifarBatch)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);

}  // namespace

// --avx2-only: the AVX2 code on an AVX-512 machine (kernels::LimitToAvx2).
int main(int argc, char** argv) {
  int n = 0;
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) == "--avx2-only") dsc::kernels::LimitToAvx2(true);
    else argv[n++] = argv[i];
  }
  argc = n;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
