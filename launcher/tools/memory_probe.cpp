// See memory_probe.h.
#include "launcher/tools/memory_probe.h"

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "common/base/child_process.h"
#include "common/base/errors.h"
#include "common/base/fs_util.h"
#include "common/config/config_file.h"
#include "common/layout/model_geometry.h"
#include "common/layout/pipeline_layout.h"
#include "launcher/stage_binary.h"

namespace up {
namespace {

namespace fs = std::filesystem;

// The file, or "" when it is not there (a probe that failed early).
std::string ReadIfThere(const std::string& path) {
  return fs::exists(path) ? ReadFile(path) : std::string();
}
// The number at `"outer":{..."key":N...}` (no deeper nesting inside), or -1.
int64_t NestedNumber(const std::string& json, const std::string& outer, const std::string& key) {
  const size_t at = json.find("\"" + outer + "\":{");
  if (at == std::string::npos) return -1;
  const size_t end = json.find('}', at);
  const size_t k = json.find("\"" + key + "\":", at);
  if (k == std::string::npos || k > end) return -1;
  return std::stoll(json.substr(k + key.size() + 3));
}

// The `{...}` after `"key":` (empty when missing).
std::string Object(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\":{");
  if (at == std::string::npos) return "";
  const size_t start = at + key.size() + 3;
  int depth = 0;
  for (size_t i = start; i < json.size(); ++i) {
    if (json[i] == '{') ++depth;
    if (json[i] == '}' && --depth == 0) return json.substr(start, i - start + 1);
  }
  return "";
}

// The sum of the numbers in a flat `{"a":N,"b":M}` (peak_rss_bytes), or -1.
int64_t SumOfNumbers(const std::string& object) {
  if (object.empty()) return -1;
  int64_t sum = 0;
  for (size_t at = object.find("\":"); at != std::string::npos; at = object.find("\":", at + 2))
    sum += std::stoll(object.substr(at + 2));
  return sum;
}

std::string LastLine(const std::string& text) {
  std::istringstream lines(text);
  std::string last;
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) last = line;
  return last;
}

// A private folder under /tmp for the probes' runs, removed with them.
class ProbeFolder {
 public:
  ProbeFolder() {
    std::string tmpl = (fs::temp_directory_path() / "up-plan-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw RuntimeError("plan: cannot create a folder in /tmp");
    path_ = tmpl;
  }
  ~ProbeFolder() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ProbeFolder(const ProbeFolder&) = delete;
  ProbeFolder& operator=(const ProbeFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// One probe's figures: each process's peak in its forward/backward work and
// in its optimizer steps apart (the first grows with the patch, the second
// hardly: at a small patch it can be the larger, so one line through the
// overall peaks would bend), and what each stage holds between turns.
struct Point {
  double voxels = 0;
  std::vector<int64_t> compute;  // per process: the trainer, or each stage in pipeline order
  std::vector<int64_t> step;
  std::vector<int64_t> residue;
  int64_t rss = 0;  // every process's peak resident size, summed
};

int64_t Extrapolate(double v1, int64_t y1, double v2, int64_t y2, double v) {
  const double slope = (static_cast<double>(y2) - y1) / (v2 - v1);
  return std::llround(y1 + slope * (v - v1));
}

std::string List(const std::vector<int>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out;
}

}  // namespace

bool ProbesOnOneThread(const Config& config) { return config.train.precision == Precision::kBf16; }

std::vector<std::vector<int>> ProbePatches(const Config& config, int64_t max_voxels) {
  // Halving the largest axis that can shrink (down to a multiple of the
  // bottleneck's downsampling on it, at least twice that so the bottleneck
  // keeps two voxels a side) walks down from the config's patch; the probes
  // are the largest consecutive pair within max_voxels.
  const std::vector<int> units = PatchMultiple(config.model);
  auto voxels = [](const std::vector<int>& p) {
    int64_t v = 1;
    for (int s : p) v *= s;
    return v;
  };
  std::vector<std::vector<int>> walk{config.data.size};
  for (;;) {
    std::vector<int> next = walk.back();
    int axis = -1;
    for (size_t d = 0; d < next.size(); ++d) {
      const int unit = units[d];
      const int smaller = std::max(2 * unit, next[d] / 2 / unit * unit);
      if (smaller < next[d] && (axis < 0 || next[d] > next[axis])) axis = static_cast<int>(d);
    }
    if (axis < 0) break;
    next[axis] = std::max(2 * units[axis], next[axis] / 2 / units[axis] * units[axis]);
    walk.push_back(next);
  }
  size_t i = 0;
  while (i + 1 < walk.size() && voxels(walk[i]) > max_voxels) ++i;
  if (i + 1 < walk.size()) return {walk[i + 1], walk[i]};
  std::vector<int> larger = walk[i];  // the config's patch cannot shrink: one larger
  larger.back() *= 2;                 // a multiple still
  return {walk[i], larger};
}

std::vector<ProbedBytes> ProbeTensorBytes(const std::string& config_path,
                                          const std::vector<std::string>& overrides,
                                          const Config& config, const std::vector<ProbeWay>& ways,
                                          int64_t max_voxels) {
  const std::string exe = StageBinary("unet-pipeline");
  // On this machine's CPU whatever the config's devices: tensor bytes are
  // the same figures there, and a shared device with parking is what the
  // pipeline rows assume.
  const std::string device = "cpu";
  const std::vector<std::string> on_cpu{"pipeline.stages.encoder.device=cpu",
                                        "pipeline.stages.decoder.device=cpu",
                                        "pipeline.stages.encoder.node=0",
                                        "pipeline.stages.decoder.node=0",
                                        "pipeline.devices=[]",
                                        "pipeline.nodes=[]",
                                        "pipeline.transport=shm",
                                        "pipeline.schedule=sequential",
                                        "pipeline.lock=auto",
                                        "data.kind=synthetic"};
  const std::vector<std::vector<int>> patches = ProbePatches(config, max_voxels);
  // The pipeline's stages by the keys its summary.json uses.
  std::vector<std::string> stage_keys;
  for (const StageSpec& spec : ResolveLayout(config).stages) stage_keys.push_back(spec.Key());
  double full = 1;
  for (int s : config.data.size) full *= s;
  ProbeFolder folder;
  // nnU-Net's data resolves the model (its plans, channels, labels): probe
  // the resolved config, whose dump holds the architecture, on synthetic data.
  std::string probe_config = config_path;
  std::vector<std::string> base = overrides;
  if (config.data.kind == DataKind::kNnunet) {
    Config resolved = config;
    resolved.data.kind = DataKind::kSynthetic;
    resolved.data.augment.clear();
    probe_config = folder.path() + "/config.yaml";
    WriteFileAtomic(probe_config, DumpConfig(resolved));
    base.clear();
  }
  std::vector<ProbedBytes> out;
  int n = 0;
  for (const ProbeWay& way : ways) {
    Point points[2];
    for (int i = 0; i < 2; ++i) {
      const std::string run = folder.path() + "/run" + std::to_string(++n);
      std::vector<std::string> args{"train", "--config", probe_config, "--out", run, "-q"};
      if (way.single_process) args.push_back("--single-process");
      std::vector<std::string> sets = base;
      sets.insert(sets.end(), on_cpu.begin(), on_cpu.end());
      sets.insert(sets.end(), way.sets.begin(), way.sets.end());
      sets.insert(sets.end(), {"train.steps=2", "train.warmup_steps=0", "checkpoint.every=0",
                               "train.memory_budget=null", "data.size=[" + List(patches[i]) + "]"});
      if (ProbesOnOneThread(config)) sets.push_back("train.threads=1");
      for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
      ChildOptions options;
      options.name = "plan probe";
      options.executable = exe;
      options.args = args;
      options.output_file = run + ".log";
      // Freed blocks go back to the kernel, so each process's peak RSS is
      // what it needs at once, not what the keep policy holds between turns:
      // a real run keeps blocks only while the machine has room for them
      // (host_memory_guard.h). Tensor bytes are counted the same either way.
      options.extra_env = {{"UP_GLIBC_MALLOC_DEFAULTS", "1"}};
      ChildProcess child = ChildProcess::Spawn(options);
      const ExitStatus status =
          child.Wait(std::chrono::steady_clock::now() + std::chrono::hours(1));
      const std::string summary = ReadIfThere(run + "/summary.json");
      if (!status.success() || summary.empty()) {
        throw RuntimeError("plan: measuring " + way.name + " at patch " + List(patches[i]) +
                           " failed (" + status.Describe() +
                           "): " + LastLine(ReadIfThere(run + ".log")));
      }
      Point& p = points[i];
      p.voxels = 1;
      for (int v : patches[i]) p.voxels *= v;
      const std::vector<std::string> who =
          way.single_process ? std::vector<std::string>{"trainer"} : stage_keys;
      p.rss = SumOfNumbers(Object(summary, "peak_rss_bytes"));
      if (p.rss < 0) throw RuntimeError("plan: " + run + "/summary.json lacks peak_rss_bytes");
      const std::string phases = Object(summary, "phase_peak_tensor_bytes");
      for (const std::string& k : who) {
        p.compute.push_back(NestedNumber(phases, k, "compute"));
        p.step.push_back(NestedNumber(phases, k, "step"));
        p.residue.push_back(way.single_process ? 0
                                               : NestedNumber(summary, "residue_tensor_bytes", k));
        if (p.compute.back() < 0 || p.step.back() < 0 || p.residue.back() < 0)
          throw RuntimeError("plan: " + run + "/summary.json lacks the " + k + "'s peaks");
      }
    }
    ProbedBytes b;
    auto line = [&](std::vector<int64_t> Point::*field, size_t k) {
      return Extrapolate(points[0].voxels, (points[0].*field)[k], points[1].voxels,
                         (points[1].*field)[k], full);
    };
    // Each process's peak: the larger phase at the config's patch.
    auto peak = [&](size_t k) { return std::max(line(&Point::compute, k), line(&Point::step, k)); };
    if (way.single_process) {
      b.device = peak(0);
    } else {
      // The device's peak is a turn's: one stage's peak plus what the others
      // hold parked then.
      for (size_t k = 0; k < stage_keys.size(); ++k) b.stages.emplace_back(stage_keys[k], peak(k));
      for (size_t k = 0; k < stage_keys.size(); ++k) {
        int64_t others = 0;
        for (size_t o = 0; o < stage_keys.size(); ++o)
          if (o != k) others += line(&Point::residue, o);
        b.device = std::max(b.device, b.stages[k].second + others);
      }
    }
    b.host = Extrapolate(points[0].voxels, points[0].rss, points[1].voxels, points[1].rss, full);
    out.push_back(b);
  }
  return out;
}

}  // namespace up
