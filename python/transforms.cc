#include "python/transforms.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kernels/mix.h"
#include "kernels/transforms.h"

namespace py = pybind11;

namespace dsc::python {
namespace {

struct VectorLog final : kernels::ParamLog {
  std::vector<std::pair<std::string, double>> entries;
  void Put(const char* name, double v) override { entries.emplace_back(name, v); }
};

}  // namespace

void BindTransforms(py::module_& m) {
  m.def(
      "_apply_transform",
      [](const std::string& spec, py::array_t<uint8_t, py::array::c_style | py::array::forcecast> image, uint64_t seed,
         uint64_t epoch, uint64_t index) {
        if (image.ndim() != 3 || image.shape(2) != 3) throw py::value_error("image must be a uint8 H x W x 3 array");
        const kernels::TransformList list = kernels::ParseTransforms(spec);
        py::array_t<uint8_t> out({image.shape(0), image.shape(1), py::ssize_t(3)});
        std::memcpy(out.mutable_data(), image.data(), size_t(image.size()));
        kernels::ImageU8 img{out.mutable_data(), int(image.shape(1)), int(image.shape(0))};
        VectorLog log;
        {
          py::gil_scoped_release nogil;
          kernels::TransformScratch scratch;
          list.Apply(img, seed, epoch, index, scratch, &log);
        }
        return py::make_tuple(out, log.entries);
      },
      py::arg("spec"), py::arg("image"), py::arg("seed") = 0, py::arg("epoch") = 0, py::arg("index") = 0,
      "Applies the transform list `spec` to a copy of a uint8 HxWx3 image with sample `index`'s stream; returns "
      "(image, [(parameter, value), ...]) with the parameters in the order drawn.");
  m.def(
      "_transform_draws",
      [](const std::string& spec, int width, int height, uint64_t seed, uint64_t n) {
        const kernels::TransformList list = kernels::ParseTransforms(spec);
        std::vector<std::vector<std::pair<std::string, double>>> all;
        std::vector<uint8_t> pixels(size_t(width) * size_t(height) * 3);
        kernels::TransformScratch scratch;
        for (uint64_t i = 0; i < n; ++i) {
          for (size_t k = 0; k < pixels.size(); ++k) pixels[k] = uint8_t((k * 37 + i) & 0xFF);
          VectorLog log;
          list.Apply(kernels::ImageU8{pixels.data(), width, height}, seed, 0, i, scratch, &log);
          all.push_back(std::move(log.entries));
        }
        return all;
      },
      py::arg("spec"), py::arg("width"), py::arg("height"), py::arg("seed"), py::arg("n"),
      "The parameters a list draws for samples 0..n-1 of a width x height image (statistical tests).");
  m.def(
      "_mix_batch",
      [](py::array_t<float, py::array::c_style> images, py::array_t<int32_t, py::array::c_style | py::array::forcecast> labels,
         int num_classes, float mixup_alpha, float cutmix_alpha, float prob, float switch_prob, float label_smoothing,
         bool nchw, uint64_t seed, uint64_t epoch, uint64_t batch) {
        if (images.ndim() != 4) throw py::value_error("images must be a float32 N x C x H x W or N x H x W x C array");
        const int n = int(images.shape(0));
        if (labels.ndim() != 1 || labels.shape(0) != n) throw py::value_error("labels must be N int32 values");
        const int c = int(nchw ? images.shape(1) : images.shape(3));
        const int h = int(nchw ? images.shape(2) : images.shape(1));
        const int w = int(nchw ? images.shape(3) : images.shape(2));
        kernels::MixSpec spec{mixup_alpha, cutmix_alpha, prob, switch_prob, label_smoothing, num_classes};
        py::array_t<float> soft({py::ssize_t(n), py::ssize_t(num_classes)});
        float* px = images.mutable_data();
        const int32_t* lb = labels.data();
        float* out = soft.mutable_data();
        kernels::MixDraw d;
        {
          py::gil_scoped_release nogil;
          d = kernels::MixBatch(spec, px, n, c, h, w, nchw, lb, out, seed, epoch, batch);
        }
        py::dict draw;
        draw["mixed"] = d.mixed;
        draw["cutmix"] = d.cutmix;
        draw["lam"] = d.lam;
        draw["box"] = py::make_tuple(d.x0, d.y0, d.x1, d.y1);
        return py::make_tuple(soft, draw);
      },
      py::arg("images"), py::arg("labels"), py::arg("num_classes"), py::arg("mixup_alpha"), py::arg("cutmix_alpha"),
      py::arg("prob"), py::arg("switch_prob"), py::arg("label_smoothing"), py::arg("nchw"), py::arg("seed"),
      py::arg("epoch"), py::arg("batch"),
      "MixUp / CutMix of a float32 batch in place (kernels/mix.h); returns (soft labels N x classes, the draw).");
  m.def("transform_names", &kernels::TransformNames, "(name, torchvision signature) of every registered transform");
  m.def(
      "check_transforms", [](const std::string& spec) { return kernels::ParseTransforms(spec).Text(); },
      py::arg("spec"), "Parses a transform list; returns its canonical text or raises dsc.Error.");
}

}  // namespace dsc::python
