#include "python/transforms.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

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
  m.def("transform_names", &kernels::TransformNames, "(name, torchvision signature) of every registered transform");
  m.def(
      "check_transforms", [](const std::string& spec) { return kernels::ParseTransforms(spec).Text(); },
      py::arg("spec"), "Parses a transform list; returns its canonical text or raises dsc.Error.");
}

}  // namespace dsc::python
