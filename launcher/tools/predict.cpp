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
#include "common/nifti_io.h"
#include "common/png_io.h"
#include "launcher/tools/trained_model.h"

namespace up {
namespace {

namespace fs = std::filesystem;

bool IsCase(const fs::path& dir) { return BratsFile(dir.string(), "flair").has_value(); }

// `x` (N, C, *S) zero-padded at the end of each spatial axis to a multiple of `m`.
// x: (N, C, *S); multiple: one entry per spatial axis.
torch::Tensor PadToMultiple(const torch::Tensor& x, const std::vector<int>& multiple) {
  std::vector<int64_t> pad;  // constant_pad_nd wants the last axis first
  for (int64_t d = x.dim() - 1; d >= 2; --d) {
    const int64_t m = multiple[static_cast<size_t>(d - 2)];
    pad.push_back(0);
    pad.push_back((m - x.size(d) % m) % m);
  }
  return torch::constant_pad_nd(x, pad, 0);
}

// Class per voxel (*S) uint8 for one input (1, C, *S): pad, run, crop, argmax.
torch::Tensor PredictClasses(TrainedModel& model, const torch::Tensor& input,
                             const torch::Device& device) {
  const std::vector<int> multiple = PatchMultiple(model.config.model);
  torch::Tensor logits = model.Logits(PadToMultiple(input, multiple).to(device));  // (1, K, *S')
  for (int64_t d = 2; d < input.dim(); ++d) logits = logits.narrow(d, 0, input.size(d));
  return logits.argmax(1)[0].to(torch::kCPU, torch::kUInt8).contiguous();  // (*S)
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
               const torch::Device& device) {
  const PngImage img = ReadPng(path);
  const int expected = model.config.model.in_channels;
  if (img.channels != expected) {
    throw UsageError("'" + path + "' has " + std::to_string(img.channels) +
                     " channels but the model was trained on " + std::to_string(expected) +
                     " (model.in_channels); give images like the training images");
  }
  const torch::Tensor classes =
      PredictClasses(model, ImageTensor(img).unsqueeze(0), device);  // (H, W)
  const std::string stem = fs::path(path).stem().string();
  WriteMaskAndOverlay(out, stem, img, classes);
  LogInfo(Str(fs::path(path).filename().string(), ": ", img.width, "x", img.height, ", classes ",
              ClassShares(classes, model.config.model.num_classes)));
}

void Predict3d(TrainedModel& model, const std::string& case_dir, const fs::path& out,
               const torch::Device& device) {
  const BratsCase c = LoadBratsCase(case_dir, /*with_labels=*/false);
  const torch::Tensor classes = PredictClasses(model, c.image.unsqueeze(0), device);  // (D, H, W)
  const std::string name = fs::path(case_dir).filename().string();

  Volume seg;  // the whole prediction as BraTS labels
  seg.dims = {classes.size(2), classes.size(1), classes.size(0)};
  seg.spacing = c.spacing;
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
  LogInfo(Str(name, ": ", seg.dims[0], "x", seg.dims[1], "x", seg.dims[2], ", classes ",
              ClassShares(classes, model.config.model.num_classes)));
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
      cxxopts::value<std::string>())("h,help", "this help");
  const auto parsed = ParseCommandLine(options, argc, argv, "unet-pipeline predict --help");
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  if (!args.count("checkpoint") || !args.count("input") || !args.count("out"))
    throw UsageError("predict needs --checkpoint DIR, --input PATH and --out DIR");
  InitLogging("predict", LogLevel::kInfo);

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
  LogInfo(Str("model from ", model.checkpoint_dir, " (step ", model.step, ") on ", device.str(),
              "; ", inputs.size(), " input", inputs.size() == 1 ? "" : "s"));
  for (const std::string& input : inputs) {
    if (dims == 2) {
      Predict2d(model, input, out, device);
    } else {
      Predict3d(model, input, out, device);
    }
  }
  std::cout << "wrote " << inputs.size() << (dims == 2 ? " masks" : " segmentations")
            << " and overlays to " << out.string() << "\n";
  return 0;
}

}  // namespace up
