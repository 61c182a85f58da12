// See bench_step.h. Progress goes to stderr, one line per run, so that stdout
// holds only the table or the JSON.
#include "bench/bench_step.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <sstream>

#include "bench/bench_machine.h"
#include "bench/bench_trainer.h"
#include "bench/bench_util.h"
#include "common/base/byte_size.h"
#include "common/base/errors.h"
#include "common/base/json_writer.h"
#include "common/config/config_file.h"
#include "common/device/device_memory.h"
#include "launcher/device_lock.h"

namespace up::bench {
namespace {

constexpr const char* kPair = "pipeline_vs_single";
constexpr const char* kUnlocked = "unlocked_schedules";
constexpr const char* kLean = "lean_vs_written";

struct Variant {
  StepRow row;
  TrainerSpec spec;
};

// The row's overrides on top of the config, and its resolved lock; the config
// check turns a combination the pipeline refuses into a UsageError now.
Variant MakeVariant(const StepOptions& o, const std::string& group, const std::string& label,
                    bool single, std::vector<std::string> sets) {
  sets.insert(sets.begin(), {"train.steps=" + std::to_string(o.steps), "checkpoint.every=0"});
  sets.insert(sets.begin(), o.sets.begin(), o.sets.end());  // the row's own keys win
  const Config c = LoadConfig(o.config, sets);
  Variant v;
  v.row.group = group;
  v.row.label = label;
  v.row.mode = single ? "single" : "pipeline";
  if (!single) {
    const PipelineConfig& p = c.pipeline;
    v.row.schedule = NameOf(p.schedule);
    v.row.activations = NameOf(p.activations);
    v.row.lock = ResolveLock(p.lock, p.encoder.device, p.decoder.device, p.schedule) ? "on" : "off";
  }
  v.spec = {o.config, single, sets, "", {}};
  return v;
}

// The step times of a run after the warm-up; RuntimeError if the run did not
// write every step.
std::vector<double> TimedSteps(const StepOptions& o, const TrainerResult& res,
                               const std::string& out) {
  if (static_cast<int64_t>(res.step_s.size()) != o.steps) {
    throw RuntimeError("bench step: " + out + "/metrics.jsonl has " +
                       std::to_string(res.step_s.size()) + " steps, expected " +
                       std::to_string(o.steps));
  }
  return std::vector<double>(res.step_s.begin() + o.warmup, res.step_s.end());
}

// Runs each variant `rounds` times, alternating, and fills its figures.
void RunAlternated(const StepOptions& o, std::vector<Variant>& variants, const TempFolder& tmp,
                   int* run_counter) {
  std::vector<std::vector<double>> pooled(variants.size());
  for (int r = 0; r < o.rounds; ++r) {
    for (size_t i = 0; i < variants.size(); ++i) {
      Variant& v = variants[i];
      const std::string out = tmp.path() + "/run-" + std::to_string(++*run_counter);
      const TrainerResult result = RunTrainer(v.spec, out);
      const std::vector<double> kept = TimedSteps(o, result, out);
      int64_t rss = 0;
      for (const char* process : {"trainer", "launcher", "encoder", "decoder"})
        rss += static_cast<int64_t>(
            JsonNestedNumber(result.summary_json, "peak_rss_bytes", process).value_or(0));
      v.row.peak_rss_bytes = std::max(v.row.peak_rss_bytes, rss);
      pooled[i].insert(pooled[i].end(), kept.begin(), kept.end());
      v.row.run_medians_s.push_back(Median(kept));
      std::cerr << "bench step: round " << r + 1 << "/" << o.rounds << " " << v.row.label
                << ": median " << Median(kept) << " s/step\n";
    }
  }
  for (size_t i = 0; i < variants.size(); ++i) {
    variants[i].row.median_step_s = Median(pooled[i]);
    variants[i].row.samples = static_cast<int64_t>(pooled[i].size());
  }
}

// The variant under `budget` bytes at the fewest micro-batches that train
// under it (probes of 2 steps, 1 micro-batch upwards through the batch's
// divisors); a row that trains at none is not built.
void FitBudget(const StepOptions& o, int64_t budget, Variant& v, const TempFolder& tmp,
               int* run_counter) {
  const Config c = LoadConfig(o.config, v.spec.sets);
  const std::string limit = "train.memory_budget=" + std::to_string(budget);
  for (int mb = 1; mb <= c.train.batch_size; ++mb) {
    if (c.train.batch_size % (mb * c.pipeline.replicas) != 0) continue;
    TrainerSpec probe = v.spec;
    probe.sets.insert(probe.sets.end(),
                      {limit, "train.micro_batches=" + std::to_string(mb), "train.steps=2"});
    const std::string out = tmp.path() + "/run-" + std::to_string(++*run_counter);
    try {
      RunTrainer(probe, out);
    } catch (const RuntimeError& e) {
      if (std::string(e.what()).find("out of memory") == std::string::npos) throw;
      std::cerr << "bench step: " << v.row.label << ": " << mb
                << " micro-batch(es) run out of memory\n";
      continue;
    }
    std::cerr << "bench step: " << v.row.label << ": trains in " << mb << " micro-batch(es)\n";
    v.spec.sets.insert(v.spec.sets.end(), {limit, "train.micro_batches=" + std::to_string(mb)});
    v.row.micro_batches = mb;
    return;
  }
  v.row.built = false;
  v.row.note = "trains under " + FormatBytes(budget) + " at no micro-batch count";
}

void SetRatio(StepRow& row, const StepRow& peer) {
  row.ratio_to = peer.label;
  row.ratio = row.median_step_s / peer.median_step_s;
}

std::string RowJson(const StepRow& r) {
  JsonWriter j;
  j.Field("group", r.group).Field("label", r.label).Field("mode", r.mode).Field("built", r.built);
  if (r.mode == "pipeline") {
    j.Field("schedule", r.schedule).Field("lock", r.lock).Field("activations", r.activations);
  }
  if (!r.built) return j.Field("note", r.note).str();
  std::string runs;
  for (double m : r.run_medians_s) {
    if (!runs.empty()) runs += ',';
    runs += JsonWriter::FormatDouble(m);
  }
  j.Field("median_step_s", r.median_step_s).Raw("run_medians_s", "[" + runs + "]");
  j.Field("samples", r.samples);
  if (r.peak_rss_bytes > 0) j.Field("peak_rss_bytes", r.peak_rss_bytes);
  if (r.micro_batches > 0) j.Field("micro_batches", r.micro_batches);
  if (!r.ratio_to.empty()) j.Field("ratio_to", r.ratio_to).Field("ratio", r.ratio);
  return j.str();
}

// The Python eager peer's command line for `config`, or why there is none
// (the row's note).
struct PeerCommand {
  std::vector<std::string> args;
  std::string note;
};

std::string IntsJson(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : ", ") + std::to_string(x);
  return "[" + out + "]";
}

PeerCommand PythonPeer(const StepOptions& o, const std::string& tmp) {
  namespace fs = std::filesystem;
  // The checkout holding the build: where bench/ and .venv are.
  fs::path root;
  for (fs::path at = fs::path(SelfExe()).parent_path(); !at.empty() && at != at.root_path();
       at = at.parent_path()) {
    if (fs::exists(at / "bench/eager_step.py")) {
      root = at;
      break;
    }
  }
  if (root.empty()) return {{}, "no checkout (bench/eager_step.py) above this binary"};
  const std::string python = (root / ".venv/bin/python").string();
  if (!fs::exists(python)) return {{}, "no " + python + " (scripts/install-deps.sh makes it)"};
  const Config c = LoadConfig(o.config, o.sets);
  const TrainConfig& t = c.train;
  const ModelConfig& m = c.model;
  if (t.optimizer != Optimizer::kAdam)
    return {{}, "the peers train with Adam; train.optimizer is " + NameOf(t.optimizer)};
  std::vector<std::string> shape{"--patch"};
  for (int s : c.data.size) shape.push_back(std::to_string(s));
  std::vector<std::string> common = shape;
  for (const auto& [flag, value] :
       {std::pair{"--batch", t.batch_size}, std::pair{"--micro-batches", t.micro_batches},
        std::pair{"--threads", t.threads}, std::pair{"--steps", static_cast<int>(o.steps)},
        std::pair{"--warmup", static_cast<int>(o.warmup)}}) {
    common.push_back(flag);
    common.push_back(std::to_string(value));
  }
  PeerCommand peer;
  if (m.kind == ModelKind::kNnunet) {
    if (!t.deep_supervision) return {{}, "the nnU-Net peer trains with deep supervision"};
    const std::string arch = tmp + "/peer-architecture.json";
    std::ofstream(arch) << "{\"architecture\": " << NnunetArchitectureText(m.nnunet) << "}\n";
    peer.args = {python,           "-W",
                 "ignore",         (root / "bench/nnunet_eager.py").string(),
                 "--architecture", arch,
                 "--in-channels",  std::to_string(m.in_channels),
                 "--num-classes",  std::to_string(m.num_classes),
                 "--loss",         NameOf(t.loss)};
    if (!t.batch_dice) peer.args.push_back("--no-batch-dice");
  } else {
    if (t.loss != LossKind::kCe)
      return {{}, "the peer trains with cross-entropy; train.loss is " + NameOf(t.loss)};
    if (t.deep_supervision) return {{}, "the peer trains one head; train.deep_supervision is on"};
    std::string factory, kwargs;
    if (m.kind == ModelKind::kTorchscript) {
      if (m.bundle.factory.empty())
        return {{}, "the bundle names no factory (export it with the export_unet.py command)"};
      factory = m.bundle.factory;
      kwargs = m.bundle.factory_kwargs;
    } else {
      factory = "unet_reference:UNet";
      kwargs = "{\"dims\": " + std::to_string(m.dims) +
               ", \"in_channels\": " + std::to_string(m.in_channels) +
               ", \"num_classes\": " + std::to_string(m.num_classes) +
               ", \"features\": " + IntsJson(m.features) + ", \"norm\": \"" + NameOf(m.norm) +
               "\", \"groups\": " + std::to_string(m.groups) + "}";
    }
    peer.args = {python,  "-W",       "ignore", (root / "bench/eager_step.py").string(),
                 factory, "--kwargs", kwargs};
  }
  peer.args.insert(peer.args.end(), common.begin(), common.end());
  return peer;
}

// The peer's row: `rounds` runs, each's kept steps pooled as the trainers' are.
StepRow RunPythonPeer(const StepOptions& o, const TempFolder& tmp) {
  StepRow row;
  row.group = kPair;
  row.label = "python eager";
  row.mode = "python";
  const PeerCommand peer = PythonPeer(o, tmp.path());
  if (peer.args.empty()) {
    row.built = false;
    row.note = peer.note;
    std::cerr << "bench step: no python eager row: " << peer.note << "\n";
    return row;
  }
  std::vector<double> pooled;
  for (int r = 0; r < o.rounds; ++r) {
    const std::vector<double> kept =
        RunPeer(peer.args, tmp.path() + "/peer-" + std::to_string(r) + ".log");
    if (kept.empty()) throw RuntimeError("bench step: the Python peer printed no step times");
    pooled.insert(pooled.end(), kept.begin(), kept.end());
    row.run_medians_s.push_back(Median(kept));
    std::cerr << "bench step: round " << r + 1 << "/" << o.rounds << " python eager: median "
              << Median(kept) << " s/step\n";
  }
  row.median_step_s = Median(pooled);
  row.samples = static_cast<int64_t>(pooled.size());
  return row;
}

// Three ways as written and lean, alternated in one rotation; each lean row
// against its written twin. A config without lean blocks (a TorchScript
// bundle, fp16 or bf16) gives rows that say why.
std::vector<StepRow> RunLeanGroup(const StepOptions& o, const TempFolder& tmp, int* run_counter) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> ways{
      {"single", {}},
      {"single offload", {"train.checkpointing=blocks", "train.offload=on"}},
      {"pipeline offload",
       {"pipeline.activations=recompute", "pipeline.recompute_unit=block", "pipeline.offload=on"}}};
  // Why the config has no lean blocks (its kind or precision), if it has none.
  std::string why_not;
  try {
    std::vector<std::string> lean_sets = o.sets;
    lean_sets.push_back("model.memory=lean");
    LoadConfig(o.config, lean_sets);
  } catch (const UsageError& e) {
    why_not = e.what();
    std::cerr << "bench step: no lean rows: " << why_not << "\n";
  }
  std::vector<StepRow> unbuilt;
  std::vector<Variant> variants;
  for (const auto& [name, sets] : ways) {
    const bool single = name.rfind("single", 0) == 0;
    if (!why_not.empty()) {
      StepRow row;
      row.group = kLean;
      row.label = name + " lean";
      row.mode = single ? "single" : "pipeline";
      row.built = false;
      row.note = why_not;
      unbuilt.push_back(row);
      continue;
    }
    variants.push_back(MakeVariant(o, kLean, name + " as written", single, sets));
    std::vector<std::string> lean = sets;
    lean.push_back("model.memory=lean");
    variants.push_back(MakeVariant(o, kLean, name + " lean", single, lean));
  }
  if (!why_not.empty()) return unbuilt;
  RunAlternated(o, variants, tmp, run_counter);
  std::vector<StepRow> rows;
  for (size_t i = 0; i + 1 < variants.size(); i += 2) {
    SetRatio(variants[i + 1].row, variants[i].row);
    rows.push_back(variants[i].row);
    rows.push_back(variants[i + 1].row);
  }
  return rows;
}

}  // namespace

StepReport RunStepBench(const StepOptions& o) {
  if (o.config.empty()) throw UsageError("bench step needs --config FILE");
  if (o.steps < 2 || o.steps > 100000)
    throw UsageError("--steps " + std::to_string(o.steps) + " is out of range; use 2 to 100000");
  if (o.rounds < 1 || o.rounds > 100)
    throw UsageError("--rounds " + std::to_string(o.rounds) + " is out of range; use 1 to 100");
  if (o.warmup < 0 || o.warmup >= o.steps) {
    throw UsageError("--warmup " + std::to_string(o.warmup) + " leaves no step of " +
                     std::to_string(o.steps) + " to time; use 0 to " + std::to_string(o.steps - 1));
  }
  if (!o.only.empty() && o.only != "lean")
    throw UsageError("--only " + o.only + ": the one group that runs alone is lean");
  StepReport report;
  report.options = o;
  report.threads = LoadConfig(o.config, o.sets).train.threads;
  if (!o.budget.empty()) report.budget_bytes = ParseByteSize(o.budget, "--budget");
  if (o.only == "lean") {
    TempFolder tmp;
    int runs = 0;
    report.rows = RunLeanGroup(o, tmp, &runs);
    return report;
  }

  std::vector<Variant> pair{
      MakeVariant(o, kPair, "pipeline", false, {"pipeline.activations=keep"}),
      MakeVariant(o, kPair, "single", true, {}),
      MakeVariant(o, kPair, "pipeline recompute", false, {"pipeline.activations=recompute"})};
  std::vector<Variant> unlocked;
  for (const char* schedule : {"sequential", "gpipe", "1f1b"}) {
    unlocked.push_back(MakeVariant(o, kUnlocked, schedule, false,
                                   {"pipeline.activations=keep", "pipeline.lock=off",
                                    std::string("pipeline.schedule=") + schedule}));
  }
  // The same overlap with the boundary over c10d (Gloo on loopback), as
  // between two machines: what the c10d transport costs against the ring.
  unlocked.push_back(MakeVariant(o, kUnlocked, "1f1b gloo", false,
                                 {"pipeline.activations=keep", "pipeline.lock=off",
                                  "pipeline.schedule=1f1b", "pipeline.transport=gloo"}));
  // fp16 with its loss scale (what 16 GB cards without bf16 run), each
  // trainer against the other.
  std::vector<Variant> fp16{MakeVariant(o, kPair, "single fp16", true, {"train.precision=fp16"}),
                            MakeVariant(o, kPair, "pipeline fp16", false,
                                        {"pipeline.activations=keep", "train.precision=fp16"})};
  // The trainers with glibc's malloc defaults (freed blocks go back to the
  // kernel and are faulted in again next step), against the same trainers as
  // they run (tensor_accounting.h keeps freed blocks in the process).
  std::vector<Variant> malloc_defaults{
      MakeVariant(o, kPair, "single glibc defaults", true, {}),
      MakeVariant(o, kPair, "pipeline glibc defaults", false, {"pipeline.activations=keep"})};
  for (Variant& v : malloc_defaults) {
    v.spec.env = {"UP_GLIBC_MALLOC_DEFAULTS=1"};
    pair.push_back(v);  // pair[3], pair[4]: alternated with the rows they are compared to
  }
  // Checkpointing against offloading what it keeps: one process, and the
  // pipeline's offload way (recompute by blocks, parked kept inputs) at the
  // same budget, each against single-process checkpointing.
  std::vector<Variant> offload{
      MakeVariant(o, kPair, "single checkpointing", true, {"train.checkpointing=levels"}),
      MakeVariant(o, kPair, "single offload", true,
                  {"train.checkpointing=blocks", "train.offload=on"}),
      MakeVariant(o, kPair, "pipeline offload", false,
                  {"pipeline.activations=recompute", "pipeline.recompute_unit=block",
                   "pipeline.offload=on"})};
  TempFolder tmp;
  int runs = 0;
  RunAlternated(o, pair, tmp, &runs);
  if (report.budget_bytes > 0) {
    for (Variant& v : offload) FitBudget(o, report.budget_bytes, v, tmp, &runs);
    std::vector<Variant> fitted;
    for (const Variant& v : offload)
      if (v.row.built) fitted.push_back(v);
    RunAlternated(o, fitted, tmp, &runs);
    for (Variant& v : offload)
      for (const Variant& f : fitted)
        if (f.row.label == v.row.label) v = f;
  } else {
    RunAlternated(o, offload, tmp, &runs);
  }
  StepRow python = RunPythonPeer(o, tmp);
  RunAlternated(o, unlocked, tmp, &runs);
  const std::vector<StepRow> lean = RunLeanGroup(o, tmp, &runs);
  // fp16 on a CPU is emulated (about 30x fp32 on tiny here, 100 s a step on
  // small): a figure about the emulation, not the trainers, and an hour of
  // runs. Timed where the device has fp16 arithmetic (the GPU check).
  Config base = LoadConfig(o.config, o.sets);
  ResolveAutoDevicesHere(&base);  // where the trainers will run
  if (base.pipeline.encoder.device == "cpu" && base.pipeline.decoder.device == "cpu") {
    for (Variant& v : fp16) {
      v.row.built = false;
      v.row.note = "fp16 on a CPU is emulated; timed on a GPU (scripts/gpu-check.sh)";
    }
  } else {
    RunAlternated(o, fp16, tmp, &runs);
  }

  {
    TrainerSpec traced = pair[0].spec;
    const std::string out = tmp.path() + "/run-traced";
    traced.trace = out + ".trace.json";
    const std::vector<double> kept = TimedSteps(o, RunTrainer(traced, out), out);
    report.traced_mean_step_s = std::accumulate(kept.begin(), kept.end(), 0.0) / kept.size();
    report.breakdown = BreakdownFromTrace(traced.trace, o.warmup);
    std::cerr << "bench step: traced pipeline: mean " << report.traced_mean_step_s << " s/step\n";
  }

  SetRatio(pair[0].row, pair[1].row);
  report.rows.push_back(pair[1].row);
  // Plain PyTorch on the same LibTorch, against the single-process trainer.
  if (python.built) SetRatio(python, pair[1].row);
  report.rows.push_back(python);
  report.rows.push_back(pair[0].row);
  // What recomputing the encoder's activations costs, against single-process.
  SetRatio(pair[2].row, pair[1].row);
  report.rows.push_back(pair[2].row);
  for (Variant& v : unlocked) {
    SetRatio(v.row, unlocked[0].row);
    report.rows.push_back(v.row);
  }
  report.rows.push_back(offload[0].row);
  for (size_t i = 1; i < offload.size(); ++i) {
    if (offload[i].row.built && offload[0].row.built) SetRatio(offload[i].row, offload[0].row);
    report.rows.push_back(offload[i].row);
  }
  SetRatio(pair[3].row, pair[1].row);  // glibc defaults against the trainers as they run
  SetRatio(pair[4].row, pair[0].row);
  report.rows.push_back(pair[3].row);
  report.rows.push_back(pair[4].row);
  if (fp16[1].row.built) SetRatio(fp16[1].row, fp16[0].row);
  report.rows.push_back(fp16[0].row);
  report.rows.push_back(fp16[1].row);
  report.rows.insert(report.rows.end(), lean.begin(), lean.end());
  return report;
}

std::string StepJson(const StepReport& r) {
  std::string rows;
  for (const StepRow& row : r.rows) {
    if (!rows.empty()) rows += ',';
    rows += RowJson(row);
  }
  JsonWriter out;
  out.Field("bench", "step")
      .Raw("machine", MachineJson(DescribeMachine()))
      .Field("config", r.options.config)
      .Raw("sets", JsonStrings(r.options.sets))
      .Field("steps", r.options.steps)
      .Field("rounds", r.options.rounds)
      .Field("warmup", r.options.warmup)
      .Field("threads", r.threads);
  if (r.budget_bytes > 0) out.Field("budget_bytes", r.budget_bytes);
  if (!r.options.only.empty()) out.Field("only", r.options.only);
  out.Raw("results", "[" + rows + "]");
  if (!r.options.only.empty()) return out.str();  // no traced run
  const StepBreakdown& b = r.breakdown;
  JsonWriter breakdown;
  breakdown.Field("steps", b.steps)
      .Field("step_ms", r.traced_mean_step_s * 1e3)
      .Field("turn_ms", b.turn_ms)
      .Field("compute_ms", b.compute_ms)
      .Field("transfer_ms", b.transfer_ms);
  out.Raw("pipeline_breakdown", breakdown.str());
  return out.str();
}

std::string StepTable(const StepReport& r) {
  std::ostringstream s;
  s << "machine: " << MachineText(DescribeMachine()) << "\n"
    << "config " << r.options.config << ", " << r.threads << " thread(s) per process, "
    << r.options.rounds << " runs per row of " << r.options.steps << " steps, first "
    << r.options.warmup << " of each dropped\n";
  if (r.budget_bytes > 0) {
    s << "offload rows under a " << FormatBytes(r.budget_bytes)
      << " budget, each at the fewest micro-batches that train under it\n";
  }
  char line[256];
  std::snprintf(line, sizeof(line), "%-20s %-10s %-5s %-9s %12s %-26s\n", "row", "schedule", "lock",
                "acts", "median s", "ratio");
  s << line;
  for (const StepRow& row : r.rows) {
    const std::string ratio =
        row.ratio_to.empty()
            ? ""
            : JsonWriter::FormatDouble(std::round(row.ratio * 1000) / 1000) + "x " + row.ratio_to;
    if (!row.built) {
      std::snprintf(line, sizeof(line), "%-20s %-10s %-5s %-9s %12s\n", row.label.c_str(),
                    row.schedule.c_str(), row.lock.c_str(), row.activations.c_str(),
                    ("- " + row.note).c_str());
    } else {
      const std::string label = row.micro_batches > 0
                                    ? row.label + " (" + std::to_string(row.micro_batches) + " mb)"
                                    : row.label;
      std::snprintf(line, sizeof(line), "%-20s %-10s %-5s %-9s %12.4f %-26s\n", label.c_str(),
                    row.schedule.empty() ? "-" : row.schedule.c_str(),
                    row.lock.empty() ? "-" : row.lock.c_str(),
                    row.activations.empty() ? "-" : row.activations.c_str(), row.median_step_s,
                    ratio.c_str());
    }
    s << line;
  }
  if (!r.options.only.empty()) return s.str();  // no traced run
  const StepBreakdown& b = r.breakdown;
  std::snprintf(line, sizeof(line),
                "traced pipeline run, per step: %.1f ms wall, turns held %.1f ms = compute "
                "%.1f + boundary transfer %.1f + turn-taking %.1f\n",
                r.traced_mean_step_s * 1e3, b.turn_ms, b.compute_ms, b.transfer_ms,
                b.turn_ms - b.compute_ms - b.transfer_ms);
  s << line;
  return s.str();
}

}  // namespace up::bench
