// The schedule as a pure function: each kind is valid, has the documented
// shape, respects 1F1B's in-flight bound, and the validator catches broken ones.
#include "launcher/schedule.h"

#include <gtest/gtest.h>

#include "common/base/errors.h"

namespace up {
namespace {

using ipc::Action;
using ipc::Op;

TEST(Schedule, SequentialIsTurnTaking) {
  EXPECT_EQ(DescribeSchedule(StepSchedule(ScheduleKind::kSequential, 2, false)),
            "E[F0 F1] D[FB0 FB1 S] E[B0 B1 S]");
  EXPECT_EQ(DescribeSchedule(StepSchedule(ScheduleKind::kSequential, 2, true)),
            "E[F0 F1] D[FB0 FB1] E[B0 B1 S] D[S]");
  for (const Phase& phase : StepSchedule(ScheduleKind::kSequential, 4, true))
    EXPECT_EQ(phase.turns.size(), 1u);
}

TEST(Schedule, GPipeAndOneFOneBOverlapTheStages) {
  EXPECT_EQ(DescribeSchedule(StepSchedule(ScheduleKind::kGPipe, 3, false)),
            "E[F0 F1 F2 B0 B1 B2 S]|D[FB0 FB1 FB2 S]");
  EXPECT_EQ(DescribeSchedule(StepSchedule(ScheduleKind::k1F1B, 3, false)),
            "E[F0 F1 B0 F2 B1 B2 S]|D[FB0 FB1 FB2 S]");
  EXPECT_EQ(DescribeSchedule(StepSchedule(ScheduleKind::k1F1B, 2, true)),
            "E[F0 F1 B0 B1]|D[FB0 FB1] E[S]|D[S]");
}

TEST(Schedule, EveryKindIsValidForManyMicroBatches) {
  for (auto kind : {ScheduleKind::kSequential, ScheduleKind::kGPipe, ScheduleKind::k1F1B}) {
    for (int m = 1; m <= 9; ++m) {
      for (bool norms : {false, true}) {
        EXPECT_EQ(ValidateSchedule(StepSchedule(kind, m, norms), m, norms), "")
            << DescribeSchedule(StepSchedule(kind, m, norms));
      }
    }
  }
}

TEST(Schedule, InFlightBounds) {
  for (int m = 1; m <= 8; ++m) {
    EXPECT_EQ(EncoderMaxInFlight(StepSchedule(ScheduleKind::kSequential, m, false)), m);
    EXPECT_EQ(EncoderMaxInFlight(StepSchedule(ScheduleKind::kGPipe, m, false)), m);
    // 1F1B with K=2 stages keeps at most K - 0 = 2 micro-batches on the encoder.
    EXPECT_EQ(EncoderMaxInFlight(StepSchedule(ScheduleKind::k1F1B, m, false)), std::min(m, 2));
  }
}

TEST(Schedule, AccumulationOrderIsMicroBatchOrder) {
  // Bit-identical results need each stage's backward in order 0..M-1.
  for (auto kind : {ScheduleKind::kSequential, ScheduleKind::kGPipe, ScheduleKind::k1F1B}) {
    int next[2] = {0, 0};
    for (const Phase& phase : StepSchedule(kind, 5, false)) {
      for (const Turn& turn : phase.turns) {
        for (const Action& a : turn.actions) {
          if (a.op == Op::kBackward || a.op == Op::kForwardBackward) {
            EXPECT_EQ(a.micro_batch, next[static_cast<int>(turn.stage)]++);
          }
        }
      }
    }
  }
}

TEST(Schedule, ValidatorRejectsBrokenSchedules) {
  auto phases = StepSchedule(ScheduleKind::kSequential, 2, true);
  auto swapped = phases;
  std::swap(swapped[0], swapped[1]);  // decoder before the encoder's forward
  EXPECT_NE(ValidateSchedule(swapped, 2, true), "");
  auto missing = phases;
  missing[2].turns[0].actions.erase(missing[2].turns[0].actions.begin());  // no B0
  EXPECT_NE(ValidateSchedule(missing, 2, true), "");
  auto early = phases;
  early[1].turns[0].actions.push_back(
      {Op::kStep, -1});  // decoder steps before the encoder's norms exist
  early.pop_back();
  EXPECT_NE(ValidateSchedule(early, 2, true), "");
  EXPECT_EQ(ValidateSchedule(early, 2, false), "");  // fine without clipping
  auto wrong_stage = phases;
  wrong_stage[0].turns[0].stage = StageId::kDecoder;
  EXPECT_NE(ValidateSchedule(wrong_stage, 2, true), "");
}

TEST(Schedule, UnknownKindIsAUsageError) { EXPECT_THROW(ParseScheduleKind("zigzag"), UsageError); }

}  // namespace
TEST(Schedule, ValidationTakesTurnsInRingSizedRoundsOrOverlaps) {
  EXPECT_EQ(DescribeSchedule(ValidationSchedule(5, 2, false)),
            "E[VF0 VF1] D[VP0 VP1] E[VF2 VF3] D[VP2 VP3] E[VF4] D[VP4]");
  EXPECT_EQ(DescribeSchedule(ValidationSchedule(3, 2, true)), "E[VF0 VF1 VF2]|D[VP0 VP1 VP2]");
  EXPECT_TRUE(ValidationSchedule(0, 2, false).empty());
}

}  // namespace up
