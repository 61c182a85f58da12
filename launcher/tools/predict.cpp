// See predict.h.
#include "launcher/tools/predict.h"

#include <algorithm>
#include <cxxopts.hpp>
#include <filesystem>
#include <iostream>

#include "common/command_line.h"
#include "common/data/dataset.h"
#include "common/data/nifti_dataset.h"
#include "common/errors.h"
#include "common/logging.h"
#include "common/mask_overlay.h"
#include "common/model/device_memory.h"
#include "common/model/sliding_window.h"
#include "common/model/tensor_file.h"
#include "common/nifti_io.h"
#include "common/png_io.h"
#include "launcher/tools/trained_model.h"

namespace up {
namespace {

namespace fs = std::filesystem;

bool IsCase(const fs::path& dir) { return BratsFile(dir.string(), "flair").has_value(); }

// How one input is predicted: the window and the options of the command.
struct PredictOptions {
  SlidingWindowOptions window;
  bool save_logits = false;
};

// Blended logits (K, *S) float32 on the CPU for one input (1, C, *S): the
// training patch slid over it (sliding_window.h).
torch::Tensor PredictLogits(TrainedModel& model, const torch::Tensor& input,
                            const torch::Device& device, const PredictOptions& options) {
  const WindowNet net = [&model](const torch::Tensor& windows) { return model.Logits(windows); };
  return SlidingWindowLogits(net, input, options.window, device)[0].to(torch::kCPU);
}

// Class per voxel (*S) uint8 from logits (K, *S).
torch::Tensor Classes(const torch::Tensor& logits) {
  return logits.argmax(0).to(torch::kUInt8).contiguous();
}

// NAME_logits.pt: the blended logits and the input as the network saw it.
void SaveLogits(const fs::path& out, const std::string& stem, const torch::Tensor& input,
                const torch::Tensor& logits) {
  SaveTensorFile((out / (stem + "_logits.pt")).string(),
                 {{"logits", logits}, {"input", input[0]}});  // (K, *S), (C, *S)
}

std::string WindowsText(const std::vector<int64_t>& spatial, const PredictOptions& options) {
  const int64_t n = WindowCount(spatial, options.window);
  return Str(n, n == 1 ? " window" : " windows", options.window.mirror ? " (mirrored)" : "");
}

std::vector<uint8_t> Bytes(const torch::Tensor& t) {
  const uint8_t* p = t.data_ptr<uint8_t>();
  return std::vector<uint8_t>(p, p + t.numel());
}

std::string ClassShares(const torch::Tensor& classes, int num_classes) {
  std::string out;
  const torch::Tensor counts =
      torch::bincount(classes.flatten().to(torch::kInt64), {}, num_classes);
  for (int k = 0; k < num_classes; ++k) {
    char part[48];
    std::snprintf(part, sizeof part, "%s%d: %.1f%%", k ? ", " : "", k,
                  100.0 * counts[k].item<int64_t>() / classes.numel());
    out += part;
  }
  return out;
}

void WriteMaskAndOverlay(const fs::path& out, const std::string& stem, const PngImage& base,
                         const torch::Tensor& classes /* (H, W) uint8 */) {
  const std::vector<uint8_t> mask = Bytes(classes);
  WritePng((out / (stem + "_mask.png")).string(), PngImage{base.width, base.height, 1, mask});
  WritePng((out / (stem + "_overlay.png")).string(), ColourOverlay(base, mask));
}

void Predict2d(TrainedModel& model, const std::string& path, const fs::path& out,
               const torch::Device& device, const PredictOptions& options) {
  const PngImage img = ReadPng(path);
  const int expected = model.config.model.in_channels;
  if (img.channels != expected) {
    throw UsageError("'" + path + "' has " + std::to_string(img.channels) +
                     " channels but the model was trained on " + std::to_string(expected) +
                     " (model.in_channels); give images like the training images");
  }
  const torch::Tensor input = ImageTensor(img).unsqueeze(0);                  // (1, C, H, W)
  const torch::Tensor logits = PredictLogits(model, input, device, options);  // (K, H, W)
  const torch::Tensor classes = Classes(logits);                              // (H, W)
  const std::string stem = fs::path(path).stem().string();
  WriteMaskAndOverlay(out, stem, img, classes);
  if (options.save_logits) SaveLogits(out, stem, input, logits);
  LogInfo(Str(fs::path(path).filename().string(), ": ", img.width, "x", img.height, ", ",
              WindowsText({img.height, img.width}, options), ", classes ",
              ClassShares(classes, model.config.model.num_classes)));
}

void Predict3d(TrainedModel& model, const std::string& case_dir, const fs::path& out,
               const torch::Device& device, const PredictOptions& options) {
  const BratsCase c = LoadBratsCase(case_dir, /*with_labels=*/false);
  const torch::Tensor input = c.image.unsqueeze(0);                           // (1, 4, D, H, W)
  const torch::Tensor logits = PredictLogits(model, input, device, options);  // (K, D, H, W)
  const torch::Tensor classes = Classes(logits);                              // (D, H, W)
  const std::string name = fs::path(case_dir).filename().string();
  if (options.save_logits) SaveLogits(out, name, input, logits);

  Volume seg;  // the whole prediction as BraTS labels, where the input lies
  seg.dims = {classes.size(2), classes.size(1), classes.size(0)};
  seg.spacing = c.spacing;
  seg.space = c.space;
  const torch::Tensor labels = torch::where(classes == 3, torch::full_like(classes, 4), classes);
  const torch::Tensor as_float = labels.to(torch::kFloat32).contiguous();
  seg.voxels.assign(as_float.data_ptr<float>(), as_float.data_ptr<float>() + as_float.numel());
  WriteNifti((out / (name + "_seg.nii.gz")).string(), seg, NiftiStorage::kUInt8);

  // The middle axial slice over the flair channel, scaled to 0..255.
  const int64_t z = classes.size(0) / 2;
  torch::Tensor flair = c.image[0][z];  // (H, W)
  const float lo = flair.min().item<float>(), hi = flair.max().item<float>();
  flair = ((flair - lo) / std::max(hi - lo, 1e-6f) * 255).round().to(torch::kUInt8).contiguous();
  PngImage base{static_cast<int>(flair.size(1)), static_cast<int>(flair.size(0)), 1, Bytes(flair)};
  WriteMaskAndOverlay(out, name, base, classes[z].contiguous());
  LogInfo(Str(name, ": ", seg.dims[0], "x", seg.dims[1], "x", seg.dims[2], ", ",
              WindowsText({classes.size(0), classes.size(1), classes.size(2)}, options),
              ", classes ", ClassShares(classes, model.config.model.num_classes)));
}

torch::Device PickDevice(const std::string& requested, const Config& config) {
  if (!requested.empty()) return ParseDevice(requested, "--device");
  // The device the encoder trained on when this machine has it, else the CPU.
  const std::string& trained_on = config.pipeline.encoder.device;
  if (trained_on != "cpu" && CudaDeviceCount() > 0)
    return ParseDevice(trained_on, "pipeline.stages.encoder.device");
  return torch::Device(torch::kCPU);
}

}  // namespace

std::vector<std::string> ListPredictInputs(const std::string& path, int dims) {
  std::error_code ec;
  const fs::path p(path);
  std::vector<std::string> out;
  if (dims == 2) {
    if (fs::is_regular_file(p, ec)) return {path};
    const fs::path dir = fs::is_directory(p / "images", ec) ? p / "images" : p;
    if (fs::is_directory(dir, ec)) {
      for (const auto& e : fs::directory_iterator(dir))
        if (e.is_regular_file() && e.path().extension() == ".png") out.push_back(e.path().string());
    }
    if (out.empty()) {
      throw UsageError("--input " + path +
                       ": no .png images there; give a PNG file or a folder of them");
    }
  } else {
    if (IsCase(p)) return {path};
    if (fs::is_directory(p, ec)) {
      for (const auto& e : fs::directory_iterator(p))
        if (e.is_directory() && IsCase(e.path())) out.push_back(e.path().string());
    }
    if (out.empty()) {
      throw UsageError("--input " + path +
                       ": no BraTS case there; give a case folder (CASE/CASE_flair.nii.gz, "
                       "_t1, _t1ce, _t2) or a folder of cases");
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

int PredictCommand(int argc, char** argv) {
  cxxopts::Options options("unet-pipeline predict",
                           "Predict masks with a trained U-Net; write masks and colour overlays.");
  options.add_options()("checkpoint", "a run folder or RUN/checkpoints/step-N",
                        cxxopts::value<std::string>())(
      "input", "a PNG or a folder of PNGs (2-D); a BraTS case or a folder of cases (3-D)",
      cxxopts::value<std::string>())("out", "output folder (created)",
                                     cxxopts::value<std::string>())(
      "device", "cpu, cuda or cuda:N (default: the encoder's configured device if present)",
      cxxopts::value<std::string>())(
      "overlap", "fraction of a window its neighbours share, [0, 1) (default 0.5)",
      cxxopts::value<double>()->default_value("0.5"))(
      "mirror", "test-time mirroring: average the logits over every flip of the axes")(
      "sw-batch-size", "windows per forward pass on the device (default 1)",
      cxxopts::value<int>()->default_value("1"))(
      "blend", "how overlapping windows blend: gaussian or constant (default gaussian)",
      cxxopts::value<std::string>()->default_value("gaussian"))(
      "save-logits", "also write NAME_logits.pt: the blended logits and the network's input")(
      "h,help", "this help");
  const auto parsed = ParseCommandLine(options, argc, argv, "unet-pipeline predict --help");
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  if (!args.count("checkpoint") || !args.count("input") || !args.count("out"))
    throw UsageError("predict needs --checkpoint DIR, --input PATH and --out DIR");
  InitLogging("predict", LogLevel::kInfo);
  const double overlap = args["overlap"].as<double>();
  if (!(overlap >= 0 && overlap < 1)) {
    throw UsageError(Str("--overlap ", overlap) +
                     ": must be at least 0 and below 1 (0.5 is nnU-Net's and MONAI's choice)");
  }
  const int sw_batch = args["sw-batch-size"].as<int>();
  if (sw_batch < 1) {
    throw UsageError("--sw-batch-size " + std::to_string(sw_batch) +
                     ": must be at least 1 window per forward pass");
  }
  const std::string blend = args["blend"].as<std::string>();
  if (blend != "gaussian" && blend != "constant")
    throw UsageError("--blend " + blend + ": must be gaussian or constant");

  TrainedModel model = LoadTrainedModel(args["checkpoint"].as<std::string>());
  const int dims = model.config.model.dims;
  const std::vector<std::string> inputs = ListPredictInputs(args["input"].as<std::string>(), dims);
  const fs::path out(args["out"].as<std::string>());
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw UsageError("--out " + out.string() + ": cannot create it: " + ec.message());
  const torch::Device device =
      PickDevice(args.count("device") ? args["device"].as<std::string>() : "", model.config);
  model.encoder->to(device);
  model.decoder->to(device);
  PredictOptions how;
  how.window.window.assign(model.config.data.size.begin(), model.config.data.size.end());
  how.window.overlap = overlap;
  how.window.batch = sw_batch;
  how.window.gaussian = blend == "gaussian";
  how.window.mirror = args.count("mirror") > 0;
  how.save_logits = args.count("save-logits") > 0;
  LogInfo(Str("model from ", model.checkpoint_dir, " (step ", model.step, ") on ", device.str(),
              "; ", inputs.size(), " input", inputs.size() == 1 ? "" : "s"));
  for (const std::string& input : inputs) {
    if (dims == 2) {
      Predict2d(model, input, out, device, how);
    } else {
      Predict3d(model, input, out, device, how);
    }
  }
  std::cout << "wrote " << inputs.size() << (dims == 2 ? " masks" : " segmentations")
            << " and overlays to " << out.string() << "\n";
  return 0;
}

}  // namespace up
