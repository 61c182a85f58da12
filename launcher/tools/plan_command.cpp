// `unet-pipeline plan --config C [--set k=v]... [--gpu-mem 16GiB] [--json]
// [--no-measure]`: predicts peak device memory of single-process training
// (plain and checkpointed) and of the pipeline under each activation policy,
// and says whether each fits: an estimate from shapes (memory_plan.h) and,
// unless --no-measure, the tensor bytes measured at two small patches and
// extrapolated (memory_probe.h), which then decide `fits`.
#include <algorithm>
#include <cstdio>
#include <cxxopts.hpp>
#include <iostream>
#include <optional>

#include "common/base/command_line.h"
#include "common/base/errors.h"
#include "common/base/json_writer.h"
#include "common/config/config_file.h"
#include "common/layout/level_times.h"
#include "launcher/time_balance.h"
#include "launcher/tools/memory_plan.h"
#include "launcher/tools/memory_probe.h"
#include "launcher/tools/plan_command.h"

namespace up {
namespace {

std::string PatchText(const std::vector<int>& patch) {
  std::string out;
  for (size_t i = 0; i < patch.size(); ++i) out += (i ? "x" : "") + std::to_string(patch[i]);
  return out;
}

// `text` without its trailing newline.
std::string TrimLine(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

}  // namespace

int PlanCommand(int argc, char** argv) {
  cxxopts::Options options("unet-pipeline plan",
                           "Predict peak device memory from the config's shapes.");
  options.add_options()("config", "YAML config file", cxxopts::value<std::string>())(
      "set", "override a key (repeatable)", cxxopts::value<std::vector<std::string>>())(
      "gpu-mem", "device memory to fit in", cxxopts::value<std::string>()->default_value("16GiB"))(
      "no-measure", "the estimate from shapes only (no probe runs)")(
      "probe-voxels", "the largest patch (in voxels) a probe run trains (default 262144)",
      cxxopts::value<int64_t>()->default_value(std::to_string(kProbeVoxels)))("json", "print JSON")(
      "h,help", "this help");
  const auto parsed = ParseCommandLine(options, argc, argv, "unet-pipeline plan --help");
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  if (!args.count("config")) throw UsageError("plan needs --config FILE");
  Config config =
      LoadConfig(args["config"].as<std::string>(),
                 args.count("set") ? RejoinOverrides(args["set"].as<std::vector<std::string>>())
                                   : std::vector<std::string>{});
  // pipeline.balance: time: the levels timed and cut as `train` would; the
  // probes train those cuts.
  std::vector<std::string> probe_sets =
      args.count("set") ? RejoinOverrides(args["set"].as<std::vector<std::string>>())
                        : std::vector<std::string>{};
  std::optional<LevelTimes> times;
  if (NeedsLevelTimes(config)) {
    if (!args.count("json"))
      std::fprintf(stderr,
                   "plan: timing each level on the stages' devices (pipeline.balance: time)\n");
    times = BalanceByTime(&config);
    auto list = [](const std::vector<int>& v) {
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
      return out + "]";
    };
    if (!config.pipeline.encoder_cuts.empty())
      probe_sets.push_back("pipeline.cuts.encoder=" + list(config.pipeline.encoder_cuts));
    if (!config.pipeline.decoder_cuts.empty())
      probe_sets.push_back("pipeline.cuts.decoder=" + list(config.pipeline.decoder_cuts));
  }
  const int64_t budget = ParseBytes(args["gpu-mem"].as<std::string>());
  std::vector<PlanRow> rows = PlanMemory(config, budget);
  const StageCounts enc = EncoderCounts(config), dec = DecoderCounts(config);
  const bool measure = !args.count("no-measure");
  const int64_t probe_voxels = args["probe-voxels"].as<int64_t>();
  if (probe_voxels < 1) throw UsageError("--probe-voxels must be at least 1");
  if (measure) {
    // Each row as a way of training; the pipeline rows on one shared device, parked.
    std::vector<ProbeWay> ways;
    for (const PlanRow& r : rows)
      ways.push_back({r.name, r.single_process, WaySets(config, r.single_process, r.sets)});
    if (!args.count("json"))
      std::fprintf(stderr, "plan: measuring %zu ways at two small patches\n", ways.size());
    const std::vector<ProbedBytes> measured =
        ProbeTensorBytes(args["config"].as<std::string>(), probe_sets, config, ways, probe_voxels);
    for (size_t i = 0; i < rows.size(); ++i) {
      rows[i].tensor_bytes = measured[i].device;
      rows[i].stage_tensor_bytes = measured[i].stages;
      rows[i].fits = rows[i].tensor_bytes + rows[i].context_bytes <= budget;
    }
  }

  const PartsPlan parts = PlanParts(config);
  // Each stage's forward and backward of a micro-batch, when timed.
  const std::vector<double> part_ms =
      times ? PartTimes(*times, ResolveLayout(config)) : std::vector<double>{};
  const std::optional<PartsPlan> fewest_shared = FewestPartsThatFit(config, budget, true);
  const std::optional<PartsPlan> fewest_own = FewestPartsThatFit(config, budget, false);
  const int64_t floor = FloorBytes(config);
  const Recommendation pick = Recommend(config, rows, fewest_shared, floor, budget);
  auto floor_ratio = [floor](const PlanRow& r) {
    return floor > 0 ? static_cast<double>(r.tensor_estimate()) / static_cast<double>(floor) : 0.0;
  };
  std::string pick_command = "unet-pipeline train --config " + args["config"].as<std::string>();
  if (pick.single_process) pick_command += " --single-process";
  // The user's own --set values come along (the way's replace theirs), so the
  // command trains what was planned.
  auto key_of = [](const std::string& set) { return set.substr(0, set.find('=')); };
  const std::vector<std::string> user_sets =
      args.count("set") ? RejoinOverrides(args["set"].as<std::vector<std::string>>())
                        : std::vector<std::string>{};
  for (const std::string& set : user_sets) {
    const bool replaced =
        std::any_of(pick.sets.begin(), pick.sets.end(),
                    [&](const std::string& s) { return key_of(s) == key_of(set); });
    if (!replaced) pick_command += " --set " + set;
  }
  for (const std::string& set : pick.sets) pick_command += " --set " + set;
  auto fewest_json = [](const std::optional<PartsPlan>& p, bool shared) {
    if (!p) return std::string("null");
    return JsonWriter()
        .Field("encoder_parts", p->encoder_parts)
        .Field("decoder_parts", p->decoder_parts)
        .Field("peak_bytes", shared ? p->shared_device_bytes : p->own_device_bytes)
        .str();
  };

  if (args.count("json")) {
    std::string stages = "[";
    for (size_t i = 0; i < parts.stages.size(); ++i) {
      const StagePlan& p = parts.stages[i];
      JsonWriter w;
      w.Field("stage", p.key)
          .Field("levels", p.levels)
          .Field("state_bytes", p.state_bytes)
          .Field("activation_bytes", p.activation_bytes)
          .Field("boundary_bytes", p.boundary_bytes)
          .Field("workspace_bytes", p.workspace_bytes)
          .Field("turn_bytes", p.turn_bytes)
          .Field("residue_bytes", p.residue_bytes);
      if (i < part_ms.size()) w.Field("time_ms", part_ms[i]);
      stages += (i ? "," : "") + w.str();
    }
    std::string list = "[";
    for (size_t i = 0; i < rows.size(); ++i) {
      JsonWriter w;
      w.Field("name", rows[i].name)
          .Field("peak_phase", rows[i].peak_phase)
          .Field("state_bytes", rows[i].state_bytes)
          .Field("activation_bytes", rows[i].activation_bytes)
          .Field("boundary_bytes", rows[i].boundary_bytes)
          .Field("workspace_bytes", rows[i].workspace_bytes)
          .Field("context_bytes", rows[i].context_bytes)
          .Field("peak_bytes", rows[i].peak_bytes);
      if (rows[i].tensor_bytes >= 0) w.Field("tensor_bytes", rows[i].tensor_bytes);
      if (!rows[i].stage_tensor_bytes.empty()) {
        JsonWriter st;
        for (const auto& [key, bytes] : rows[i].stage_tensor_bytes) st.Field(key, bytes);
        w.Raw("stage_tensor_bytes", st.str());
      }
      w.Field("processes", rows[i].processes)
          .Field("floor_ratio", floor_ratio(rows[i]))
          .Field("fits", rows[i].fits);
      list += (i ? "," : "") + w.str();
    }
    JsonWriter out;
    std::string sets = "[";
    for (size_t i = 0; i < pick.sets.size(); ++i)
      sets += (i ? "," : "") + JsonWriter::Quote(pick.sets[i]);
    out.Field("budget_bytes", budget)
        .Field("floor_bytes", floor)
        .Raw("recommended", JsonWriter()
                                .Field("way", pick.way)
                                .Field("fits", pick.fits)
                                .Field("single_process", pick.single_process)
                                .Raw("sets", sets + "]")
                                .Field("peak_bytes", pick.bytes)
                                .Field("reason", pick.reason)
                                .Field("command", pick_command)
                                .str())
        .Field("encoder_parameters", enc.parameters)
        .Field("decoder_parameters", dec.parameters)
        .Raw("rows", list + "]")
        .Raw("stages", stages + "]")
        .Raw("level_times", times ? TrimLine(LevelTimesFile(*times, config)) : "null")
        .Field("shared_device_bytes", parts.shared_device_bytes)
        .Field("own_device_bytes", parts.own_device_bytes)
        .Raw("fewest_parts", JsonWriter()
                                 .Raw("one_device", fewest_json(fewest_shared, true))
                                 .Raw("device_per_stage", fewest_json(fewest_own, false))
                                 .str());
    std::cout << out.str() << std::endl;
    return 0;
  }
  std::printf(
      "plan for %s: %d-D, %.1fM parameters (encoder %.1fM, decoder %.1fM), batch %d in %d "
      "micro-batch(es), %s\n",
      args["config"].as<std::string>().c_str(), config.model.dims,
      (enc.parameters + dec.parameters) / 1e6, enc.parameters / 1e6, dec.parameters / 1e6,
      config.train.batch_size, config.train.micro_batches, config.train.precision.c_str());
  std::printf("device budget %s; context allowance %s per process\n\n", FormatBytes(budget).c_str(),
              FormatBytes(kContextAllowanceBytes).c_str());
  std::printf("%-36s %9s %12s %9s %10s %12s %10s %12s %8s  %-5s %s\n", "", "state", "activations",
              "boundary", "workspace", "context", "estimate", "measured", "x floor", "fits",
              "peak during");
  for (const PlanRow& r : rows) {
    const std::string context =
        std::to_string(r.processes) + " x " + FormatBytes(r.context_bytes / r.processes);
    std::printf("%-36s %9s %12s %9s %10s %12s %10s %12s %7.1fx  %-5s %s\n", r.name.c_str(),
                FormatBytes(r.state_bytes).c_str(), FormatBytes(r.activation_bytes).c_str(),
                FormatBytes(r.boundary_bytes).c_str(), FormatBytes(r.workspace_bytes).c_str(),
                context.c_str(), FormatBytes(r.peak_bytes).c_str(),
                r.tensor_bytes >= 0 ? FormatBytes(r.tensor_bytes).c_str() : "-", floor_ratio(r),
                r.fits ? "yes" : "NO", r.peak_phase.c_str());
  }
  std::printf(
      "\nfloor: %s, the largest %s's forward and backward for one sample (x floor: each way's "
      "tensor bytes over it)\n",
      FormatBytes(floor).c_str(), config.model.kind == "torchscript" ? "level" : "block");
  if (measure) {
    std::printf(
        "\nmeasured: the device's peak tensor bytes, every process on it together, from real "
        "runs at\npatches %s and %s extrapolated to this patch (no context); fits: measured + "
        "context <= budget\n",
        PatchText(ProbePatches(config, probe_voxels)[0]).c_str(),
        PatchText(ProbePatches(config, probe_voxels)[1]).c_str());
    if (ProbesOnOneThread(config))
      std::printf(
          "  the runs use one CPU thread: in bf16, oneDNN's convolutions take scratch for each "
          "thread, which no card holds\n");
    for (const PlanRow& r : rows) {
      if (r.stage_tensor_bytes.empty()) continue;
      std::string stages;
      for (const auto& [key, bytes] : r.stage_tensor_bytes)
        stages += (stages.empty() ? "" : ", ") + key + " " + FormatBytes(bytes);
      std::printf("  %s: %s\n", r.name.c_str(), stages.c_str());
    }
  }
  std::printf(
      "\nthis config's %zu stages (pipeline.encoder_parts %d, decoder_parts %d, "
      "activations %s, cuts balancing %s), estimate:\n",
      parts.stages.size(), parts.encoder_parts, parts.decoder_parts,
      config.pipeline.activations.c_str(), times ? "measured time" : "estimated memory");
  std::printf("  %-10s %-12s %9s %12s %9s %10s %10s %10s%s\n", "stage", "levels", "state",
              "activations", "boundary", "workspace", "turn", "parked",
              times ? "   time (ms)" : "");
  for (size_t i = 0; i < parts.stages.size(); ++i) {
    const StagePlan& p = parts.stages[i];
    std::printf("  %-10s %-12s %9s %12s %9s %10s %10s %10s", p.key.c_str(), p.levels.c_str(),
                FormatBytes(p.state_bytes).c_str(), FormatBytes(p.activation_bytes).c_str(),
                FormatBytes(p.boundary_bytes).c_str(), FormatBytes(p.workspace_bytes).c_str(),
                FormatBytes(p.turn_bytes).c_str(), FormatBytes(p.residue_bytes).c_str());
    if (i < part_ms.size()) std::printf(" %12.2f", part_ms[i]);
    std::printf("\n");
  }
  if (times) {
    std::printf(
        "  time: one micro-batch's forward and backward through the stage's levels, measured on "
        "%s (encoder) and %s (decoder)\n",
        times->encoder_device.c_str(), times->decoder_device.c_str());
  }
  std::printf(
      "  one device, in turns: %s with %zu contexts (%s); a device per stage: %s each (%s)\n",
      FormatBytes(parts.shared_device_bytes).c_str(), parts.stages.size(),
      parts.shared_device_bytes <= budget ? "fits" : "does NOT fit",
      FormatBytes(parts.own_device_bytes).c_str(),
      parts.own_device_bytes <= budget ? "fits" : "does NOT fit");
  auto fewest_text = [](const std::optional<PartsPlan>& p, bool shared) {
    if (!p) return std::string("none, even one level per part");
    return "pipeline.encoder_parts=" + std::to_string(p->encoder_parts) +
           " pipeline.decoder_parts=" + std::to_string(p->decoder_parts) + " (" +
           FormatBytes(shared ? p->shared_device_bytes : p->own_device_bytes) + ")";
  };
  std::printf(
      "fewest parts that fit %s with activations %s: one device in turns: %s; a device "
      "per stage: %s\n",
      FormatBytes(budget).c_str(), config.pipeline.activations.c_str(),
      fewest_text(fewest_shared, true).c_str(), fewest_text(fewest_own, false).c_str());
  std::printf(
      "\nstate = weights + gradients + optimizer state; the pipeline rows assume both stages "
      "share\n"
      "the device and park between turns. An estimate from shapes: see docs/DESIGN.md.\n");
  std::printf("\nrecommended: %s: %s\n  %s\n", pick.way.c_str(), pick.reason.c_str(),
              pick.fits ? pick_command.c_str() : "(nothing to run)");
  return 0;
}

}  // namespace up
