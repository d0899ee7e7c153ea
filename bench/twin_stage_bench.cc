// Host-side cost of staging JPEG payloads for the GPU decoder (kernels/jpeg_twin_batch.h): parse (shared
// table sets once per batch), restart-interval scan, copy into the staging buffer. Per image, median of
// repeated passes. Also the host twin's full CPU decode per image, for scale (it is the GPU code run
// serially, not a fast CPU decoder).
//
//   twin_stage_bench FILE.beton|JPEG_DIR [--batch N] [--reps N] [--decode]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/jpeg_twin.h"
#include "kernels/jpeg_twin_batch.h"
#include "reader/dataset.h"

namespace {

struct Item {
  const uint8_t* head;
  size_t head_size;
  const uint8_t* body;
  size_t body_size;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE.beton|JPEG_DIR [--batch N] [--reps N] [--decode]\n", argv[0]);
    return 2;
  }
  const std::string src = argv[1];
  size_t batch = 512;
  int reps = 9;
  bool decode = false;
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--batch") && i + 1 < argc) batch = std::stoul(argv[++i]);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::stoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--decode")) decode = true;
  }
  if (!std::filesystem::exists(src)) {
    std::fprintf(stderr, "%s: no such file or folder\n", src.c_str());
    return 1;
  }
  std::vector<Item> items;
  std::vector<std::vector<uint8_t>> files;
  std::unique_ptr<dsc::Dataset> ds;
  std::vector<std::vector<uint8_t>> scratch;
  if (std::filesystem::is_directory(src)) {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::recursive_directory_iterator(src))
      if (e.is_regular_file()) names.push_back(e.path().string());
    std::sort(names.begin(), names.end());
    for (const auto& n : names) {
      std::ifstream f(n, std::ios::binary);
      files.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }
    for (const auto& f : files) items.push_back({nullptr, 0, f.data(), f.size()});
  } else try {
    ds = std::make_unique<dsc::Dataset>(src);
    scratch.resize(ds->size());
    for (uint64_t i = 0; i < ds->size(); ++i) {
      const auto p = ds->ReadPayloadParts(i, &scratch[i]);
      items.push_back({p.head.data, p.head.size, p.body.data, p.body.size});
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  if (items.empty()) {
    std::fprintf(stderr, "%s: no payloads\n", src.c_str());
    return 1;
  }
  size_t max_body = 0;
  for (const auto& it : items) max_body = std::max(max_body, it.body_size);
  std::vector<uint8_t> buf(batch * (max_body + 64 + sizeof(dsc::kernels::TwinTables)) + (16u << 20));
  dsc::kernels::TwinBatchStager st(buf.data(), buf.size(), uint32_t(batch), uint32_t(batch) * 1024);
  size_t staged = 0, refused = 0, units = 0, tables = 0, bytes = 0;
  std::vector<double> per_image, copy_only;
  for (int r = 0; r < reps; ++r) {
    // The floor, interleaved with the measured passes: only copying the payload bytes into the buffer.
    const auto c0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < items.size(); i += batch) {
      size_t at = 0;
      for (size_t j = i; j < std::min(items.size(), i + batch); ++j) {
        std::memcpy(buf.data() + at, items[j].body, items[j].body_size);
        at += items[j].body_size;
      }
    }
    const auto c1 = std::chrono::steady_clock::now();
    copy_only.push_back(std::chrono::duration<double, std::micro>(c1 - c0).count() / double(items.size()));
    staged = refused = units = tables = bytes = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < items.size(); i += batch) {
      st.Reset();
      for (size_t j = i; j < std::min(items.size(), i + batch); ++j) {
        const auto& it = items[j];
        if (st.Add(it.head, it.head_size, it.body, it.body_size).status == dsc::kernels::kTwinOk) ++staged;
        else ++refused;
      }
      if (!st.Finish()) return 1;
      units += st.header().units;
      tables += st.header().table_sets;
      bytes += st.bytes_used();
    }
    const auto t1 = std::chrono::steady_clock::now();
    per_image.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / double(items.size()));
  }
  std::printf("%s: %zu images, batch %zu: %zu staged, %zu refused (CPU), %.1f units/image, %zu table sets, "
              "%.1f KiB staged/image\n",
              src.c_str(), items.size(), batch, staged, refused, double(units) / double(items.size()), tables,
              double(bytes) / 1024.0 / double(items.size()));
  std::printf("staging: median %.3f us/image, min %.3f us/image over %d passes\n", Median(per_image),
              *std::min_element(per_image.begin(), per_image.end()), reps);
  std::printf("memcpy of the payload bodies alone (floor): median %.3f us/image, min %.3f us/image\n",
              Median(copy_only), *std::min_element(copy_only.begin(), copy_only.end()));
  if (decode) {
    std::vector<uint8_t> rgb;
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& it : items) {
      int w, h;
      dsc::kernels::DecodeTwinRGB(it.head, it.head_size, it.body, it.body_size, false, &rgb, &w, &h);
    }
    const auto t1 = std::chrono::steady_clock::now();
    std::printf("host twin full decode (serial GPU code on one core): %.1f us/image\n",
                std::chrono::duration<double, std::micro>(t1 - t0).count() / double(items.size()));
  }
  return 0;
}
