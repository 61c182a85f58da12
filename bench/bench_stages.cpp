// See bench_stages.h. Progress goes to stderr, one line per run.
#include "bench/bench_stages.h"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "bench/bench_machine.h"
#include "bench/bench_trainer.h"
#include "bench/bench_util.h"
#include "bench/trace_breakdown.h"
#include "common/base/errors.h"
#include "common/base/json_writer.h"
#include "common/config/config_file.h"
#include "common/training/stage_optimizer.h"
#include "ipc/schedule.h"

namespace up::bench {

StagesReport RunStagesBench(const StagesOptions& o) {
  if (o.steps <= o.warmup)
    throw UsageError("bench stages: --steps must exceed --warmup (" + std::to_string(o.warmup) +
                     ")");
  StagesReport report;
  report.options = o;
  TempFolder tmp;
  int run = 0;
  std::vector<std::pair<int, int>> layouts = o.layouts;
  if (layouts.empty()) {
    for (int s : o.stages) {
      if (s < 2 || s > 4) {
        throw UsageError("bench stages: --stages " + std::to_string(s) +
                         ": 2 (one part per half), 3 (two encoder parts) or 4 (two parts each)");
      }
      layouts.emplace_back(s >= 3 ? 2 : 1, s >= 4 ? 2 : 1);
    }
  }
  for (const auto& [encoder_parts, decoder_parts] : layouts) {
    if (encoder_parts < 1 || decoder_parts < 1)
      throw UsageError("bench stages: --layouts: each half has at least one part");
    const int s = encoder_parts + decoder_parts;
    double sequential_ms = 0;
    for (const char* schedule : {"sequential", "gpipe", "1f1b"}) {
      std::vector<std::string> sets = o.sets;
      sets.insert(sets.end(), {"train.steps=" + std::to_string(o.steps), "checkpoint.every=0",
                               "train.threads=1", "pipeline.lock=off",
                               std::string("pipeline.schedule=") + schedule,
                               "pipeline.encoder_parts=" + std::to_string(encoder_parts),
                               "pipeline.decoder_parts=" + std::to_string(decoder_parts)});
      const Config config = LoadConfig(o.config, sets);  // a bad combination fails here
      report.micro_batches = config.train.micro_batches;
      const std::string out = tmp.path() + "/run-" + std::to_string(++run);
      TrainerSpec spec{o.config, false, sets, out + ".trace.json", {}};
      const TrainerResult result = RunTrainer(spec, out);
      if (static_cast<int64_t>(result.step_s.size()) != o.steps)
        throw RuntimeError("bench stages: " + out + " did not write every step");
      StagesRow row;
      row.stages = s;
      row.encoder_parts = encoder_parts;
      row.decoder_parts = decoder_parts;
      row.schedule = schedule;
      row.step_ms =
          1e3 * Median(std::vector<double>(result.step_s.begin() + o.warmup, result.step_s.end()));
      const StagesBreakdown b = StagesFromTrace(spec.trace, o.warmup);
      double idle = 0;
      for (const StageCompute& c : b.stages) {
        row.stage_compute_ms.emplace_back(c.stage, c.compute_ms);
        idle += 1.0 - std::min(1.0, c.compute_ms / b.wall_ms);
      }
      row.bubble = b.stages.empty() ? 0 : idle / static_cast<double>(b.stages.size());
      const int m = config.train.micro_batches;
      double slowest = 0, all = 0;
      for (const StageCompute& c : b.stages) {
        slowest = std::max(slowest, c.compute_ms);
        all += c.compute_ms;
      }
      row.slowest_limit_ms = std::string(schedule) == "sequential"
                                 ? all
                                 : slowest * static_cast<double>(m + s - 1) / m;
      row.bubble_theory = std::string(schedule) == "sequential"
                              ? static_cast<double>(s - 1) / s
                              : static_cast<double>(s - 1) / (m + s - 1);
      const std::string first = encoder_parts == 1 ? "encoder" : "encoder1";
      row.first_peak_tensor_bytes = static_cast<int64_t>(
          JsonNestedNumber(result.summary_json, "peak_tensor_bytes", first).value_or(0));
      row.first_in_flight = ChainMaxInFlight(
          ChainSchedule(ParseScheduleKind(schedule), s, m, NeedsGlobalNorms(config.train)), 0);
      if (std::string(schedule) == "sequential") sequential_ms = row.step_ms;
      row.speedup = sequential_ms / row.step_ms;
      std::cerr << "bench stages: " << s << " stages, " << schedule << ": " << row.step_ms
                << " ms/step, bubble " << row.bubble << "\n";
      report.rows.push_back(row);
    }
  }
  return report;
}

std::string StagesJson(const StagesReport& r) {
  std::string rows = "[";
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const StagesRow& row = r.rows[i];
    JsonWriter compute;
    for (const auto& [stage, ms] : row.stage_compute_ms) compute.Field(stage, ms);
    rows += (i ? "," : "") + JsonWriter()
                                 .Field("stages", row.stages)
                                 .Field("encoder_parts", row.encoder_parts)
                                 .Field("decoder_parts", row.decoder_parts)
                                 .Field("schedule", row.schedule)
                                 .Field("step_ms", row.step_ms)
                                 .Field("speedup_vs_sequential", row.speedup)
                                 .Field("bubble", row.bubble)
                                 .Field("bubble_theory", row.bubble_theory)
                                 .Field("slowest_limit_ms", row.slowest_limit_ms)
                                 .Raw("stage_compute_ms", compute.str())
                                 .Field("first_peak_tensor_bytes", row.first_peak_tensor_bytes)
                                 .Field("first_in_flight", row.first_in_flight)
                                 .str();
  }
  return JsonWriter()
      .Field("bench", "stages")
      .Raw("machine", MachineJson(DescribeMachine()))
      .Field("config", r.options.config)
      .Raw("sets", JsonStrings(r.options.sets))
      .Field("steps", r.options.steps)
      .Field("warmup", r.options.warmup)
      .Field("micro_batches", r.micro_batches)
      .Raw("rows", rows + "]")
      .str();
}

std::string StagesTable(const StagesReport& r) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line,
                "bench stages: %s, %d micro-batches, lock off, one thread per stage; medians of "
                "steps %lld..%lld\n",
                r.options.config.c_str(), r.micro_batches,
                static_cast<long long>(r.options.warmup + 1),
                static_cast<long long>(r.options.steps));
  out += line;
  std::snprintf(line, sizeof line, "%-7s %-6s %-11s %9s %8s %8s %8s %14s %14s %9s\n", "stages",
                "parts", "schedule", "ms/step", "speedup", "bubble", "theory", "slowest limit",
                "first peak", "in flight");
  out += line;
  for (const StagesRow& row : r.rows) {
    const std::string parts =
        std::to_string(row.encoder_parts) + "+" + std::to_string(row.decoder_parts);
    std::snprintf(
        line, sizeof line, "%-7d %-6s %-11s %9.1f %7.2fx %8.2f %8.2f %11.1f ms %14s %9d\n",
        row.stages, parts.c_str(), row.schedule.c_str(), row.step_ms, row.speedup, row.bubble,
        row.bubble_theory, row.slowest_limit_ms,
        BytesText(static_cast<uint64_t>(row.first_peak_tensor_bytes)).c_str(), row.first_in_flight);
    out += line;
  }
  return out;
}

}  // namespace up::bench
