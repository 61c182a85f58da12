// A TorchScript bundle (model.kind = torchscript): a folder written by
// scripts/export_unet.py holding one file per level of a U-Net and a
// manifest.json that lists them:
//
//   encoder[i]  x -> x, i = 0..L; encoder[i]'s output is skip i, encoder[L]
//               is the bottleneck;
//   decoder[i]  (x, skip i) -> x, i = L-1..0 (run deepest first);
//   heads       x at decoder level i -> logits at that resolution (level 0
//               always; more with deep supervision).
//
// For the manifest's example input, every level's input and output shapes;
// for every parameter and buffer its name in the level's file and its key(s)
// in the user's original model (what `export` writes).
//
// Torch-free: the launcher reads and checks a bundle (every file's size and
// SHA-256, and that each level's inputs are the outputs of the levels before
// it) before it starts any process. Loading the files is the stages' (see
// common/model/script_level.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace up {

struct BundleTensor {
  std::string name;  // in the level's file, e.g. "conv1.conv.weight"
  std::vector<int64_t> shape;
  std::string dtype;              // "float32", "int64", ...
  bool buffer = false;            // a buffer (running statistics, ...), not a parameter
  std::vector<std::string> keys;  // in the user's model's state dict (one or more)
};

struct BundleLevel {
  std::string file;  // relative to the bundle, e.g. "encoder0.pt"
  int64_t bytes = 0;
  std::string sha256;  // lower-case hex
  std::string method;  // script | trace
  int level = 0;       // which level (encoder: i; decoder: the skip it takes; head: its level)
  std::vector<std::vector<int64_t>> inputs;  // example shapes, (N, C, *S) each
  std::vector<int64_t> output;
  std::vector<BundleTensor> state;
};

struct TorchscriptBundle {
  std::string dir;     // absolute
  std::string source;  // what it was exported from, e.g. "monai.networks.nets.dynunet.DynUNet"
  // How the unsplit model is built ("MODULE:CALLABLE" and its keyword
  // arguments as JSON), when the exporter was told: for bench's Python peer.
  std::string factory;
  std::string factory_kwargs;
  int dims = 2;
  int in_channels = 1;
  int num_classes = 2;
  std::vector<int64_t> example;      // (N, C, *S)
  std::vector<BundleLevel> encoder;  // encoder[i], i = 0..L (L: the bottleneck)
  std::vector<BundleLevel> decoder;  // decoder[i] takes skip i, i = 0..L-1
  std::vector<BundleLevel> heads;    // by level, ascending; heads[0] is level 0

  int levels() const { return static_cast<int>(decoder.size()); }
  // The head at `level`, or nullptr.
  const BundleLevel* HeadAt(int level) const;
  // Every level's downsampling per axis against the example (scale[L]: the bottleneck).
  std::vector<std::vector<int>> Scale() const;
};

inline constexpr const char* kBundleManifest = "manifest.json";
inline constexpr const char* kBundleFormat = "unet-pipeline-torchscript";
inline constexpr int kBundleVersion = 1;

// Reads DIR/manifest.json and checks it against the files: UsageError
// ("config: model.path = 'DIR': ...", one line naming the file and the
// mismatch) when the folder or manifest is missing or malformed, a file's
// size or SHA-256 differs from the manifest, or a level's inputs are not the
// outputs of the levels that feed it.
TorchscriptBundle ReadTorchscriptBundle(const std::string& dir);

}  // namespace up
