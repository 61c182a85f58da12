// GPU-labelled tests for what only a GPU can show: the caching allocator's
// tensor accounting, CUDA stages training like CPU stages (fp32, bf16, fp16,
// within a tolerance: cuDNN's kernels are not the CPU's; over shm, cuda_ipc
// and, with two GPUs, NCCL), and parking with the side-stream prefetch
// changing nothing but timing; lean blocks' norm backward on the card
// against the CPU's loop. Each skips with a printed
// reason where no GPU is visible; scripts/gpu-check.sh runs them (ctest -L gpu).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/device/tensor_accounting.h"
#include "common/model/norm_act_backward.h"
#include "tests/support/command.h"

namespace up::test {
namespace {

bool NoGpu(std::string* why) {
  if (torch::cuda::is_available()) return false;
  *why = "no CUDA device visible on this machine: this test needs one";
  return true;
}

TEST(CudaAccounting, CachingAllocatorCountsTensors) {
  std::string why;
  if (NoGpu(&why)) GTEST_SKIP() << why;
  const torch::Device gpu(torch::kCUDA, 0);
  ResetPeakTensorBytes(gpu);
  const TensorBytes before = TensorBytesOn(gpu);
  {
    torch::Tensor t = torch::empty({16 << 20}, torch::TensorOptions(gpu).dtype(torch::kFloat32));
    const TensorBytes during = TensorBytesOn(gpu);
    EXPECT_GE(during.live - before.live, 64ll << 20);
    EXPECT_GE(during.peak, during.live);
    EXPECT_GE(during.reserved, during.peak);
  }
  EXPECT_EQ(TensorBytesOn(gpu).live, before.live);
  EXPECT_GE(TensorBytesOn(gpu).peak - before.live, 64ll << 20);
}

double FinalLoss(const std::string& run) {
  return std::stod(JsonField(Slurp(run + "/summary.json"), "final_loss"));
}

void TrainTiny(const TempDir& dir, const std::string& out, std::vector<std::string> sets) {
  std::vector<std::string> args{
      BinPath("unet-pipeline"), "train", "--config", SourcePath("configs/tiny.yaml"), "--set",
      "train.steps=4",          "--out", dir / out};
  for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
  CommandResult r = RunCommand(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

TEST(CudaStages, TrainLikeCpuStagesWithinTolerance) {
  std::string why;
  if (NoGpu(&why)) GTEST_SKIP() << why;
  TempDir dir;
  const std::vector<std::string> cuda = {"pipeline.stages.encoder.device=cuda:0",
                                         "pipeline.stages.decoder.device=cuda:0"};
  for (const std::string precision : {"fp32", "bf16", "fp16"}) {
    TrainTiny(dir, "cpu-" + precision,
              {"train.precision=" + precision, "pipeline.stages.encoder.device=cpu",
               "pipeline.stages.decoder.device=cpu"});  // tiny's `auto` is the GPU here
    std::vector<std::string> sets = cuda;
    sets.push_back("train.precision=" + precision);
    TrainTiny(dir, "cuda-" + precision, sets);
    sets.push_back("pipeline.transport=cuda_ipc");
    TrainTiny(dir, "ipc-" + precision, sets);
    const double cpu = FinalLoss(dir / ("cpu-" + precision));
    const double tolerance = precision == "fp32" ? 0.02 : 0.08;
    EXPECT_NEAR(FinalLoss(dir / ("cuda-" + precision)), cpu, tolerance * cpu) << precision;
    EXPECT_NEAR(FinalLoss(dir / ("ipc-" + precision)), cpu, tolerance * cpu) << precision;
    const std::string summary = Slurp(dir / ("cuda-" + precision) + "/summary.json");
    EXPECT_GT(std::stoll(JsonField(JsonField(summary, "peak_tensor_bytes"), "encoder")), 0)
        << summary;
    EXPECT_FALSE(JsonField(summary, "peak_reserved_bytes").empty()) << summary;
  }
}

TEST(CudaStages, NcclBetweenTwoGpusTrainsLikeCpu) {
  std::string why;
  if (NoGpu(&why)) GTEST_SKIP() << why;
  if (torch::cuda::device_count() < 2) {
    GTEST_SKIP() << "one CUDA device here: NCCL joins two GPUs (on one GPU the pipeline refuses "
                    "nccl and uses cuda_ipc, tested above)";
  }
  TempDir dir;
  TrainTiny(dir, "cpu", {});
  TrainTiny(dir, "nccl",
            {"pipeline.stages.encoder.device=cuda:0", "pipeline.stages.decoder.device=cuda:1",
             "pipeline.transport=nccl"});
  const double cpu = FinalLoss(dir / "cpu");
  EXPECT_NEAR(FinalLoss(dir / "nccl"), cpu, 0.02 * cpu);
}

// tiny's pipeline with both stages parked on cuda:0, then the same with
// `setting`: the final losses within 2% of each other.
void ExpectParkedOnTheCardTrainsAlikeWith(const std::string& setting) {
  TempDir dir;
  const std::vector<std::string> parked = {"pipeline.stages.encoder.device=cuda:0",
                                           "pipeline.stages.decoder.device=cuda:0",
                                           "pipeline.park=always"};
  std::vector<std::string> with = parked;
  with.push_back(setting);
  TrainTiny(dir, "parked", parked);
  TrainTiny(dir, "with", with);
  const double loss = FinalLoss(dir / "parked");
  EXPECT_NEAR(FinalLoss(dir / "with"), loss, 0.02 * loss) << setting;
}

TEST(CudaStages, ParkingWithPrefetchTrainsLikeWithout) {
  std::string why;
  if (NoGpu(&why)) GTEST_SKIP() << why;
  ExpectParkedOnTheCardTrainsAlikeWith("pipeline.prefetch=on");
}

// Lean blocks on the card: NormAct's backward there is the tensor ops
// (norm_act_backward.h), which must give what the CPU's fused loop gives,
// for each grouping and activation; and a lean pipeline trains like the
// written one.
TEST(CudaLean, NormActBackwardOnTheCardEqualsTheCpuLoop) {
  std::string why;
  if (NoGpu(&why)) GTEST_SKIP() << why;
  const torch::Device gpu(torch::kCUDA, 0);
  for (const StatGroups groups :
       {StatGroups::kChannel, StatGroups::kSampleChannel, StatGroups::kSampleGroup}) {
    for (const double slope : {0.0, 0.01}) {
      SCOPED_TRACE(std::to_string(static_cast<int>(groups)) + " slope " + std::to_string(slope));
      torch::manual_seed(5);
      const torch::Tensor x = torch::randn({2, 6, 24, 20, 16}), grad_y = torch::randn_like(x);
      const torch::Tensor w = torch::randn({6}), b = torch::randn({6});
      NormActSpec spec;
      spec.groups = groups;
      spec.num_groups = 3;
      spec.act = true;
      spec.slope = slope;
      const NormActGrads cpu = NormActBackward(x, grad_y, w, b, spec);
      const NormActGrads card =
          NormActBackward(x.to(gpu), grad_y.to(gpu), w.to(gpu), b.to(gpu), spec);
      ASSERT_TRUE(card.x.is_cuda());
      EXPECT_TRUE(torch::allclose(card.x.cpu(), cpu.x, 1e-3, 1e-4));
      EXPECT_TRUE(torch::allclose(card.weight.cpu(), cpu.weight, 1e-3, 1e-3));
      EXPECT_TRUE(torch::allclose(card.bias.cpu(), cpu.bias, 1e-3, 1e-3));
    }
  }
}

TEST(CudaLean, LeanPipelineTrainsLikeTheWrittenOne) {
  std::string why;
  if (NoGpu(&why)) GTEST_SKIP() << why;
  ExpectParkedOnTheCardTrainsAlikeWith("model.memory=lean");
}

}  // namespace
}  // namespace up::test
