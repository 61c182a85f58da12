// See bench_replicas.h. Progress goes to stderr, one line per run.
#include "bench/bench_replicas.h"

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>

#include "bench/bench_machine.h"
#include "bench/bench_trainer.h"
#include "bench/bench_util.h"
#include "bench/trace_breakdown.h"
#include "common/base/errors.h"
#include "common/base/json_writer.h"
#include "common/base/logging.h"
#include "common/base/trace.h"
#include "common/config/config_file.h"
#include "common/layout/level_counts.h"
#include "common/layout/pipeline_layout.h"

namespace up::bench {
namespace {

// Each stage's parameters, in bytes of float32 gradients.
std::vector<std::pair<std::string, int64_t>> StageGradientBytes(const Config& config) {
  const PipelineLayout layout = ResolveLayout(config);
  const std::vector<StageCounts> enc = EncoderLevelCounts(config), dec = DecoderLevelCounts(config);
  std::vector<std::pair<std::string, int64_t>> out;
  for (const StageSpec& s : layout.stages) {
    int64_t params = 0;
    for (int level = s.lo; level <= s.hi; ++level)
      params += (s.encoder ? enc : dec)[static_cast<size_t>(level)].parameters;
    out.emplace_back(s.Key(), 4 * params);
  }
  return out;
}

// The checkout's Python (.venv) and bench/allreduce_peer.py, or why not.
std::pair<std::vector<std::string>, std::string> AllReducePeer() {
  namespace fs = std::filesystem;
  for (fs::path at = fs::path(SelfExe()).parent_path(); !at.empty() && at != at.root_path();
       at = at.parent_path()) {
    if (!fs::exists(at / "bench/allreduce_peer.py")) continue;
    const std::string python = (at / ".venv/bin/python").string();
    if (!fs::exists(python)) return {{}, "no " + python + " (scripts/install-deps.sh makes it)"};
    return {{python, "-W", "ignore", (at / "bench/allreduce_peer.py").string()}, ""};
  }
  return {{}, "no checkout (bench/allreduce_peer.py) above this binary"};
}

}  // namespace

ReplicasReport RunReplicasBench(const ReplicasOptions& o) {
  if (o.steps <= o.warmup) {
    throw UsageError("bench replicas: --steps must exceed --warmup (" + std::to_string(o.warmup) +
                     ")");
  }
  ReplicasReport report;
  report.options = o;
  if (report.options.replicas.empty()) {
    report.options.replicas = {1, 2};
    if (std::thread::hardware_concurrency() >= 8) report.options.replicas.push_back(4);
  }
  const auto [peer, why] = AllReducePeer();
  report.peer_note = why;
  TempFolder tmp;
  // The peer of the step times: one process training the same batch.
  {
    std::vector<std::string> sets = o.sets;
    sets.insert(sets.end(), {"train.steps=" + std::to_string(o.steps), "checkpoint.every=0"});
    const TrainerResult single =
        RunTrainer({o.config, true, sets, "", {}}, tmp.path() + "/single-process");
    if (static_cast<int64_t>(single.step_s.size()) != o.steps)
      throw RuntimeError("bench replicas: the single-process run did not write every step");
    report.single_step_ms =
        1e3 * Median(std::vector<double>(single.step_s.begin() + o.warmup, single.step_s.end()));
    std::cerr << "bench replicas: single-process: " << report.single_step_ms << " ms/step\n";
  }
  int run = 0;
  for (int r : report.options.replicas) {
    std::vector<std::string> sets = o.sets;
    sets.insert(sets.end(), {"train.steps=" + std::to_string(o.steps), "checkpoint.every=0",
                             "pipeline.replicas=" + std::to_string(r)});
    const Config config = LoadConfig(o.config, sets);  // a batch R cannot share fails here
    report.batch_size = config.train.batch_size;
    const std::string out = tmp.path() + "/run-" + std::to_string(++run);
    TrainerSpec spec{o.config, false, sets, out + ".trace.json", {}};
    const TrainerResult result = RunTrainer(spec, out);
    if (static_cast<int64_t>(result.step_s.size()) != o.steps)
      throw RuntimeError("bench replicas: " + out + " did not write every step");
    ReplicasRow row;
    row.replicas = r;
    row.step_ms =
        1e3 * Median(std::vector<double>(result.step_s.begin() + o.warmup, result.step_s.end()));
    row.samples_per_s = config.train.batch_size / (row.step_ms / 1e3);
    const std::vector<StageCompute> exchange =
        SpanTimeFromTrace(spec.trace, o.warmup, trace_event::kReplicaExchange);
    for (const auto& [key, bytes] : StageGradientBytes(config)) {
      ReplicaStage stage{key, bytes, 0, 0, -1};
      // The copy that came last waited least for the others: its time is
      // the exchange's own, the others' add how much sooner they came.
      for (const StageCompute& e : exchange) {
        if (e.stage != key && e.stage.rfind(key + ".r", 0) != 0) continue;
        stage.waited_ms = std::max(stage.waited_ms, e.compute_ms);
        stage.exchange_ms =
            stage.exchange_ms > 0 ? std::min(stage.exchange_ms, e.compute_ms) : e.compute_ms;
      }
      if (r > 1 && !peer.empty()) {
        std::vector<std::string> args = peer;
        args.insert(args.end(), {"--ranks", std::to_string(r), "--numel",
                                 std::to_string(std::max<int64_t>(bytes / 4, 1)), "--iters", "10"});
        stage.peer_ms = 1e3 * Median(RunPeer(args, out + "-peer-" + key + ".log"));
      }
      row.stages.push_back(stage);
    }
    std::cerr << "bench replicas: " << r << " replicas: " << row.step_ms << " ms/step\n";
    report.rows.push_back(row);
  }
  return report;
}

std::string ReplicasJson(const ReplicasReport& r) {
  std::string rows = "[";
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const ReplicasRow& row = r.rows[i];
    std::string stages = "[";
    for (size_t k = 0; k < row.stages.size(); ++k) {
      const ReplicaStage& s = row.stages[k];
      JsonWriter w;
      w.Field("stage", s.stage)
          .Field("bytes", s.bytes)
          .Field("exchange_ms", s.exchange_ms)
          .Field("exchange_with_wait_ms", s.waited_ms);
      if (s.peer_ms >= 0) w.Field("peer_allreduce_ms", s.peer_ms);
      stages += (k ? "," : "") + w.str();
    }
    rows += (i ? "," : "") + JsonWriter()
                                 .Field("replicas", row.replicas)
                                 .Field("step_ms", row.step_ms)
                                 .Field("samples_per_s", row.samples_per_s)
                                 .Raw("stages", stages + "]")
                                 .str();
  }
  return JsonWriter()
      .Field("bench", "replicas")
      .Raw("machine", MachineJson(DescribeMachine()))
      .Field("config", r.options.config)
      .Raw("sets", JsonStrings(r.options.sets))
      .Field("steps", r.options.steps)
      .Field("warmup", r.options.warmup)
      .Field("batch_size", r.batch_size)
      .Field("single_process_step_ms", r.single_step_ms)
      .Field("peer_note", r.peer_note)
      .Raw("rows", rows + "]")
      .str();
}

std::string ReplicasTable(const ReplicasReport& r) {
  std::string out;
  char line[320];
  std::snprintf(line, sizeof line,
                "bench replicas: %s, batch %d over every replica; medians of steps %lld..%lld; "
                "peer: torch.distributed.all_reduce (Gloo, Python) of the same bytes\n",
                r.options.config.c_str(), r.batch_size,
                static_cast<long long>(r.options.warmup + 1),
                static_cast<long long>(r.options.steps));
  out += line;
  std::snprintf(line, sizeof line, "single-process, the same batch: %.1f ms/step, %.1f samples/s\n",
                r.single_step_ms, r.batch_size / (r.single_step_ms / 1e3));
  out += line;
  if (!r.peer_note.empty()) out += "  (no peer: " + r.peer_note + ")\n";
  std::snprintf(line, sizeof line, "%-9s %9s %10s   %-10s %10s %12s %10s %10s\n", "replicas",
                "ms/step", "samples/s", "stage", "gradients", "exchange ms", "+wait ms", "peer ms");
  out += line;
  for (const ReplicasRow& row : r.rows) {
    for (size_t k = 0; k < row.stages.size(); ++k) {
      const ReplicaStage& s = row.stages[k];
      char peer_text[32];
      std::snprintf(peer_text, sizeof peer_text, "%.2f", s.peer_ms);
      const std::string peer = s.peer_ms >= 0 ? peer_text : "-";
      if (k == 0) {
        std::snprintf(line, sizeof line, "%-9d %9.1f %10.1f   ", row.replicas, row.step_ms,
                      row.samples_per_s);
      } else {
        std::snprintf(line, sizeof line, "%-9s %9s %10s   ", "", "", "");
      }
      out += line;
      std::snprintf(line, sizeof line, "%-10s %10s %12.2f %10.2f %10s\n", s.stage.c_str(),
                    BytesText(static_cast<uint64_t>(s.bytes)).c_str(), s.exchange_ms, s.waited_ms,
                    row.replicas > 1 ? peer.c_str() : "-");
      out += line;
    }
  }
  return out;
}

}  // namespace up::bench
