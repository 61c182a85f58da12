// The step breakdown from a trace: the warm-up window, nested transfers
// counted once, per-step means, and a trace without turns refused.
#include "bench/trace_breakdown.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/base/errors.h"

namespace up::bench {
namespace {

class TraceBreakdownTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             ("trace_breakdown_test_" + std::to_string(getpid()) + ".json"))
                .string();
  }
  void TearDown() override { std::filesystem::remove(path_); }

  static std::string Event(const std::string& name, const std::string& cat, int pid, int64_t ts,
                           int64_t dur) {
    return "{\"name\":\"" + name + "\",\"cat\":\"" + cat +
           "\",\"ph\":\"X\",\"ts\":" + std::to_string(ts) + ",\"dur\":" + std::to_string(dur) +
           ",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(pid) + "},";
  }

  // Steps of 1000 us: a turn of 900 us in which stage 2 computes 600 us
  // (a 100 us send inside it) and then sends 50 us outside any compute span.
  void WriteSteps(int steps) {
    std::ofstream out(path_);
    out << "{\"traceEvents\":[\n"
        << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"x\"}},\n";
    for (int s = 1; s <= steps; ++s) {
      const int64_t t = s * 1000;
      out << Event("turn held: encoder turn [F0] of step " + std::to_string(s), "turn", 1, t, 900)
          << "\n"
          << Event("forward m0", "compute", 2, t + 10, 600) << "\n"
          << Event("send fwd m0", "transfer", 2, t + 500, 100) << "\n"
          << Event("send fwd m1", "transfer", 2, t + 700, 50) << "\n";
    }
    out << "{}]}\n";
  }

  std::string path_;
};

TEST_F(TraceBreakdownTest, PerStepMeansAfterWarmup) {
  WriteSteps(5);
  const StepBreakdown b = BreakdownFromTrace(path_, 2);
  EXPECT_EQ(b.steps, 3);
  EXPECT_DOUBLE_EQ(b.turn_ms, 0.9);
  EXPECT_DOUBLE_EQ(b.transfer_ms, 0.15);
  EXPECT_DOUBLE_EQ(b.compute_ms, 0.5) << "the nested send is not also compute";
}

TEST_F(TraceBreakdownTest, NoTurnAfterWarmupIsAnError) {
  WriteSteps(2);
  EXPECT_THROW(BreakdownFromTrace(path_, 2), RuntimeError);
  EXPECT_THROW(BreakdownFromTrace(path_ + ".missing", 0), RuntimeError);
}

}  // namespace
}  // namespace up::bench

namespace up::bench {
namespace {

// Per stage: the process named "<key>_proc" by its metadata event; its
// compute less the ring waits inside it, per step, against the window.
TEST(StagesFromTrace, EachStagesComputeAgainstTheStepsWallTime) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("stages_from_trace_" + std::to_string(getpid()) + ".json"))
                               .string();
  {
    std::ofstream out(path);
    out << "{\"traceEvents\":[\n";
    for (const auto& [pid, name] : std::vector<std::pair<int, std::string>>{
             {1, "unet-pipeline (launcher)"}, {2, "encoder1_proc"}, {3, "decoder_proc"}})
      out << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << pid << ",\"tid\":" << pid
          << ",\"args\":{\"name\":\"" << name << "\"}},\n";
    auto event = [&](const std::string& n, const std::string& cat, int pid, int64_t ts,
                     int64_t dur) {
      out << "{\"name\":\"" << n << "\",\"cat\":\"" << cat << "\",\"ph\":\"X\",\"ts\":" << ts
          << ",\"dur\":" << dur << ",\"pid\":" << pid << ",\"tid\":" << pid << "},\n";
    };
    for (int s = 1; s <= 4; ++s) {
      const int64_t t = s * 1000;
      event("turn held: encoder1 turn [F0 B0 S] of step " + std::to_string(s), "turn", 1, t, 1000);
      event("forward m0", "compute", 2, t, 400);
      event("backward m0", "compute", 2, t + 600, 400);
      event("receive bwd m0", "transfer", 2, t + 600, 200);  // waiting, inside the backward
      event("forward+backward m0", "compute", 3, t + 400, 300);
    }
    out << "{}]}\n";
  }
  const StagesBreakdown b = StagesFromTrace(path, 1);
  std::filesystem::remove(path);
  EXPECT_EQ(b.steps, 3);
  EXPECT_DOUBLE_EQ(b.wall_ms, 1.0);
  ASSERT_EQ(b.stages.size(), 2u);
  EXPECT_EQ(b.stages[0].stage, "encoder1");
  EXPECT_DOUBLE_EQ(b.stages[0].compute_ms, 0.6);
  EXPECT_EQ(b.stages[1].stage, "decoder");
  EXPECT_DOUBLE_EQ(b.stages[1].compute_ms, 0.3);
}

}  // namespace
}  // namespace up::bench
