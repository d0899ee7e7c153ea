#include "python/args.h"

#include <pybind11/numpy.h>

#include <cmath>
#include <limits>

namespace dsc::python {

std::string TypeName(py::handle h) { return py::str(py::type::handle_of(h).attr("__name__")); }

[[noreturn]] void BadType(const std::string& name, py::handle h, const char* want) {
  throw py::type_error("option " + name + " must be " + want + ", got " + TypeName(h) + " (" +
                       std::string(py::str(py::repr(h))) + ")");
}
[[noreturn]] void BadValue(const std::string& name, const std::string& why) {
  throw py::value_error("option " + name + " " + why);
}

// numpy.integer (its int scalars), or nullptr without numpy. Held for the process's life.
PyObject* NumpyInteger() {
  static PyObject* const type = [] {
    PyObject* np = PyImport_ImportModule("numpy");
    PyObject* t = np ? PyObject_GetAttrString(np, "integer") : nullptr;
    Py_XDECREF(np);
    if (!t) PyErr_Clear();
    return t;
  }();
  return type;
}

// An int or a numpy integer scalar; not a bool (numpy's neither), float, str, array or tensor (those
// have __index__ too, and out_size=np.array([16, 16]) is a sequence).
bool IsInt(py::handle h) {
  if (PyBool_Check(h.ptr())) return false;
  if (PyLong_Check(h.ptr())) return true;
  PyObject* integer = NumpyInteger();
  const int is = integer ? PyObject_IsInstance(h.ptr(), integer) : 0;
  if (is < 0) PyErr_Clear();
  return is == 1;
}

bool AsBool(const std::string& name, py::handle h) {
  if (!PyBool_Check(h.ptr())) BadType(name, h, "a bool");
  return h.cast<bool>();
}

// A real number (int, float, numpy's scalars) that a float holds: 2**1100 is an error naming the
// option, not pybind11's cast failure.
float AsFloat(const std::string& name, py::handle h) {
  // Not a bool (numpy's bool_ has __float__), str, or array (a 1-element one has __float__ too).
  const std::string type = TypeName(h);
  if (PyBool_Check(h.ptr()) || PyUnicode_Check(h.ptr()) || PyBytes_Check(h.ptr()) || py::isinstance<py::array>(h) ||
      type == "bool_" || type == "bool")
    BadType(name, h, "a number");
  const double d = PyFloat_AsDouble(h.ptr());
  if (d == -1.0 && PyErr_Occurred()) {
    const bool overflow = PyErr_ExceptionMatches(PyExc_OverflowError);
    PyErr_Clear();
    if (overflow) BadValue(name, "= " + std::string(py::str(h)) + " is out of a float's range");
    BadType(name, h, "a number");
  }
  if (std::isfinite(d) && std::fabs(d) > double(std::numeric_limits<float>::max()))
    BadValue(name, "= " + std::string(py::str(h)) + " is out of a float's range");
  return float(d);
}

std::string AsChoice(const std::string& name, py::handle h, const std::vector<std::string>& choices) {
  if (!PyUnicode_Check(h.ptr())) BadType(name, h, "a str");
  const std::string s = h.cast<std::string>();
  std::string list;
  for (const auto& c : choices) {
    if (c == s) return s;
    // Appended piece by piece: GCC 12's LTO warned (-Wstringop-overflow, a false positive) on a
    // concatenation of temporaries here.
    if (!list.empty()) list += ", ";
    list += '\'';
    list += c;
    list += '\'';
  }
  BadValue(name, "= '" + s + "' is not one of " + list);
}

std::string AsStr(const std::string& name, py::handle h) {
  if (!py::isinstance<py::str>(h)) BadType(name, h, "a str");
  return h.cast<std::string>();
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace dsc::python
