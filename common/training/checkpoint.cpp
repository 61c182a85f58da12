// See checkpoint.h.
#include "common/training/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>

#include "common/base/errors.h"
#include "common/base/fs_util.h"
#include "common/base/sha256.h"
#include "common/config/config_file.h"
#include "common/layout/pipeline_layout.h"
#include "common/model/unet.h"
#include "common/run/checkpoint_manifest.h"
#include "common/training/stage_optimizer.h"

namespace up {
namespace {

namespace fs = std::filesystem;
constexpr const char* kManifest = "manifest.json";

std::string FileSha256(const std::string& path) { return Sha256Hex(ReadFile(path)); }

}  // namespace

std::string ModelSignature(const ModelConfig& m) {
  std::ostringstream s;
  s << "dims=" << m.dims << ";in=" << m.in_channels << ";classes=" << m.num_classes
    << ";norm=" << NameOf(m.norm) << ";groups=" << (m.norm == Norm::kGroup ? m.groups : 0)
    << ";features=";
  for (int f : m.features) s << f << ",";
  return Sha256Hex(s.str());
}

std::vector<std::string> StageFileNames(const Config& config) {
  std::vector<std::string> out;
  for (const StageSpec& s : ResolveLayout(config).stages) out.push_back(s.Key() + ".pt");
  return out;
}

void CheckStageFiles(const std::string& dir, const std::vector<std::string>& files) {
  std::string missing, present;
  for (const std::string& f : files) {
    if (!fs::exists(fs::path(dir) / f)) missing += (missing.empty() ? "" : ", ") + f;
  }
  if (missing.empty()) return;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() == ".pt") present += (present.empty() ? "" : ", ") + name;
  }
  throw UsageError("checkpoint '" + dir + "' holds " +
                   (present.empty() ? "no stage file" : present) + ", not " + missing +
                   ": it was written by a run in other stages (pipeline.encoder_parts, "
                   "pipeline.decoder_parts, pipeline.cuts, --single-process); resume with the "
                   "stages it was written by");
}

void LoadWholeModel(const Config& config, const std::string& dir, UNetEncoderImpl& encoder,
                    UNetDecoderImpl& decoder) {
  auto load = [&](const std::string& file, torch::nn::Module& module) {
    StageOptimizer scratch(module, config.train);
    LoadStageFile((fs::path(dir) / file).string(), module, scratch.optimizer());
  };
  if (fs::exists(fs::path(dir) / "encoder.pt") && fs::exists(fs::path(dir) / "decoder.pt")) {
    load("encoder.pt", encoder);
    load("decoder.pt", decoder);
    return;
  }
  const PipelineLayout layout = ResolveLayout(config);
  std::vector<std::string> files;
  for (const StageSpec& s : layout.stages) files.push_back(s.Key() + ".pt");
  CheckStageFiles(dir, files);
  torch::NoGradGuard no_grad;
  for (const StageSpec& s : layout.stages) {
    std::shared_ptr<torch::nn::Module> part;
    if (s.encoder) {
      part = MakeEncoderPart(config, s.lo, s.hi).ptr();
    } else {
      part = MakeDecoderPart(config, s.lo, s.hi).ptr();
    }
    load(s.Key() + ".pt", *part);
    std::map<std::string, torch::Tensor> whole;
    for (auto& [name, t] : NamedState(s.encoder ? static_cast<torch::nn::Module&>(encoder)
                                                : static_cast<torch::nn::Module&>(decoder)))
      whole[name] = t;
    for (const auto& [name, t] : NamedState(*part)) whole.at(name).copy_(t);
  }
}

void SaveStageFile(const std::string& path, torch::nn::Module& module,
                   torch::optim::Optimizer& optimizer, int64_t step, const LossScale* loss_scale) {
  torch::serialize::OutputArchive archive;
  torch::serialize::OutputArchive module_archive;
  module.save(module_archive);
  archive.write("module", module_archive);
  torch::serialize::OutputArchive optimizer_archive;
  optimizer.save(optimizer_archive);
  archive.write("optimizer", optimizer_archive);
  archive.write("step", torch::tensor(step, torch::kInt64));
  archive.write("rng", at::detail::getDefaultCPUGenerator().get_state());
  if (loss_scale) {
    archive.write("loss_scale", torch::tensor(loss_scale->scale, torch::kFloat64));
    archive.write("loss_scale_growth", torch::tensor(loss_scale->growth_tracker, torch::kInt64));
  }
  // Serialized in memory, then written by WriteFileAtomic: a full disk or any
  // other write error is one clear RuntimeError naming the file, and leaves
  // no partial file under the final name.
  std::ostringstream bytes;
  archive.save_to(bytes);
  WriteFileAtomic(path, bytes.str());
}

int64_t LoadStageFile(const std::string& path, torch::nn::Module& module,
                      torch::optim::Optimizer& optimizer, LossScale* loss_scale) {
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path);
    torch::serialize::InputArchive module_archive;
    archive.read("module", module_archive);
    // Module::load replaces a tensor of another shape silently: check shapes.
    std::vector<std::vector<int64_t>> shapes;
    for (const auto& t : NamedState(module)) shapes.push_back(t.second.sizes().vec());
    module.load(module_archive);
    size_t i = 0;
    for (const auto& [name, t] : NamedState(module)) {
      if (t.sizes().vec() != shapes[i++]) {
        throw UsageError("checkpoint file '" + path + "' does not fit this model: '" + name +
                         "' has shape " + c10::str(t.sizes()) +
                         " in the file; resume with the config the run was started with");
      }
    }
    torch::serialize::InputArchive optimizer_archive;
    archive.read("optimizer", optimizer_archive);
    optimizer.load(optimizer_archive);
    torch::Tensor step, rng;
    archive.read("step", step);
    archive.read("rng", rng);
    {
      at::Generator gen = at::detail::getDefaultCPUGenerator();
      gen.set_state(rng);
    }
    torch::Tensor scale, growth;
    if (loss_scale && archive.try_read("loss_scale", scale) &&
        archive.try_read("loss_scale_growth", growth)) {
      loss_scale->scale = scale.item<double>();
      loss_scale->growth_tracker = growth.item<int64_t>();
    }
    return step.item<int64_t>();
  } catch (const c10::OutOfMemoryError&) {
    throw;  // the file is fine; the device is full (out_of_memory.h says so)
  } catch (const c10::Error& e) {
    std::string what = e.what_without_backtrace();
    what = what.substr(0, what.find('\n'));
    throw UsageError("checkpoint file '" + path + "' does not fit this model: " + what);
  }
}

std::string BeginCheckpoint(const std::string& run_dir, int64_t step) {
  const fs::path staging =
      fs::path(run_dir) / "checkpoints" / (".step-" + std::to_string(step) + ".staging");
  std::error_code ec;
  fs::remove_all(staging, ec);
  fs::create_directories(staging);
  return staging.string();
}

StagingCleanup::~StagingCleanup() {
  std::error_code ec;
  fs::remove_all(staging_, ec);  // a no-op once committed (renamed away)
}

std::string CommitCheckpoint(const std::string& run_dir, const std::string& staging, int64_t step,
                             const std::vector<std::string>& files, const Config& config) {
  CheckpointManifest manifest;
  manifest.step = step;
  manifest.model_signature = ModelSignature(config.model);
  manifest.config_sha256 = ConfigHash(config);
  for (const std::string& name : files) {
    const std::string path = (fs::path(staging) / name).string();
    manifest.files.push_back({name, static_cast<uint64_t>(fs::file_size(path)), FileSha256(path)});
  }
  WriteFileAtomic((fs::path(staging) / kManifest).string(), ManifestJson(manifest) + "\n");

  const fs::path root = fs::path(run_dir) / "checkpoints";
  const fs::path final_dir = root / ("step-" + std::to_string(step));
  std::error_code ec;
  fs::remove_all(final_dir, ec);  // a re-run of the same step after resume
  fs::rename(staging, final_dir);
  FsyncPath(root.string());

  // Keep the newest `keep` checkpoints.
  std::vector<int64_t> steps;
  for (const auto& e : fs::directory_iterator(root)) {
    const int64_t s = StepOfCheckpointDir(e.path().filename().string());
    if (s >= 0) steps.push_back(s);
  }
  std::sort(steps.rbegin(), steps.rend());
  for (size_t i = config.checkpoint.keep; i < steps.size(); ++i) {
    fs::remove_all(root / ("step-" + std::to_string(steps[i])), ec);
  }
  return final_dir.string();
}

std::string KeepBestCheckpoint(const std::string& run_dir, int64_t step) {
  const fs::path root = fs::path(run_dir) / "checkpoints";
  const fs::path source = root / ("step-" + std::to_string(step));
  const std::string name = "best-" + std::to_string(step);
  const fs::path target = root / name;
  std::error_code ec;
  if (!fs::exists(target / kManifest, ec)) {
    const fs::path staging = root / (".best-" + std::to_string(step) + ".staging");
    fs::remove_all(staging, ec);
    fs::create_directories(staging);
    StagingCleanup cleanup(staging.string());
    for (const auto& e : fs::directory_iterator(source)) {
      const fs::path to = staging / e.path().filename();
      fs::create_hard_link(e.path(), to, ec);
      if (ec) fs::copy_file(e.path(), to);
    }
    FsyncPath(staging.string());
    fs::remove_all(target, ec);
    fs::rename(staging, target);
  }
  const fs::path link = root / ".best.link";
  fs::remove(link, ec);
  fs::create_directory_symlink(name, link);
  fs::rename(link, root / "best");  // atomic: the old link or the new one
  FsyncPath(root.string());
  for (const auto& e : fs::directory_iterator(root)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("best-", 0) == 0 && n != name) fs::remove_all(e.path(), ec);
  }
  return (root / "best").string();
}

std::optional<CheckpointRef> FindLatestCheckpoint(
    const std::string& run_dir, const Config& config,
    const std::function<void(const std::string&)>& warn) {
  const fs::path root = fs::path(run_dir) / "checkpoints";
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return std::nullopt;
  std::vector<std::pair<int64_t, fs::path>> found;
  for (const auto& e : fs::directory_iterator(root)) {
    const int64_t s = StepOfCheckpointDir(e.path().filename().string());
    if (s >= 0 && e.is_directory()) found.emplace_back(s, e.path());
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  const std::string signature = ModelSignature(config.model);
  for (const auto& [step, dir] : found) {
    const fs::path manifest_path = dir / kManifest;
    CheckpointManifest manifest;
    try {
      const uint64_t size = fs::file_size(manifest_path);
      if (size > kMaxManifestBytes) {
        throw RuntimeError("manifest is " + std::to_string(size) + " bytes, expected at most " +
                           std::to_string(kMaxManifestBytes));
      }
      manifest = ParseManifest(ReadFile(manifest_path.string()));
      if (manifest.step != step) {
        throw RuntimeError("manifest is for step " + std::to_string(manifest.step));
      }
    } catch (const std::exception& e) {
      warn("checkpoint '" + dir.string() + "' skipped: unreadable manifest (" + e.what() + ")");
      continue;
    }
    if (manifest.model_signature != signature) {
      throw UsageError("checkpoint '" + dir.string() +
                       "' was written for a different model (model.* differs from this config); "
                       "resume with the run's own config or start a new run");
    }
    const std::string problem = VerifyCheckpointFiles(dir.string(), manifest);
    if (problem.empty()) return CheckpointRef{step, dir.string()};
    warn("checkpoint '" + dir.string() + "' skipped: " + problem);
  }
  return std::nullopt;
}

}  // namespace up
