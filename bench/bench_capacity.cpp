// See bench_capacity.h. Each probe is a real training run (bench_trainer.h)
// under train.memory_budget; a run that ends "out of memory" is a no (and,
// below the config's own size, one too small to train), any other failure
// stops the bench.
#include "bench/bench_capacity.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "bench/bench_machine.h"
#include "bench/bench_trainer.h"
#include "bench/bench_util.h"
#include "common/base/byte_size.h"
#include "common/base/command_line.h"
#include "common/base/errors.h"
#include "common/base/json_writer.h"
#include "common/config/config_file.h"
#include "common/device/device_memory.h"
#include "common/model/unet.h"
#include "launcher/tools/memory_plan.h"

namespace up::bench {
namespace {

namespace fs = std::filesystem;

struct Way {
  std::string name;
  bool single_process;
  std::vector<std::string> sets;
  bool single_way;    // one of the single-process ways (for vs_best_single)
  bool lean = false;  // model.memory: lean
};

// The config's own micro-batches, then one sample per micro-batch (the
// cheapest memory saving each trainer has) where that differs.
std::vector<Way> Ways(const Config& c) {
  const std::string mb1 = "train.micro_batches=" + std::to_string(c.train.batch_size);
  const std::string ckpt = "train.checkpointing=levels";
  const std::string recompute = "pipeline.activations=recompute";
  const std::string park = "pipeline.park=always";
  const std::string blocks = "train.checkpointing=blocks";
  const std::string unit = "pipeline.recompute_unit=block";
  std::vector<Way> ways{
      {"single-process", true, {}, true},
      {"single-process, micro-batches of 1", true, {mb1}, true},
      {"single-process, checkpointing", true, {ckpt}, true},
      {"single-process, checkpointing, mb of 1", true, {ckpt, mb1}, true},
      {"pipeline keep", false, {"pipeline.activations=keep"}, false},
      {"pipeline recompute+park", false, {recompute, park}, false},
      {"pipeline recompute+park, mb of 1", false, {recompute, park, mb1}, false},
      // More stages taking turns on the one device: each turn holds less.
      {"3 stages recompute+park", false, {recompute, park, "pipeline.encoder_parts=2"}, false},
      {"4 stages recompute+park",
       false,
       {recompute, park, "pipeline.encoder_parts=2", "pipeline.decoder_parts=2"},
       false},
      {"3 stages recompute+park, mb of 1",
       false,
       {recompute, park, mb1, "pipeline.encoder_parts=2"},
       false},
      {"4 stages recompute+park, mb of 1",
       false,
       {recompute, park, mb1, "pipeline.encoder_parts=2", "pipeline.decoder_parts=2"},
       false},
  };
  if (c.train.micro_batches == c.train.batch_size) {  // already one sample each
    ways.erase(
        std::remove_if(ways.begin(), ways.end(),
                       [](const Way& w) { return w.name.find("of 1") != std::string::npos; }),
        ways.end());
  }
  const std::string offload = "train.offload=on";
  const std::string parked = "pipeline.offload=on";
  // Parked kept inputs at the config's micro-batches (where those are not
  // one sample each already, the rows below).
  if (c.train.micro_batches != c.train.batch_size) {
    ways.push_back({"single-process, offload", true, {blocks, offload}, true});
    ways.push_back({"pipeline offload+park", false, {recompute, unit, parked, park}, false});
  }
  // Finer units and parked kept inputs, at one sample per micro-batch (the
  // least each way can hold): one process's best against the pipeline's.
  const std::vector<Way> finer{
      {"single-process, checkpointing blocks, mb of 1", true, {blocks, mb1}, true},
      {"single-process, offload, mb of 1", true, {blocks, offload, mb1}, true},
      {"pipeline recompute blocks+park, mb of 1", false, {recompute, unit, park, mb1}, false},
      {"pipeline offload+park, mb of 1", false, {recompute, unit, parked, park, mb1}, false},
  };
  ways.insert(ways.end(), finer.begin(), finer.end());
  // Lean blocks: plain single-process and the two ways that hold least.
  if (LeanTwin(c)) {
    for (const std::string name :
         {"single-process", "single-process, offload, mb of 1", "pipeline offload+park, mb of 1"}) {
      const auto way =
          std::find_if(ways.begin(), ways.end(), [&](const Way& w) { return w.name == name; });
      if (way == ways.end()) continue;
      Way lean = *way;
      lean.name += ", lean";
      lean.sets.push_back("model.memory=lean");
      lean.lean = true;
      ways.push_back(lean);
    }
  }
  return ways;
}

std::string IntList(const std::vector<int>& v, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + std::to_string(v[i]);
  return out;
}

// The config at scale `k`, as --set overrides.
class Scaler {
 public:
  Scaler(const Config& base, const std::string& scale) : base_(base), patch_(scale == "patch") {
    if (scale != "features" && scale != "patch")
      throw UsageError("--scale " + scale + ": use features or patch");
    unit_ = 1 << base.model.features.size();
  }
  // Level 0's width, or axis 0's patch size in units of 2^levels.
  int Base() const {
    return patch_ ? std::max(1, base_.data.size[0] / unit_) : base_.model.features[0];
  }

  std::vector<int> Features(int k) const {
    std::vector<int> f;
    for (int b : base_.model.features)
      f.push_back(
          std::max(1, static_cast<int>(std::lround(1.0 * b * k / base_.model.features[0]))));
    return f;
  }
  std::vector<int> Patch(int k) const {
    std::vector<int> s;
    for (int b : base_.data.size) {
      const double units = 1.0 * b / base_.data.size[0] * k;
      s.push_back(unit_ * std::max(1, static_cast<int>(std::lround(units))));
    }
    return s;
  }
  std::vector<std::string> Sets(int k) const {
    if (patch_) return {"data.size=[" + IntList(Patch(k), ",") + "]"};
    return {"model.features=[" + IntList(Features(k), ",") + "]"};
  }
  std::string Describe(int k) const {
    return patch_ ? "patch " + IntList(Patch(k), "x")
                  : "features [" + IntList(Features(k), ", ") + "]";
  }
  bool patch() const { return patch_; }

 private:
  const Config& base_;
  bool patch_;
  int unit_ = 1;
};

struct Probe {
  bool fits = false;
  std::string why;  // why not
  TrainerResult result;
};

}  // namespace

CapacityReport RunCapacityBench(const CapacityOptions& o) {
  if (o.config.empty()) throw UsageError("bench capacity needs --config FILE");
  if (o.budget.empty()) throw UsageError("bench capacity needs --budget SIZE (e.g. 16GiB)");
  if (o.steps < 1 || o.steps > 1000)
    throw UsageError("--steps " + std::to_string(o.steps) + " is out of range; use 1 to 1000");
  CapacityReport report;
  report.options = o;
  report.budget_bytes = ParseByteSize(o.budget, "--budget");
  std::vector<std::string> sets = o.sets;
  sets.insert(sets.end(), {"train.steps=" + std::to_string(o.steps), "checkpoint.every=0",
                           "train.memory_budget=" + std::to_string(report.budget_bytes)});
  Config base = LoadConfig(o.config, sets);
  ResolveAutoDevicesHere(&base);  // where the trainers will run
  const Scaler scaler(base, o.scale);
  const std::string device = base.pipeline.encoder.device;
  TempFolder tmp;
  int run_number = 0;

  std::vector<Way> ways = Ways(base);
  KeepNamedWays(
      o.ways, [](const Way& w) { return w.name; }, "bench capacity has", &ways);
  for (const Way& way : ways) {
    CapacityRow row;
    row.way = way.name;
    std::optional<TrainerResult> best;
    auto probe = [&](int k) {
      std::vector<std::string> s = sets;
      for (const std::string& x : way.sets) s.push_back(x);
      for (const std::string& x : scaler.Sets(k)) s.push_back(x);
      const std::string out = tmp.path() + "/run" + std::to_string(++run_number);
      ++row.probes;
      Probe p;
      try {
        p.result = RunTrainer({o.config, way.single_process, s, "", {}}, out);
        p.fits = true;
      } catch (const RuntimeError& e) {
        // Below the config's own size a model may be too small to train at
        // all (BatchNorm over one value): that size is a no too.
        const std::string what = e.what();
        if (what.find("out of memory") != std::string::npos) {
          p.why = "out of memory";
        } else if (k < scaler.Base()) {
          p.why = "too small to train (" + what.substr(what.rfind(": ") + 2) + ")";
        } else {
          throw;
        }
      }
      std::cerr << "bench capacity: " << way.name << ", " << scaler.Describe(k) << ": "
                << (p.fits ? "trains" : p.why) << "\n";
      fs::remove_all(out);
      return p;
    };
    // Up from the config's own size by doubling, down by halving, then bisect.
    int lo = 0, hi = 0;  // the largest known to fit (0: none), the smallest known not to (0: none)
    int k = scaler.Base();
    for (;;) {
      Probe p = probe(k);
      if (p.fits) {
        lo = k;
        best = std::move(p.result);
        if (hi != 0) break;
        if (k >= o.max_scale) break;
        k = std::min(2 * k, o.max_scale);
      } else {
        hi = k;
        if (lo != 0 || k == 1) break;
        k = std::max(1, k / 2);
      }
    }
    while (hi != 0 && hi - lo > 1) {
      const int mid = lo + (hi - lo) / 2;
      Probe p = probe(mid);
      if (p.fits) {
        lo = mid;
        best = std::move(p.result);
      } else {
        hi = mid;
      }
    }
    row.scale = lo;
    if (lo > 0) {
      Config c = LoadConfig(o.config, [&] {
        std::vector<std::string> s = sets;
        for (const std::string& x : scaler.Sets(lo)) s.push_back(x);
        return s;
      }());
      row.size = scaler.Describe(lo);
      row.parameters =
          ParameterCount(*UNetEncoder(c.model, 0)) + ParameterCount(*UNetDecoder(c.model, 0));
      row.voxels = 1;
      for (int d : c.data.size) row.voxels *= d;
      row.peak_device_bytes = static_cast<int64_t>(
          JsonNestedNumber(best->summary_json, "peak_device_tensor_bytes", device).value_or(0));
      row.step_s = best->step_s.empty() ? 0 : best->step_s.back();
    }
    report.rows.push_back(row);
  }
  auto measure = [&](const CapacityRow& r) {
    return static_cast<double>(scaler.patch() ? r.voxels : r.parameters);
  };
  double best_single = 0, plain = 0, best_written = 0;
  for (size_t i = 0; i < ways.size(); ++i) {
    report.rows[i].lean = ways[i].lean;
    if (ways[i].lean) continue;
    if (ways[i].single_way) best_single = std::max(best_single, measure(report.rows[i]));
    if (ways[i].name == "single-process") plain = measure(report.rows[i]);
    best_written = std::max(best_written, measure(report.rows[i]));
  }
  for (CapacityRow& r : report.rows) {
    r.vs_plain = plain > 0 ? measure(r) / plain : 0;
    r.vs_best_single = best_single > 0 ? measure(r) / best_single : 0;
    r.vs_best_written = best_written > 0 ? measure(r) / best_written : 0;
  }
  return report;
}

std::string CapacityJson(const CapacityReport& r) {
  std::string rows = "[";
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const CapacityRow& x = r.rows[i];
    JsonWriter w;
    w.Field("way", x.way)
        .Field("scale", x.scale)
        .Field("size", x.size)
        .Field("parameters", x.parameters)
        .Field("voxels", x.voxels)
        .Field("peak_device_tensor_bytes", x.peak_device_bytes)
        .Field("step_s", x.step_s)
        .Field("probes", x.probes)
        .Field("vs_plain", x.vs_plain)
        .Field("vs_best_single", x.vs_best_single)
        .Field("lean", x.lean)
        .Field("vs_best_written", x.vs_best_written);
    rows += (i ? "," : "") + w.str();
  }
  JsonWriter out;
  out.Field("bench", "capacity")
      .Raw("machine", MachineJson(DescribeMachine()))
      .Field("config", r.options.config)
      .Field("scale", r.options.scale)
      .Field("budget_bytes", r.budget_bytes)
      .Field("steps", r.options.steps)
      .Raw("sets", JsonStrings(r.options.sets))
      .Raw("rows", rows + "]");
  return out.str();
}

std::string CapacityTable(const CapacityReport& r) {
  std::ostringstream s;
  s << "machine: " << MachineText(DescribeMachine()) << "\n"
    << "config " << r.options.config << ", budget " << FormatBytes(r.budget_bytes)
    << " (train.memory_budget), scaling " << r.options.scale << ", " << r.options.steps
    << " steps per probe\n";
  char line[320];
  std::snprintf(line, sizeof(line), "%-46s %-30s %12s %12s %9s %8s %8s %8s\n", "way",
                "largest that trains", "parameters", "peak tensors", "step s", "x plain",
                "x best 1p", "x best");
  s << line;
  for (const CapacityRow& x : r.rows) {
    std::snprintf(line, sizeof(line), "%-46s %-30s %12lld %12s %9.3f %8.2f %8.2f %8.2f\n",
                  x.way.c_str(), x.scale ? x.size.c_str() : "(none)",
                  static_cast<long long>(x.parameters), FormatBytes(x.peak_device_bytes).c_str(),
                  x.step_s, x.vs_plain, x.vs_best_single, x.vs_best_written);
    s << line;
  }
  s << "x plain / x best 1p / x best: "
    << (r.options.scale == "patch" ? "patch voxels" : "parameters")
    << " against plain single-process, the best single-process way and the best way, each as "
       "written (not lean)\n";
  return s.str();
}

}  // namespace up::bench
