#include "python/loader_options.h"

#include <pybind11/numpy.h>

#include <algorithm>
#include <cmath>

#include <unistd.h>

#ifdef DSC_HAVE_REMOTE
#include "remote/client.h"
#endif
#include "python/args.h"
#include "reader/option_table.h"

namespace dsc::python {

namespace {

// A keyword argument as its option-table row's text (reader/option_table.h): the type is checked here,
// with Python's TypeError; the value by the row, whose OptionError (a ValueError) every front end shares.
std::string LoaderOptionText(const dsc::OptionRow& row, py::handle h) {
  using T = dsc::OptionType;
  const std::string& n = row.name;
  auto whole = [](py::handle v) { return std::string(py::str(py::reinterpret_steal<py::object>(PyNumber_Index(v.ptr())))); };
  auto int_text = [&](const std::string& name, py::handle v) {
    if (!IsInt(v)) BadType(name, v, "an int");
    return whole(v);
  };
  auto sequence = [&](const char* want) {
    if (!(py::isinstance<py::sequence>(h) || py::isinstance<py::array>(h)) || PyUnicode_Check(h.ptr())) BadType(n, h, want);
    return py::reinterpret_borrow<py::object>(h);
  };
  auto join = [](const std::vector<std::string>& parts) {
    std::string s;
    for (const auto& p : parts) s += (s.empty() ? "" : ",") + p;
    return s;
  };
  switch (row.type) {
    case T::kBool: return dsc::TextOf(AsBool(n, h));
    case T::kInt: return int_text(n, h);
    case T::kFloat: return dsc::TextOf(AsFloat(n, h));
    case T::kChoice:
    case T::kText: return AsStr(n, h);
    case T::kThreads:
      if (PyUnicode_Check(h.ptr())) return AsStr(n, h);  // 'auto', 'auto:N'
      if (!IsInt(h)) BadType(n, h, "an int, 'auto' or 'auto:N'");
      return whole(h);
    case T::kInts:
    case T::kFloats: {
      const std::string want = "a sequence of " + std::to_string(row.count) + (row.type == T::kInts ? " ints" : " numbers");
      const py::sequence s = py::reinterpret_borrow<py::sequence>(sequence(want.c_str()));
      std::vector<std::string> parts;  // the row checks the count
      for (size_t i = 0; i < s.size(); ++i) {
        const std::string name = n + "[" + std::to_string(i) + "]";
        parts.push_back(row.type == T::kInts ? int_text(name, s[i]) : dsc::TextOf(AsFloat(name, s[i])));
      }
      return join(parts);
    }
    case T::kIndices: {
      std::vector<std::string> parts;
      for (py::handle x : py::iter(sequence("a sequence of sample indices"))) {
        py::object i = py::reinterpret_steal<py::object>(PyNumber_Index(x.ptr()));
        if (!i) {
          PyErr_Clear();
          BadType(n + " entry", x, "an int");
        }
        parts.push_back(std::string(py::str(i)));
      }
      return join(parts);
    }
    case T::kTexts: {
      if (PyUnicode_Check(h.ptr())) return AsStr(n, h);  // "host:port,host:port"
      std::vector<std::string> parts;
      for (py::handle x : py::iter(sequence("a list of \"host:port\" str"))) parts.push_back(AsStr(n + " entry", x));
      return join(parts);
    }
    case T::kSize: {
      if (IsInt(h)) return int_text(n, h);
      // (height, width), as torchvision's size: whole pixels (15.9 was taken as 15)
      const py::sequence s = py::reinterpret_borrow<py::sequence>(sequence("an int or a sequence of 2 ints"));
      if (s.size() != 2) BadValue(n, "needs 2 ints (height, width), got " + std::to_string(s.size()));
      std::vector<std::string> parts;
      for (size_t i = 0; i < 2; ++i) {  // 16 or 16.0 (np.array([16., 16.]) was taken), not 15.9
        const py::object v = s[i];
        const std::string name = n + "[" + std::to_string(i) + "]";
        if (IsInt(v)) {
          parts.push_back(whole(v));
          continue;
        }
        const float f = AsFloat(name, v);
        if (!(f >= 1 && f <= float(1 << 24) && f == std::floor(f))) BadType(name, v, "a whole number of pixels");
        parts.push_back(std::to_string(int(f)));
      }
      return join(parts);
    }
  }
  BadType(n, h, "a value");
}

}  // namespace

std::vector<std::string> PythonOptionNames() {
  std::vector<std::string> v;
  for (const auto& row : dsc::LoaderOptionTable())
    if (row.where & dsc::kOnPython) v.push_back(row.name);
  return v;
}

// help(dsc.Loader)'s list of options, from the table.
std::string LoaderOptionsDoc() {
  std::string s;
  for (const auto& row : dsc::LoaderOptionTable())
    if (row.where & dsc::kOnPython) s += "    - " + row.name + " [" + dsc::TypeHint(row) + "]: " + row.help + "\n";
  return s;
}

dsc::LoaderOptions MakeLoaderOptions(const std::optional<std::string>& preset, const py::dict& kwargs) {
  std::vector<std::string> given;
  dsc::LoaderOptions o;
  if (preset) o = dsc::Preset(*preset);  // an unknown name: dsc.OptionError listing the presets
  for (auto [k, v] : kwargs) {
    const std::string name = py::str(k);
    const dsc::OptionRow* row = dsc::FindLoaderOption(name);
    if (!row || !(row->where & dsc::kOnPython) || name.find('-') != std::string::npos) {
      // dsc.Loader's own keywords (dsc/__init__.py) are near names too: pin_memroy -> pin_memory.
      static const std::vector<std::string> kOwn = {"rank", "world_size", "copy", "pin_memory", "pad_last", "tracer", "preset"};
      const std::string hint = dsc::SuggestLoaderOption(name, dsc::kOnPython, [](const std::string& n) { return n; }, kOwn);
      throw py::type_error("unknown Loader option '" + name + "'" + (hint.empty() ? "" : " (" + hint + ")") +
                           "; accepted: " + Join(PythonOptionNames()));
    }
    if (v.is_none()) continue;  // None: keep the preset's value
    // The deferred work (flip, translate, cutout, normalise from per-sample parameters) is done by
    // C++'s gpu::Augmenter or kernels::AugmentBatchCpu, neither reachable from here: True would hand
    // out un-augmented images as if they were augmented.
    if (name == "defer_augment" && AsBool(name, v))
      BadValue(name, "True is for C++ (the deferred flip / translate / cutout / normalise run in dsc::gpu::Augmenter); "
                     "Python receives finished batches: for uint8 on the GPU use dtype='uint8', layout='NHWC', normalize=False");
    row->set(o, LoaderOptionText(*row, v));
    given.push_back(name);
  }
  dsc::CheckGivenOptions(o, given, [](const std::string& row) { return "option " + row; });
  // A loop that keeps batches (a list of them, outputs with their graphs) gets more buffers instead
  // of an error, up to a quarter of this machine's memory unless told otherwise.
  if (std::find(given.begin(), given.end(), "lease_memory") == given.end())
    o.lease_memory = uint64_t(::sysconf(_SC_PHYS_PAGES)) * uint64_t(::sysconf(_SC_PAGESIZE)) / 4;
  if (!o.remote.addresses.empty()) {
#ifdef DSC_HAVE_REMOTE
    o.remote.connect = dsc::remote::Connector();
#else
    BadValue("remote", "needs dsc built with gRPC (libgrpc++-dev, protobuf-compiler-grpc); this module was built without");
#endif
  }
  return o;
}

}  // namespace dsc::python
