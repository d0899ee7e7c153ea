// Restart-marker trade-off on real photos: for each restart target T (and for the sources as they
// are), the total size after lossless transcoding, the images whose interval is a whole MCU row, the
// full-decode time with TurboJPEG, and the cost of finding the RST markers by scanning the payload.
// Rounds are interleaved (every variant once per round) and the median round's thread CPU time is
// reported. "RRC decoded": the mean share of an image's MCUs that a crop-aware decoder would decode
// for torchvision RandomResizedCrop crops (100 per image), given the intervals.
// usage: restart_bench DIR [ROUNDS=5] [T...]     (DIR: a tree of JPEGs, e.g. bench/shrink_photos.py's)
#include <turbojpeg.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cmath>
#include <ctime>
#include <random>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/jpeg_codec.h"
#include "kernels/jpeg_transcode.h"

namespace {

// Thread CPU time, not wall time: the machine is shared, and a decode is single-threaded CPU work.
double Now() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}
using Files = std::vector<std::vector<uint8_t>>;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double DecodeAll(tjhandle h, const Files& files, std::vector<uint8_t>* rgb) {
  const double t0 = Now();
  for (const auto& f : files) {
    int w, hh, s, c;
    tjDecompressHeader3(h, f.data(), f.size(), &w, &hh, &s, &c);
    rgb->resize(size_t(w) * hh * 3);
    if (tjDecompress2(h, f.data(), f.size(), rgb->data(), w, 0, hh, TJPF_RGB, 0) != 0)
      std::fprintf(stderr, "decode failed: %s\n", tjGetErrorStr2(h));
  }
  return Now() - t0;
}

double ScanAll(const Files& files, size_t* markers) {
  const double t0 = Now();
  size_t n = 0;
  std::vector<uint32_t> at;
  for (const auto& f : files) {
    at.clear();
    n += dsc::kernels::ScanRestartMarkers(f.data(), f.size(), &at);
  }
  *markers = n;
  return Now() - t0;
}

// torchvision's RandomResizedCrop.get_params (scale (0.08, 1), ratio (3/4, 4/3)) on a W x H image.
struct Crop {
  int x, y, w, h;
};
Crop RandomResizedCrop(int W, int H, std::mt19937& rng) {
  std::uniform_real_distribution<double> scale(0.08, 1.0), logr(std::log(3.0 / 4), std::log(4.0 / 3));
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double area = W * double(H) * scale(rng), ar = std::exp(logr(rng));
    const int w = int(std::lround(std::sqrt(area * ar))), h = int(std::lround(std::sqrt(area / ar)));
    if (w > 0 && h > 0 && w <= W && h <= H)
      return {std::uniform_int_distribution<int>(0, W - w)(rng), std::uniform_int_distribution<int>(0, H - h)(rng), w, h};
  }
  return {0, 0, W, H};
}

// The share of an image's MCUs a crop-aware decoder entropy-decodes for a crop: every interval that
// the crop touches, in every MCU row it touches.
double DecodedShare(const Crop& c, const dsc::kernels::RestartResult& r) {
  if (r.interval == 0 || r.interval >= r.mcus_per_row * r.mcu_rows) return 1.0;  // no RST marker: whole image
  const int r0 = c.y / r.mcu_height, r1 = (c.y + c.h - 1) / r.mcu_height;
  const int i0 = c.x / r.mcu_width / r.interval, i1 = (c.x + c.w - 1) / r.mcu_width / r.interval;
  const int cols = std::min(r.mcus_per_row, (i1 + 1) * r.interval) - i0 * r.interval;
  return double(r1 - r0 + 1) * cols / (double(r.mcu_rows) * r.mcus_per_row);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: restart_bench DIR [ROUNDS] [T...]\n");
    return 2;
  }
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  std::vector<int> targets;
  for (int i = 3; i < argc; ++i) targets.push_back(std::atoi(argv[i]));
  if (targets.empty()) targets = {2, 3, 4, 6, 8, 12, 16};
  Files sources;
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::recursive_directory_iterator(argv[1]))
    if (e.is_regular_file()) {
      std::string ext = e.path().extension().string();
      for (auto& c : ext) c = char(std::tolower(c));
      if (ext == ".jpg" || ext == ".jpeg") paths.push_back(e.path());
    }
  std::sort(paths.begin(), paths.end());
  for (const auto& p : paths) {
    std::ifstream in(p, std::ios::binary);
    sources.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // Variants: the sources; optimised Huffman tables without restart markers (an interval longer than
  // any of these images); then each target T.
  struct Variant {
    std::string name;
    Files files;
    size_t bytes = 0, whole_row = 0, with_markers = 0;
    double rrc_share = 0;  // mean share of MCUs decoded for RandomResizedCrop crops
    double mean_interval = 0;
    std::vector<double> decode, scan;
    size_t markers = 0;
  };
  std::vector<Variant> vs;
  vs.emplace_back();
  vs.back().name = "source (none)";
  vs.back().files = sources;
  dsc::kernels::JpegRestartWriter w;
  auto transcode = [&](const std::string& name, dsc::kernels::RestartPolicy p) {
    Variant v;
    v.name = name;
    std::mt19937 rng(1);
    for (const auto& f : sources) {
      std::vector<uint8_t> out;
      dsc::kernels::RestartResult r;
      if (!w.Transcode(f.data(), f.size(), p, &out, &r)) {
        std::fprintf(stderr, "transcode failed: %s\n", w.error().c_str());
        std::exit(1);
      }
      int W = 0, H = 0, sub, cs;
      tjhandle th = tjInitDecompress();
      tjDecompressHeader3(th, f.data(), f.size(), &W, &H, &sub, &cs);
      tjDestroy(th);
      for (int k = 0; k < 100; ++k) v.rrc_share += DecodedShare(RandomResizedCrop(W, H, rng), r) / 100;
      if (r.interval == 0) out = f;
      else {
        ++v.with_markers;
        v.mean_interval += r.interval;
        if (r.interval == r.mcus_per_row) ++v.whole_row;
      }
      v.files.push_back(std::move(out));
    }
    if (v.with_markers) v.mean_interval /= double(v.with_markers);
    v.rrc_share /= double(sources.size());
    vs.push_back(std::move(v));
  };
  // An interval longer than any of these images writes a DRI marker but no RST marker; without the
  // DRI segment (6 bytes) the same bytes are a plain Huffman-optimised baseline JPEG.
  transcode("optimised, DRI only", {.fixed = 65535});
  vs.emplace_back(vs.back());
  vs.back().name = "optimised, no DRI";
  for (auto& f : vs.back().files) {
    const size_t prefix = dsc::kernels::JpegPrefixLength(f.data(), f.size());
    for (size_t i = 2; i + 6 <= prefix; ++i)
      if (f[i] == 0xFF && f[i + 1] == 0xDD && f[i + 2] == 0 && f[i + 3] == 4) {
        f.erase(f.begin() + long(i), f.begin() + long(i) + 6);
        break;
      }
  }
  for (int t : targets) transcode("auto T=" + std::to_string(t), {.target = t});
  for (auto& v : vs)
    for (const auto& f : v.files) v.bytes += f.size();
  tjhandle h = tjInitDecompress();
  std::vector<uint8_t> rgb;
  for (int r = 0; r < rounds; ++r)
    for (auto& v : vs) {
      v.decode.push_back(DecodeAll(h, v.files, &rgb));
      v.scan.push_back(ScanAll(v.files, &v.markers));
    }
  tjDestroy(h);
  std::printf("%zu images from %s, %d rounds (medians)\n", sources.size(), argv[1], rounds);
  std::printf("%-20s %12s %8s %10s %10s %13s %13s %10s %11s %12s\n", "variant", "bytes", "size", "markers", "whole-row",
              "mean interval", "decode ms/img", "vs source", "scan us/img", "RRC decoded");
  const double base_decode = Median(vs[0].decode);
  for (auto& v : vs) {
    const double dec = Median(v.decode), scan = Median(v.scan);
    std::printf("%-20s %12zu %7.4fx %10zu %10zu %13.1f %13.3f %9.3fx %11.2f %11.1f%%\n", v.name.c_str(), v.bytes,
                double(v.bytes) / double(vs[0].bytes), v.markers, v.whole_row, v.mean_interval,
                1e3 * dec / double(sources.size()), dec / base_decode, 1e6 * scan / double(sources.size()),
                100 * (v.rrc_share > 0 ? v.rrc_share : 1.0));
  }
  return 0;
}
