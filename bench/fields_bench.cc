// In-process cost of typed fields per sample, as the loader's consumer thread pays it
// (reader/batch_fields.h): FillFieldColumns over batches of 64 random samples, reusing one
// BatchBuffer as a ring slot does. Contenders, alternated round by round, medians printed:
//   boxes+geometry  the box field and its companions mapped through RandomResizedCrop(224) + flip
//   boxes raw       the same fields copied, not mapped
//   fixed           a fixed-shape field (e.g. 1 KiB) copied out of the columns section
//   memcpy          a plain memcpy of the same fixed field's bytes per sample (the reference)
// usage: fields_bench BOXES.beton BOX_FIELD,COMPANION.. FIXED.beton FIXED_FIELD [ROUNDS] [BATCHES]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "reader/batch_fields.h"
#include "reader/batch_memory.h"
#include "reader/dataset.h"

namespace {

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t comma = std::min(s.find(',', at), s.size());
    out.push_back(s.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// The random sample indices of `batches` batches of 64 (the same for every contender).
std::vector<uint32_t> Indices(uint64_t n, int batches) {
  std::mt19937_64 rng(7);
  std::vector<uint32_t> idx(size_t(batches) * 64);
  for (auto& i : idx) i = uint32_t(rng() % n);
  return idx;
}

// ns per sample of `batches` FillFieldColumns calls.
double TimeFill(const dsc::Dataset& ds, const std::vector<size_t>& fields, const dsc::BoxGeometry& geo,
                const std::vector<uint32_t>& idx, dsc::BatchBuffer* b, uint64_t* sink) {
  const size_t batches = idx.size() / 64;
  auto t0 = std::chrono::steady_clock::now();
  for (int pass = 0; pass < 2; ++pass) {  // the first pass warms the caches: time the second
    t0 = std::chrono::steady_clock::now();
    for (size_t k = 0; k < batches; ++k) {
      b->indices.assign(idx.begin() + long(k * 64), idx.begin() + long(k * 64 + 64));
      dsc::FillFieldColumns(ds.view(), fields, 64, b, geo, k);
      *sink += b->field_data[0].size();
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / double(idx.size());
}

double TimeMemcpy(const dsc::Dataset& ds, size_t f, const std::vector<uint32_t>& idx, std::vector<uint8_t>* dst, uint64_t* sink) {
  const size_t w = size_t(ds.view().layout().width[f]);
  dst->resize(64 * w);
  auto t0 = std::chrono::steady_clock::now();
  for (int pass = 0; pass < 2; ++pass) {
    t0 = std::chrono::steady_clock::now();
    for (size_t k = 0; k < idx.size(); k += 64) {
      for (size_t j = 0; j < 64; ++j) std::memcpy(dst->data() + j * w, ds.view().FixedValue(f, idx[k + j]), w);
      *sink += (*dst)[size_t(k / 64) % dst->size()];
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / double(idx.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s BOXES.beton BOX_FIELD,COMPANION.. FIXED.beton FIXED_FIELD [ROUNDS] [BATCHES]\n", argv[0]);
    return 2;
  }
  const int rounds = argc > 5 ? std::atoi(argv[5]) : 7;
  const int batches = argc > 6 ? std::atoi(argv[6]) : 200;
  try {
    dsc::Dataset boxes_ds(argv[1]), fixed_ds(argv[3]);
    const std::vector<std::string> box_names = Split(argv[2]);
    const std::vector<size_t> box_fields = dsc::SelectFields(boxes_ds.view(), box_names);
    const std::vector<size_t> fixed_fields = dsc::SelectFields(fixed_ds.view(), {argv[4]});
    dsc::kernels::AugmentSpec spec;  // the imagenet-train preset's geometry
    spec.crop = dsc::kernels::CropMode::kRandomResized;
    spec.out_w = spec.out_h = 224;
    spec.flip = true;
    const dsc::BoxGeometry geo = dsc::SelectBoxes(boxes_ds.view(), box_fields, box_names, spec, 1);
    const std::vector<uint32_t> bi = Indices(boxes_ds.size(), batches), fi = Indices(fixed_ds.size(), batches);
    dsc::BatchBuffer b1, b2, b3;
    std::vector<uint8_t> dst;
    uint64_t sink = 0, boxes_in = 0;
    for (uint32_t i : bi) boxes_in += boxes_ds.view().VarValue(box_fields[0], i).size / 16;
    std::vector<double> geo_ns, raw_ns, fixed_ns, copy_ns, ratio;
    for (int r = 0; r < rounds + 1; ++r) {  // round 0 warms the buffers
      const double g = TimeFill(boxes_ds, box_fields, geo, bi, &b1, &sink);
      const double w = TimeFill(boxes_ds, box_fields, {}, bi, &b2, &sink);
      // Each times its second pass over the indices; the order alternates all the same.
      double f = 0, c = 0;
      if (r % 2) {
        f = TimeFill(fixed_ds, fixed_fields, {}, fi, &b3, &sink);
        c = TimeMemcpy(fixed_ds, fixed_fields[0], fi, &dst, &sink);
      } else {
        c = TimeMemcpy(fixed_ds, fixed_fields[0], fi, &dst, &sink);
        f = TimeFill(fixed_ds, fixed_fields, {}, fi, &b3, &sink);
      }
      if (r == 0) continue;
      geo_ns.push_back(g), raw_ns.push_back(w), fixed_ns.push_back(f), copy_ns.push_back(c), ratio.push_back(f / c);
    }
    const size_t w = size_t(fixed_ds.view().layout().width[fixed_fields[0]]);
    std::printf("in-process, one thread, %d batches of 64 random samples per round, %d rounds (medians), ns per sample:\n",
                batches, rounds);
    std::printf("  boxes + geometry (%s; %.1f boxes per sample in, RandomResizedCrop(224) + flip)  %8.1f\n", argv[2],
                double(boxes_in) / double(bi.size()), Median(geo_ns));
    std::printf("  boxes copied, no geometry                                                 %8.1f\n", Median(raw_ns));
    std::printf("  fixed field '%s' (%zu bytes)                                        %8.1f\n", argv[4], w, Median(fixed_ns));
    std::printf("  memcpy of the same %zu bytes per sample (reference)                       %8.1f\n", w, Median(copy_ns));
    std::printf("  fixed field / memcpy, median (range) of the rounds' ratios: %.2fx (%.2f-%.2f)   (sink %llu)\n", Median(ratio),
                *std::min_element(ratio.begin(), ratio.end()), *std::max_element(ratio.begin(), ratio.end()),
                static_cast<unsigned long long>(sink % 10));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fields_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
