// The schedule as a pure function, for any number of stages: the two-stage
// case written out as the launcher logs it; every kind is valid (runs to the
// end without a deadlock, each stage stepping once, last) for 2..6 stages and
// 1..8 micro-batches; 1F1B bounds what each stage keeps; backwards run in
// micro-batch order; a stage's own turns come out in order; and the checker
// catches each kind of broken schedule.
#include "ipc/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

#include "common/base/errors.h"

namespace up {
namespace {

using ipc::Op;

const ScheduleKind kKinds[] = {ScheduleKind::kSequential, ScheduleKind::kGPipe,
                               ScheduleKind::k1F1B};

std::string TwoStages(ScheduleKind kind, int m, bool global_norms) {
  return DescribeChainSchedule(ChainSchedule(kind, 2, m, global_norms), {"E", "D"});
}

// Two stages, the encoder (E) and the decoder (D), as the launcher's log line
// names them.
TEST(ChainSchedule, TwoStagesWrittenOut) {
  EXPECT_EQ(TwoStages(ScheduleKind::kSequential, 2, false), "E[F0 F1] D[FB0 FB1 S] E[B0 B1 S]");
  EXPECT_EQ(TwoStages(ScheduleKind::kSequential, 2, true), "E[F0 F1] D[FB0 FB1] E[B0 B1 S] D[S]");
  EXPECT_EQ(TwoStages(ScheduleKind::kGPipe, 3, false), "E[F0 F1 F2 B0 B1 B2 S]|D[FB0 FB1 FB2 S]");
  EXPECT_EQ(TwoStages(ScheduleKind::k1F1B, 3, false), "E[F0 F1 B0 F2 B1 B2 S]|D[FB0 FB1 FB2 S]");
  EXPECT_EQ(TwoStages(ScheduleKind::k1F1B, 2, true), "E[F0 F1 B0 B1]|D[FB0 FB1] E[S]|D[S]");
  // Without names, stages are numbered.
  EXPECT_EQ(DescribeChainSchedule(ChainSchedule(ScheduleKind::kSequential, 2, 1, false)),
            "0[F0] 1[FB0 S] 0[B0 S]");
}

// 1F1B with two stages keeps at most 2 micro-batches on the encoder.
TEST(ChainSchedule, TwoStagesInFlight) {
  for (int m = 1; m <= 8; ++m) {
    EXPECT_EQ(ChainMaxInFlight(ChainSchedule(ScheduleKind::kSequential, 2, m, false), 0), m);
    EXPECT_EQ(ChainMaxInFlight(ChainSchedule(ScheduleKind::kGPipe, 2, m, false), 0), m);
    EXPECT_EQ(ChainMaxInFlight(ChainSchedule(ScheduleKind::k1F1B, 2, m, false), 0), std::min(m, 2));
  }
}

// A stage's own turns, in order: what a stage running alone runs.
TEST(ChainSchedule, StageTurnsAreAStagesTurnsInOrder) {
  const auto three = ChainSchedule(ScheduleKind::kSequential, 3, 2, true);
  auto text = [](const std::vector<std::vector<ipc::Action>>& turns) {
    std::string out;
    for (const auto& t : turns) out += (out.empty() ? "[" : " [") + ipc::ActionsText(t) + "]";
    return out;
  };
  EXPECT_EQ(text(StageTurns(three, 0)), "[F0 F1] [B0 B1 S]");
  EXPECT_EQ(text(StageTurns(three, 1)), "[F0 F1] [B0 B1] [S]");
  EXPECT_EQ(text(StageTurns(three, 2)), "[FB0 FB1] [S]");
  EXPECT_EQ(text(StageTurns(ChainSchedule(ScheduleKind::kSequential, 3, 2, false), 2)),
            "[FB0 FB1 S]");
  EXPECT_TRUE(StageTurns(three, 3).empty());
}

TEST(ChainSchedule, UnknownKindIsAUsageError) {
  EXPECT_EQ(ParseScheduleKind("1f1b"), ScheduleKind::k1F1B);
  EXPECT_THROW(ParseScheduleKind("zigzag"), UsageError);
}

// The validation pass: each batch through every stage, at most per_turn a
// turn when taking turns.
TEST(ChainValidationSchedule, EveryStageInTurnOrAllAtOnce) {
  EXPECT_EQ(DescribeChainSchedule(ChainValidationSchedule(3, 2, false, 3)),
            "0[VF0 VF1] 1[VF0 VF1] 2[VP0 VP1] 0[VF2] 1[VF2] 2[VP2]");
  EXPECT_EQ(DescribeChainSchedule(ChainValidationSchedule(2, 4, true, 3)),
            "0[VF0 VF1]|1[VF0 VF1]|2[VP0 VP1]");
  EXPECT_TRUE(ChainValidationSchedule(0, 2, false, 4).empty());
  EXPECT_EQ(DescribeChainSchedule(ChainValidationSchedule(5, 2, false, 2), {"E", "D"}),
            "E[VF0 VF1] D[VP0 VP1] E[VF2 VF3] D[VP2 VP3] E[VF4] D[VP4]");
  EXPECT_EQ(DescribeChainSchedule(ChainValidationSchedule(3, 2, true, 2), {"E", "D"}),
            "E[VF0 VF1 VF2]|D[VP0 VP1 VP2]");
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
