// Memory measured, not estimated: every trainer process reports its peak
// tensor bytes in summary.json (tensor_accounting.h), the stages' peaks are
// each below the single-process trainer's, recomputing the encoder's
// activations lowers the encoder's peak, and the counting allocator changes
// nothing in the arithmetic (the digests still agree).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/command.h"

namespace up::test {
namespace {

CommandResult Train(std::vector<std::string> args) {
  args.insert(args.begin(), {BinPath("unet-pipeline"), "train"});
  return RunCommand(args);
}

long long PeakTensorBytes(const std::string& run, const std::string& process) {
  const std::string tensors = JsonField(Slurp(run + "/summary.json"), "peak_tensor_bytes");
  const std::string value = JsonField(tensors, process);
  EXPECT_FALSE(value.empty()) << run << ": no peak_tensor_bytes." << process << " in "
                              << Slurp(run + "/summary.json");
  return value.empty() ? 0 : std::stoll(value);
}

TEST(Memory, EveryProcessReportsItsPeakTensorBytes) {
  TempDir dir;
  const std::string config = SourcePath("configs/tiny.yaml");
  const std::vector<std::string> steps = {"--set", "train.steps=2"};
  auto train = [&](const std::string& out, std::vector<std::string> extra) {
    std::vector<std::string> args{"--config", config, "--out", dir / out};
    args.insert(args.end(), steps.begin(), steps.end());
    args.insert(args.end(), extra.begin(), extra.end());
    CommandResult r = Train(args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
  };
  train("single", {"--single-process"});
  train("keep", {});
  train("recompute", {"--set", "pipeline.activations=recompute"});
  const long long single = PeakTensorBytes(dir / "single", "trainer");
  // tiny's parameters alone, with Adam's two moments and the gradients, are
  // about 4 MiB; the activations of a micro-batch of 4 at 64x64 more.
  EXPECT_GT(single, 4ll << 20);
  const long long enc = PeakTensorBytes(dir / "keep", "encoder");
  const long long dec = PeakTensorBytes(dir / "keep", "decoder");
  EXPECT_GT(enc, 0);
  EXPECT_GT(dec, 0);
  EXPECT_LT(dec, single);
  EXPECT_LT(PeakTensorBytes(dir / "recompute", "encoder"), enc)
      << "recompute keeps only the inputs between forward and backward";
  EXPECT_EQ(JsonField(Slurp(dir / "single/summary.json"), "peak_reserved_bytes"), "")
      << "reserved bytes are a CUDA figure";
  EXPECT_EQ(RunDigest(dir / "keep"), RunDigest(dir / "single"));
  EXPECT_EQ(RunDigest(dir / "recompute"), RunDigest(dir / "single"));
}

}  // namespace
}  // namespace up::test
