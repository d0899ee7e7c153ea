// dsc._dsc's transform-list functions (kernels/transforms.h): applying a list to one image with its
// drawn parameters (the torchvision comparison tests replay them) and the registered names.
#pragma once
#include <pybind11/pybind11.h>

namespace dsc::python {
void BindTransforms(pybind11::module_& m);
}  // namespace dsc::python
