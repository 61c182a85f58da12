// The bench helpers that read the trainers' JSON back and summarise timings.
#include "bench/bench_util.h"

#include <gtest/gtest.h>

#include <cmath>

namespace up::bench {
namespace {

TEST(BenchMedian, OddEvenEmpty) {
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_TRUE(std::isnan(Median({})));
}

TEST(BenchJson, ReadsFlatAndNestedNumbers) {
  const std::string line = R"({"step":3,"loss":0.5,"step_s":1.25e-2,"lr":0.001})";
  EXPECT_EQ(JsonNumber(line, "step_s").value(), 0.0125);
  EXPECT_FALSE(JsonNumber(line, "dice").has_value());
  const std::string summary =
      R"({"peak_rss_bytes":{"launcher":10,"encoder":20,"decoder":30},"decoder":99})";
  EXPECT_EQ(JsonNestedNumber(summary, "peak_rss_bytes", "decoder").value(), 30);
  EXPECT_FALSE(JsonNestedNumber(summary, "peak_rss_bytes", "trainer").has_value());
  EXPECT_FALSE(JsonNestedNumber(summary, "busy_fraction", "encoder").has_value());
}

TEST(BenchJson, NestedKeyOfALaterObjectIsNotTaken) {
  const std::string s = R"({"peak_rss_bytes":{"trainer":5},"busy":{"encoder":0.5}})";
  EXPECT_FALSE(JsonNestedNumber(s, "peak_rss_bytes", "encoder").has_value());
}

TEST(BenchBytesText, Units) {
  EXPECT_EQ(BytesText(4096), "4 KiB");
  EXPECT_EQ(BytesText(uint64_t{256} << 20), "256 MiB");
  EXPECT_EQ(BytesText(1536), "1.5 KiB");
}

}  // namespace
}  // namespace up::bench
