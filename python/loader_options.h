// dsc.Loader's keyword arguments: each an option-table row (reader/option_table.h), its Python type
// checked here (TypeError), its value by the row (dsc.OptionError, a ValueError, with the reason the dsc
// program gives).
#pragma once
#include <pybind11/pybind11.h>

#include <optional>
#include <string>
#include <vector>

#include "reader/loader.h"

namespace dsc::python {

// The preset (None: LoaderOptions' defaults), then each keyword argument (None keeps the preset's value).
LoaderOptions MakeLoaderOptions(const std::optional<std::string>& preset, const pybind11::dict& kwargs);
std::vector<std::string> PythonOptionNames();  // the rows Python takes, in table order
std::string LoaderOptionsDoc();                // help(dsc.Loader)'s list of them

}  // namespace dsc::python
