// See pipeline.h. The run in its parts: PlanPipeline (pipeline_checks.h)
// checks and resolves the run before any process starts;
// PipelineResources (pipeline_resources.h) owns what the run makes and
// starts the stages; the handshake here; StepLoop (step_loop.h) runs the
// steps, a TurnRunner (turn_runner.h) each step's turns; the shutdown and
// summary.json here.
#include "launcher/pipeline.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "common/base/deadline.h"
#include "common/base/errors.h"
#include "common/base/json_writer.h"
#include "common/base/logging.h"
#include "common/base/proc_stats.h"
#include "common/base/test_hooks.h"
#include "common/model/digest.h"
#include "common/model/unet.h"
#include "launcher/handshake.h"
#include "launcher/pipeline_checks.h"
#include "launcher/pipeline_resources.h"
#include "launcher/stale_runs.h"
#include "launcher/step_loop.h"
#include "launcher/turn_runner.h"

namespace up {
namespace {

namespace fs = std::filesystem;

// The parts of each half must hold each of its parameters once.
void CheckPositions(const PipelineLayout& layout, const std::vector<StageLink>& stages) {
  for (bool encoder : {true, false}) {
    std::vector<int32_t> all;
    for (const StageLink& s : stages) {
      if (s.replica != 0 || layout.stages[static_cast<size_t>(s.stage)].encoder != encoder)
        continue;
      all.insert(all.end(), s.parameter_positions.begin(), s.parameter_positions.end());
    }
    std::sort(all.begin(), all.end());
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i] != static_cast<int32_t>(i)) {
        throw RuntimeError(Str("handshake: the ", encoder ? "encoder" : "decoder",
                               " parts do not hold each parameter of the ",
                               encoder ? "encoder" : "decoder", " once (position ", i, ")"));
      }
    }
  }
}

// Handshake: protocol, config and boundary must agree before any work; a
// stage on another node then gets its stage file to resume from.
void GreetStages(PipelineResources& res, const Config& config, const PipelinePlan& plan,
                 const std::optional<CheckpointRef>& resume, const NodeOptions& nodes) {
  StageGroup& stages = res.stages();
  const std::string boundary = BoundarySignature(config);
  const std::vector<ipc::Hello> hellos =
      stages.AcceptAll(res.listener(), After(config.pipeline.timeout_s),
                       "start-up before step " + std::to_string((resume ? resume->step : 0) + 1));
  for (StageLink& s : stages.all()) {
    const ipc::Hello& h = hellos[static_cast<size_t>(s.index)];
    const std::string problem = HandshakeProblem(h, res.config_sha(), boundary);
    if (!problem.empty()) {
      s.control->Send(ipc::EncodeReject(problem));
      throw UsageError("handshake with the " + s.label + " failed: it " + problem);
    }
    s.parameter_positions = h.parameter_positions;
  }
  CheckPositions(plan.layout, stages.all());
  for (StageLink& s : stages.all()) {
    stages.Send(s, ipc::EncodeWelcome(s.remote() && resume), "start-up");
    if (s.remote() && resume) {  // replica 0's file, for every replica
      const std::string file = plan.layout.stages[static_cast<size_t>(s.stage)].Key() + ".pt";
      ipc::SendFile(*s.control, (fs::path(resume->dir) / file).string());
    }
  }
  std::string up;
  for (const StageLink& s : stages.all())
    up += Str(up.empty() ? "" : ", ", s.key, " pid ", hellos[static_cast<size_t>(s.index)].pid,
              nodes.nnodes > 1 ? Str(" (node ", s.node, ")") : std::string());
  LogInfo(Str("run id ", res.run_id().Hex(), "; stages up: ", up));
}

// Orderly shutdown: Finish -> Bye (peak RSS) -> exit 0.
void FinishStages(StageGroup& stages, int64_t completed, double timeout_s) {
  const std::string shutdown = "shutdown after step " + std::to_string(completed);
  for (StageLink& s : stages.all()) stages.Send(s, ipc::EncodeFinish(), shutdown);
  TestHookPoint("launcher", "finish");
  std::vector<int> waiting;
  for (int s = 0; s < static_cast<int>(stages.all().size()); ++s) waiting.push_back(s);
  while (!waiting.empty()) {
    auto [id, m] = stages.Await(waiting, After(timeout_s), shutdown);
    ipc::ExpectType(m, ipc::MsgType::kBye, stages[id].label);
    const ipc::ByeReport bye = ipc::DecodeBye(m);
    StageLink& s = stages[id];
    s.peak_rss_bytes = bye.peak_rss_bytes;
    s.device_peak_bytes = std::max(s.device_peak_bytes, bye.device_peak_bytes);
    s.peak_tensor_bytes = std::max(s.peak_tensor_bytes, bye.peak_tensor_bytes);
    s.peak_reserved_bytes = bye.peak_reserved_bytes;
    s.finished = true;
    waiting.erase(std::find(waiting.begin(), waiting.end(), id));
  }
  for (StageLink& s : stages.all()) {
    if (s.remote()) continue;  // its node's launcher waits for it
    const ExitStatus status = s.child->Wait(After(timeout_s));
    if (!status.success()) throw RuntimeError(s.label + " " + status.Describe() + " at shutdown");
    s.peak_rss_bytes = std::max(s.peak_rss_bytes, s.child->peak_rss_bytes());
  }
}

// summary.json: the pipeline's own fields, then each process's figures and
// each device's peak.
void WritePipelineSummary(RunDir& run, const Config& config, const PipelinePlan& plan,
                          PipelineResources& res, const TurnRunner& turns,
                          const TrainSummary& summary, const NodeOptions& nodes) {
  const PipelineConfig& p = config.pipeline;
  std::vector<ProcessFigures> processes(1);
  processes[0].name = "launcher";
  processes[0].peak_rss_bytes = PeakRssBytes();
  for (StageLink& s : res.stages().all()) {
    processes.push_back({s.key, s.peak_rss_bytes, s.device_peak_bytes, s.busy_s,
                         s.peak_tensor_bytes,
                         plan.device[static_cast<size_t>(s.stage)].is_cuda()
                             ? std::optional<int64_t>(s.peak_reserved_bytes)
                             : std::nullopt,
                         s.residue_tensor_bytes,
                         PhasePeaks{s.compute_peak_tensor_bytes, s.step_peak_tensor_bytes}});
  }
  std::vector<DevicePeak> devices;
  for (const auto& [key, peak] : turns.device_peak()) {
    std::optional<int64_t> shared_cpu;
    for (int s = 0; s < plan.stages && !shared_cpu; ++s)
      if (res.stages()[s].device == key) shared_cpu = res.SharedCpuPeak(s);
    devices.push_back({key, shared_cpu ? *shared_cpu : peak});
  }
  JsonWriter own;
  own.Field("schedule", NameOf(p.schedule))
      .Field("transport", NameOf(p.transport))
      .Field("nnodes", nodes.nnodes)
      .Field("stages", plan.stages)
      .Field("replicas", plan.replicas)
      .Field("run_id", res.run_id().Hex());
  WriteRunSummary(run, "pipeline", own, summary, processes, devices, config.train.memory_budget);
}

}  // namespace

TrainSummary RunPipeline(const Config& config, RunDir& run,
                         const std::optional<CheckpointRef>& resume, const DebugOutputs& debug,
                         const NodeOptions& nodes) {
  const TrainConfig& t = config.train;
  const PipelinePlan plan = PlanPipeline(config, resume, debug, nodes);
  LogPipelinePlan(plan, config, nodes);
  BeginRecording(debug, config);
  std::vector<std::string> keys;
  for (int r = 0; r < plan.replicas; ++r)
    for (const StageSpec& s : plan.layout.stages) keys.push_back(ReplicaKey(s.Key(), r));
  TraceSession trace(debug, keys);

  for (const std::string& path : RemoveStaleRuns()) {
    LogWarn("removed " + path + ", left behind by a run whose launcher died");
  }
  PipelineResources res(config, plan, run, resume, debug, nodes);
  GreetStages(res, config, plan, resume, nodes);

  TurnRunner turns(config, plan, res.stages());
  const int64_t start = resume ? resume->step : 0;
  StepLoop loop(config, plan, run, res.stages(), turns);
  TrainSummary summary = loop.Run(start, resume.has_value());
  const int64_t completed = loop.completed();

  FinishStages(res.stages(), completed, config.pipeline.timeout_s);
  res.Disarm();
  FinishRecording(debug, config);
  trace.Merge();

  // The digest comes from the final checkpoint the stages wrote.
  const fs::path final_dir =
      fs::path(run.path()) / "checkpoints" / ("step-" + std::to_string(completed));
  UNetEncoder enc(config.model, 0);
  UNetDecoder dec(config.model, 0, t.deep_supervision);
  LoadWholeModel(config, final_dir.string(), *enc, *dec);
  summary.param_digest = ParamDigest(NamedState(*enc), NamedState(*dec));
  summary.SetThroughput(start, completed, t.batch_size);
  WritePipelineSummary(run, config, plan, res, turns, summary, nodes);
  return summary;
}

}  // namespace up
