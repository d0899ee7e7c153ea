// Writes pickles byte for byte the way Python 2's cPickle (protocol 2) wrote CIFAR's python-version
// files: SHORT_BINSTRING/BINSTRING strings, BINPUT memo after each container, MARK+SETITEMS/APPENDS in
// batches of 1000, numpy arrays rebuilt through numpy.core.multiarray._reconstruct + BUILD.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dsc::test {

class Py2Pickler {
 public:
  Py2Pickler();
  void BeginDict(size_t items);  // then call Key/value pairs, then EndDict
  void EndDict();
  void Str(const std::string& s);
  void Int(int64_t v);
  void IntList(const std::vector<int>& v);
  void StrList(const std::vector<std::string>& v);
  void U8Array(const uint8_t* data, int64_t rows, int64_t cols);
  std::string Finish();

 private:
  void Put();  // BINPUT / LONG_BINPUT with the next memo index
  std::string out_;
  uint32_t memo_ = 1;
  std::vector<size_t> dict_items_, dict_done_;
};

}  // namespace dsc::test
