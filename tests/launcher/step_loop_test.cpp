// The step loop driven in-process, no stage binary started: threads play the
// stages on real control channels (stage_players.h), writing the stage files
// a Save asks for. What a run leaves must follow the config: a checkpoint at
// checkpoint.every and after the last step, a metrics line a step, the loss
// the stages reported, and an error when fp16 stages disagree.
#include "launcher/step_loop.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/base/errors.h"
#include "common/config/config_file.h"
#include "launcher/pipeline_checks.h"
#include "tests/launcher/stage_players.h"
#include "tests/support/command.h"

namespace up::step_loop_test {

namespace fs = std::filesystem;
using stage_players::Answer;
using stage_players::Received;
using stage_players::StagePlayers;

const std::vector<std::vector<int32_t>> kPositions{{0, 1, 2}, {0, 1}};

// The decoder's loss: 0.125 a micro-batch (already scaled by 1 /
// micro_batches); each stage's norms once its backward ran.
Answer Report(int process, const ipc::TurnRequest& turn) {
  Answer a;
  a.report.step = turn.step;
  for (const ipc::Action& action : turn.actions) {
    if (action.op == ipc::Op::kForwardBackward) a.report.loss += 0.125;
    if (action.op == ipc::Op::kForwardBackward || action.op == ipc::Op::kBackward)
      a.report.norms.assign(kPositions[static_cast<size_t>(process)].size(), 1.0f);
  }
  return a;
}

// The steps (counted from 1) each stage was asked to save, stage by stage.
std::vector<std::vector<int64_t>> Saves(const StagePlayers& players, int stages) {
  std::vector<std::vector<int64_t>> saves(static_cast<size_t>(stages));
  for (const Received& r : players.received())
    if (r.type == ipc::MsgType::kSave) saves[static_cast<size_t>(r.process)].push_back(r.save_step);
  return saves;
}

int64_t Lines(const std::string& path) {
  std::ifstream in(path);
  int64_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

struct LoopRun {
  explicit LoopRun(const std::vector<std::string>& overrides,
                   stage_players::Answerer answer = Report)
      : config(LoadConfig("", overrides)),
        plan(PlanPipeline(config, std::nullopt, {}, {})),
        run(RunDir::Create(dir / "run", config)),
        players(plan, kPositions, std::move(answer)),
        turns(config, plan, players.group()),
        loop(config, plan, run, players.group(), turns) {}

  test::TempDir dir;
  Config config;
  PipelinePlan plan;
  RunDir run;
  StagePlayers players;
  TurnRunner turns;
  StepLoop loop;
};

TEST(StepLoop, CheckpointsAtCheckpointEveryAndAfterTheLastStep) {
  LoopRun r({"train.steps=5", "checkpoint.every=2", "checkpoint.keep=5"});
  const TrainSummary summary = r.loop.Run(0, false);
  EXPECT_EQ(r.loop.completed(), 5);
  EXPECT_DOUBLE_EQ(summary.final_loss, 0.25) << "the decoder's two micro-batches";
  const std::vector<int64_t> want{2, 4, 5};
  EXPECT_EQ(Saves(r.players, 2), (std::vector<std::vector<int64_t>>{want, want}));
  for (int64_t step : want) {
    const fs::path dir = fs::path(r.run.path()) / "checkpoints" / ("step-" + std::to_string(step));
    EXPECT_TRUE(fs::exists(dir / "encoder.pt")) << dir;
    EXPECT_TRUE(fs::exists(dir / "decoder.pt")) << dir;
  }
  EXPECT_FALSE(fs::exists(fs::path(r.run.path()) / "checkpoints" / "step-3"));
  EXPECT_EQ(Lines(r.run.path() + "/metrics.jsonl"), 5);
}

TEST(StepLoop, GoesOnFromItsStartStep) {
  LoopRun r({"train.steps=5", "checkpoint.every=2"});
  r.loop.Run(3, true);
  EXPECT_EQ(r.loop.completed(), 5);
  std::vector<int64_t> steps;  // the steps the encoder's turns were of
  for (const Received& got : r.players.received())
    if (got.type == ipc::MsgType::kTurn && got.process == 0 &&
        (steps.empty() || steps.back() != got.turn.step))
      steps.push_back(got.turn.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(Saves(r.players, 2)[1], (std::vector<int64_t>{4, 5}));
}

TEST(StepLoop, Fp16StagesThatDisagreeOnTheLossScaleAreAnError) {
  LoopRun r({"train.steps=2", "train.precision=fp16"},
            [](int process, const ipc::TurnRequest& turn) {
              Answer a = Report(process, turn);
              for (const ipc::Action& action : turn.actions)
                if (action.op == ipc::Op::kStep) a.report.loss_scale = process == 0 ? 1024 : 512;
              return a;
            });
  try {
    r.loop.Run(0, false);
    FAIL() << "the disagreement was not seen";
  } catch (const RuntimeError& e) {
    EXPECT_STREQ(e.what(),
                 "fp16: the stages disagree on step 1: encoder scale 1024, decoder scale 512");
  }
  EXPECT_TRUE(Saves(r.players, 2)[0].empty()) << "no checkpoint of a step that failed";
}

TEST(StepLoop, Fp16StagesThatAgreeStep) {
  LoopRun r({"train.steps=2", "train.precision=fp16"},
            [](int process, const ipc::TurnRequest& turn) {
              Answer a = Report(process, turn);
              for (const ipc::Action& action : turn.actions)
                if (action.op == ipc::Op::kStep) a.report.loss_scale = 1024;
              return a;
            });
  r.loop.Run(0, false);
  EXPECT_EQ(r.loop.completed(), 2);
  EXPECT_NE(test::Slurp(r.run.path() + "/metrics.jsonl").find("1024"), std::string::npos);
}

}  // namespace up::step_loop_test
