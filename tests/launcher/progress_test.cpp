// The progress line: every field the issue asks for, durations, and when a
// plain (non-terminal) line is due.
#include "launcher/progress.h"

#include <gtest/gtest.h>

#include <cmath>

namespace up {
namespace {

TEST(ProgressTest, LineHoldsEveryField) {
  ProgressFields f;
  f.step = 12;
  f.total = 20;
  f.loss = 0.41234;
  f.dice = 0.7126;
  f.samples_per_s = 85.34;
  f.eta_s = 65;
  f.extra = "device turns: encoder 48% decoder 52%  rss: encoder 210 MiB decoder 190 MiB";
  EXPECT_EQ(FormatProgress(f),
            "step 12/20  loss 0.4123  dice 0.713  85.3 samples/s  eta 1m05s | device turns: "
            "encoder 48% decoder 52%  rss: encoder 210 MiB decoder 190 MiB");
}

TEST(ProgressTest, ValidationDiceOnceThereIsOne) {
  ProgressFields f;
  f.step = 4;
  f.total = 8;
  f.dice = 0.5;
  f.samples_per_s = 2;
  f.eta_s = 5;
  EXPECT_EQ(FormatProgress(f).find("val"), std::string::npos);
  f.val_dice = 0.6544;
  EXPECT_EQ(FormatProgress(f),
            "step 4/8  loss 0.0000  dice 0.500  val 0.654  2.0 samples/s  eta 5s");
}

TEST(ProgressTest, NoExtraNoSeparator) {
  ProgressFields f;
  f.step = 1;
  f.total = 2;
  f.eta_s = -1;
  EXPECT_EQ(FormatProgress(f), "step 1/2  loss 0.0000  dice 0.000  0.0 samples/s  eta ?");
}

TEST(ProgressTest, Durations) {
  EXPECT_EQ(FormatDuration(0), "0s");
  EXPECT_EQ(FormatDuration(59.4), "59s");
  EXPECT_EQ(FormatDuration(60), "1m00s");
  EXPECT_EQ(FormatDuration(3599), "59m59s");
  EXPECT_EQ(FormatDuration(3600 * 2 + 180), "2h03m");
  EXPECT_EQ(FormatDuration(-1), "?");
  EXPECT_EQ(FormatDuration(std::nan("")), "?");
  EXPECT_EQ(FormatDuration(INFINITY), "?");
}

TEST(ProgressTest, PlainLinesAtFirstLastAndEveryInterval) {
  EXPECT_TRUE(PlainLineDue(1, 1, 100, 0.0, 3.0));    // the first step
  EXPECT_FALSE(PlainLineDue(2, 1, 100, 0.5, 3.0));   // too soon
  EXPECT_TRUE(PlainLineDue(9, 1, 100, 3.0, 3.0));    // the interval passed
  EXPECT_TRUE(PlainLineDue(100, 1, 100, 0.1, 3.0));  // the last step
  EXPECT_TRUE(PlainLineDue(11, 11, 20, 0.0, 3.0));   // the first step of a resumed run
}

}  // namespace
}  // namespace up
