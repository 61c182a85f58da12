// The manifest of a checkpoint (`checkpoints/step-N/manifest.json`): what the
// writer (CommitCheckpoint) and the reader (FindLatestCheckpoint) share.
//
//   {"format":"unet-pipeline-checkpoint","version":1,"step":N,
//    "model_signature":"<64 hex>","config_sha256":"<64 hex>",
//    "files":{"encoder.pt":{"bytes":B,"sha256":"<64 hex>"},...}}
//
// ParseManifest trusts nothing in the text: its size, every field's type and
// range, the file names (no path separators) and the number of files are
// checked, and a problem is a RuntimeError("<what> is <value>, expected
// <what>"). VerifyCheckpointFiles compares each file's size with the manifest
// before reading it, then its sha256. Torch-free; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace up {

inline constexpr const char* kManifestFormat = "unet-pipeline-checkpoint";
inline constexpr int kManifestVersion = 1;
inline constexpr size_t kMaxManifestBytes = 64 << 10;
inline constexpr size_t kMaxManifestFiles = 16;

struct ManifestFile {
  std::string name;  // a plain file name in the checkpoint folder
  uint64_t bytes = 0;
  std::string sha256;  // 64 lowercase hex digits
};

struct CheckpointManifest {
  int64_t step = 0;
  std::string model_signature;
  std::string config_sha256;  // ConfigHash of the run's config (config_file.h)
  std::vector<ManifestFile> files;
};

std::string ManifestJson(const CheckpointManifest& manifest);
CheckpointManifest ParseManifest(const std::string& text);

// The step of a folder named "step-N" (N: 1 to 18 digits), else -1.
int64_t StepOfCheckpointDir(const std::string& name);

// Empty when every file of `manifest` in `dir` has the size and sha256 the
// manifest says; otherwise which file is missing, truncated or corrupt.
std::string VerifyCheckpointFiles(const std::string& dir, const CheckpointManifest& manifest);

}  // namespace up
