// Offload moves what checkpointing (or recompute) keeps to host memory; it
// must never cost device memory. Each way is trained twice, with offload and
// without, and every process's peak tensor bytes and the device's total
// (summary.json) with offload are at most the same way's without: one
// process checkpointing by levels and by blocks, and the pipeline
// recomputing by blocks, at tiny3d 64^3 and at tiny 2-D's own size, two
// micro-batches of one sample each.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "tests/support/command.h"

// Its own namespace: the unity build joins this file to the other memory tests.
namespace up::test::offload {
namespace {

struct Way {
  std::string name;                // the test's suffix
  std::string config;              // configs/...
  std::vector<std::string> batch;  // the size, and the micro-batches
  std::vector<std::string> way;    // the way, without offload
  std::string offload;             // the key that turns offload on
};

// Its name, not its bytes, in the test's listing.
void PrintTo(const Way& way, std::ostream* os) { *os << way.name; }

std::vector<std::string> With(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The run's summary.json, after training `way` into `out` (offload on or off).
std::string TrainSummary(const Way& way, const std::string& out, bool offload) {
  std::vector<std::string> args{BinPath("unet-pipeline"), "train", "-q", "--config",
                                SourcePath(way.config),   "--out", out,  "--set",
                                "train.steps=2"};
  args = With(With(args, way.batch), way.way);
  args = With(args, {"--set", way.offload + (offload ? "=on" : "=off")});
  const CommandResult r = RunCommand(args);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return Slurp(out + "/summary.json");
}

long long Bytes(const std::string& summary, const std::string& field, const std::string& who) {
  const std::string v = JsonField(JsonField(summary, field), who);
  EXPECT_FALSE(v.empty()) << "no " << field << "." << who << " in " << summary;
  return v.empty() ? 0 : std::stoll(v);
}

class Offload : public testing::TestWithParam<Way> {};

TEST_P(Offload, NeverHoldsMoreThanTheSameWayWithout) {
  const Way& way = GetParam();
  TempDir dir;
  const std::string without = TrainSummary(way, dir / "without", false);
  const std::string with = TrainSummary(way, dir / "with", true);
  const bool single = way.offload == "train.offload";
  const std::vector<std::string> processes =
      single ? std::vector<std::string>{"trainer"} : std::vector<std::string>{"encoder", "decoder"};
  for (const std::string& p : processes) {
    EXPECT_LE(Bytes(with, "peak_tensor_bytes", p), Bytes(without, "peak_tensor_bytes", p))
        << way.name << ": the " << p << " holds more with offload than without";
  }
  EXPECT_LE(Bytes(with, "peak_device_tensor_bytes", "cpu"),
            Bytes(without, "peak_device_tensor_bytes", "cpu"))
      << way.name << ": the device holds more with offload than without";
  EXPECT_EQ(RunDigest(dir / "with"), RunDigest(dir / "without"))
      << "offload moves tensors, it changes no arithmetic";
}

const std::vector<std::string> kTiny3d64{
    "--set", "data.size=64", "--set", "train.batch_size=2", "--set", "train.micro_batches=2"};
const std::vector<std::string> kTiny2d{"--set", "train.batch_size=2", "--set",
                                       "train.micro_batches=2"};
const std::vector<std::string> kLevels{"--single-process", "--set", "train.checkpointing=levels"};
const std::vector<std::string> kBlocks{"--single-process", "--set", "train.checkpointing=blocks"};
const std::vector<std::string> kRecomputeBlocks{"--set", "pipeline.activations=recompute", "--set",
                                                "pipeline.recompute_unit=block"};

INSTANTIATE_TEST_SUITE_P(
    Ways, Offload,
    testing::Values(
        Way{"tiny3d_single_levels", "configs/tiny3d.yaml", kTiny3d64, kLevels, "train.offload"},
        Way{"tiny3d_single_blocks", "configs/tiny3d.yaml", kTiny3d64, kBlocks, "train.offload"},
        Way{"tiny3d_pipeline_blocks", "configs/tiny3d.yaml", kTiny3d64, kRecomputeBlocks,
            "pipeline.offload"},
        Way{"tiny_single_levels", "configs/tiny.yaml", kTiny2d, kLevels, "train.offload"},
        Way{"tiny_single_blocks", "configs/tiny.yaml", kTiny2d, kBlocks, "train.offload"},
        Way{"tiny_pipeline_blocks", "configs/tiny.yaml", kTiny2d, kRecomputeBlocks,
            "pipeline.offload"}),
    [](const testing::TestParamInfo<Way>& info) { return info.param.name; });

}  // namespace
}  // namespace up::test::offload
