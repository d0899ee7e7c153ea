// The pickle subset reader: real cPickle-shaped input parses to the right values; every truncation and
// unsupported construct is an error with a byte offset, never a crash.
#include <gtest/gtest.h>

#include "format/error.h"
#include "tests/pickle_writer.h"
#include "writer/pickle.h"

namespace dsc::test {
namespace {

using pickle::Value;

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

}  // namespace
}  // namespace dsc::test
