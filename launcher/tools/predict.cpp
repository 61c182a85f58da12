// See predict.h.
#include "launcher/tools/predict.h"

#include <algorithm>
#include <cxxopts.hpp>
#include <filesystem>
#include <iostream>

#include "common/base/command_line.h"
#include "common/base/errors.h"
#include "common/base/logging.h"
#include "common/data/case_cache.h"
#include "common/data/dataset.h"
#include "common/data/nifti_dataset.h"
#include "common/device/device_memory.h"
#include "common/formats/mask_overlay.h"
#include "common/formats/nifti_io.h"
#include "common/formats/png_io.h"
#include "common/model/sliding_window.h"
#include "common/model/tensor_file.h"
#include "common/training/trained_model.h"

namespace up {
namespace {

namespace fs = std::filesystem;

bool IsCase(const fs::path& dir) {
  std::error_code ec;
  return BratsFile(dir.string(), "flair").has_value() || fs::exists(dir / "case.json", ec);
}

// nnU-Net's raw layout (imagesTs/): a case is files CASE_0000.nii.gz,
// CASE_0001.nii.gz, ... one per channel. The case's path prefix
// ("DIR/CASE") when `file` is the first channel of one, else "".
std::string NnunetCasePrefix(const fs::path& file) {
  const std::string name = file.filename().string();
  for (const char* ending : {"_0000.nii.gz", "_0000.nii"}) {
    const size_t n = std::string(ending).size();
    if (name.size() > n && name.compare(name.size() - n, n, ending) == 0)
      return (file.parent_path() / name.substr(0, name.size() - n)).string();
  }
  return "";
}

// The channel files of the nnU-Net case at `prefix`, `channels` of them;
// UsageError naming the first one missing.
std::vector<std::string> NnunetChannelFiles(const std::string& prefix, int channels) {
  const std::string ending =
      fs::exists(prefix + "_0000.nii.gz") ? std::string(".nii.gz") : std::string(".nii");
  std::vector<std::string> files;
  for (int k = 0; k < channels; ++k) {
    char suffix[16];
    std::snprintf(suffix, sizeof suffix, "_%04d", k);
    const std::string path = prefix + suffix + ending;
    if (!fs::exists(path)) {
      char last[16];
      std::snprintf(last, sizeof last, "_%04d", channels - 1);
      throw UsageError("case '" + fs::path(prefix).filename().string() + "' has no channel " +
                       std::to_string(k) + " image '" + path + "'; the model takes " +
                       std::to_string(channels) + " channels (model.in_channels): CASE_0000" +
                       ending + " to CASE" + last + ending);
    }
    files.push_back(path);
  }
  return files;
}

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

// Class per voxel (*S) uint8 from logits (K, *S) (regions painted in order).
torch::Tensor Classes(const torch::Tensor& logits, const ModelConfig& model) {
  return PredictedClasses(logits.unsqueeze(0), model)[0].to(torch::kUInt8).contiguous();
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
  const torch::Tensor classes = Classes(logits, model.config.model);          // (H, W)
  const std::string stem = fs::path(path).stem().string();
  WriteMaskAndOverlay(out, stem, img, classes);
  if (options.save_logits) SaveLogits(out, stem, input, logits);
  LogInfo(Str(fs::path(path).filename().string(), ": ", img.width, "x", img.height, ", ",
              WindowsText({img.height, img.width}, options), ", classes ",
              ClassShares(classes, MaskClasses(model.config.model))));
}

// A 3-D input on its original voxel grid, prepared as training saw it.
struct Volume3d {
  std::string name;
  torch::Tensor image;  // (C, D, H, W) float32, z-scored
  std::array<double, 3> spacing{1, 1, 1};
  NiftiSpace space;
  std::vector<int64_t> label_values;  // class k is written as label [k]
  std::string seg_file;               // the segmentation's file name
};

// A BraTS case folder, one case of a preprocessed cache (its crop pasted
// back into the original grid), or an nnU-Net case (the prefix DIR/CASE of
// its channel files; its segmentation is CASE.nii.gz with labels 0..K-1, as
// nnU-Net names and numbers its predictions).
Volume3d LoadVolume3d(const std::string& path, const ModelConfig& model) {
  Volume3d v;
  v.name = fs::path(path).filename().string();
  v.seg_file = v.name + "_seg.nii.gz";
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    const RawCase raw{v.name, NnunetChannelFiles(path, model.in_channels), ""};
    BratsCase c = LoadRawCase(raw, {}, /*with_labels=*/false);
    v.image = std::move(c.image);
    v.spacing = c.spacing;
    v.space = c.space;
    for (int64_t k = 0; k < MaskClasses(model); ++k) v.label_values.push_back(k);
    v.seg_file = v.name + ".nii.gz";
    return v;
  }
  if (fs::exists(fs::path(path) / "case.json", ec)) {
    const CacheCaseMeta meta = ReadCaseMeta(path);
    const std::string cache = fs::path(path).parent_path().string();
    v.label_values = ReadCacheIndex(cache).label_values;
    const torch::Tensor cropped = ReadNpyTensor((fs::path(path) / "image.npy").string());
    std::vector<int64_t> full{meta.channels};
    full.insert(full.end(), meta.original_shape.begin(), meta.original_shape.end());
    v.image = torch::zeros(full);
    BoxView(v.image, meta.crop_begin, meta.shape).copy_(cropped);
    v.spacing = meta.spacing;
    v.space = meta.space;
    return v;
  }
  BratsCase c = LoadBratsCase(path, /*with_labels=*/false);
  v.image = std::move(c.image);
  v.spacing = c.spacing;
  v.space = c.space;
  v.label_values = kBratsLabels;
  return v;
}

// Predicts inside the box of non-zero voxels (where training cases were
// cropped to) and writes the segmentation on the input's whole grid, with
// its qform and sform; background outside the box.
void Predict3d(TrainedModel& model, const std::string& path, const fs::path& out,
               const torch::Device& device, const PredictOptions& options) {
  const Volume3d v = LoadVolume3d(path, model.config.model);
  std::vector<int64_t> begin, size;
  NonzeroBox(v.image, &begin, &size);
  const torch::Tensor input =
      BoxView(v.image, begin, size).unsqueeze(0).contiguous();                // (1, C, *box)
  const torch::Tensor logits = PredictLogits(model, input, device, options);  // (K, *box)
  if (options.save_logits) SaveLogits(out, v.name, input, logits);
  torch::Tensor classes = torch::zeros(v.image.sizes().slice(1), torch::kUInt8);  // (D, H, W)
  BoxView(classes, begin, size).copy_(Classes(logits, model.config.model));

  Volume seg;  // the labels, where the input lies
  seg.dims = {classes.size(2), classes.size(1), classes.size(0)};
  seg.spacing = v.spacing;
  seg.space = v.space;
  const torch::Tensor values = torch::tensor(v.label_values, torch::kFloat32);
  const torch::Tensor labels = values.index_select(0, classes.flatten().to(torch::kInt64));
  seg.voxels.assign(labels.data_ptr<float>(), labels.data_ptr<float>() + labels.numel());
  WriteNifti((out / v.seg_file).string(), seg, NiftiStorage::kUInt8);

  // The middle axial slice over the first channel, scaled to 0..255.
  const int64_t z = classes.size(0) / 2;
  torch::Tensor base_slice = v.image[0][z];  // (H, W)
  const float lo = base_slice.min().item<float>(), hi = base_slice.max().item<float>();
  base_slice =
      ((base_slice - lo) / std::max(hi - lo, 1e-6f) * 255).round().to(torch::kUInt8).contiguous();
  PngImage base{static_cast<int>(base_slice.size(1)), static_cast<int>(base_slice.size(0)), 1,
                Bytes(base_slice)};
  WriteMaskAndOverlay(out, v.name, base, classes[z].contiguous());
  LogInfo(Str(v.name, ": ", seg.dims[0], "x", seg.dims[1], "x", seg.dims[2], " (box ", size[2], "x",
              size[1], "x", size[0], "), ", WindowsText(size, options), ", classes ",
              ClassShares(classes, MaskClasses(model.config.model))));
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
    if (fs::is_regular_file(p, ec) && !NnunetCasePrefix(p).empty()) return {NnunetCasePrefix(p)};
    if (fs::is_directory(p, ec)) {
      for (const auto& e : fs::directory_iterator(p)) {
        if (e.is_directory() && IsCase(e.path())) out.push_back(e.path().string());
        if (e.is_regular_file() && !NnunetCasePrefix(e.path()).empty())
          out.push_back(NnunetCasePrefix(e.path()));
      }
    }
    if (out.empty()) {
      throw UsageError("--input " + path +
                       ": no 3-D case there; give a BraTS case folder (CASE/CASE_flair.nii.gz, "
                       "_t1, _t1ce, _t2), a preprocessed cache or one of its cases, an nnU-Net "
                       "images folder (imagesTs/CASE_0000.nii.gz, ...) or one CASE_0000 file, or "
                       "a folder of cases");
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
      "input",
      "a PNG or a folder of PNGs (2-D); a BraTS case, a cache, an nnU-Net imagesTs folder, or a "
      "folder of cases (3-D)",
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
  // A network trained on volumes predicts volumes, a 2-D one slice by slice.
  const DataKind kind = model.config.data.kind;
  const bool volumes =
      kind == DataKind::kNifti || kind == DataKind::kCache || kind == DataKind::kNnunet;
  const int dims = volumes ? 3 : model.config.model.dims;
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
