// The pickle subset reader: real cPickle-shaped input parses to the right values; every truncation and
// unsupported construct is an error with a byte offset, never a crash.
#include <gtest/gtest.h>

#include "format/error.h"
#include "tests/pickle_writer.h"
#include "writer/pickle.h"

namespace dsc::test {
namespace {

using pickle::Value;
using namespace std::string_literals;

std::string SampleBatch() {
  Py2Pickler p;
  std::vector<uint8_t> data(2 * 3072);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 31);
  std::vector<int> labels(2500);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = int(i % 300);  // K and M opcodes, 3 APPENDS batches
  p.BeginDict(3);
  p.Str("data");
  p.U8Array(data.data(), 2, 3072);
  p.Str("labels");
  p.IntList(labels);
  p.Str("batch_label");
  p.Str("training batch 1 of 5");
  p.EndDict();
  return p.Finish();
}

TEST(Pickle, ParsesCPickleProtocol2) {
  std::string s = SampleBatch();
  auto root = pickle::Parse(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  ASSERT_EQ(root->kind, Value::Kind::kDict);
  const Value* data = pickle::DictGet(*root, "data");
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(data->kind, Value::Kind::kArray);
  EXPECT_EQ(data->s, "u1");
  EXPECT_EQ(data->shape, (std::vector<int64_t>{2, 3072}));
  ASSERT_EQ(data->data.size(), 6144u);
  EXPECT_EQ(uint8_t(data->data[100]), uint8_t(100 * 31));
  auto labels = pickle::ToInts(*pickle::DictGet(*root, "labels"), "labels");
  ASSERT_EQ(labels.size(), 2500u);
  EXPECT_EQ(labels[299], 299);
  EXPECT_EQ(labels[2499], 2499 % 300);
  EXPECT_EQ(pickle::DictGet(*root, "batch_label")->s, "training batch 1 of 5");
  EXPECT_EQ(pickle::DictGet(*root, "missing"), nullptr);
}

TEST(Pickle, EveryTruncationIsAnError) {
  std::string s = SampleBatch();
  for (size_t cut = 0; cut < s.size(); cut += (cut < 400 ? 1 : 97)) {
    try {
      pickle::Parse(reinterpret_cast<const uint8_t*>(s.data()), cut);
      ADD_FAILURE() << "accepted a pickle cut at " << cut;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("at byte"), std::string::npos);
    }
  }
}

TEST(Pickle, RejectsUnsupportedCallablesAndOpcodes) {
  std::string evil = std::string("\x80\x02") + "cos\nsystem\nU\x02lsq\x01\x85R.";
  try {
    pickle::Parse(reinterpret_cast<const uint8_t*>(evil.data()), evil.size());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unsupported callable os.system"), std::string::npos) << e.what();
  }
  std::string odd = "\x80\x02\x01.";
  EXPECT_THROW(pickle::Parse(reinterpret_cast<const uint8_t*>(odd.data()), odd.size()), Error);
  std::string underflow = "\x80\x02s.";
  EXPECT_THROW(pickle::Parse(reinterpret_cast<const uint8_t*>(underflow.data()), underflow.size()), Error);
  std::string badget = "\x80\x02h\x05.";
  EXPECT_THROW(pickle::Parse(reinterpret_cast<const uint8_t*>(badget.data()), badget.size()), Error);
}

TEST(Pickle, RandomMutationsNeverCrash) {
  std::string s = SampleBatch().substr(0, 2000);
  s.back() = '.';
  uint32_t seed = 1;
  for (int k = 0; k < 3000; ++k) {
    std::string m = s;
    for (int j = 0; j < 3; ++j) {
      seed = seed * 1664525u + 1013904223u;
      m[(seed >> 8) % m.size()] = char(seed >> 24);
    }
    try {
      pickle::Parse(reinterpret_cast<const uint8_t*>(m.data()), m.size());
    } catch (const Error&) {
    }
  }
  SUCCEED();
}

// Raw opcode helpers for the limit tests below.
// Appends opcode `op` with a little-endian u32 argument.
void Op32(std::string* o, char op, uint32_t v) {
  o->push_back(op);
  for (int i = 0; i < 4; ++i) o->push_back(char(v >> (8 * i)));
}

// The error Parse throws for `s`, or "" when it accepts it.
std::string ParseError(const std::string& s) {
  try {
    pickle::Parse(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Pickle, DeepTupleNestingIsBoundedNotAStackOverflow) {
  // 300,000 nested TUPLE1s: destroying such a tree recursively overflows the stack.
  const size_t depth = 300000;
  std::string s = std::string("\x80\x02N", 3) + std::string(depth, '\x85') + ".";
  std::string err = ParseError(s);
  EXPECT_NE(err.find("nested deeper than 1000"), std::string::npos) << err;
  // The 1001st TUPLE1 (after PROTO 2 and None, bytes 0-2) is the one that goes too deep.
  EXPECT_NE(err.find("at byte " + std::to_string(2 + 1001)), std::string::npos) << err;
  // 1000 levels of tuples around None are still fine.
  std::string ok = std::string("\x80\x02N", 3) + std::string(1000, '\x85') + ".";
  auto root = pickle::Parse(reinterpret_cast<const uint8_t*>(ok.data()), ok.size());
  size_t levels = 0;
  for (const Value* v = root.get(); v->kind == Value::Kind::kTuple; v = v->items.at(0).get()) ++levels;
  EXPECT_EQ(levels, 1000u);
}

TEST(Pickle, DeepListNestingMadeThroughTheMemoIsBounded) {
  // Lists made first, then each appended into the previous one: no list looks deep when it is changed,
  // yet A0 ends up 100,000 levels deep. The whole result is checked (and freed) without recursion.
  const uint32_t n = 100000;
  std::string s = std::string("\x80\x02(", 3);
  for (uint32_t i = 0; i < n; ++i) {
    s += ']';
    Op32(&s, 'r', i);  // LONG_BINPUT i
  }
  for (uint32_t i = 0; i + 1 < n; ++i) {
    Op32(&s, 'j', i);  // LONG_BINGET
    Op32(&s, 'j', i + 1);
    s += 'a';
  }
  s += "t.";
  std::string err = ParseError(s);
  EXPECT_NE(err.find("nested deeper than 1000"), std::string::npos) << err;
  EXPECT_NE(err.find("at byte"), std::string::npos) << err;
}

TEST(Pickle, ListOrDictThatContainsItselfIsRefused) {
  // A list appended to itself through the memo, a dict holding itself as a value, and a cycle through a
  // tuple (list -> tuple -> list). Each would leak (shared_ptr cycles) and hang a tree walk.
  const std::string self_list = "\x80\x02]q\x00h\x00" "a."s;
  const std::string self_dict = "\x80\x02}q\x00K\x01h\x00s."s;
  const std::string via_tuple = "\x80\x02]q\x00h\x00\x85q\x01" "a."s;
  for (const std::string& s : {self_list, self_dict, via_tuple}) {
    std::string err = ParseError(s);
    EXPECT_NE(err.find("contains itself"), std::string::npos) << err;
    EXPECT_NE(err.find("at byte"), std::string::npos) << err;
  }
  // The cycle's last link is the APPEND at byte 7 / SETITEM at byte 9 / APPEND at byte 10.
  EXPECT_NE(ParseError(self_list).find("at byte 7"), std::string::npos) << ParseError(self_list);
  EXPECT_NE(ParseError(self_dict).find("at byte 9"), std::string::npos) << ParseError(self_dict);
  EXPECT_NE(ParseError(via_tuple).find("at byte 10"), std::string::npos) << ParseError(via_tuple);
  // A cycle followed by a bad opcode: the error path must free it too (ASan's leak check shows it).
  const std::string then_bad = "\x80\x02]q\x00h\x00" "a\x01"s;
  EXPECT_NE(ParseError(then_bad).find("unsupported opcode 0x01"), std::string::npos) << ParseError(then_bad);
  // Sharing without a cycle is fine: the same list twice in a tuple.
  const std::string shared = "\x80\x02]q\x00K\x07" "ah\x00\x86."s;
  auto root = pickle::Parse(reinterpret_cast<const uint8_t*>(shared.data()), shared.size());
  ASSERT_EQ(root->items.size(), 2u);
  EXPECT_EQ(root->items[0], root->items[1]);
  EXPECT_EQ(root->items[0]->items.at(0)->i, 7);
}

TEST(Pickle, MemoisedStringReusedManyTimesIsBounded) {
  // One 1 MiB string memoised, then copied by bytes() 200 times (200 MiB from 1 MiB of input), and
  // separately glued to itself by STACK_GLOBAL 200 times. Materialised bytes are bounded to
  // 4 x the input size + 1 MiB.
  const uint32_t len = 1 << 20;
  const std::string big(len, 'x');
  std::string copies = "\x80\x02("s;
  Op32(&copies, 'B', len);  // BINBYTES
  copies += big + "q\x00"s + "c__builtin__\nbytes\nq\x01"s;
  for (int i = 0; i < 200; ++i) copies += std::string("h\x01h\x00\x85R", 6);
  copies += "t.";
  std::string err = ParseError(copies);
  EXPECT_NE(err.find("materialises more than"), std::string::npos) << err;
  EXPECT_NE(err.find("at byte"), std::string::npos) << err;

  std::string globals = "\x80\x02("s;
  Op32(&globals, 'X', len);  // BINUNICODE
  globals += big + "q\x00"s;
  for (int i = 0; i < 200; ++i) globals += std::string("h\x00h\x00\x93", 5);
  globals += "t.";
  err = ParseError(globals);
  EXPECT_NE(err.find("materialises more than"), std::string::npos) << err;

  // A real-shaped batch (its array data copied once by BUILD) stays well inside the bound.
  std::vector<uint8_t> data(len);
  Py2Pickler p;
  p.BeginDict(1);
  p.Str("data");
  p.U8Array(data.data(), 1024, 1024);
  p.EndDict();
  std::string batch = p.Finish();
  EXPECT_EQ(ParseError(batch), "");
}

}  // namespace
}  // namespace dsc::test
