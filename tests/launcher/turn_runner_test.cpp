// The turn runner driven in-process, no stage binary started: threads play
// the stages on real control channels (stage_players.h), and the plan comes
// from PlanPipeline. Each test is one thing the runner must get right: the
// schedule's order, the norms a step needs, the figures, a failing or
// silent stage.
#include "launcher/turn_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/base/errors.h"
#include "common/config/config_file.h"
#include "launcher/pipeline_checks.h"
#include "tests/launcher/stage_players.h"

namespace up::turn_runner_test {

using stage_players::Answer;
using stage_players::Received;
using stage_players::StagePlayers;

// The parameter positions each stage's Hello gives, out of order so that
// the runner must place each norm by them.
const std::vector<std::vector<int32_t>> kPositions{{2, 0, 1}, {1, 0}, {0, 1}};

PipelinePlan PlanOf(const Config& config) { return PlanPipeline(config, std::nullopt, {}, {}); }

bool HasOp(const ipc::TurnRequest& turn, ipc::Op op) {
  return std::any_of(turn.actions.begin(), turn.actions.end(),
                     [op](const ipc::Action& a) { return a.op == op; });
}

// Stage s's i-th parameter's norm: 100 * (s + 1) + i.
std::vector<float> NormsOf(int stage, size_t count) {
  std::vector<float> norms;
  for (size_t i = 0; i < count; ++i) norms.push_back(100.0f * (stage + 1) + i);
  return norms;
}

// A stage as the worker answers: its norms once its backward ran.
Answer Report(int process, const ipc::TurnRequest& turn) {
  Answer a;
  a.report.step = turn.step;
  if (HasOp(turn, ipc::Op::kBackward) || HasOp(turn, ipc::Op::kForwardBackward))
    a.report.norms = NormsOf(process, kPositions[static_cast<size_t>(process)].size());
  return a;
}

std::vector<Received> Turns(const StagePlayers& players) {
  std::vector<Received> turns;
  for (const Received& r : players.received())
    if (r.type == ipc::MsgType::kTurn) turns.push_back(r);
  return turns;
}

void RunOneStep(const Config& config, const PipelinePlan& plan, StagePlayers& players) {
  TurnRunner runner(config, plan, players.group());
  runner.BeginStep();
  runner.Run(0, plan.phases, plan.replicas, [](int, const ipc::TurnReport&) {});
}

TEST(TurnRunner, GrantsTakingTurnsInTheSchedulesOrder) {
  for (const std::vector<std::string>& overrides : std::vector<std::vector<std::string>>{
           {"train.micro_batches=2"},
           {"train.micro_batches=3", "train.batch_size=6", "train.grad_clip=1"},
           {"pipeline.encoder_parts=2", "pipeline.decoder_parts=1"}}) {
    const Config config = LoadConfig("", overrides);
    const PipelinePlan plan = PlanOf(config);
    ASSERT_TRUE(plan.lock_on) << "the stages share the CPU";
    StagePlayers players(plan, kPositions, Report);
    RunOneStep(config, plan, players);
    // Taking turns, one turn a phase: the turns arrive in the schedule's order.
    std::vector<std::pair<int, std::string>> want, got;
    for (const ChainPhase& phase : plan.phases)
      for (const ChainTurn& turn : phase.turns)
        want.emplace_back(turn.stage, ipc::ActionsText(turn.actions));
    for (const Received& r : Turns(players))
      got.emplace_back(r.process, ipc::ActionsText(r.turn.actions));
    EXPECT_EQ(got, want) << DescribeChainSchedule(plan.phases);
  }
}

TEST(TurnRunner, GrantsOverlappedPhasesOneAfterAnother) {
  const Config config = LoadConfig(
      "", {"pipeline.schedule=1f1b", "pipeline.lock=off", "train.micro_batches=4",
           "train.batch_size=8", "pipeline.encoder_parts=2", "pipeline.decoder_parts=1"});
  const PipelinePlan plan = PlanOf(config);
  StagePlayers players(plan, kPositions, Report);
  RunOneStep(config, plan, players);
  // Each stage's j-th turn belongs to the j-th phase it runs in; phases do
  // not overlap, so the phases of the turns as they arrive never go back.
  std::vector<std::vector<size_t>> phase_of(static_cast<size_t>(plan.stages));
  for (size_t k = 0; k < plan.phases.size(); ++k)
    for (const ChainTurn& turn : plan.phases[k].turns)
      phase_of[static_cast<size_t>(turn.stage)].push_back(k);
  std::vector<size_t> next(static_cast<size_t>(plan.stages), 0);
  size_t last_phase = 0;
  for (const Received& r : Turns(players)) {
    const size_t s = static_cast<size_t>(r.process);
    ASSERT_LT(next[s], phase_of[s].size()) << "a turn more than the schedule gives stage " << s;
    const std::vector<ipc::Action> want = StageTurns(plan.phases, r.process)[next[s]];
    EXPECT_EQ(ipc::ActionsText(r.turn.actions), ipc::ActionsText(want)) << "stage " << s;
    const size_t k = phase_of[s][next[s]++];
    EXPECT_GE(k, last_phase) << "a turn of phase " << k << " after one of phase " << last_phase;
    last_phase = k;
  }
  for (size_t s = 0; s < next.size(); ++s)
    EXPECT_EQ(next[s], phase_of[s].size()) << "stage " << s << " missed turns";
}

TEST(TurnRunner, AStepGetsEveryStagesNormsInTheModelsOrder) {
  const Config config = LoadConfig("", {"train.grad_clip=1"});
  const PipelinePlan plan = PlanOf(config);
  ASSERT_TRUE(plan.global_norms);
  StagePlayers players(plan, kPositions, Report);
  RunOneStep(config, plan, players);
  // The encoder's 3 norms at positions {2, 0, 1}, then the decoder's 2 at {1, 0}.
  const std::vector<float> decoder_part{201, 200};
  const std::vector<float> whole{101, 102, 100, 201, 200};
  std::vector<std::vector<float>> step_norms(2);
  for (const Received& r : Turns(players))
    if (HasOp(r.turn, ipc::Op::kStep))
      step_norms[static_cast<size_t>(r.process)] = r.turn.all_norms;
  // The encoder steps in the turn of its last backward: its own are not in yet.
  EXPECT_EQ(step_norms[0], (std::vector<float>{0, 0, 0, 201, 200}));
  EXPECT_EQ(step_norms[1], whole);
}

TEST(TurnRunner, NormsOtherThanAStagesParametersAreAnError) {
  const Config config = LoadConfig("", {"train.grad_clip=1"});
  const PipelinePlan plan = PlanOf(config);
  StagePlayers players(plan, kPositions, [](int process, const ipc::TurnRequest& turn) {
    Answer a = Report(process, turn);
    if (process == 1 && !a.report.norms.empty()) a.report.norms.pop_back();
    return a;
  });
  try {
    RunOneStep(config, plan, players);
    FAIL() << "a short list of norms was taken";
  } catch (const RuntimeError& e) {
    EXPECT_STREQ(e.what(), "the decoder stage reported 1 gradient norms for its 2 parameters");
  }
}

TEST(TurnRunner, FoldsEachReportIntoItsStagesFigures) {
  const Config config = LoadConfig("", {});
  const PipelinePlan plan = PlanOf(config);
  StagePlayers players(plan, kPositions, [](int process, const ipc::TurnRequest& turn) {
    Answer a = Report(process, turn);
    a.report.busy_s = 0.5;
    a.report.tensor_bytes = 1000 * (process + 1);
    a.report.turn_peak_tensor_bytes = 5000 * (process + 1);
    return a;
  });
  TurnRunner runner(config, plan, players.group());
  runner.BeginStep();
  std::vector<int> reported;
  runner.Run(0, plan.phases, 1, [&](int id, const ipc::TurnReport&) { reported.push_back(id); });
  // Sequential, two stages: E[F0 F1] D[FB0 FB1 S] E[B0 B1 S].
  EXPECT_EQ(reported, (std::vector<int>{0, 1, 0}));
  EXPECT_DOUBLE_EQ(players.group()[0].busy_s, 1.0);
  EXPECT_DOUBLE_EQ(players.group()[1].busy_s, 0.5);
  EXPECT_EQ(players.group()[1].peak_tensor_bytes, 10000);
  EXPECT_EQ(players.group()[0].residue_tensor_bytes, 1000);
  // The CPU's most at once: the decoder's turn (10000) with the encoder's
  // residue (1000).
  const std::string cpu = plan.placement().lock_key[0];
  ASSERT_EQ(runner.device_peak().count(cpu), 1u);
  EXPECT_EQ(runner.device_peak().at(cpu), 11000);
  for (double held : runner.held_s()) EXPECT_GT(held, 0.0);
  EXPECT_TRUE(players.group()[0].turn.empty()) << "no turn outstanding";
}

TEST(TurnRunner, AStagesFailureEndsTheRunWithItsMessage) {
  const Config config = LoadConfig("", {});
  const PipelinePlan plan = PlanOf(config);
  StagePlayers players(plan, kPositions, [](int process, const ipc::TurnRequest& turn) {
    Answer a = Report(process, turn);
    if (process == 1) a.failure = ipc::Failure{1, "out of cheese"};
    return a;
  });
  try {
    RunOneStep(config, plan, players);
    FAIL() << "the failure was not seen";
  } catch (const RuntimeError& e) {
    EXPECT_STREQ(e.what(),
                 "decoder (during decoder turn [FB0 FB1 S] of step 1) failed: out of cheese");
  }
}

TEST(TurnRunner, AStageThatDoesNotAnswerTimesOut) {
  const Config config = LoadConfig("", {"pipeline.timeout_s=0.3"});
  const PipelinePlan plan = PlanOf(config);
  StagePlayers players(plan, kPositions, [](int process, const ipc::TurnRequest& turn) {
    Answer a = Report(process, turn);
    a.silent = true;
    return a;
  });
  try {
    RunOneStep(config, plan, players);
    FAIL() << "a silent stage was waited for past pipeline.timeout_s";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("encoder did not answer within"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("during encoder turn [F0 F1] of step 1"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace up::turn_runner_test
