// dsc.Writer's core (python/dsc/writer.py turns NumPy arrays, PIL images, bytes and str into the
// (kind, data) pairs this takes): a dsc::Writer (writer/writer.h) with the GIL released while it encodes.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>

#include "format/fields.h"
#include "python/gil.h"
#include "writer/writer.h"

namespace py = pybind11;
using dsc::python::WithoutGil;

namespace {

class PyWriter {
 public:
  // schema: (name, type, dtype, shape, classes) per field, the format's names ("image", "label",
  // "scalar", "array", "var_array", "bytes", "text"; "int8" .. "bool").
  PyWriter(const std::string& path, const std::vector<std::tuple<std::string, std::string, std::string, std::vector<uint32_t>,
                                                                 std::vector<std::string>>>& schema,
           const py::dict& options) {
    dsc::Schema s;
    for (const auto& [name, type, dtype, shape, classes] : schema) {
      dsc::format::Field f;
      f.name = name;
      f.dims = shape;
      f.classes = classes;
      bool known = false;
      for (uint8_t t = 1; t <= 8; ++t)
        if (type == dsc::format::FieldTypeName(dsc::format::FieldType(t))) f.type = dsc::format::FieldType(t), known = true;
      if (!known) throw dsc::OptionError("field '" + name + "': unknown type '" + type + "'");
      if (!dtype.empty() && !dsc::format::ParseDType(dtype, &f.dtype))
        throw dsc::OptionError("field '" + name + "': unknown dtype '" + dtype + "'");
      s.push_back(std::move(f));
    }
    dsc::WriterOptions o;
    for (const auto& [k, v] : options) {
      const std::string key = py::str(k);
      if (key == "threads") o.threads = v.cast<int>();
      else if (key == "block_size") o.block_size = v.cast<uint64_t>();
      else if (key == "jpeg_tables") o.jpeg_tables = v.cast<std::string>();
      else if (key == "encoding") o.encode.encoding = v.cast<std::string>();
      else if (key == "quality") o.encode.quality = v.cast<int>();
      else if (key == "subsampling") o.encode.subsampling = v.cast<std::string>();
      else if (key == "max_resolution") o.encode.max_resolution = v.cast<int>();
      else if (key == "restart_interval") o.encode.restart_interval = v.cast<std::string>();
      else if (key == "max_file_size") o.max_file_size = v.cast<uint64_t>();
      else throw dsc::OptionError("dsc.Writer: unknown option '" + key + "'");
    }
    w_ = std::make_unique<dsc::Writer>(path, std::move(s), std::move(o));
  }

  // values: name -> (kind, data, width, height, dtype): kind "image" (encoded bytes), "pixels" (RGB
  // HWC uint8, width x height), "mask" (H x W x C values; C in the dtype slot), "raw" (little-endian
  // elements of dtype), "bytes", "text" (UTF-8), "file" (a path, str: the file's contents for an image
  // or bytes field, read by the writer).
  void Add(const py::dict& values) {
    dsc::Sample s;
    for (const auto& [k, v] : values) {
      const std::string name = py::str(k);
      const auto t = v.cast<py::tuple>();
      const std::string kind = t[0].cast<std::string>();
      if (kind == "file") {
        s.SetFile(name, t[1].cast<std::string>());
        continue;
      }
      const py::buffer_info b = t[1].cast<py::buffer>().request();
      const auto* p = static_cast<const uint8_t*>(b.ptr);
      std::vector<uint8_t> bytes(p, p + size_t(b.size) * size_t(b.itemsize));
      if (kind == "image") s.SetImage(name, std::move(bytes));
      else if (kind == "pixels") s.SetPixels(name, std::move(bytes), t[2].cast<int>(), t[3].cast<int>());
      else if (kind == "mask") s.SetMask(name, std::move(bytes), t[2].cast<int>(), t[3].cast<int>(), t[4].cast<int>());
      else if (kind == "bytes") s.SetBytes(name, std::move(bytes));
      else if (kind == "text") s.SetText(name, std::string(bytes.begin(), bytes.end()));
      else if (kind == "raw") {
        dsc::format::DType dt;
        if (!dsc::format::ParseDType(t[4].cast<std::string>(), &dt)) throw dsc::OptionError("field '" + name + "': unknown dtype");
        s.SetRaw(name, dt, bytes.data(), bytes.size());
      } else {
        throw dsc::OptionError("field '" + name + "': unknown value kind '" + kind + "'");
      }
    }
    WithoutGil([&] { w_->Add(std::move(s)); });
  }

  uint64_t Close() {
    return WithoutGil([&] { return w_->Close(); });
  }
  uint64_t Samples() const { return w_->samples(); }

 private:
  std::unique_ptr<dsc::Writer> w_;
};

}  // namespace

namespace dsc::python {

void RegisterWriter(py::module_& m) {
  py::class_<PyWriter>(m, "Writer")
      .def(py::init<const std::string&, const std::vector<std::tuple<std::string, std::string, std::string, std::vector<uint32_t>,
                                                                     std::vector<std::string>>>&,
                    const py::dict&>(),
           py::arg("path"), py::arg("schema"), py::arg("options"))
      .def("add", &PyWriter::Add)
      .def("close", &PyWriter::Close)
      .def("samples", &PyWriter::Samples);
}

}  // namespace dsc::python
