// An FFCV-style photo loader for bench/run_photos_bench.sh: every JPEG under DIR (read into memory
// first) is decoded whole with TurboJPEG, cropped with RandomResizedCrop's parameters (the same draws
// as dsc's imagenet-train: kernels::MakeParams), area-resized to 224x224 (OpenCV's INTER_AREA, as
// FFCV's RandomResizedCropRGBImageDecoder; here kernels::ResizeArea), flipped and normalised to float32
// NCHW. Threads split each epoch's files. Prints images per second (median epoch after the first).
// usage: photo_baseline DIR THREADS EPOCHS
#include <turbojpeg.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "kernels/augment.h"
#include "kernels/normalize_row.h"
#include "kernels/resize.h"
#include "reader/loader.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: photo_baseline DIR THREADS EPOCHS\n");
    return 2;
  }
  const int threads = std::max(1, std::atoi(argv[2])), epochs = std::max(2, std::atoi(argv[3]));
  std::vector<std::string> paths;
  for (auto& e : std::filesystem::recursive_directory_iterator(argv[1])) {
    std::string ext = e.path().extension().string();
    for (auto& ch : ext) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    if (e.is_regular_file() && (ext == ".jpg" || ext == ".jpeg")) paths.push_back(e.path().string());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<std::vector<unsigned char>> files;
  for (const auto& p : paths) {
    std::ifstream f(p, std::ios::binary);
    files.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  if (files.empty()) return 1;
  const dsc::kernels::AugmentSpec spec = dsc::LoaderOptions::ImagenetTrain().augment;
  float scale[3], bias[3];
  dsc::kernels::NormalizeCoefficients(spec, scale, bias);
  std::atomic<bool> failed{false};
  auto work = [&](int t, uint64_t epoch) {
    tjhandle h = tjInitDecompress();
    std::vector<unsigned char> full, crop, small(224 * 224 * 3);
    std::vector<float> out(3 * 224 * 224);
    for (size_t i = size_t(t); i < files.size(); i += size_t(threads)) {
      int w, hh, sub, cs;
      if (tjDecompressHeader3(h, files[i].data(), files[i].size(), &w, &hh, &sub, &cs) != 0) failed = true;
      full.resize(size_t(w) * hh * 3);
      if (tjDecompress2(h, files[i].data(), files[i].size(), full.data(), w, 0, hh, TJPF_RGB, 0) != 0) failed = true;
      dsc::kernels::CropRect r;
      dsc::kernels::SampleParams p;
      dsc::kernels::MakeParams(spec, w, hh, 0, epoch, i, &r, &p);
      crop.resize(size_t(r.w) * r.h * 3);
      dsc::kernels::CropCopy(full.data(), w, 3, r.x, r.y, r.w, r.h, crop.data());
      dsc::kernels::ResizeArea(crop.data(), r.w, r.h, 3, small.data(), 224, 224);
      for (int y = 0; y < 224; ++y)
        dsc::kernels::NormalizeRowPlanar(&small[size_t(y) * 224 * 3], 224, &out[size_t(y) * 224],
                                         &out[224 * 224 + size_t(y) * 224], &out[2 * 224 * 224 + size_t(y) * 224], scale,
                                         bias, p.flip != 0);
    }
    tjDestroy(h);
  };
  std::vector<double> rates;
  for (int e = 0; e < epochs; ++e) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(work, t, uint64_t(e));
    for (auto& th : pool) th.join();
    if (e > 0) rates.push_back(files.size() / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (failed) return 1;
  std::sort(rates.begin(), rates.end());
  std::printf("%.0f\n", rates[rates.size() / 2]);
  return 0;
}
