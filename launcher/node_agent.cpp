// See node_agent.h.
#include "launcher/node_agent.h"

#include <cstring>
#include <filesystem>
#include <vector>

#include "common/base/child_process.h"
#include "common/base/deadline.h"
#include "common/base/errors.h"
#include "common/base/fs_util.h"
#include "common/base/logging.h"
#include "common/base/sha256.h"
#include "common/config/config_file.h"
#include "common/layout/pipeline_layout.h"
#include "ipc/control_channel.h"
#include "launcher/rendezvous.h"
#include "launcher/stage_binary.h"
#include "launcher/stale_runs.h"
#include "launcher/stop_signal.h"
#include "launcher/time_balance.h"

namespace up {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

int RunNodeAgent(const Config& given, const NodeOptions& nodes, const std::string& log_dir) {
  Config config = given;  // node 0's cuts go in under pipeline.balance: time
  const PipelineConfig& p = config.pipeline;
  // The stages placed on this node, of every replica (pipeline.replicas).
  struct Mine {
    StageSpec spec;
    int replica = 0, slot = 0;
    std::string key;  // "decoder", "encoder.r1"
  };
  std::vector<Mine> mine;
  const int R = p.replicas;
  for (int r = 0; r < R; ++r) {
    const int slot = R > 1 ? ReplicaSlot(R, nodes.nnodes, r) : 0;
    const PipelineLayout layout = ResolveLayout(config, slot);
    const Placement placement = ResolveReplicaPlacement(p, layout, nodes, r);
    for (const StageSpec& s : layout.stages) {
      if (placement.Local(s.index, nodes.node_rank))
        mine.push_back({s, r, slot, ReplicaKey(s.Key(), r)});
    }
  }
  std::vector<std::string> binaries;
  for (const Mine& m : mine)
    binaries.push_back(StageBinary(m.spec.encoder ? "encoder_proc" : "decoder_proc"));
  const std::string node_addr =
      nodes.node_addr.empty() ? LocalAddressToward(nodes.master_addr) : nodes.node_addr;

  for (const std::string& path : RemoveStaleRuns()) {
    LogWarn("removed " + path + ", left behind by a run whose launcher died");
  }
  LogInfo(Str("node ", nodes.node_rank, " of ", nodes.nnodes, " (", node_addr,
              "): waiting for node 0 at ", nodes.master_addr, ":", nodes.master_port));
  Rendezvous rendezvous = Rendezvous::Join(nodes.master_addr, nodes.master_port, p.timeout_s);
  const std::optional<std::string> text = rendezvous.Get("up/run", p.timeout_s);
  if (!text) {
    throw TimeoutError("node 0 at " + rendezvous.address() + " did not announce a run within " +
                       std::to_string(static_cast<int>(p.timeout_s)) + " s (pipeline.timeout_s)");
  }
  const RunAnnouncement run = RunAnnouncement::Decode(*text);
  if (p.balance == Balance::kTime) {  // node 0 timed the levels and cut: its parts are every node's
    const std::optional<std::string> cuts = rendezvous.Get("up/cuts", p.timeout_s);
    if (!cuts)
      throw TimeoutError("node 0 announced a run but not its cuts (pipeline.balance: time)");
    DecodeCuts(*cuts, &config.pipeline);
    for (Mine& m : mine)
      m.spec = ResolveLayout(config, m.slot).stages[static_cast<size_t>(m.spec.index)];
  }
  const std::string resolved = DumpConfig(config);
  if (Sha256Hex(resolved) != run.config_sha256) {
    throw UsageError("the config on node " + std::to_string(nodes.node_rank) +
                     " differs from node 0's (config sha256 " + Sha256Hex(resolved).substr(0, 12) +
                     " here, " + run.config_sha256.substr(0, 12) +
                     " there): give every node the same --config and --set");
  }
  fs::create_directories(log_dir);
  const std::string config_path = (fs::path(log_dir) / "config.yaml").string();
  WriteFileAtomic(config_path, resolved);
  RunScratchDir scratch(run.run_id);

  std::vector<ChildProcess> children;
  for (size_t i = 0; i < mine.size(); ++i) {
    const std::string& name = mine[i].key;
    // Each stage its own scratch folder: a stage file crosses the connection through it.
    const std::string stage_scratch = (fs::path(scratch.path()) / name).string();
    fs::create_directories(stage_scratch);
    std::vector<std::string> args{"--config",    config_path,
                                  "--part",      std::to_string(mine[i].spec.part + 1),
                                  "--control",   run.control,
                                  "--run-id",    run.run_id,
                                  "--c10d",      NameOf(p.transport),
                                  "--store",     rendezvous.address(),
                                  "--node-addr", node_addr,
                                  "--scratch",   stage_scratch,
                                  "--log",       (fs::path(log_dir) / (name + ".log")).string()};
    if (R > 1) {
      args.insert(args.end(), {"--replica", std::to_string(mine[i].replica), "--replica-slot",
                               std::to_string(mine[i].slot)});
    }
    children.push_back(ChildProcess::Spawn({name, binaries[i], args, {}, true, ""}));
    StopSignals::WatchChild(children.back().pid());
    LogInfo(Str(mine[i].spec.Name(), R > 1 ? Str(" of replica ", mine[i].replica) : "",
                " started (pid ", children.back().pid(), ", ", mine[i].spec.LevelsText(), "), run ",
                run.run_id));
  }

  // Watch until every stage has ended; the first failure ends the node.
  for (;;) {
    bool running = false;
    for (size_t i = 0; i < children.size(); ++i) {
      const std::optional<ExitStatus> status = children[i].Poll();
      if (!status) {
        running = true;
        continue;
      }
      if (!status->success()) {
        const std::string& name = mine[i].key;
        try {
          rendezvous.Set("up/" + run.run_id + "/exit/" + name, status->Describe());
        } catch (const Error&) {
          // Node 0 is gone too: nobody to tell.
        }
        throw RuntimeError(mine[i].spec.Name() + (mine[i].spec.parts == 1 ? " stage " : " ") +
                           (R > 1 ? Str("of replica ", mine[i].replica, " ") : std::string()) +
                           status->Describe() + "; see its log in " + log_dir);
      }
    }
    if (!running) break;
    if (const int sig = StopSignals::requested()) {
      throw Error(Str("stopped by ", strsignal(sig),
                      ": this node's stages were ended; node 0 "
                      "reports the run's state"),
                  128 + sig);
    }
    std::vector<int> fds;
    for (ChildProcess& c : children) fds.push_back(c.pidfd());
    ipc::WaitReadable(fds, Clock::now() + std::chrono::milliseconds(200));
  }
  LogInfo(Str("node ", nodes.node_rank, ": the stages finished the run; logs in ", log_dir));
  return 0;
}

}  // namespace up
