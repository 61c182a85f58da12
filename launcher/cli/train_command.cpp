// See train_command.h.
#include "launcher/cli/train_command.h"

#include <torch/torch.h>

#include <cstring>
#include <ctime>
#include <cxxopts.hpp>
#include <filesystem>
#include <iostream>
#include <optional>

#include "common/base/command_line.h"
#include "common/base/errors.h"
#include "common/base/fs_util.h"
#include "common/base/logging.h"
#include "common/config/config_file.h"
#include "common/data/dataset.h"
#include "common/data/validation_split.h"
#include "common/device/device_memory.h"
#include "common/model/bundle_unet.h"
#include "common/nnunet/nnunet_export.h"
#include "common/nnunet/nnunet_import.h"
#include "common/nnunet/nnunet_layout.h"
#include "common/nnunet/nnunet_validation.h"
#include "common/run/metrics_format.h"
#include "common/run/run_dir.h"
#include "common/training/checkpoint.h"
#include "launcher/launch_env.h"
#include "launcher/node_agent.h"
#include "launcher/pipeline.h"
#include "launcher/single_process.h"
#include "launcher/stop_signal.h"
#include "launcher/time_balance.h"
#include "launcher/tools/host_budget.h"

namespace up {
namespace {

namespace fs = std::filesystem;

std::string DefaultOut(const std::string& config_path) {
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", std::localtime(&now));
  const std::string stem = config_path.empty() ? "run" : fs::path(config_path).stem().string();
  return (fs::path("runs") / (stem + "-" + stamp)).string();
}

// Every device this node's processes would use exists (single-process: the
// encoder's, which runs the whole model), checked like the data before the
// run folder is made: `cuda` on a machine without one is one line, exit 2.
void CheckDevices(const Config& config, bool single_process, int node = 0, int nnodes = 1) {
  if (single_process) {
    ParseDevice(config.pipeline.encoder.device, "pipeline.stages.encoder.device");
    return;
  }
  CheckStageDevices(config, node, nnodes);
}

// Every file of a folder or NIfTI dataset is checked here, before the run
// folder is made or any process starts: a bad file is one line and exit 2.
// 2-D folder images are small, so each pair is read whole (a file truncated
// after its header is caught too); NIfTI volumes are checked by their headers.
// What a run reads besides its config, checked before any process starts:
// the bundle's level files (torchscript) and the dataset.
void CheckData(const Config& config) {
  if (config.model.kind == ModelKind::kTorchscript) CheckBundleLevels(config.model);
  if (config.data.kind == DataKind::kSynthetic && !config.data.HasValidation()) return;
  if (config.data.kind == DataKind::kNnunet) ImportNnunetData(config);  // once; later runs reuse it
  const std::unique_ptr<Dataset> data = MakeDataset(config);            // the training cases
  if (config.data.kind == DataKind::kFolder) {
    for (int64_t i = 0; i < data->size(); ++i) data->Get(i);
  }
  const std::unique_ptr<ValidationSet> val = MakeValidationSet(config);  // its split, checked
  const int64_t held = val ? val->cases->size() : 0;
  LogInfo(
      Str("data: ", data->size(), " samples for training",
          val ? Str(", ", held, " for validation (", val->plan.size(), " window batches a pass)")
              : std::string(),
          " in ",
          config.data.kind == DataKind::kNnunet ? config.data.cache
          : config.data.path.empty()            ? NameOf(config.data.kind)
                                                : config.data.path));
}

cxxopts::Options TrainOptions() {
  cxxopts::Options options("unet-pipeline train",
                           "Train a U-Net split into encoder and decoder stages.");
  options.add_options()("config", "YAML config file", cxxopts::value<std::string>())(
      "set", "override a key: --set key.path=value (repeatable)",
      cxxopts::value<std::vector<std::string>>())(
      "out", "run folder (default runs/<config>-<time>)", cxxopts::value<std::string>())(
      "resume", "continue the run in this folder from its newest checkpoint",
      cxxopts::value<std::string>())("single-process",
                                     "train the whole U-Net in this process (the reference)")(
      "record", "pipeline: record boundary tensors, losses and weights into DIR",
      cxxopts::value<std::string>())("record-steps", "steps to record (the first N)",
                                     cxxopts::value<int>()->default_value("1"))(
      "trace", "pipeline: write a Chrome trace (JSON) to FILE", cxxopts::value<std::string>())(
      "nnodes", "machines the run spans (1 to the number of stages; torchrun-style)",
      cxxopts::value<int>()->default_value("1"))(
      "node-rank", "this machine's rank: 0 drives the run and writes the run folder",
      cxxopts::value<int>()->default_value("0"))(
      "master-addr", "node 0's address (the c10d rendezvous and the stages' control)",
      cxxopts::value<std::string>()->default_value("127.0.0.1"))(
      "master-port", "node 0's rendezvous port (0: any free port, one machine only)",
      cxxopts::value<int>()->default_value("0"))(
      "node-addr", "this machine's address for c10d (default: the one that reaches node 0)",
      cxxopts::value<std::string>()->default_value(""))("v,verbose", "more log output")(
      "q,quiet", "only warnings and errors")("h,help", "this help");
  return options;
}

// Where this machine stands among the run's nodes: the flags, or, started by
// torchrun or srun without them, their variables (`from_env`).
NodeOptions NodesOf(const cxxopts::ParseResult& args, bool* from_env) {
  NodeOptions nodes;
  nodes.nnodes = args["nnodes"].as<int>();
  nodes.node_rank = args["node-rank"].as<int>();
  nodes.master_addr = args["master-addr"].as<std::string>();
  nodes.master_port = args["master-port"].as<int>();
  nodes.node_addr = args["node-addr"].as<std::string>();
  *from_env = false;
  if (args.count("nnodes") || args.count("node-rank")) return nodes;
  if (const auto env = ReadLaunchEnvironment(ProcessEnvironment())) {
    *from_env = true;
    nodes.nnodes = env->nodes.nnodes;
    nodes.node_rank = env->nodes.node_rank;
    nodes.master_addr = env->nodes.master_addr;
    nodes.master_port = env->nodes.master_port;
    nodes.store_exists = env->store_exists;
    LogInfo(Str("launch: ", env->source, " makes this node ", nodes.node_rank, " of ", nodes.nnodes,
                nodes.nnodes > 1 ? Str(", node 0 at ", nodes.master_addr, ":", nodes.master_port,
                                       env->store_exists ? " (its store)" : "")
                                 : std::string()));
  }
  return nodes;
}

// Another node: start this node's stage(s); node 0 drives and keeps the run folder.
int RunOtherNode(const cxxopts::ParseResult& args, const NodeOptions& nodes, bool from_env,
                 const std::vector<std::string>& overrides) {
  if (args.count("resume")) {
    throw UsageError(
        "--resume goes to node 0 only (it sends this node its stage files); "
        "start node " +
        std::to_string(nodes.node_rank) + " with --config and --set as before");
  }
  if (!args.count("config")) throw UsageError("train needs --config FILE");
  const std::string path = args["config"].as<std::string>();
  Config config = LoadConfig(path, overrides);
  const AutoDevices auto_devices = ResolveAutoDevicesHere(&config);
  if (!auto_devices.why.empty()) LogInfo(auto_devices.why);
  CheckDevices(config, false, nodes.node_rank, nodes.nnodes);
  CheckData(config);  // this node's copy of the data
  StopSignals stop;
  // Every node of a torchrun or srun launch gets the same --out: the
  // others log into its node<N> folder (inside node 0's run folder when
  // the file system is shared).
  const std::string node = "node" + std::to_string(nodes.node_rank);
  return RunNodeAgent(config, nodes,
                      !args.count("out") ? DefaultOut(path) + "-" + node
                      : from_env         ? args["out"].as<std::string>() + "/" + node
                                         : args["out"].as<std::string>());
}

// Before any process starts or any folder is made: a run whose processes
// would hold more host memory together than the machine has (by
// host_budget.h's estimate, the one `plan --no-measure` shows) is refused in
// one line rather than killed by the kernel mid-step; more than is available
// now is a warning. On one machine only: with more nodes each holds a part.
void CheckHostMemory(const Config& config, bool single_process, const NodeOptions& nodes) {
  if (nodes.nnodes > 1) return;
  const HostNeed need = EstimateHostNeed(config, single_process, TrainsOnHost(config));
  const std::string warning = CheckHostFits(need, ReadMachineMemory());
  if (!warning.empty()) LogWarn(warning);
}

// Node 0's run, checked and with its folder: a new one, or --resume's.
struct PreparedRun {
  Config config;
  std::optional<CheckpointRef> resume;
  std::optional<RunDir> run;
  std::string device_note;   // how `auto` was resolved, the log's first line
  bool made_folder = false;  // the run folder is this run's own (not --resume, not a user's)
  std::optional<LevelTimes> level_times;  // pipeline.balance: time
};

PreparedRun PrepareResume(const cxxopts::ParseResult& args,
                          const std::vector<std::string>& overrides, bool single_process,
                          const NodeOptions& nodes) {
  if (args.count("config") || args.count("out")) {
    throw UsageError("--resume DIR takes the config and run folder from DIR; drop --config/--out");
  }
  PreparedRun r;
  const std::string dir = args["resume"].as<std::string>();
  r.config = RunDir::LoadConfigOf(dir, overrides);
  r.device_note = ResolveAutoDevicesHere(&r.config).why;  // an --set ...device=auto
  CheckDevices(r.config, single_process, 0, nodes.nnodes);
  CheckData(r.config);
  CheckHostMemory(r.config, single_process, nodes);
  r.resume = FindLatestCheckpoint(dir, r.config, [](const std::string& w) { LogWarn(w); });
  if (!r.resume)
    throw UsageError("--resume " + dir + ": no complete checkpoint in " + dir + "/checkpoints");
  if (r.resume->step > r.config.train.steps) {
    throw UsageError("--resume " + dir + ": the newest checkpoint is at step " +
                     std::to_string(r.resume->step) + " but train.steps = " +
                     std::to_string(r.config.train.steps) + "; raise it with --set train.steps=N");
  }
  r.run.emplace(RunDir::Reopen(dir, r.config, r.resume->step));
  return r;
}

PreparedRun PrepareNewRun(const cxxopts::ParseResult& args,
                          const std::vector<std::string>& overrides, bool single_process,
                          const NodeOptions& nodes) {
  if (!args.count("config")) throw UsageError("train needs --config FILE (or --resume DIR)");
  PreparedRun r;
  const std::string path = args["config"].as<std::string>();
  r.config = LoadConfig(path, overrides);
  r.device_note = ResolveAutoDevicesHere(&r.config).why;
  CheckDevices(r.config, single_process, 0,
               nodes.nnodes);  // before the run folder: a missing GPU leaves none
  CheckData(r.config);
  CheckHostMemory(r.config, single_process, nodes);
  // pipeline.balance: time: the cuts the config leaves open, from the
  // levels timed on the stages' devices, before the run's config is written.
  if (!single_process) r.level_times = BalanceByTime(&r.config);
  const std::string out = args.count("out") ? args["out"].as<std::string>() : DefaultOut(path);
  std::error_code ec;
  r.made_folder = !fs::exists(out, ec);
  r.run.emplace(RunDir::Create(out, r.config));
  KeepNnunetPlans(r.run->path(), r.config);  // for `export --format nnunet`
  if (r.level_times) {
    WriteFileAtomic((fs::path(r.run->path()) / "level_times.json").string(),
                    LevelTimesFile(*r.level_times, r.config));
  }
  return r;
}

DebugOutputs DebugOutputsOf(const cxxopts::ParseResult& args) {
  DebugOutputs debug;
  if (args.count("record")) debug.record_dir = args["record"].as<std::string>();
  debug.record_steps = args["record-steps"].as<int>();
  if (args.count("trace")) debug.trace_file = args["trace"].as<std::string>();
  debug.verbosity = args.count("quiet") ? "-q" : args.count("verbose") ? "-v" : "";
  return debug;
}

// Runs the trainer. A failure while running loses nothing already saved: its
// line says which checkpoint is intact; a config refused before the first
// step leaves no run folder behind when this run made it.
TrainSummary RunTrainer(const cxxopts::ParseResult& args, PreparedRun& r,
                        const NodeOptions& nodes) {
  const Config& config = r.config;
  RunDir& run = *r.run;
  try {
    return args.count("single-process")
               ? RunSingleProcess(config, run, r.resume)
               : RunPipeline(config, run, r.resume, DebugOutputsOf(args), nodes);
  } catch (const Error& e) {
    if (const int sig = StopSignals::requested()) {
      throw Error(
          Str("stopped at once by ", strsignal(sig), " (", e.what(), "); the newest checkpoint in ",
              run.path(), " is intact: continue with --resume ", run.path()),
          128 + sig);
    }
    std::optional<CheckpointRef> saved;
    try {
      saved = FindLatestCheckpoint(run.path(), config, [](auto&) {});
    } catch (const Error&) {
      // Only a hint: the original error is what matters.
    }
    if (e.exit_code() == 2 && r.made_folder && !saved) {
      std::error_code ec;
      fs::remove_all(run.path(), ec);
      throw;
    }
    if (e.exit_code() != 1) saved.reset();
    if (saved) {
      throw RuntimeError(Str(e.what(), "; checkpoint step-", saved->step,
                             " is intact: continue with --resume ", run.path()));
    }
    throw;
  }
}

// data.kind: nnunet: the fold filed in nnUNet_results, and validated with
// nnU-Net's own predictor unless validate.nnunet is off.
void FileNnunetFold(const std::string& run, const Config& config) {
  const std::string fold = WriteNnunetResults(run, config);
  LogInfo(Str(
      "nnU-Net: fold filed in ", fold, "; predict with nnUNetv2_predict -i IN -o OUT -d ",
      fs::path(config.data.dataset).filename().string(), " -c ", config.data.configuration, " -f ",
      config.data.fold, " -tr ", kNnunetResultsTrainer,
      config.data.plans != "nnUNetPlans" ? " -p " + config.data.plans : "",
      config.data.results.empty() ? " (set nnUNet_results to this folder's nnUNet_results)" : ""));
  if (config.data.AllFolds() || config.validate.nnunet == ValidationFolder::kOff) return;
  LogInfo(Str("nnU-Net: validating fold ", config.data.fold,
              "'s held-out cases with nnU-Net's predictor, as nnUNetTrainer does at its end"));
  const NnunetValidation v = WriteNnunetValidation(fold, run, config);
  LogInfo(Str("nnU-Net: validation of ", v.cases, " cases in ", v.folder, ": mean foreground Dice ",
              v.foreground_dice, " (summary.json; nnUNetv2_find_best_configuration reads it)"));
}

}  // namespace

int TrainCommand(int argc, char** argv) {
  cxxopts::Options options = TrainOptions();
  const auto parsed = ParseCommandLine(options, argc, argv, "unet-pipeline train --help");
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  InitLogging("launcher", VerbosityOf(args));
  const std::vector<std::string> overrides =
      args.count("set") ? RejoinOverrides(args["set"].as<std::vector<std::string>>())
                        : std::vector<std::string>{};
  bool from_env = false;
  const NodeOptions nodes = NodesOf(args, &from_env);
  if (nodes.nnodes != 1 &&
      (args.count("single-process") || args.count("record") || args.count("trace"))) {
    throw UsageError("--nnodes " + std::to_string(nodes.nnodes) +
                     ": --single-process, --record and --trace run on one machine; drop them");
  }
  if (nodes.node_rank > 0) return RunOtherNode(args, nodes, from_env, overrides);

  const bool single_process = args.count("single-process") > 0;
  PreparedRun r = args.count("resume") ? PrepareResume(args, overrides, single_process, nodes)
                                       : PrepareNewRun(args, overrides, single_process, nodes);
  const Config& config = r.config;
  const RunDir& run = *r.run;
  torch::set_num_threads(config.train.threads);
  AddLogFile((fs::path(run.path()) / "launcher.log").string());
  if (!r.device_note.empty()) LogInfo(r.device_note);
  LogInfo(Str("run folder ", run.path()));
  if (r.level_times) LogInfo(DescribeTimeBalance(*r.level_times, config));
  if (single_process && (args.count("record") || args.count("trace")))
    throw UsageError("--record and --trace are for the pipeline; drop --single-process");
  StopSignals stop;
  const TrainSummary s = RunTrainer(args, r, nodes);
  try {
    LogInfo("curves: " + WriteTrainingCurves(run.path()));
  } catch (const Error& e) {  // the run itself succeeded: say so, keep its exit code
    LogWarn(Str("no curves written: ", e.what()));
  }
  if (const int sig = StopSignals::requested(); sig && s.steps < config.train.steps) {
    std::cerr << "unet-pipeline: stopped by " << strsignal(sig) << " after step " << s.steps
              << " (checkpointed); continue with --resume " << run.path() << std::endl;
    return 128 + sig;
  }
  LogInfo(Str("done: ", s.steps, " steps, final loss ", s.final_loss, ", ", s.samples_per_s,
              " samples/s, param_digest ", s.param_digest));
  if (config.data.kind == DataKind::kNnunet) FileNnunetFold(run.path(), config);
  return 0;
}

}  // namespace up
