// The step breakdown from a trace: the warm-up window, nested transfers
// counted once, per-step means, and a trace without turns refused.
#include "bench/trace_breakdown.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/errors.h"

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
