// Stages on two machines, as torchrun users start them: two launchers on
// loopback (node ranks 0 and 1) joined by c10d's TCPStore, the boundary over
// a real Gloo process group. The result must equal --single-process bit for
// bit, under every schedule and across a resume; a node that never comes, a
// node given another config and a stage killed on node 1 end in one clear
// error each, with no process or scratch folder left behind.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/support/command.h"

namespace up::test {
namespace {

namespace fs = std::filesystem;

// A port free right now on loopback (the kernel's pick).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

std::vector<std::string> Train(const std::vector<std::string>& extra) {
  std::vector<std::string> args{BinPath("unet-pipeline"),
                                "train",
                                "--config",
                                SourcePath("configs/tiny.yaml"),
                                "--set",
                                "train.threads=1",
                                "--set",
                                "train.micro_batches=4",
                                "--set",
                                "train.steps=6",
                                "--set",
                                "checkpoint.every=3",
                                "--set",
                                "pipeline.transport=gloo"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<std::string> Node(int rank, int port, const std::string& out,
                              std::vector<std::string> extra = {}, int nnodes = 2) {
  std::vector<std::string> args{"--nnodes",      std::to_string(nnodes),
                                "--node-rank",   std::to_string(rank),
                                "--master-addr", "127.0.0.1",
                                "--master-port", std::to_string(port),
                                "--out",         out};
  args.insert(args.end(), extra.begin(), extra.end());
  return Train(args);
}

int ScratchDirsOf(const std::string& run_id) {
  int n = 0;
  for (const auto& e : fs::directory_iterator("/tmp"))
    n += e.path().filename().string().find(run_id) != std::string::npos;
  return n;
}

struct TwoNodes {
  CommandResult node0, node1;
};

TwoNodes RunTwoNodes(const std::string& dir, std::vector<std::string> extra0 = {},
                     std::vector<std::string> extra1 = {}) {
  TwoNodes r;
  // Another test may take the free port first: then start over on a new one.
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::filesystem::remove_all(dir + "/node0");
    std::filesystem::remove_all(dir + "/node1");
    const int port = FreePort();
    BackgroundCommand node1(Node(1, port, dir + "/node1", extra1));
    r.node0 = RunCommand(Node(0, port, dir + "/node0", extra0), 300);
    r.node1 = node1.Wait(60);
    if (r.node0.output.find("Address already in use") == std::string::npos) break;
  }
  return r;
}

std::string SingleProcessDigest(const TempDir& dir, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = Train({"--single-process", "--out", dir / "single"});
  args.insert(args.end(), extra.begin(), extra.end());
  const CommandResult r = RunCommand(args);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return RunDigest(dir / "single");
}

TEST(MultiNode, GlooOnOneMachineEqualsSingleProcess) {
  TempDir dir;
  const CommandResult r = RunCommand(Train({"--out", dir / "gloo"}));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("transport gloo"), std::string::npos) << r.output;
  EXPECT_EQ(RunDigest(dir / "gloo"), SingleProcessDigest(dir));
}

TEST(MultiNode, TwoNodeLoopbackEqualsSingleProcessAndNode0KeepsTheRun) {
  TempDir dir;
  const TwoNodes r = RunTwoNodes(dir.path());
  ASSERT_EQ(r.node0.exit_code, 0) << r.node0.output;
  ASSERT_EQ(r.node1.exit_code, 0) << r.node1.output;
  EXPECT_NE(r.node0.output.find("decoder on cpu (node 1)"), std::string::npos) << r.node0.output;
  const std::string run = dir / "node0";
  EXPECT_EQ(RunDigest(run), SingleProcessDigest(dir));
  EXPECT_EQ(JsonField(Slurp(run + "/summary.json"), "nnodes"), "2");
  // Node 0 holds both stage files of every checkpoint; node 1 only its log.
  for (const char* step : {"step-3", "step-6"}) {
    for (const char* file : {"encoder.pt", "decoder.pt", "manifest.json"})
      EXPECT_TRUE(fs::exists(run + "/checkpoints/" + step + "/" + file)) << step << "/" << file;
  }
  EXPECT_TRUE(fs::exists(dir / "node1/decoder.log"));
  EXPECT_FALSE(fs::exists(dir / "node1/checkpoints"));
  const std::string id = JsonField(Slurp(run + "/summary.json"), "run_id");
  EXPECT_TRUE(ProcessesMentioning(dir.path() + "/node").empty());
  EXPECT_EQ(ScratchDirsOf(id), 0);
}

// torchrun starts one launcher a node with --no-python: they find their
// rank, node 0 and torchrun's own store in its variables, no flags.
TEST(MultiNode, TorchrunStartsTwoNodesWithoutFlags) {
  const std::string torchrun = SourcePath(".venv/bin/torchrun");
  ASSERT_TRUE(fs::exists(torchrun)) << torchrun << " (scripts/install-deps.sh installs it)";
  TempDir dir;
  CommandResult n0, n1;
  for (int attempt = 0; attempt < 3; ++attempt) {
    fs::remove_all(dir / "run");
    const int port = FreePort();
    auto node = [&](int rank) {
      std::vector<std::string> args{torchrun,
                                    "--no-python",
                                    "--nnodes=2",
                                    "--node-rank=" + std::to_string(rank),
                                    "--nproc-per-node=1",
                                    "--master-addr=127.0.0.1",
                                    "--master-port=" + std::to_string(port)};
      for (const std::string& a : Train({"--out", dir / "run"})) args.push_back(a);
      return args;
    };
    BackgroundCommand second(node(1));
    n0 = RunCommand(node(0), 300);
    n1 = second.Wait(60);
    if (n0.output.find("Address already in use") == std::string::npos) break;
  }
  ASSERT_EQ(n0.exit_code, 0) << n0.output;
  ASSERT_EQ(n1.exit_code, 0) << n1.output;
  EXPECT_NE(n0.output.find("launch: torchrun makes this node 0 of 2"), std::string::npos)
      << n0.output;
  EXPECT_NE(n0.output.find("decoder on cpu (node 1)"), std::string::npos) << n0.output;
  EXPECT_TRUE(fs::exists(dir / "run/node1/decoder.log"));
  EXPECT_EQ(RunDigest(dir / "run"), SingleProcessDigest(dir));
  EXPECT_TRUE(ProcessesMentioning(dir.path() + "/run").empty());
}

// The example sbatch script under a stand-in srun (no SLURM here) that
// starts its tasks on this machine with the variables srun sets.
TEST(MultiNode, TheSbatchScriptTrainsOnTwoNodesFromSlurmsVariables) {
  TempDir dir;
  const std::string srun = dir / "srun";
  {
    std::ofstream f(srun);
    f << "#!/usr/bin/env bash\n"
         "# srun's stand-in: SLURM_NNODES tasks here, one a node, as srun starts them.\n"
         "while [[ \"$1\" == --* ]]; do shift; done\n"
         "pids=()\n"
         "for ((i = 0; i < SLURM_NNODES; i++)); do\n"
         "  SLURM_PROCID=$i SLURM_NODEID=$i SLURM_LOCALID=0 SLURM_NTASKS=$SLURM_NNODES \"$@\" &\n"
         "  pids+=($!)\n"
         "done\n"
         "rc=0; for p in \"${pids[@]}\"; do wait \"$p\" || rc=$?; done; exit $rc\n";
  }
  fs::permissions(srun, fs::perms::owner_all);
  CommandResult r;
  for (int attempt = 0; attempt < 3; ++attempt) {
    fs::remove_all(dir / "run");
    std::vector<std::string> args{"/usr/bin/env",
                                  "PATH=" + dir.path() + ":/usr/bin:/bin",
                                  "SLURM_NNODES=2",
                                  "SLURM_JOB_NODELIST=localhost",
                                  "SLURM_JOB_ID=77",
                                  "SLURM_SUBMIT_DIR=" + SourcePath(""),
                                  "MASTER_PORT=" + std::to_string(FreePort()),
                                  "UP_BIN=" + BinPath("unet-pipeline"),
                                  SourcePath("scripts/slurm-train.sbatch"),
                                  SourcePath("configs/tiny.yaml")};
    const std::vector<std::string> train = Train({"--out", dir / "run"});
    args.insert(args.end(), train.begin() + 4, train.end());  // after "train --config FILE"
    r = RunCommand(args, 300);
    if (r.output.find("Address already in use") == std::string::npos) break;
  }
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("launch: SLURM makes this node 0 of 2"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(dir / "run/node1/decoder.log"));
  EXPECT_EQ(RunDigest(dir / "run"), SingleProcessDigest(dir));
}

TEST(MultiNode, OverlappedSchedulesAcrossNodesEqualSingleProcess) {
  TempDir dir;
  const std::string single = SingleProcessDigest(dir);
  for (const char* schedule : {"gpipe", "1f1b"}) {
    TempDir runs;
    const std::vector<std::string> set{"--set", std::string("pipeline.schedule=") + schedule};
    const TwoNodes r = RunTwoNodes(runs.path(), set, set);
    ASSERT_EQ(r.node0.exit_code, 0) << schedule << "\n" << r.node0.output;
    ASSERT_EQ(r.node1.exit_code, 0) << schedule << "\n" << r.node1.output;
    EXPECT_NE(r.node0.output.find("lock off"), std::string::npos) << r.node0.output;
    EXPECT_EQ(RunDigest(runs / "node0"), single) << schedule;
  }
}

TEST(MultiNode, ResumeSendsNode1ItsStageFileAndEqualsAnUninterruptedRun) {
  TempDir dir;
  TwoNodes first = RunTwoNodes(dir.path());
  ASSERT_EQ(first.node0.exit_code, 0) << first.node0.output;
  const std::string run = dir / "node0";
  const std::string straight = RunDigest(run);
  fs::remove_all(run + "/checkpoints/step-6");  // as if stopped after step 3
  const int port = FreePort();
  BackgroundCommand node1(Node(1, port, dir / "node1-again"));
  const CommandResult node0 = RunCommand({BinPath("unet-pipeline"), "train", "--resume", run,
                                          "--nnodes", "2", "--master-port", std::to_string(port)});
  ASSERT_EQ(node0.exit_code, 0) << node0.output;
  const CommandResult n1 = node1.Wait(60);
  ASSERT_EQ(n1.exit_code, 0) << n1.output;
  EXPECT_NE(Slurp(dir / "node1-again/decoder.log").find("at step 3"), std::string::npos);
  EXPECT_EQ(RunDigest(run), straight);
}

// pipeline.replicas over two machines: each node runs one whole replica (both
// its stages), each replica's boundary over its own Gloo group, the copies'
// gradients summed across the machines; the run equals --single-process, and
// a resume sends node 1's replica replica 0's stage files.
TEST(MultiNode, TwoNodesEachRunningOneReplicaEqualSingleProcess) {
  TempDir dir;
  const std::vector<std::string> sets{"--set", "pipeline.replicas=2", "--set",
                                      "model.norm=instance"};
  TwoNodes r = RunTwoNodes(dir.path(), sets, sets);
  ASSERT_EQ(r.node0.exit_code, 0) << r.node0.output;
  ASSERT_EQ(r.node1.exit_code, 0) << r.node1.output;
  EXPECT_NE(r.node0.output.find("1 on cpu (node 1)/cpu (node 1)"), std::string::npos)
      << r.node0.output;
  EXPECT_TRUE(fs::exists(dir / "node1/encoder.r1.log"));
  EXPECT_TRUE(fs::exists(dir / "node1/decoder.r1.log"));
  EXPECT_FALSE(fs::exists(dir / "node1/checkpoints"));
  const std::string run = dir / "node0";
  const std::string straight = RunDigest(run);
  EXPECT_EQ(straight, SingleProcessDigest(dir, sets));

  fs::remove_all(run + "/checkpoints/step-6");  // as if stopped after step 3
  const int port = FreePort();
  BackgroundCommand node1(Node(1, port, dir / "node1-again", sets));
  const CommandResult node0 = RunCommand({BinPath("unet-pipeline"), "train", "--resume", run,
                                          "--nnodes", "2", "--master-port", std::to_string(port)});
  ASSERT_EQ(node0.exit_code, 0) << node0.output;
  const CommandResult n1 = node1.Wait(60);
  ASSERT_EQ(n1.exit_code, 0) << n1.output;
  EXPECT_NE(Slurp(dir / "node1-again/decoder.r1.log").find("at step 3"), std::string::npos);
  EXPECT_EQ(RunDigest(run), straight);

  // Counts that do not divide each other, and a transport that stays on one
  // machine, are one line each before anything starts.
  CommandResult bad =
      RunCommand(Node(0, FreePort(), dir / "bad",
                      {"--set", "pipeline.replicas=2", "--set", "pipeline.encoder_parts=2", "--set",
                       "pipeline.decoder_parts=1"},
                      3));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("pipeline.replicas = 2 over --nnodes 3: one must divide the other"),
            std::string::npos)
      << bad.output;
  bad = RunCommand(Node(0, FreePort(), dir / "bad",
                        {"--set", "pipeline.replicas=2", "--set", "pipeline.transport=shm"}));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("pipeline.transport = shm stays on one machine"), std::string::npos)
      << bad.output;
}

// Four stages (two parts each half) on three launchers: each node starts the
// stages placed on it (stage s of 4 on node s*3/4: node 0 both encoder
// parts, node 1 decoder part 1, node 2 decoder part 2), every skip goes
// straight over Gloo from its maker to its user, and the run equals
// --single-process; killing the middle decoder part ends every node with
// the part named.
TEST(MultiNode, ThreeNodesFourStagesEqualSingleProcess) {
  TempDir dir;
  const std::vector<std::string> parts{"--set", "pipeline.encoder_parts=2", "--set",
                                       "pipeline.decoder_parts=2"};
  auto node = [&](int rank, int port, const std::string& out, std::vector<std::string> extra) {
    extra.insert(extra.end(), parts.begin(), parts.end());
    return Node(rank, port, out, extra, /*nnodes=*/3);
  };
  CommandResult r0, r1, r2;
  for (int attempt = 0; attempt < 3; ++attempt) {
    fs::remove_all(dir / "node0");
    const int port = FreePort();
    BackgroundCommand n1(node(1, port, dir / "node1", {}));
    BackgroundCommand n2(node(2, port, dir / "node2", {}));
    r0 = RunCommand(node(0, port, dir / "node0", {}), 300);
    r1 = n1.Wait(60);
    r2 = n2.Wait(60);
    if (r0.output.find("Address already in use") == std::string::npos) break;
  }
  ASSERT_EQ(r0.exit_code, 0) << r0.output;
  ASSERT_EQ(r1.exit_code, 0) << r1.output;
  ASSERT_EQ(r2.exit_code, 0) << r2.output;
  EXPECT_NE(r0.output.find("2 decoder1 levels 3-1 on cpu (node 1)"), std::string::npos)
      << r0.output;
  EXPECT_NE(r0.output.find("3 decoder2 level 0 on cpu (node 2)"), std::string::npos) << r0.output;
  EXPECT_EQ(RunDigest(dir / "node0"), SingleProcessDigest(dir));
  for (const char* file : {"encoder1.pt", "encoder2.pt", "decoder1.pt", "decoder2.pt"})
    EXPECT_TRUE(fs::exists(dir / "node0/checkpoints/step-6/" + std::string(file))) << file;
  EXPECT_TRUE(fs::exists(dir / "node1/decoder1.log"));
  EXPECT_TRUE(fs::exists(dir / "node2/decoder2.log"));

  // The middle part killed on node 1: every node ends, the part named.
  const int port = FreePort();
  const std::vector<std::string> longer{"--set", "train.steps=100000", "--set",
                                        "checkpoint.every=0"};
  BackgroundCommand n1(node(1, port, dir / "k1", longer));
  BackgroundCommand n2(node(2, port, dir / "k2", longer));
  BackgroundCommand n0(node(0, port, dir / "k0", longer));
  for (int i = 0; i < 300 && Slurp(dir / "k0/metrics.jsonl").empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_FALSE(Slurp(dir / "k0/metrics.jsonl").empty()) << "training did not start";
  ASSERT_EQ(
      RunCommand({"/usr/bin/pkill", "-KILL", "-f", "decoder_proc.*" + (dir / "k1")}).exit_code, 0);
  const CommandResult k0 = n0.Wait(60), k1 = n1.Wait(60), k2 = n2.Wait(60);
  EXPECT_EQ(k0.exit_code, 1) << k0.output;
  EXPECT_NE(k0.output.find("decoder part 1 of 2 on node 1 killed by signal 9"), std::string::npos)
      << k0.output;
  EXPECT_EQ(k1.exit_code, 1) << k1.output;
  EXPECT_NE(k1.output.find("decoder part 1 of 2 killed by signal 9"), std::string::npos)
      << k1.output;
  EXPECT_NE(k2.exit_code, 0) << k2.output;
  EXPECT_TRUE(ProcessesMentioning(dir.path() + "/k").empty());
}

// pipeline.placement: mirrored over two machines: the encoder parts' nodes
// given, each decoder part runs beside the encoder part whose skips it
// takes, so no skip crosses the network; the bits are single-process's.
// Cut by time (pipeline.balance: time): node 0 times the levels, and node 1
// runs node 0's cuts (its own config has none; the configs still agree).
TEST(MultiNode, MirroredPartsKeepEverySkipOnItsNode) {
  TempDir dir;
  const std::vector<std::string> mirrored{
      "--set", "pipeline.encoder_parts=2",    "--set", "pipeline.decoder_parts=2",
      "--set", "pipeline.placement=mirrored", "--set", "pipeline.nodes=[0, 1]",
      "--set", "pipeline.balance=time"};
  const TwoNodes r = RunTwoNodes(dir.path(), mirrored, mirrored);
  ASSERT_EQ(r.node0.exit_code, 0) << r.node0.output;
  ASSERT_EQ(r.node1.exit_code, 0) << r.node1.output;
  EXPECT_NE(r.node0.output.find("pipeline.balance time: "), std::string::npos) << r.node0.output;
  EXPECT_EQ(r.node1.output.find("pipeline.balance time: "), std::string::npos) << r.node1.output;
  const std::string cuts = JsonField(Slurp(dir / "node0/level_times.json"), "encoder_cuts");
  ASSERT_EQ(cuts.size(), 3u) << cuts;  // one cut: "[k]"
  const std::string line = "encoder: [" + cuts.substr(1, 1) + "]";
  EXPECT_NE(Slurp(dir / "node0/config.yaml").find(line), std::string::npos) << line;
  EXPECT_NE(Slurp(dir / "node1/config.yaml").find(line), std::string::npos) << line;
  // Stages in pipeline order: encoder1 (node 0), encoder2 (node 1), then
  // decoder1 beside encoder2 and decoder2 beside encoder1.
  for (const char* line : {"0 encoder1 ", "1 encoder2 ", "2 decoder1 ", "3 decoder2 "}) {
    const size_t at = r.node0.output.find(line);
    ASSERT_NE(at, std::string::npos) << line << "\n" << r.node0.output;
    const std::string rest =
        r.node0.output.substr(at, r.node0.output.find_first_of(";\n", at) - at);
    const bool on_node1 = rest.find("(node 1)") != std::string::npos;
    EXPECT_EQ(on_node1, line[0] == '1' || line[0] == '2') << rest;
  }
  EXPECT_TRUE(fs::exists(dir / "node1/encoder2.log"));
  EXPECT_TRUE(fs::exists(dir / "node1/decoder1.log"));
  EXPECT_EQ(RunDigest(dir / "node0"), SingleProcessDigest(dir));
}

TEST(MultiNode, MissingNodeIsAClearTimeoutWithNothingLeft) {
  TempDir dir;
  const auto start = std::chrono::steady_clock::now();
  const CommandResult r =
      RunCommand(Node(0, FreePort(), dir / "node0", {"--set", "pipeline.timeout_s=3"}), 60);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("decoder (node 1) did not connect and say hello within 3 s"),
            std::string::npos)
      << r.output;
  EXPECT_LT(took, 30) << "the timeout did not hold";
  EXPECT_TRUE(ProcessesMentioning(dir.path() + "/node").empty());

  // And node 1 alone: node 0 never answers.
  const CommandResult alone =
      RunCommand(Node(1, FreePort(), dir / "node1", {"--set", "pipeline.timeout_s=2"}), 60);
  EXPECT_EQ(alone.exit_code, 1) << alone.output;
  EXPECT_NE(alone.output.find("node 0 did not answer at 127.0.0.1:"), std::string::npos)
      << alone.output;
  EXPECT_TRUE(ProcessesMentioning(dir.path() + "/node").empty());
}

// Another learning rate, or another number of replicas (pipeline.replicas):
// node 1 is refused at the rendezvous with one line, and nothing is left.
TEST(MultiNode, DifferentConfigOnNode1IsRefused) {
  for (const char* differs : {"train.lr=0.5", "pipeline.replicas=2"}) {
    TempDir dir;
    const TwoNodes r = RunTwoNodes(dir.path(), {"--set", "pipeline.timeout_s=5"},
                                   {"--set", "pipeline.timeout_s=5", "--set", differs});
    EXPECT_EQ(r.node1.exit_code, 2) << differs << "\n" << r.node1.output;
    EXPECT_NE(r.node1.output.find("the config on node 1 differs from node 0's"), std::string::npos)
        << differs << "\n"
        << r.node1.output;
    EXPECT_EQ(ErrorLines(r.node1.output).size(), 1u) << r.node1.output;
    EXPECT_NE(r.node0.exit_code, 0) << r.node0.output;
    EXPECT_TRUE(ProcessesMentioning(dir.path() + "/node").empty());
  }
}

TEST(MultiNode, StageKilledOnNode1IsNamedByNode0) {
  TempDir dir;
  const int port = FreePort();
  const std::vector<std::string> longer{"--set", "train.steps=100000", "--set",
                                        "checkpoint.every=0"};
  BackgroundCommand node1(Node(1, port, dir / "node1", longer));
  BackgroundCommand node0(Node(0, port, dir / "node0", longer));
  // Wait until training runs, then kill node 1's decoder.
  for (int i = 0; i < 300 && Slurp(dir / "node0/metrics.jsonl").empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_FALSE(Slurp(dir / "node0/metrics.jsonl").empty()) << "training did not start";
  const CommandResult killed =
      RunCommand({"/usr/bin/pkill", "-KILL", "-f", "decoder_proc.*" + (dir / "node1")});
  ASSERT_EQ(killed.exit_code, 0) << killed.output;
  const CommandResult r0 = node0.Wait(30);
  const CommandResult r1 = node1.Wait(30);
  EXPECT_EQ(r0.exit_code, 1) << r0.output;
  EXPECT_NE(r0.output.find("decoder stage on node 1 killed by signal 9"), std::string::npos)
      << r0.output;
  EXPECT_EQ(r1.exit_code, 1) << r1.output;
  EXPECT_NE(r1.output.find("decoder stage killed by signal 9"), std::string::npos) << r1.output;
  EXPECT_TRUE(ProcessesMentioning(dir.path() + "/node").empty());
}

}  // namespace
}  // namespace up::test
