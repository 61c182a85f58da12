// See inspect.h.
#include "launcher/tools/inspect.h"

#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <iostream>

#include "common/base/errors.h"
#include "common/base/fs_util.h"
#include "common/model/tensor_file.h"
#include "common/run/recording_format.h"

namespace up {
namespace {

namespace fs = std::filesystem;

// Every tensor of a LibTorch archive, nested archives as "outer.inner".
void WalkArchive(torch::serialize::InputArchive& archive, const std::string& prefix) {
  for (const std::string& key : archive.keys()) {
    const std::string name = prefix.empty() ? key : prefix + "." + key;
    c10::IValue value;
    if (!archive.try_read(key, value)) continue;
    if (value.isTensor()) {
      std::cout << "  " << DescribeTensor(name, value.toTensor()) << "\n";
    } else if (value.isObject()) {
      torch::serialize::InputArchive inner;
      if (archive.try_read(key, inner)) WalkArchive(inner, name);
    }
  }
}

// A LibTorch archive (a TorchScript zip) lists code and constants beside its
// data; a pickled dict does not.
bool IsPickle(const std::string& path) {
  return ReadFile(path).find("constants.pkl") == std::string::npos;
}

void InspectFile(const std::string& path) {
  if (IsPickle(path)) {
    std::cout << path << ": tensor file (torch.load reads it)\n";
    for (const auto& [name, t] : LoadTensorFile(path))
      std::cout << "  " << DescribeTensor(name, t) << "\n";
    return;
  }
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path);
  } catch (const c10::Error& e) {
    std::string what = e.what_without_backtrace();
    throw UsageError("'" + path + "' is neither a tensor file nor a stage file: " +
                     what.substr(0, what.find('\n')));
  }
  torch::Tensor step;
  std::cout << path << ": stage file (LibTorch archive)";
  if (archive.try_read("step", step)) std::cout << ", step " << step.item<int64_t>();
  std::cout << "\n";
  WalkArchive(archive, "");
}

void InspectCheckpoint(const std::string& dir) {
  const YAML::Node manifest = YAML::Load(ReadFile((fs::path(dir) / "manifest.json").string()));
  std::cout << dir << ": checkpoint of step " << manifest["step"].as<std::string>("?") << "\n";
  for (const auto& file : manifest["files"])
    InspectFile((fs::path(dir) / file.first.as<std::string>()).string());
}

void InspectRecording(const std::string& dir) {
  const recording::Index index = recording::ReadIndex(dir);
  std::cout << dir << ": recording of steps";
  for (int64_t s : index.steps) std::cout << " " << s;
  std::cout << " (0-based), " << index.micro_batches << " micro-batches, config "
            << (fs::path(dir) / recording::kConfigFile).string() << "\n";
  for (const recording::Entry& e : index.entries) {
    if (e.kind == "loss") {
      std::cout << "loss step " << e.step << " micro-batch " << e.micro_batch << ": " << e.value
                << "\n";
    } else {
      InspectFile((fs::path(dir) / e.file).string());
    }
  }
}

}  // namespace

int InspectMain(int argc, char** argv) {
  if (argc != 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::cout << "usage: unet-pipeline inspect PATH\n"
                 "  PATH: a recording folder, a checkpoint folder (checkpoints/step-N), a stage\n"
                 "  file or a recorded tensor file"
              << std::endl;
    return argc == 2 ? 0 : 2;
  }
  const std::string path = argv[1];
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    if (fs::exists(fs::path(path) / recording::kIndexFile)) {
      InspectRecording(path);
    } else if (fs::exists(fs::path(path) / "manifest.json")) {
      InspectCheckpoint(path);
    } else {
      throw UsageError("'" + path + "' holds neither index.json (a recording) nor manifest.json " +
                       "(a checkpoint)");
    }
  } else if (fs::exists(path, ec)) {
    InspectFile(path);
  } else {
    throw UsageError("inspect: '" + path + "' does not exist");
  }
  std::cout.flush();
  return 0;
}

}  // namespace up
