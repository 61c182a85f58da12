// Tests for up::JsonWriter: field order and types, string escaping, nested
// Raw values, non-finite doubles as null, and exact double round trips.
#include "common/base/json_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

namespace up {
namespace {

TEST(JsonWriterTest, EmptyObject) { EXPECT_EQ(JsonWriter().str(), "{}"); }

TEST(JsonWriterTest, AppendKeepsBothOrders) {
  JsonWriter tail;
  tail.Field("b", 2).Field("c", "x");
  EXPECT_EQ(JsonWriter().Field("a", 1).Append(tail).Field("d", true).str(),
            "{\"a\":1,\"b\":2,\"c\":\"x\",\"d\":true}");
  EXPECT_EQ(JsonWriter().Field("a", 1).Append(JsonWriter()).str(), "{\"a\":1}");
  EXPECT_EQ(JsonWriter().Append(tail).str(), "{\"b\":2,\"c\":\"x\"}");
}

TEST(JsonWriterTest, FieldsInOrderWithEveryType) {
  JsonWriter w;
  w.Field("a", 1)
      .Field("b", "x")
      .Field("c", std::string("y"))
      .Field("d", int64_t{-9000000000})
      .Field("e", uint64_t{18446744073709551615u})
      .Field("f", true)
      .Field("g", false)
      .Field("h", 0.5);
  EXPECT_EQ(w.str(),
            "{\"a\":1,\"b\":\"x\",\"c\":\"y\",\"d\":-9000000000,\"e\":18446744073709551615,"
            "\"f\":true,\"g\":false,\"h\":0.5}");
}

TEST(JsonWriterTest, EscapesQuotesBackslashesAndControlCharacters) {
  JsonWriter w;
  w.Field("k\"ey", std::string("a\"b\\c\nd\te\x01g\x1f") + '\0' + "h");
  EXPECT_EQ(w.str(), "{\"k\\\"ey\":\"a\\\"b\\\\c\\u000ad\\u0009e\\u0001g\\u001f\\u0000h\"}");
}

TEST(JsonWriterTest, Utf8PassesThrough) {
  EXPECT_EQ(JsonWriter().Field("s", "\xc3\xa9").str(), "{\"s\":\"\xc3\xa9\"}");
}

TEST(JsonWriterTest, NestedRaw) {
  JsonWriter inner;
  inner.Field("loss", 0.25).Field("step", 3);
  JsonWriter outer;
  outer.Raw("stats", inner.str()).Raw("list", "[1,2]").Field("ok", true);
  EXPECT_EQ(outer.str(), "{\"stats\":{\"loss\":0.25,\"step\":3},\"list\":[1,2],\"ok\":true}");
}

TEST(JsonWriterTest, NonFiniteDoublesBecomeNull) {
  JsonWriter w;
  w.Field("nan", std::nan(""))
      .Field("inf", std::numeric_limits<double>::infinity())
      .Field("ninf", -std::numeric_limits<double>::infinity());
  EXPECT_EQ(w.str(), "{\"nan\":null,\"inf\":null,\"ninf\":null}");
}

TEST(JsonWriterTest, DoublesRoundTripExactly) {
  const double values[] = {0.1,      1.0 / 3.0, 1e-300, 2.5e300, -123.456, 6.02214076e23,
                           4.9e-324, 1e-3,      0.0,    -0.0,    1e17,     123456789.125};
  for (double v : values) {
    std::string text = JsonWriter::FormatDouble(v);
    char* end = nullptr;
    double back = std::strtod(text.c_str(), &end);
    EXPECT_EQ(*end, '\0') << text;
    EXPECT_EQ(back, v) << text;
    EXPECT_EQ(std::signbit(back), std::signbit(v)) << text;
  }
  EXPECT_EQ(JsonWriter::FormatDouble(0.1), "0.1");  // shortest form, not 0.10000000000000001
  EXPECT_EQ(JsonWriter().Field("x", 1e-3).str(), "{\"x\":0.001}");
}

}  // namespace
}  // namespace up
