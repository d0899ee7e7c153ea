// Reading samples of a (fuzzed) file through the loader's per-sample path, without verification:
// whatever the bytes, decoding either works or throws dsc::Error, and never reads outside the file.
// Typed files' fields go through the batch column fill too (variable values, masks decoded and cropped),
// and format 1.3's further images through the same per-sample path as the first.
#include <memory>
#include <vector>

#include "format/error.h"
#include "kernels/augment.h"
#include "reader/batch_fields.h"
#include "reader/batch_memory.h"
#include "reader/dataset.h"
#include "reader/loader.h"
#include "reader/sample_processor.h"
#include "tests/fuzz/fuzz_targets.h"

DSC_FUZZ_TARGET {
  try {
    dsc::Dataset ds(std::make_unique<dsc::format::MemorySource>("fuzz.beton", data, size), {});
    std::vector<uint32_t> images{0};
    for (size_t f = 1; f < ds.meta().fields.size(); ++f)
      if (dsc::format::IsFurtherImage(ds.meta(), f)) images.push_back(uint32_t(f));
    for (uint32_t image : images)
    for (bool crop : {false, true}) {
      dsc::kernels::AugmentSpec spec = dsc::LoaderOptions::CifarTrain().augment;
      uint32_t w = 32, h = 32;
      if (crop) {
        spec.crop = dsc::kernels::CropMode::kRandomResized;
        spec.out_w = spec.out_h = 16;
        w = h = 16;
      } else if (ds.size() > 0) {
        w = ds.entry(0, image).width;
        h = ds.entry(0, image).height;
        if (w * h > 4096 * 4096) continue;
      }
      float table[768];
      uint16_t half[768];
      dsc::kernels::MakeNormalizeTable(spec, table);
      dsc::OutputFormat out{dsc::DType::kFloat32, dsc::Layout::kNCHW, w, h, table, half, false, {1, 1, 1}, {0, 0, 0}};
      dsc::kernels::NormalizeCoefficients(spec, out.scale, out.bias);
      out.image = image;
      dsc::SampleProcessor proc(ds, spec, out, false);
      std::vector<uint8_t> dst(size_t(w) * h * 3 * 4);
      dsc::StageStats st;
      for (uint64_t i = 0; i < ds.size() && i < 16; ++i) {
        const auto e = ds.entry(i, image);
        if (!crop && (e.width != w || e.height != h)) continue;  // the loader refuses mixed sizes up front
        try {
          proc.Process(i, 1, 0, dst.data(), &st);
        } catch (const dsc::Error&) {
        }
      }
      if (ds.view().typed() && image == 0) {
        try {
          const auto fields = dsc::SelectFields(ds.view(), {});
          const dsc::BoxGeometry geo = dsc::SelectBoxes(ds.view(), fields, {}, spec, 1);
          dsc::BatchBuffer b;
          for (uint64_t i = 0; i < ds.size() && i < 16; ++i)
            if (crop || (ds.entry(i).width == w && ds.entry(i).height == h)) b.indices.push_back(uint32_t(i));
          dsc::FillFieldColumns(ds.view(), fields, uint32_t(b.indices.size()), &b, geo, 0);
        } catch (const dsc::Error&) {
        }
      }
    }
  } catch (const dsc::Error&) {
  }
  return 0;
}
