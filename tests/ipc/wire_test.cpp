// Tests for WireWriter / WireReader: a round trip of every type, truncation
// at every byte, forged lengths and counts (rejected without allocating),
// trailing bytes.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/base/errors.h"
#include "ipc/wire.h"

namespace up::ipc {
namespace {

std::string Sample() {
  WireWriter w;
  w.U32(0xdeadbeef)
      .U64(std::numeric_limits<uint64_t>::max())
      .I64(-42)
      .F64(3.5)
      .Str("encoder")
      .Str("")
      .F32Vec({1.5f, -2.25f, 0.0f})
      .F32Vec({})
      .I64Vec({7, -8, std::numeric_limits<int64_t>::min()});
  return w.bytes();
}

TEST(WireTest, RoundTripsEveryType) {
  const std::string bytes = Sample();
  WireReader r(bytes, "sample");
  EXPECT_EQ(r.U32(), 0xdeadbeefu);
  EXPECT_EQ(r.U64(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(r.I64(), -42);
  EXPECT_EQ(r.F64(), 3.5);
  EXPECT_EQ(r.Str(), "encoder");
  EXPECT_EQ(r.Str(), "");
  EXPECT_EQ(r.F32Vec(), (std::vector<float>{1.5f, -2.25f, 0.0f}));
  EXPECT_TRUE(r.F32Vec().empty());
  EXPECT_EQ(r.I64Vec(), (std::vector<int64_t>{7, -8, std::numeric_limits<int64_t>::min()}));
  EXPECT_TRUE(r.done());
  EXPECT_NO_THROW(r.ExpectDone());
}

TEST(WireTest, EmptyMessageIsDone) {
  const std::string empty;
  WireReader r(empty, "empty");
  EXPECT_TRUE(r.done());
  EXPECT_THROW(r.U32(), RuntimeError);
}

TEST(WireTest, EveryTruncationThrowsMalformed) {
  const std::string full = Sample();
  for (size_t cut = 0; cut < full.size(); ++cut) {
    const std::string bytes = full.substr(0, cut);
    WireReader r(bytes, "truncated sample");
    try {
      r.U32();
      r.U64();
      r.I64();
      r.F64();
      r.Str();
      r.Str();
      r.F32Vec();
      r.F32Vec();
      r.I64Vec();
      FAIL() << "no error for a message cut at " << cut << " of " << full.size() << " bytes";
    } catch (const RuntimeError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("malformed truncated sample: ", 0), 0u) << e.what();
    }
  }
}

TEST(WireTest, HugeCountsAreRejectedWithoutAllocating) {
  // A bad_alloc (not RuntimeError) would escape if the reader trusted these.
  const uint64_t huge[] = {std::numeric_limits<uint64_t>::max(), uint64_t{1} << 61, 3};
  for (uint64_t count : huge) {
    const std::string bytes = WireWriter().U64(count).U64(0).bytes();  // 8 bytes of "data"
    WireReader f(bytes, "forged vector");
    EXPECT_THROW(f.F32Vec(), RuntimeError) << count;
    WireReader i(bytes, "forged vector");
    EXPECT_THROW(i.I64Vec(), RuntimeError) << count;
  }
  const std::string str = WireWriter().U32(0xffffffffu).U32(0).bytes();
  WireReader s(str, "forged string");
  try {
    s.Str();
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("malformed forged string"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("4294967295"), std::string::npos) << e.what();
  }
}

TEST(WireTest, ExactCountIsAccepted) {
  const std::string bytes = WireWriter().U64(2).F64(1.0).F64(2.0).bytes();
  WireReader r(bytes, "exact");
  EXPECT_EQ(r.I64Vec().size(), 2u);
  EXPECT_TRUE(r.done());
}

TEST(WireTest, TrailingBytesFailExpectDone) {
  const std::string bytes = WireWriter().U32(1).U32(2).bytes();
  WireReader r(bytes, "reply");
  EXPECT_EQ(r.U32(), 1u);
  EXPECT_FALSE(r.done());
  EXPECT_EQ(r.remaining(), 4u);
  try {
    r.ExpectDone();
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_EQ(std::string(e.what()), "malformed reply: 4 trailing bytes");
  }
}

TEST(WireTest, TakeEmptiesTheWriter) {
  WireWriter w;
  w.U32(5);
  const std::string bytes = w.Take();
  EXPECT_EQ(bytes.size(), 4u);
  EXPECT_TRUE(w.bytes().empty());
}

}  // namespace
}  // namespace up::ipc
