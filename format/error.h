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

}  // namespace dsc
