// The one exception type dsc throws for bad input, damaged files and I/O failures. Messages always name
// the file and, where it applies, the sample, block or byte offset.
#pragma once
#include <stdexcept>
#include <string>

namespace dsc {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A bad option value (the loader's or the writer's): the dsc program reports it as a usage error.
class OptionError : public Error {
 public:
  using Error::Error;
};

}  // namespace dsc
