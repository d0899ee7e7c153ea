// A reader for the subset of Python's pickle format that CIFAR's "python version" files use: dicts,
// lists, tuples, ints, byte and unicode strings, and numpy arrays, as written by Python 2's cPickle
// (protocol 2) and by Python 3 (protocols 2-5, numpy.core or numpy._core). No Python is involved:
// this is a small stack machine that understands only the opcodes and callables those files contain,
// and rejects anything else with the byte offset.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dsc::pickle {

struct Value;
using Ref = std::shared_ptr<Value>;

struct Value {
  enum class Kind { kNone, kBool, kInt, kFloat, kBytes, kStr, kList, kTuple, kDict, kGlobal, kDtype, kArray };
  Kind kind = Kind::kNone;
  int64_t i = 0;
  double f = 0;
  std::string s;  // bytes, str (UTF-8), a global's "module.name", or a dtype's type string ("u1")
  std::vector<Ref> items;                        // list, tuple
  std::vector<std::pair<Ref, Ref>> dict;         // dict, in insertion order
  // numpy array: dtype string (e.g. "u1", "i8"), byte order ('<', '>', '|' or '=' ), shape, bytes.
  char byte_order = '|';
  std::vector<int64_t> shape;
  std::string data;
  bool fortran = false;
};

// Parses one pickle; throws dsc::Error("pickle: ... at byte N").
Ref Parse(const uint8_t* data, size_t size);

// dict lookup by str or bytes key; nullptr when absent or not a dict.
const Value* DictGet(const Value& dict, const std::string& key);
// Integers from a list/tuple of ints or from an integer ndarray; throws dsc::Error(what + ...) otherwise.
std::vector<int64_t> ToInts(const Value& v, const std::string& what);
// Strings from a list of str/bytes.
std::vector<std::string> ToStrings(const Value& v, const std::string& what);

}  // namespace dsc::pickle
