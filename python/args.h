// Python arguments checked and converted, with errors that name the argument: TypeError for a value of
// the wrong type, ValueError for a bad value ("option batch_size must be an int, got str ('64')").
#pragma once
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

namespace dsc::python {

namespace py = pybind11;

std::string TypeName(py::handle h);
[[noreturn]] void BadType(const std::string& name, py::handle h, const char* want);
[[noreturn]] void BadValue(const std::string& name, const std::string& why);
// An int or a numpy integer scalar; not a bool (numpy's neither), float, str, array or tensor.
bool IsInt(py::handle h);
bool AsBool(const std::string& name, py::handle h);
// A real number (int, float, numpy's scalars) that a float holds.
float AsFloat(const std::string& name, py::handle h);
std::string AsChoice(const std::string& name, py::handle h, const std::vector<std::string>& choices);
std::string AsStr(const std::string& name, py::handle h);
std::string Join(const std::vector<std::string>& v);  // "a, b, c"

template <typename T>
T AsInt(const std::string& name, py::handle h, long long lo, unsigned long long hi) {
  if (!IsInt(h)) BadType(name, h, "an int");
  PyObject* index = PyNumber_Index(h.ptr());
  if (!index) {
    PyErr_Clear();
    BadType(name, h, "an int");
  }
  const py::int_ v = py::reinterpret_steal<py::int_>(index);
  if (py::int_(lo) > v || v > py::int_(hi))
    BadValue(name, "= " + std::string(py::str(h)) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return lo < 0 ? T(v.cast<long long>()) : T(v.cast<unsigned long long>());
}

}  // namespace dsc::python
