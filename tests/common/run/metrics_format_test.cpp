// metrics.jsonl written by MetricsLine reads back through ReadMetricsFile:
// the one format both sides share.
#include "common/run/metrics_format.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

namespace up {
namespace metrics_format_test {

namespace fs = std::filesystem;

TEST(MetricsFormat, WhatTheTrainersWriteTheReadersRead) {
  StepMetrics first;
  first.step = 1;
  first.loss = 1.25;
  first.dice = 0.5;
  first.lr = 1e-3;
  first.step_s = 0.5;
  first.samples_per_s = 16;
  first.fp16 = StepMetrics::Fp16{65536, true, 1};
  StepMetrics second = first;
  second.step = 2;
  second.loss = std::numeric_limits<double>::quiet_NaN();  // written as null
  second.fp16.reset();
  second.validation = StepMetrics::Validation{0.75, {{"1", 0.7}, {"wt", 0.8}}, 3, 2.5};

  const std::string line = MetricsLine(second);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_NE(line.find("\"loss\":null"), std::string::npos) << line;
  EXPECT_NE(line.find("\"val_dice_wt\":0.8"), std::string::npos) << line;
  EXPECT_NE(MetricsLine(first).find("\"skipped_steps\":1"), std::string::npos);

  const fs::path dir = fs::temp_directory_path() / ("metrics_format_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / kMetricsFile) << MetricsLine(first) << "\n" << line << "\n";
  const std::vector<MetricsPoint> read = ReadMetricsFile((dir / kMetricsFile).string());
  fs::remove_all(dir);
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read[0].step, 1);
  EXPECT_DOUBLE_EQ(read[0].loss, 1.25);
  EXPECT_TRUE(std::isnan(read[0].val_dice));
  EXPECT_TRUE(std::isnan(read[1].loss));
  EXPECT_DOUBLE_EQ(read[1].dice, 0.5);
  EXPECT_DOUBLE_EQ(read[1].val_dice, 0.75);
}

}  // namespace metrics_format_test
}  // namespace up
