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

// Parse's limits (each breach is a dsc::Error naming the byte offset): containers nest at most kMaxDepth
// deep, no list or dict contains itself, and copies made while parsing (strings, a callable's result,
// an array's data and shape) total at most kMaxCopyFactor x the input size + kMaxCopySlack bytes, so a
// memoised string reused many times cannot make a small file materialise terabytes. Real CIFAR batches
// need at most 3 x (Python 3's latin-1 text, its bytes, the array's copy).
inline constexpr uint32_t kMaxDepth = 1000;
inline constexpr uint64_t kMaxCopyFactor = 4;
inline constexpr uint64_t kMaxCopySlack = uint64_t(1) << 20;

struct Value {
  enum class Kind { kNone, kBool, kInt, kFloat, kBytes, kStr, kList, kTuple, kDict, kGlobal, kDtype, kArray };
  Value() = default;
  Value(const Value&) = default;
  Value& operator=(const Value&) = default;
  // Frees the tree below without recursion: a deep tree must not overflow the stack.
  ~Value();

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
  // Parser bookkeeping: how many container levels sit at and below this one (as known when it was last
  // changed), and the byte offset of the opcode that made or last changed it (for error messages).
  uint32_t depth = 0;
  uint64_t changed_at = 0;
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
