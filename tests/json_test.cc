// reader/json.h: the layout, numbers and strings of the JSON dsc writes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "format/error.h"
#include "reader/json.h"

namespace dsc {
namespace {

TEST(JsonWriter, LinesAtTheTopInlineBelow) {
  JsonWriter j;
  j.Object(JsonWriter::kLines).Field("file", "a.beton").Field("samples", uint64_t(200));
  j.Key("counts").Array().Uint(1).Uint(2).End();
  j.Key("empty").Object().End();
  j.Key("epochs").Array(JsonWriter::kLines);
  j.Object().Field("epoch", 0).Field("ok", true).End();
  j.Object().Field("epoch", 1).Key("none").Null().End();
  j.End().End();
  EXPECT_EQ(j.Finish(),
            "{\n  \"file\": \"a.beton\",\n  \"samples\": 200,\n  \"counts\": [1, 2],\n  \"empty\": {},\n  \"epochs\": [\n"
            "    {\"epoch\": 0, \"ok\": true},\n    {\"epoch\": 1, \"none\": null}\n  ]\n}\n");
}

TEST(JsonWriter, NumbersAsPrintfG6AndNonFiniteAsNull) {
  JsonWriter j;
  j.Array().Number(0.1).Number(1234567.0).Number(-2.5e-7).Number(3.0).Number(std::nan(""));
  j.Number(std::numeric_limits<double>::infinity()).Number(-std::numeric_limits<double>::infinity());
  j.Uint(std::numeric_limits<uint64_t>::max()).Int(std::numeric_limits<int64_t>::min()).Value(uint8_t(7)).Value(-3).End();
  EXPECT_EQ(j.Finish(), "[0.1, 1.23457e+06, -2.5e-07, 3, null, null, null, 18446744073709551615, -9223372036854775808, 7, -3]\n");
}

TEST(JsonWriter, StringsAndKeysAreEscaped) {
  JsonWriter j;
  j.Object().Field("a\"b", "q\"b\\n\n\x01").Field("bad", std::string("x\xff")).End();
  EXPECT_EQ(j.Finish(), "{\"a\\\"b\": \"q\\\"b\\\\n\\n\\u0001\", \"bad\": \"x\xEF\xBF\xBD\"}\n");
}

TEST(JsonWriter, MisuseIsAnError) {
  {
    JsonWriter j;
    j.Object();
    EXPECT_THROW(j.Uint(1), Error);  // a value without its key
    EXPECT_THROW(j.Finish(), Error);  // unclosed
  }
  {
    JsonWriter j;
    j.Array();
    EXPECT_THROW(j.Key("k"), Error);
    j.End();
    EXPECT_THROW(j.End(), Error);
    EXPECT_THROW(j.Uint(2), Error);  // a second document
  }
  JsonWriter empty;
  EXPECT_THROW(empty.Finish(), Error);
}

}  // namespace
}  // namespace dsc
