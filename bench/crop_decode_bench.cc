// How the cost of JpegDecoder::DecodeRegion follows a crop's area once only the restart intervals
// covering it are decoded (kernels/jpeg_crop.h). Run on one core (bench/run_crop_bench.sh pins it):
//   crop_decode_bench DIR [passes]
// DIR holds JPEGs with restart markers. Each image gets 4 RandomResizedCrop(224) rectangles (seeded).
// Per pass, every rectangle is decoded with the old path (rows from the top down to the crop) and the
// new one (intervals only), in alternating order; plus the scan for RST markers over the whole
// entropy-coded data, a full decode, and TurboJPEG's whole-image decode at each DCT scale k/8 (what
// ChooseDctScale's cost table encodes). Prints medians over the passes of this thread's CPU time.
#include <turbojpeg.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <ctime>
#include <vector>

#include "kernels/augment.h"
#include "kernels/jpeg_crop.h"
#include "kernels/jpeg_decoder.h"

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Image {
  std::vector<uint8_t> jpeg;
  int w = 0, h = 0;
  std::vector<dsc::kernels::CropRect> rects;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [passes]\n", argv[0]);
    return 2;
  }
  const int passes = argc > 2 ? std::atoi(argv[2]) : 5;
  std::vector<Image> images;
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::recursive_directory_iterator(argv[1]))
    if (e.is_regular_file()) paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  dsc::kernels::AugmentSpec spec;
  spec.crop = dsc::kernels::CropMode::kRandomResized;
  spec.out_w = spec.out_h = 224;
  dsc::kernels::JpegDecoder dec;
  size_t widest = 0;
  for (const std::string& p : paths) {
    std::ifstream f(p, std::ios::binary);
    Image im;
    im.jpeg.assign(std::istreambuf_iterator<char>(f), {});
    if (!dec.ReadHeader(im.jpeg.data(), im.jpeg.size(), &im.w, &im.h)) continue;
    for (uint64_t i = 0; i < 4; ++i) {
      dsc::kernels::CropRect r;
      dsc::kernels::SampleParams sp;
      dsc::kernels::MakeParams(spec, im.w, im.h, 1, 0, images.size() * 4 + i, &r, &sp);
      im.rects.push_back(r);
    }
    widest = std::max(widest, size_t(im.w) * size_t(im.h));
    images.push_back(std::move(im));
  }
  std::vector<uint8_t> buf(widest * 3 + 64);
  size_t crops = 0, with_intervals = 0;
  // Per pass, CPU seconds spent on crops whose area is in each quarter of the image's area.
  constexpr int kBins = 4;
  std::vector<double> bin_old[kBins], bin_new[kBins];
  size_t bin_count[kBins] = {};
  auto regions = [&](bool intervals) {
    dec.set_interval_crop(intervals);
    double bins[kBins] = {};
    for (const Image& im : images)
      for (const auto& r : im.rects) {
        int w, h;
        dsc::kernels::DecodedRegion reg;
        timespec a, b;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
        if (!dec.ReadHeader(im.jpeg.data(), im.jpeg.size(), &w, &h) ||
            !dec.DecodeRegion(r.x, r.y, r.w, r.h, 224, 224, buf.data(), size_t(w) * 3, buf.size(), &reg, false)) {
          std::fprintf(stderr, "decode failed: %s\n", dec.error().c_str());
          std::exit(1);
        }
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
        const int bin = std::min(kBins - 1, int(kBins * double(r.w) * r.h / (double(im.w) * im.h)));
        bins[bin] += double(b.tv_sec - a.tv_sec) + 1e-9 * double(b.tv_nsec - a.tv_nsec);
        if (intervals) {
          ++crops;
          with_intervals += dec.last_region_used_intervals();
          if (bin_new[0].empty()) ++bin_count[bin];  // first pass only
        }
      }
    for (int i = 0; i < kBins; ++i) (intervals ? bin_new : bin_old)[i].push_back(bins[i]);
  };
  dsc::kernels::IntervalAssembler scanner;
  size_t scanned_bytes = 0;
  auto scan = [&] {
    for (const Image& im : images) {
      dsc::kernels::RestartLayout l;
      const dsc::kernels::JpegPieces p{nullptr, 0, im.jpeg.data(), im.jpeg.size()};
      if (!dsc::kernels::ParseRestartLayout(p, &l)) continue;
      const size_t all = size_t(l.intervals_per_row) * size_t(l.mcu_rows);
      scanner.FindIntervals(im.jpeg.data() + l.entropy, im.jpeg.size() - l.entropy, all - 1);
      scanned_bytes += im.jpeg.size() - l.entropy;
    }
  };
  auto full = [&] {
    for (const Image& im : images) {
      int w, h;
      if (!dec.ReadHeader(im.jpeg.data(), im.jpeg.size(), &w, &h) || !dec.DecodeRGB(buf.data(), size_t(w) * 3, false))
        std::exit(1);
    }
  };
  tjhandle tj = tjInitDecompress();
  auto scaled = [&](int k) {
    for (const Image& im : images) {
      const int sw = (im.w * k + 7) / 8, sh = (im.h * k + 7) / 8;
      if (tjDecompress2(tj, im.jpeg.data(), im.jpeg.size(), buf.data(), sw, 0, sh, TJPF_RGB, TJFLAG_FASTUPSAMPLE) != 0)
        std::exit(1);
    }
  };
  auto time = [](auto&& f) {  // CPU time of this thread: the machine is shared, wall time is not ours
    timespec a, b;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    f();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    return double(b.tv_sec - a.tv_sec) + 1e-9 * double(b.tv_nsec - a.tv_nsec);
  };
  std::vector<double> t_old, t_new, t_scan, t_full, t_k[9];
  for (int pass = 0; pass < passes; ++pass) {
    if (pass % 2) {
      t_new.push_back(time([&] { regions(true); }));
      t_old.push_back(time([&] { regions(false); }));
    } else {
      t_old.push_back(time([&] { regions(false); }));
      t_new.push_back(time([&] { regions(true); }));
    }
    t_scan.push_back(time(scan));
    t_full.push_back(time(full));
    for (int k = 1; k <= 8; ++k) t_k[k].push_back(time([&] { scaled(k); }));
  }
  tjDestroy(tj);
  const double n = double(images.size()), nc = n * 4;
  std::printf("%zu images, %zu crops (%.0f%% decoded from restart intervals), %d passes, medians\n", images.size(),
              size_t(nc), 100.0 * double(with_intervals) / double(std::max<size_t>(crops, 1)), passes);
  const double o = Median(t_old), w = Median(t_new), f = Median(t_full);
  std::printf("full decode (box)           %8.1f us/image  %7.0f images/s\n", f / n * 1e6, n / f);
  std::printf("region, old (rows to crop)  %8.1f us/crop   %7.0f crops/s\n", o / nc * 1e6, nc / o);
  std::printf("region, restart intervals   %8.1f us/crop   %7.0f crops/s   %.2fx old\n", w / nc * 1e6, nc / w, o / w);
  for (int i = 0; i < kBins; ++i)
    std::printf("  crops of %3d-%3d%% of the image (%4zu): old %7.1f us, intervals %7.1f us, %.2fx\n", 100 * i / kBins,
                100 * (i + 1) / kBins, bin_count[i], Median(bin_old[i]) / double(bin_count[i]) * 1e6,
                Median(bin_new[i]) / double(bin_count[i]) * 1e6, Median(bin_old[i]) / Median(bin_new[i]));
  std::printf("RST scan of all entropy data %7.1f us/image (%.0f MB/s), %.1f%% of a full decode\n",
              Median(t_scan) / n * 1e6, double(scanned_bytes) / double(passes) / Median(t_scan) / 1e6,
              100 * Median(t_scan) / f);
  for (int k = 1; k <= 8; ++k)
    std::printf("TurboJPEG whole image at %d/8 %8.1f us/image  %.2fx of 8/8\n", k, Median(t_k[k]) / n * 1e6,
                Median(t_k[k]) / Median(t_k[8]));
  return 0;
}
