// The schedule for any number of stages: for two it passes the two-stage
// checker; every kind is valid (runs to the end without a deadlock,
// each stage stepping once, last) for 2..6 stages and 1..8 micro-batches;
// 1F1B bounds what each stage keeps; backwards run in micro-batch order; and
// the checker catches each kind of broken schedule.
#include "launcher/chain_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

namespace up {
namespace {

using ipc::Op;

const ScheduleKind kKinds[] = {ScheduleKind::kSequential, ScheduleKind::kGPipe,
                               ScheduleKind::k1F1B};

// StepSchedule is the chain's two-stage case; the two-stage checker, written
// apart, passes it for every kind (its written-out form: schedule_test).
TEST(ChainSchedule, TwoStagesPassTheTwoStageChecker) {
  for (ScheduleKind kind : kKinds) {
    for (int m = 1; m <= 8; ++m) {
      for (bool g : {false, true}) {
        EXPECT_EQ(ValidateSchedule(StepSchedule(kind, m, g), m, g), "");
        EXPECT_EQ(DescribeChainSchedule(AsChain(StepSchedule(kind, m, g))),
                  DescribeChainSchedule(ChainSchedule(kind, 2, m, g)));
      }
    }
  }
}

// The validation pass: each batch through every stage, at most per_turn a
// turn when taking turns; the two-stage case is ValidationSchedule's.
TEST(ChainValidationSchedule, EveryStageInTurnOrAllAtOnce) {
  EXPECT_EQ(DescribeChainSchedule(ChainValidationSchedule(3, 2, false, 3)),
            "0[VF0 VF1] 1[VF0 VF1] 2[VP0 VP1] 0[VF2] 1[VF2] 2[VP2]");
  EXPECT_EQ(DescribeChainSchedule(ChainValidationSchedule(2, 4, true, 3)),
            "0[VF0 VF1]|1[VF0 VF1]|2[VP0 VP1]");
  EXPECT_TRUE(ChainValidationSchedule(0, 2, false, 4).empty());
  for (bool overlapped : {false, true}) {
    EXPECT_EQ(DescribeChainSchedule(ChainValidationSchedule(5, 2, overlapped, 2)),
              DescribeChainSchedule(AsChain(ValidationSchedule(5, 2, overlapped))));
  }
}

TEST(ChainSchedule, ThreeStagesWrittenOut) {
  EXPECT_EQ(DescribeChainSchedule(ChainSchedule(ScheduleKind::kSequential, 3, 2, false)),
            "0[F0 F1] 1[F0 F1] 2[FB0 FB1 S] 1[B0 B1 S] 0[B0 B1 S]");
  EXPECT_EQ(DescribeChainSchedule(ChainSchedule(ScheduleKind::kSequential, 3, 2, true)),
            "0[F0 F1] 1[F0 F1] 2[FB0 FB1] 1[B0 B1] 0[B0 B1 S] 1[S] 2[S]");
  EXPECT_EQ(DescribeChainSchedule(ChainSchedule(ScheduleKind::kGPipe, 3, 2, true)),
            "0[F0 F1 B0 B1]|1[F0 F1 B0 B1]|2[FB0 FB1] 0[S]|1[S]|2[S]");
  EXPECT_EQ(DescribeChainSchedule(ChainSchedule(ScheduleKind::k1F1B, 3, 4, false)),
            "0[F0 F1 F2 B0 F3 B1 B2 B3 S]|1[F0 F1 B0 F2 B1 F3 B2 B3 S]|2[FB0 FB1 FB2 FB3 S]");
}

TEST(ChainSchedule, EveryKindIsValidForManyStagesAndMicroBatches) {
  for (ScheduleKind kind : kKinds) {
    for (int stages = 2; stages <= 6; ++stages) {
      for (int m = 1; m <= 8; ++m) {
        for (bool g : {false, true}) {
          const auto phases = ChainSchedule(kind, stages, m, g);
          EXPECT_EQ(ValidateChainSchedule(phases, stages, m, g), "")
              << DescribeChainSchedule(phases);
          // Each stage accumulates its gradients in micro-batch order.
          for (int s = 0; s < stages; ++s) {
            int next = 0;
            for (const ChainPhase& p : phases) {
              for (const ChainTurn& t : p.turns) {
                if (t.stage != s) continue;
                for (const ipc::Action& a : t.actions) {
                  if (a.op == Op::kBackward || a.op == Op::kForwardBackward) {
                    EXPECT_EQ(a.micro_batch, next++) << DescribeChainSchedule(phases);
                  }
                }
              }
            }
          }
          if (kind == ScheduleKind::kSequential) {
            for (const ChainPhase& p : phases) EXPECT_EQ(p.turns.size(), 1u);  // turn taking
          }
        }
      }
    }
  }
}

TEST(ChainSchedule, OneFOneBBoundsWhatEachStageKeeps) {
  const int stages = 4, m = 8;
  const auto one = ChainSchedule(ScheduleKind::k1F1B, stages, m, false);
  const auto gpipe = ChainSchedule(ScheduleKind::kGPipe, stages, m, false);
  for (int s = 0; s < stages - 1; ++s) {
    EXPECT_EQ(ChainMaxInFlight(one, s), stages - s) << "stage " << s;
    EXPECT_EQ(ChainMaxInFlight(gpipe, s), m) << "stage " << s;
  }
  EXPECT_EQ(ChainMaxInFlight(one, stages - 1), 1);
  // Fewer micro-batches than stages: never more than there are.
  EXPECT_EQ(ChainMaxInFlight(ChainSchedule(ScheduleKind::k1F1B, 6, 2, false), 0), 2);
}

TEST(ChainSchedule, TheCheckerCatchesEachBreak) {
  const auto good = ChainSchedule(ScheduleKind::kSequential, 3, 2, false);
  ASSERT_EQ(ValidateChainSchedule(good, 3, 2, false), "");
  auto swapped = good;  // the middle stage's backward before the last stage's FB
  std::swap(swapped[2], swapped[3]);
  EXPECT_NE(ValidateChainSchedule(swapped, 3, 2, false).find("cannot finish"), std::string::npos);
  auto missing = good;
  missing[1].turns[0].actions.pop_back();  // 1:F1 never runs
  EXPECT_NE(ValidateChainSchedule(missing, 3, 2, false), "");
  auto wrong = good;
  wrong[0].turns[0].actions[0] = {Op::kForwardBackward, 0};  // FB on the first stage
  EXPECT_NE(ValidateChainSchedule(wrong, 3, 2, false).find("not an action of that stage"),
            std::string::npos);
  // One phase where stage 0 waits for its own later forward: a deadlock.
  std::vector<ChainPhase> stuck{
      {{{0, {{Op::kBackward, 0}, {Op::kForward, 0}}}, {1, {{Op::kForwardBackward, 0}}}}}};
  EXPECT_NE(ValidateChainSchedule(stuck, 2, 1, false).find("0:B0 waits"), std::string::npos);
  // Global norms: a stage stepping before every stage's backward.
  EXPECT_NE(ValidateChainSchedule(good, 3, 2, true).find("cannot finish"), std::string::npos);
  EXPECT_THROW(ChainSchedule(ScheduleKind::kGPipe, 1, 2, false), std::invalid_argument);
}

}  // namespace
}  // namespace up
