// See training_checks.h.
#include "tests/support/training_checks.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/command.h"

namespace up::test {
namespace {

CommandResult Train(const std::string& config, std::vector<std::string> args,
                    const std::vector<std::string>& set) {
  args.insert(args.begin(), {BinPath("unet-pipeline"), "train", "--config", config});
  for (const auto& s : set) {
    args.push_back("--set");
    args.push_back(s);
  }
  return RunCommand(args, 600);
}

}  // namespace

void ExpectNothingLeft(const std::string& run) {
  EXPECT_TRUE(ProcessesMentioning(run + "/config.yaml").empty())
      << "a stage of " << run << " is still running";
  const std::string id = JsonField(Slurp(run + "/summary.json"), "run_id");
  ASSERT_EQ(id.size(), 32u);
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    EXPECT_EQ(e.path().filename().string().find(id), std::string::npos)
        << "leftover segment " << e.path();
  }
  for (const auto& e : std::filesystem::directory_iterator("/tmp")) {
    EXPECT_EQ(e.path().filename().string().find("up-" + id), std::string::npos)
        << "leftover socket dir " << e.path();
  }
}

void ExpectPipelineEqualsSingleProcessAndResumeIsExact(
    const std::string& config, const std::vector<std::string>& set, const std::string& dir,
    const std::vector<std::string>& parts_extra) {
  const CommandResult single = Train(config, {"--single-process", "--out", dir + "/single"}, set);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  std::vector<std::string> pipe_set = set;
  for (const char* s :
       {"pipeline.schedule=gpipe", "pipeline.lock=off", "pipeline.activations=recompute"})
    pipe_set.push_back(s);
  const CommandResult pipe = Train(config, {"--out", dir + "/pipe"}, pipe_set);
  ASSERT_EQ(pipe.exit_code, 0) << pipe.output;
  EXPECT_FALSE(RunDigest(dir + "/single").empty());
  EXPECT_EQ(RunDigest(dir + "/single"), RunDigest(dir + "/pipe"));

  // Four stages, each half in two parts: the same again.
  std::vector<std::string> parts_set = set;
  for (const char* s : {"pipeline.encoder_parts=2", "pipeline.decoder_parts=2"})
    parts_set.push_back(s);
  parts_set.insert(parts_set.end(), parts_extra.begin(), parts_extra.end());
  const CommandResult parts = Train(config, {"--out", dir + "/parts"}, parts_set);
  ASSERT_EQ(parts.exit_code, 0) << parts.output;
  EXPECT_EQ(RunDigest(dir + "/single"), RunDigest(dir + "/parts"));

  // Two steps, then resumed to four: the same weights as four straight.
  std::vector<std::string> half = set;
  half.push_back("train.steps=2");
  const CommandResult first = Train(config, {"--out", dir + "/resumed"}, half);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const CommandResult resumed = RunCommand(
      {BinPath("unet-pipeline"), "train", "--resume", dir + "/resumed", "--set", "train.steps=4"},
      600);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(RunDigest(dir + "/single"), RunDigest(dir + "/resumed"));
}

}  // namespace up::test
