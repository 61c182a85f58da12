// Tests for the training-curves SVG: reading metrics.jsonl (torn and null
// lines), round tick values, and that each curve's points follow the data
// (one point per finite value, x in step order, a higher loss drawn higher).
#include "common/formats/plot_svg.h"
#include "common/run/metrics_format.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

namespace up {
namespace {

namespace fs = std::filesystem;

struct XY {
  double x, y;
};

// The points of every <polyline class="`name`">, one vector per polyline.
std::vector<std::vector<XY>> Polylines(const std::string& svg, const std::string& name) {
  std::vector<std::vector<XY>> out;
  const std::regex line("<polyline class=\"" + name + "\"[^>]*points=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), line); it != std::sregex_iterator();
       ++it) {
    std::vector<XY> points;
    std::istringstream pairs((*it)[1].str());
    for (std::string pair; pairs >> pair;) {
      const size_t comma = pair.find(',');
      points.push_back({std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1))});
    }
    out.push_back(points);
  }
  return out;
}

TEST(PlotSvgTest, NiceTicksAreRoundAndCoverTheRange) {
  const std::vector<double> t = NiceTicks(0.37, 1.92, 5);
  ASSERT_GE(t.size(), 3u);
  EXPECT_LE(t.front(), 0.37);
  EXPECT_GE(t.back(), 1.92);
  const double step = t[1] - t[0];
  EXPECT_NEAR(step, 0.5, 1e-12);  // (1.92-0.37)/5 = 0.31 -> next of 1,2,5 x 10^k is 0.5
  for (size_t i = 1; i < t.size(); ++i) EXPECT_NEAR(t[i] - t[i - 1], step, 1e-12);
  EXPECT_EQ(NiceTicks(1, 20, 8), (std::vector<double>{0, 5, 10, 15, 20}));
}

TEST(PlotSvgTest, NiceTicksOfOneValueSpanIt) {
  const std::vector<double> t = NiceTicks(3, 3, 4);
  ASSERT_GE(t.size(), 2u);
  EXPECT_LT(t.front(), 3);
  EXPECT_GT(t.back(), 3);
}

TEST(PlotSvgTest, CurvesFollowTheData) {
  const std::vector<MetricsPoint> points{
      {1, 1.0, 0.1}, {2, 0.8, 0.3}, {3, 0.9, 0.2}, {4, 0.5, 0.7}};
  const std::string svg = TrainingCurvesSvg(points, "t");
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  const auto loss = Polylines(svg, "loss");
  const auto dice = Polylines(svg, "dice");
  ASSERT_EQ(loss.size(), 1u);
  ASSERT_EQ(dice.size(), 1u);
  ASSERT_EQ(loss[0].size(), 4u);
  ASSERT_EQ(dice[0].size(), 4u);
  for (size_t i = 1; i < 4; ++i) EXPECT_GT(loss[0][i].x, loss[0][i - 1].x);
  // SVG y grows downwards: a larger value sits higher (smaller y).
  EXPECT_LT(loss[0][0].y, loss[0][1].y);  // 1.0 above 0.8
  EXPECT_GT(loss[0][1].y, loss[0][2].y);  // 0.8 below 0.9
  EXPECT_GT(dice[0][0].y, dice[0][3].y);  // 0.1 below 0.7
  // Equal steps are equally spaced.
  EXPECT_NEAR(loss[0][1].x - loss[0][0].x, loss[0][3].x - loss[0][2].x, 0.02);
}

TEST(PlotSvgTest, NonFiniteValuesSplitTheCurve) {
  const double nan = std::nan("");
  const std::vector<MetricsPoint> points{
      {1, 1.0, 0.1}, {2, 0.9, 0.2}, {3, nan, 0.3}, {4, 0.5, 0.4}};
  const auto loss = Polylines(TrainingCurvesSvg(points, "t"), "loss");
  ASSERT_EQ(loss.size(), 2u);
  EXPECT_EQ(loss[0].size(), 2u);
  EXPECT_EQ(loss[1].size(), 1u);
  EXPECT_EQ(Polylines(TrainingCurvesSvg(points, "t"), "dice").size(), 1u);
}

TEST(PlotSvgTest, ValidationDiceIsDrawnAtTheStepsThatHaveIt) {
  const double nan = std::nan("");
  const std::vector<MetricsPoint> points{
      {1, 1.0, 0.1, nan}, {2, 0.9, 0.2, 0.3}, {3, 0.8, 0.3, nan}, {4, 0.5, 0.4, 0.6}};
  const std::string svg = TrainingCurvesSvg(points, "t");
  const auto val = Polylines(svg, "val_dice");
  ASSERT_EQ(val.size(), 1u);  // joined across the steps without one
  ASSERT_EQ(val[0].size(), 2u);
  EXPECT_GT(val[0][0].y, val[0][1].y);  // 0.3 below 0.6
  const auto dice = Polylines(svg, "dice");
  EXPECT_NEAR(val[0][1].x, dice[0][3].x, 1e-6);  // at step 4
  EXPECT_NE(svg.find(">validation</text>"), std::string::npos);
  EXPECT_TRUE(Polylines(TrainingCurvesSvg({{1, 1, 1}}, "t"), "val_dice").empty());
}

TEST(PlotSvgTest, EmptyMetricsSayNoSteps) {
  const std::string svg = TrainingCurvesSvg({}, "t");
  EXPECT_NE(svg.find("no steps recorded"), std::string::npos);
  EXPECT_TRUE(Polylines(svg, "loss").empty());
}

TEST(PlotSvgTest, TitleIsEscaped) {
  const std::string svg = TrainingCurvesSvg({{1, 1, 1}}, "a<b & \"c\"");
  EXPECT_NE(svg.find("a&lt;b &amp; &quot;c&quot;"), std::string::npos);
}

TEST(PlotSvgTest, WritesCurvesFromMetricsFileSkippingTornLines) {
  const fs::path dir = fs::temp_directory_path() / ("plot_svg_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  {
    std::ofstream m(dir / "metrics.jsonl");
    m << "{\"step\":1,\"loss\":1.5,\"dice\":0.2,\"lr\":0.001}\n"
      << "{\"step\":2,\"loss\":null,\"dice\":0.25}\n"
      << "{\"step\":3,\"loss\":1.1,\"dice\":0.4}\n"
      << "{\"step\":4,\"loss\":1.0,\"di";  // torn by a crash
  }
  const std::vector<MetricsPoint> read = ReadMetricsFile((dir / "metrics.jsonl").string());
  ASSERT_EQ(read.size(), 3u);
  EXPECT_EQ(read[2].step, 3);
  EXPECT_DOUBLE_EQ(read[2].loss, 1.1);
  EXPECT_TRUE(std::isnan(read[1].loss));
  EXPECT_DOUBLE_EQ(read[1].dice, 0.25);

  const std::string path = WriteTrainingCurves(dir.string());
  EXPECT_EQ(path, (dir / kCurvesFile).string());
  std::ifstream f(path);
  const std::string svg((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(Polylines(svg, "dice")[0].size(), 3u);
  EXPECT_EQ(Polylines(svg, "loss").size(), 2u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace up
