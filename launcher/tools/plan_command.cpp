// `unet-pipeline plan --config C [--set k=v]... [--gpu-mem 16GiB]
// [--headroom 10%] [--json] [--no-measure]`: predicts peak device memory of
// single-process training (plain and checkpointed) and of the pipeline under
// each activation policy, and says whether each fits: an estimate from shapes
// (memory_plan.h) and, unless --no-measure, the tensor bytes measured at two
// small patches and extrapolated (memory_probe.h). The tensor bytes that
// decide (measured, else the estimate's) with card_budget.h's allowances
// must fit the card less the headroom; each way's host bytes (the probes'
// summed peak resident sizes, else host_budget.h's estimate) must fit
// --host-mem (default: the machine's MemTotal).
#include <algorithm>
#include <cstdio>
#include <cxxopts.hpp>
#include <iostream>
#include <optional>

#include "common/base/command_line.h"
#include "common/base/errors.h"
#include "common/base/json_writer.h"
#include "common/config/config_file.h"
#include "common/device/cuda_allocator_config.h"
#include "common/device/device_memory.h"
#include "common/layout/level_times.h"
#include "launcher/time_balance.h"
#include "launcher/tools/host_budget.h"
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

// Everything `plan` prints, computed once; the table and the JSON read it.
struct PlanReport {
  std::string config_path;
  Config config;
  CardBudget card;
  int64_t host_mem = 0;         // --host-mem
  bool device_is_host = false;  // the config's devices are this machine's CPU
  bool measure = true;
  int64_t probe_voxels = kProbeVoxels;
  std::optional<LevelTimes> times;
  std::vector<PlanRow> rows;
  StageCounts enc, dec;
  PartsPlan parts;
  std::vector<double> part_ms;  // each stage's forward and backward, when timed
  std::optional<PartsPlan> fewest_shared, fewest_own;
  int64_t floor = 0;
  // The floor with model.memory: lean, where the config is not lean already
  // and its kind has lean blocks (0 otherwise).
  int64_t lean_floor = 0;
  Recommendation pick;
  std::string pick_command;

  // A row's tensor bytes over its own floor: a lean twin's over the lean floor.
  double FloorRatio(const PlanRow& r) const {
    const int64_t own = r.lean && lean_floor > 0 ? lean_floor : floor;
    return own > 0 ? static_cast<double>(r.tensor_estimate()) / static_cast<double>(own) : 0.0;
  }
};

std::vector<std::string> UserSets(const cxxopts::ParseResult& args) {
  return args.count("set") ? RejoinOverrides(args["set"].as<std::vector<std::string>>())
                           : std::vector<std::string>{};
}

// pipeline.balance: time: the levels timed and cut as `train` would; the
// probes train those cuts (added to `probe_sets`).
std::optional<LevelTimes> BalanceForPlan(bool quiet, Config* config,
                                         std::vector<std::string>* probe_sets) {
  if (!NeedsLevelTimes(*config)) return std::nullopt;
  if (!quiet)
    std::fprintf(stderr,
                 "plan: timing each level on the stages' devices (pipeline.balance: time)\n");
  std::optional<LevelTimes> times = BalanceByTime(config);
  auto list = [](const std::vector<int>& v) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
    return out + "]";
  };
  if (!config->pipeline.encoder_cuts.empty())
    probe_sets->push_back("pipeline.cuts.encoder=" + list(config->pipeline.encoder_cuts));
  if (!config->pipeline.decoder_cuts.empty())
    probe_sets->push_back("pipeline.cuts.decoder=" + list(config->pipeline.decoder_cuts));
  return times;
}

// Each row as a way of training, measured at two small patches (the pipeline
// rows on one shared device, parked); `fits` then follows the measurement.
void MeasureRows(const std::vector<std::string>& probe_sets, bool quiet, PlanReport* r) {
  std::vector<ProbeWay> ways;
  for (const PlanRow& row : r->rows)
    ways.push_back(
        {row.name, row.single_process, WaySets(r->config, row.single_process, row.sets)});
  if (!quiet) std::fprintf(stderr, "plan: measuring %zu ways at two small patches\n", ways.size());
  const std::vector<ProbedBytes> measured =
      ProbeTensorBytes(r->config_path, probe_sets, r->config, ways, r->probe_voxels);
  for (size_t i = 0; i < r->rows.size(); ++i) {
    r->rows[i].tensor_bytes = measured[i].device;
    r->rows[i].stage_tensor_bytes = measured[i].stages;
    DecideFit(r->card.usable_bytes(), &r->rows[i]);
    // The probes ran on this CPU: their resident sizes hold the device's
    // tensors too, which a card would hold instead.
    PlanRow& row = r->rows[i];
    row.host_bytes = r->device_is_host ? measured[i].host
                                       : std::max(measured[i].host - measured[i].device,
                                                  row.host_need.runtime_bytes);
    row.host_measured = true;
    row.fits_host = row.host_bytes <= r->host_mem;
  }
}

// The command that trains the recommended way: the user's own --set values
// come along (the way's replace theirs), so it trains what was planned.
std::string PickCommand(const PlanReport& r, const std::vector<std::string>& user_sets) {
  std::string command = "unet-pipeline train --config " + r.config_path;
  if (r.pick.single_process) command += " --single-process";
  auto key_of = [](const std::string& set) { return set.substr(0, set.find('=')); };
  for (const std::string& set : user_sets) {
    const bool replaced =
        std::any_of(r.pick.sets.begin(), r.pick.sets.end(),
                    [&](const std::string& s) { return key_of(s) == key_of(set); });
    if (!replaced) command += " --set " + set;
  }
  for (const std::string& set : r.pick.sets) command += " --set " + set;
  return command;
}

PlanReport MakePlan(const cxxopts::ParseResult& args) {
  PlanReport r;
  const bool quiet = args.count("json") > 0;
  r.card = ParseCardBudget(args["gpu-mem"].as<std::string>(), args["headroom"].as<std::string>());
  r.config_path = args["config"].as<std::string>();
  const std::vector<std::string> user_sets = UserSets(args);
  r.config = LoadConfig(r.config_path, user_sets);
  std::vector<std::string> probe_sets = user_sets;
  r.times = BalanceForPlan(quiet, &r.config, &probe_sets);
  r.rows = PlanMemory(r.config, r.card.usable_bytes());
  // --way: only the named rows are measured, shown and weighed (a measured
  // plan at a large patch takes minutes a way).
  if (args.count("way")) {
    KeepNamedWays(
        args["way"].as<std::vector<std::string>>(), [](const PlanRow& row) { return row.name; },
        "plan knows", &r.rows);
  }
  r.host_mem = ParseHostMem(args["host-mem"].as<std::string>());
  if (r.host_mem <= 0)
    throw UsageError("--host-mem = " + args["host-mem"].as<std::string>() +
                     ": expected a size like 12.7GiB");
  {
    Config resolved = r.config;
    ResolveAutoDevicesHere(&resolved);
    r.device_is_host = TrainsOnHost(resolved);
  }
  for (PlanRow& row : r.rows) {  // the estimate, until a measurement replaces it
    std::vector<std::string> sets = probe_sets;
    for (const std::string& set : WaySets(r.config, row.single_process, row.sets))
      sets.push_back(set);
    row.host_need =
        EstimateHostNeed(LoadConfig(r.config_path, sets), row.single_process, r.device_is_host);
    row.host_bytes = row.host_need.total();
    row.fits_host = row.host_bytes <= r.host_mem;
  }
  r.enc = EncoderCounts(r.config);
  r.dec = DecoderCounts(r.config);
  r.measure = !args.count("no-measure");
  r.probe_voxels = args["probe-voxels"].as<int64_t>();
  if (r.probe_voxels < 1) throw UsageError("--probe-voxels must be at least 1");
  if (r.measure) MeasureRows(probe_sets, quiet, &r);
  r.parts = PlanParts(r.config);
  r.part_ms = r.times ? PartTimes(*r.times, ResolveLayout(r.config)) : std::vector<double>{};
  r.fewest_shared = FewestPartsThatFit(r.config, r.card.usable_bytes(), true);
  r.fewest_own = FewestPartsThatFit(r.config, r.card.usable_bytes(), false);
  r.floor = FloorBytes(r.config);
  if (const std::optional<Config> lean = LeanTwin(r.config)) r.lean_floor = FloorBytes(*lean);
  r.pick = Recommend(r.config, r.rows, r.fewest_shared, r.floor, r.card);
  if (args.count("way")) r.pick.reason += " (weighed only the ways --way named)";
  if (r.pick.fits && r.pick.way == "pipeline parts") {  // its host bytes, by the estimate
    std::vector<std::string> sets = probe_sets;
    for (const std::string& set : r.pick.sets) sets.push_back(set);
    const HostNeed host =
        EstimateHostNeed(LoadConfig(r.config_path, sets), false, r.device_is_host);
    if (host.total() > r.host_mem) {
      r.pick.fits = false;
      r.pick.way = "none";
      r.pick.reason += "; but they need " + HostNeedText(host) + " of host memory, more than " +
                       FormatBytes(r.host_mem) + " (--host-mem)";
    }
  }
  r.pick_command = PickCommand(r, user_sets);
  return r;
}

std::string FewestJson(const std::optional<PartsPlan>& p, bool shared) {
  if (!p) return std::string("null");
  return JsonWriter()
      .Field("encoder_parts", p->encoder_parts)
      .Field("decoder_parts", p->decoder_parts)
      .Field("peak_bytes", shared ? p->shared_device_bytes : p->own_device_bytes)
      .Field("needed_bytes", shared ? p->shared_need.total() : p->own_need.total())
      .str();
}

std::string StagesJson(const PlanReport& r) {
  std::string stages = "[";
  for (size_t i = 0; i < r.parts.stages.size(); ++i) {
    const StagePlan& p = r.parts.stages[i];
    JsonWriter w;
    w.Field("stage", p.key)
        .Field("levels", p.levels)
        .Field("state_bytes", p.state_bytes)
        .Field("activation_bytes", p.activation_bytes)
        .Field("boundary_bytes", p.boundary_bytes)
        .Field("workspace_bytes", p.workspace_bytes)
        .Field("turn_bytes", p.turn_bytes)
        .Field("residue_bytes", p.residue_bytes);
    if (i < r.part_ms.size()) w.Field("time_ms", r.part_ms[i]);
    stages += (i ? "," : "") + w.str();
  }
  return stages + "]";
}

std::string RowsJson(const PlanReport& r) {
  std::string list = "[";
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const PlanRow& row = r.rows[i];
    JsonWriter w;
    w.Field("name", row.name)
        .Field("lean", row.lean)
        .Field("peak_phase", row.peak_phase)
        .Field("state_bytes", row.state_bytes)
        .Field("activation_bytes", row.activation_bytes)
        .Field("boundary_bytes", row.boundary_bytes)
        .Field("workspace_bytes", row.workspace_bytes)
        .Field("context_bytes", row.need.context_bytes)
        .Field("peak_bytes", row.peak_bytes)
        .Field("decided_by", row.measured() ? "measured" : "estimate")
        .Field("tensor_bytes", row.need.tensor_bytes)
        .Field("reserve_bytes", row.need.reserve_bytes)
        .Field("workspace_allowance_bytes", row.need.workspace_bytes)
        .Field("needed_bytes", row.need.total());
    if (!row.stage_tensor_bytes.empty()) {
      JsonWriter st;
      for (const auto& [key, bytes] : row.stage_tensor_bytes) st.Field(key, bytes);
      w.Raw("stage_tensor_bytes", st.str());
    }
    w.Field("processes", row.processes)
        .Field("floor_ratio", r.FloorRatio(row))
        .Field("fits", row.fits)
        .Field("host_bytes", row.host_bytes)
        .Field("host_decided_by", row.host_measured ? "measured" : "estimate")
        .Field("host_estimate_bytes", row.host_need.total())
        .Field("fits_host", row.fits_host);
    list += (i ? "," : "") + w.str();
  }
  return list + "]";
}

// The allowances each row's needed_bytes counts (card_budget.h).
std::string AllowancesJson() {
  return JsonWriter()
      .Field("reserve_fraction", kAllocatorReserveFraction)
      .Field("workspace_bytes_per_process", kWorkspaceAllowanceBytes)
      .Field("context_bytes_per_process", kContextAllowanceBytes)
      .str();
}

// What a row's figures are, so a reader of the JSON knows which decides.
std::string LegendJson() {
  return JsonWriter()
      .Field("peak_bytes",
             "the estimate from shapes: state + activation + boundary + workspace + context bytes; "
             "shown, never the verdict")
      .Field("tensor_bytes",
             "the tensor bytes that decide: measured (decided_by measured) or the estimate less "
             "its contexts (decided_by estimate)")
      .Field("needed_bytes",
             "tensor_bytes + reserve_bytes + workspace_allowance_bytes + context_bytes; fits: "
             "needed_bytes <= usable_bytes (budget_bytes less headroom_bytes)")
      .Field("host_bytes",
             "what every process of the way holds in host memory together at its peak: the "
             "probes' summed peak resident sizes extrapolated (host_decided_by measured) or "
             "host_estimate_bytes (host_decided_by estimate); fits_host: host_bytes <= "
             "host_mem_bytes")
      .str();
}

// The recommended row's host bytes (0 for the parts fallback or none).
int64_t PickHostBytes(const PlanReport& r) {
  for (const PlanRow& row : r.rows)
    if (row.name == r.pick.way) return row.host_bytes;
  return 0;
}

void PrintPlanJson(const PlanReport& r) {
  std::string sets = "[";
  for (size_t i = 0; i < r.pick.sets.size(); ++i)
    sets += (i ? "," : "") + JsonWriter::Quote(r.pick.sets[i]);
  JsonWriter out;
  out.Field("budget_bytes", r.card.card_bytes)
      .Field("headroom", r.card.headroom_text)
      .Field("headroom_bytes", r.card.headroom_bytes)
      .Field("usable_bytes", r.card.usable_bytes())
      .Field("cuda_alloc_conf", CudaAllocatorConfigText())
      .Field("host_mem_bytes", r.host_mem)
      .Field("host_runtime_bytes_per_process", kHostRuntimeAllowanceBytes)
      .Raw("allowances", AllowancesJson())
      .Field("floor_bytes", r.floor)
      .Field("lean_floor_bytes", r.lean_floor)
      .Raw("recommended", JsonWriter()
                              .Field("way", r.pick.way)
                              .Field("fits", r.pick.fits)
                              .Field("single_process", r.pick.single_process)
                              .Raw("sets", sets + "]")
                              .Field("needed_bytes", r.pick.bytes)
                              .Field("host_bytes", PickHostBytes(r))
                              .Field("reason", r.pick.reason)
                              .Field("command", r.pick_command)
                              .str())
      .Field("encoder_parameters", r.enc.parameters)
      .Field("decoder_parameters", r.dec.parameters)
      .Raw("rows", RowsJson(r))
      .Raw("stages", StagesJson(r))
      .Raw("level_times", r.times ? TrimLine(LevelTimesFile(*r.times, r.config)) : "null")
      .Field("shared_device_bytes", r.parts.shared_device_bytes)
      .Field("own_device_bytes", r.parts.own_device_bytes)
      .Raw("fewest_parts", JsonWriter()
                               .Raw("one_device", FewestJson(r.fewest_shared, true))
                               .Raw("device_per_stage", FewestJson(r.fewest_own, false))
                               .str())
      .Raw("legend", LegendJson());  // last: its keys name the rows' fields
  std::cout << out.str() << std::endl;
}

// Under the ways' table: what `needed` counts and which figure decided.
void PrintVerdictNote(const PlanReport& r) {
  std::printf(
      "\nneeded = tensor bytes + %.0f%% of them for the caching allocator's reserve + %s "
      "workspace\n"
      "  (cuDNN, cuBLAS) and %s CUDA context per process (defaults until a GPU measures them:\n"
      "  docs/MEMORY.md); fits: needed <= %s usable.\n  Decided by %s.\n"
      "  The runs train with %s, which keeps the allocator's reserve low.\n",
      kAllocatorReserveFraction * 100, FormatBytes(kWorkspaceAllowanceBytes).c_str(),
      FormatBytes(kContextAllowanceBytes).c_str(), FormatBytes(r.card.usable_bytes()).c_str(),
      r.measure ? "the measured tensor bytes (the estimate is shown beside them)"
                : "the estimate: its tensor bytes, less its contexts (--no-measure)",
      CudaAllocatorConfigText().c_str());
  std::printf(
      "host = what every process of the way holds in host memory together at its peak (parked\n"
      "  state, offloaded activations, ring slots, %s runtime per process%s);\n"
      "  fits host: host <= %s (--host-mem). %s\n",
      FormatBytes(kHostRuntimeAllowanceBytes).c_str(),
      r.device_is_host ? ", and the device's tensors: the devices are this CPU" : "",
      FormatBytes(r.host_mem).c_str(),
      r.measure ? "Measured: the probes' peak resident sizes, summed and extrapolated."
                : "An estimate from shapes (--no-measure).");
}

// The ways of training: one row each, then the floor and what was measured.
void PrintWays(const PlanReport& r) {
  const Config& config = r.config;
  std::printf(
      "plan for %s: %d-D, %.1fM parameters (encoder %.1fM, decoder %.1fM), batch %d in %d "
      "micro-batch(es), %s\n",
      r.config_path.c_str(), config.model.dims, (r.enc.parameters + r.dec.parameters) / 1e6,
      r.enc.parameters / 1e6, r.dec.parameters / 1e6, config.train.batch_size,
      config.train.micro_batches, NameOf(config.train.precision).c_str());
  std::printf("card %s less %s headroom (--headroom): %s usable; host memory %s (--host-mem)\n\n",
              FormatBytes(r.card.card_bytes).c_str(), r.card.headroom_text.c_str(),
              FormatBytes(r.card.usable_bytes()).c_str(), FormatBytes(r.host_mem).c_str());
  std::printf("%-41s %9s %12s %9s %10s %12s %10s %10s %10s %8s  %-5s %10s %-5s %s\n", "", "state",
              "activations", "boundary", "workspace", "context", "estimate", "measured", "needed",
              "x floor", "fits", "host", "host?", "peak during");
  for (const PlanRow& row : r.rows) {
    const std::string context =
        std::to_string(row.processes) + " x " + FormatBytes(row.context_bytes / row.processes);
    std::printf(
        "%-41s %9s %12s %9s %10s %12s %10s %10s %10s %7.1fx  %-5s %10s %-5s %s\n", row.name.c_str(),
        FormatBytes(row.state_bytes).c_str(), FormatBytes(row.activation_bytes).c_str(),
        FormatBytes(row.boundary_bytes).c_str(), FormatBytes(row.workspace_bytes).c_str(),
        context.c_str(), FormatBytes(row.peak_bytes).c_str(),
        row.measured() ? FormatBytes(row.tensor_bytes).c_str() : "-",
        FormatBytes(row.need.total()).c_str(), r.FloorRatio(row), row.fits ? "yes" : "NO",
        FormatBytes(row.host_bytes).c_str(), row.fits_host ? "yes" : "NO", row.peak_phase.c_str());
  }
  PrintVerdictNote(r);
  std::printf(
      "\nfloor: %s, the largest %s's forward and backward for one sample (x floor: each way's "
      "tensor bytes over it)\n",
      FormatBytes(r.floor).c_str(),
      config.model.kind == ModelKind::kTorchscript ? "level" : "block");
  if (r.lean_floor > 0)
    std::printf(
        "lean floor: %s (%.2fx) with model.memory: lean, the same weights in blocks that hold "
        "less\n  (the rows named lean; their x floor is over this one: "
        "docs/MEMORY.md#lean-blocks)\n",
        FormatBytes(r.lean_floor).c_str(),
        r.floor > 0 ? static_cast<double>(r.lean_floor) / static_cast<double>(r.floor) : 0.0);
  if (!r.measure) return;
  std::printf(
      "\nmeasured: the device's peak tensor bytes, every process on it together, from real "
      "runs at\npatches %s and %s extrapolated to this patch (no context, no allocator reserve)\n",
      PatchText(ProbePatches(config, r.probe_voxels)[0]).c_str(),
      PatchText(ProbePatches(config, r.probe_voxels)[1]).c_str());
  if (ProbesOnOneThread(config))
    std::printf(
        "  the runs use one CPU thread: in bf16, oneDNN's convolutions take scratch for each "
        "thread, which no card holds\n");
  for (const PlanRow& row : r.rows) {
    if (row.stage_tensor_bytes.empty()) continue;
    std::string stages;
    for (const auto& [key, bytes] : row.stage_tensor_bytes)
      stages += (stages.empty() ? "" : ", ") + key + " " + FormatBytes(bytes);
    std::printf("  %s: %s\n", row.name.c_str(), stages.c_str());
  }
}

// This config's stages, the fewest parts that fit, and the recommendation.
void PrintStages(const PlanReport& r) {
  const Config& config = r.config;
  const PartsPlan& parts = r.parts;
  std::printf(
      "\nthis config's %zu stages (pipeline.encoder_parts %d, decoder_parts %d, "
      "activations %s, cuts balancing %s), estimate:\n",
      parts.stages.size(), parts.encoder_parts, parts.decoder_parts,
      NameOf(config.pipeline.activations).c_str(), r.times ? "measured time" : "estimated memory");
  std::printf("  %-10s %-12s %9s %12s %9s %10s %10s %10s%s\n", "stage", "levels", "state",
              "activations", "boundary", "workspace", "turn", "parked",
              r.times ? "   time (ms)" : "");
  for (size_t i = 0; i < parts.stages.size(); ++i) {
    const StagePlan& p = parts.stages[i];
    std::printf("  %-10s %-12s %9s %12s %9s %10s %10s %10s", p.key.c_str(), p.levels.c_str(),
                FormatBytes(p.state_bytes).c_str(), FormatBytes(p.activation_bytes).c_str(),
                FormatBytes(p.boundary_bytes).c_str(), FormatBytes(p.workspace_bytes).c_str(),
                FormatBytes(p.turn_bytes).c_str(), FormatBytes(p.residue_bytes).c_str());
    if (i < r.part_ms.size()) std::printf(" %12.2f", r.part_ms[i]);
    std::printf("\n");
  }
  if (r.times) {
    std::printf(
        "  time: one micro-batch's forward and backward through the stage's levels, measured on "
        "%s (encoder) and %s (decoder)\n",
        r.times->encoder_device.c_str(), r.times->decoder_device.c_str());
  }
  const int64_t usable = r.card.usable_bytes();
  std::printf(
      "  one device, in turns: needs %s with %zu contexts (%s); a device per stage: %s each "
      "(%s)\n",
      FormatBytes(parts.shared_need.total()).c_str(), parts.stages.size(),
      parts.shared_need.total() <= usable ? "fits" : "does NOT fit",
      FormatBytes(parts.own_need.total()).c_str(),
      parts.own_need.total() <= usable ? "fits" : "does NOT fit");
  auto fewest_text = [](const std::optional<PartsPlan>& p, bool shared) {
    if (!p) return std::string("none, even one level per part");
    return "pipeline.encoder_parts=" + std::to_string(p->encoder_parts) +
           " pipeline.decoder_parts=" + std::to_string(p->decoder_parts) + " (needs " +
           FormatBytes(shared ? p->shared_need.total() : p->own_need.total()) + ")";
  };
  std::printf(
      "fewest parts that fit %s usable with activations %s: one device in turns: %s; a device "
      "per stage: %s\n",
      FormatBytes(usable).c_str(), NameOf(config.pipeline.activations).c_str(),
      fewest_text(r.fewest_shared, true).c_str(), fewest_text(r.fewest_own, false).c_str());
  std::printf(
      "\nstate = weights + gradients + optimizer state; the pipeline rows assume both stages "
      "share\n"
      "the device and park between turns. An estimate from shapes: see docs/DESIGN.md.\n");
  std::printf("\nrecommended: %s: %s\n  %s\n", r.pick.way.c_str(), r.pick.reason.c_str(),
              r.pick.fits ? r.pick_command.c_str() : "(nothing to run)");
}

}  // namespace

int PlanCommand(int argc, char** argv) {
  cxxopts::Options options("unet-pipeline plan",
                           "Predict peak device memory from the config's shapes.");
  options.add_options()("config", "YAML config file", cxxopts::value<std::string>())(
      "set", "override a key (repeatable)", cxxopts::value<std::vector<std::string>>())(
      "gpu-mem", "device memory to fit in", cxxopts::value<std::string>()->default_value("16GiB"))(
      "headroom",
      "of --gpu-mem, kept free beyond what each way needs: a percentage (10%) or a size (1.5GiB)",
      cxxopts::value<std::string>()->default_value(kDefaultHeadroom))(
      "host-mem", "host memory (RAM) every way must fit in (default: this machine's MemTotal)",
      cxxopts::value<std::string>()->default_value(""))(
      "way", "only this way (a row's name, e.g. 'pipeline offload'; repeatable)",
      cxxopts::value<std::vector<std::string>>())("no-measure",
                                                  "the estimate from shapes only (no probe runs)")(
      "probe-voxels", "the largest patch (in voxels) a probe run trains (default 262144)",
      cxxopts::value<int64_t>()->default_value(std::to_string(kProbeVoxels)))("json", "print JSON")(
      "h,help", "this help");
  const auto parsed = ParseCommandLine(options, argc, argv, "unet-pipeline plan --help");
  if (!parsed) return 0;
  if (!parsed->count("config")) throw UsageError("plan needs --config FILE");
  const PlanReport report = MakePlan(*parsed);
  if (parsed->count("json")) {
    PrintPlanJson(report);
  } else {
    PrintWays(report);
    PrintStages(report);
  }
  return 0;
}

}  // namespace up
