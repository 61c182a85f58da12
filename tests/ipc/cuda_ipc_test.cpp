// GPU-labelled tests: CUDA IPC between two real processes, and parking across
// devices. Each skips with a printed reason where no GPU is visible.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/device/device_memory.h"
#include "common/model/digest.h"
#include "common/model/unet.h"
#include "common/training/stage_optimizer.h"
#include "common/training/stage_parking.h"
#include "ipc/cuda_ipc_channel.h"
#include "ipc/shm_segment.h"

namespace up::ipc {
namespace {

using Clock = std::chrono::steady_clock;

// Counted without initialising CUDA in this process (the test forks first).
bool GpuVisible() {
  const pid_t pid = fork();
  if (pid == 0) _exit(CudaDeviceCount() > 0 ? 0 : 1);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

TEST(CudaIpc, RoundTripBetweenTwoProcesses) {
  if (!GpuVisible())
    GTEST_SKIP() << "no CUDA device visible on this machine: the CUDA IPC round trip needs one";
  const RunId id = RunId::Random();
  const std::string name = "up-test-cuda-" + id.Hex().substr(0, 12);
  auto ring = ShmRing::Create({name, id, 2, 1 << 20, /*external_payload=*/true});
  ShmSegment handles = ShmSegment::Create(name + "-cuda", CudaIpcHandleSegmentBytes());
  const pid_t child = fork();
  if (child == 0) {  // consumer: checks the values it receives
    int code = 1;
    try {
      auto r = ShmRing::Open(name, id);
      auto receiver = MakeCudaIpcReceiver(*r, 0);
      TensorMessage m = receiver->Receive(Clock::now() + std::chrono::seconds(30));
      torch::Tensor expect = torch::arange(1000, torch::kFloat32).view({10, 100});
      code = torch::equal(m.tensors[0].tensor.cpu(), expect) ? 0 : 2;
      receiver->Release(m);
    } catch (...) {
      code = 3;
    }
    _exit(code);
  }
  auto sender = MakeCudaIpcSender(*ring, 0);
  sender->Send({0, 0, Direction::kForward},
               {{"x", torch::arange(1000, torch::kFloat32).view({10, 100}).cuda()}},
               Clock::now() + std::chrono::seconds(30));
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: no message, 2: wrong values, 3: exception";
}

TEST(CudaParking, RoundTripAcrossDevicesIsBitwise) {
  if (!GpuVisible())
    GTEST_SKIP() << "no CUDA device visible on this machine: parking across devices needs one";
  ModelConfig m;
  m.features = {4, 8};
  TrainConfig t;
  UNetEncoder enc(m, 1);
  enc->to(torch::kCUDA);
  StageOptimizer opt(*enc, t);
  opt.BeginStep(0);
  enc->forward(torch::randn({2, 4, 8, 8}, torch::kCUDA)).bottleneck.square().mean().backward();
  opt.Step(opt.GradNorms());
  const std::string before = ParamDigest(NamedState(*enc), {});
  StageParking parking(*enc, opt.optimizer(), torch::Device(torch::kCUDA, 0));
  parking.Park();
  EXPECT_TRUE(enc->parameters()[0].is_cpu());
  EXPECT_TRUE(enc->parameters()[0].is_pinned());
  parking.Unpark();
  EXPECT_TRUE(enc->parameters()[0].is_cuda());
  EXPECT_EQ(ParamDigest(NamedState(*enc), {}), before);
  opt.BeginStep(1);
  enc->forward(torch::randn({2, 4, 8, 8}, torch::kCUDA)).bottleneck.square().mean().backward();
  opt.Step(opt.GradNorms());  // no "Expected all tensors to be on the same device"

  // Prefetch on the side stream, then a turn right after it: still exact.
  const std::string stepped = ParamDigest(NamedState(*enc), {});
  parking.Park();
  parking.Prefetch();
  EXPECT_TRUE(enc->parameters()[0].is_cuda());
  parking.Unpark();  // the current stream waits for the side stream's copies
  EXPECT_EQ(ParamDigest(NamedState(*enc), {}), stepped);
}

}  // namespace
}  // namespace up::ipc
