// See sample_data.h.
#include "launcher/tools/sample_data.h"

#include <algorithm>
#include <cmath>
#include <cxxopts.hpp>
#include <filesystem>
#include <iostream>
#include <vector>

#include "common/base/command_line.h"
#include "common/base/errors.h"
#include "common/base/fs_util.h"
#include "common/formats/nifti_io.h"
#include "common/formats/png_io.h"

namespace up {
namespace {

namespace fs = std::filesystem;

// A small deterministic generator (splitmix64) with uniform and normal draws.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  double Uniform() { return (Next() >> 11) * (1.0 / 9007199254740992.0); }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  double Normal() {  // Box-Muller
    const double u = std::max(Uniform(), 1e-12);
    return std::sqrt(-2 * std::log(u)) * std::cos(6.283185307179586 * Uniform());
  }

 private:
  uint64_t state_;
};

uint8_t Byte(double v) { return static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L)); }

// One 2-D pair: mask classes 0 (background), 1 (disc), 2 (square).
void WriteImagePair(const fs::path& dir, int index, int size, Rng& rng) {
  std::vector<uint8_t> mask(static_cast<size_t>(size) * size, 0);
  const double r = size * rng.Uniform(0.12, 0.22);
  const double cx = rng.Uniform(r, size - r), cy = rng.Uniform(r, size - r);
  const double h = size * rng.Uniform(0.10, 0.18);
  const double sx = rng.Uniform(h, size - h), sy = rng.Uniform(h, size - h);
  for (int y = 0; y < size; ++y) {
    for (int x = 0; x < size; ++x) {
      uint8_t& m = mask[static_cast<size_t>(y) * size + x];
      if (std::abs(x - sx) <= h && std::abs(y - sy) <= h) m = 2;
      if ((x - cx) * (x - cx) + (y - cy) * (y - cy) <= r * r) m = 1;  // the disc on top
    }
  }
  // Channel levels per class: each class has its own pattern over the 4 channels.
  const double level[3][4] = {{60, 60, 60, 200}, {200, 80, 150, 120}, {90, 210, 70, 60}};
  PngImage image;
  image.width = image.height = size;
  image.channels = 4;
  image.pixels.resize(static_cast<size_t>(size) * size * 4);
  for (size_t p = 0; p < mask.size(); ++p) {
    for (int c = 0; c < 4; ++c)
      image.pixels[p * 4 + c] = Byte(level[mask[p]][c] + 22 * rng.Normal());
  }
  char name[32];
  std::snprintf(name, sizeof name, "sample-%03d.png", index);
  WritePng((dir / "images" / name).string(), image);
  PngImage m{size, size, 1, mask};
  WritePng((dir / "masks" / name).string(), m);
}

// One case: a brain ball with a tumour (oedema 2 around necrosis 1 around
// enhancing 4) off its centre, in the BraTS layout under `root` and in
// nnU-Net's raw layout under `nnunet` (labels 0..3, channels _0000.._0003).
void WriteCase(const fs::path& root, const fs::path& nnunet, int index, int n, Rng& rng) {
  char name[16];
  std::snprintf(name, sizeof name, "case%02d", index);
  const fs::path dir = root / name;
  fs::create_directories(dir);
  const double c = (n - 1) / 2.0, brain = 0.45 * n;
  const double tx = c + rng.Uniform(-0.12, 0.12) * n, ty = c + rng.Uniform(-0.12, 0.12) * n,
               tz = c + rng.Uniform(-0.12, 0.12) * n;
  const double oedema = n * rng.Uniform(0.16, 0.22), core = oedema * 0.6, enhancing = core * 0.5;
  Volume seg;
  seg.dims = {n, n, n};
  seg.voxels.assign(static_cast<size_t>(n) * n * n, 0);
  // Oriented as BraTS volumes are: x and y flipped (180 degrees about z).
  seg.space.qform_code = seg.space.sform_code = 1;
  seg.space.quatern = {0, 0, 1};
  seg.space.qoffset = {0, static_cast<double>(n - 1), 0};
  seg.space.srow = {{{-1, 0, 0, 0}, {0, -1, 0, static_cast<double>(n - 1)}, {0, 0, 1, 0}}};
  std::vector<Volume> modality(4, seg);
  // Mean intensity per label (0, 1, 2, 4) and modality (flair, t1, t1ce, t2).
  const double level[4][4] = {
      {400, 500, 450, 420}, {300, 350, 300, 800}, {900, 420, 430, 700}, {600, 520, 1100, 650}};
  size_t i = 0;
  for (int z = 0; z < n; ++z) {
    for (int y = 0; y < n; ++y) {
      for (int x = 0; x < n; ++x, ++i) {
        const double db = std::sqrt((x - c) * (x - c) + (y - c) * (y - c) + (z - c) * (z - c));
        if (db > brain) continue;  // outside the brain: 0 in every volume
        const double dt =
            std::sqrt((x - tx) * (x - tx) + (y - ty) * (y - ty) + (z - tz) * (z - tz));
        const int label = dt <= enhancing ? 4 : dt <= core ? 1 : dt <= oedema ? 2 : 0;
        const int row = label == 4 ? 3 : label;
        seg.voxels[i] = static_cast<float>(label);
        for (int m = 0; m < 4; ++m) {
          modality[m].voxels[i] = static_cast<float>(level[row][m] + 60 * rng.Normal());
        }
      }
    }
  }
  const char* names[4] = {"flair", "t1", "t1ce", "t2"};
  for (int m = 0; m < 4; ++m) {
    WriteNifti((dir / (std::string(name) + "_" + names[m] + ".nii.gz")).string(), modality[m],
               NiftiStorage::kInt16);
  }
  WriteNifti((dir / (std::string(name) + "_seg.nii.gz")).string(), seg, NiftiStorage::kUInt8);
  for (int m = 0; m < 4; ++m) {
    WriteNifti((nnunet / "imagesTr" / (std::string(name) + "_000" + std::to_string(m) + ".nii.gz"))
                   .string(),
               modality[m], NiftiStorage::kInt16);
  }
  for (float& v : seg.voxels) v = v == 4 ? 3 : v;  // nnU-Net numbers labels 0..K-1
  WriteNifti((nnunet / "labelsTr" / (std::string(name) + ".nii.gz")).string(), seg,
             NiftiStorage::kUInt8);
}

}  // namespace

void WriteSampleData(const std::string& dir, const SampleDataOptions& o) {
  const fs::path root(dir);
  std::error_code ec;
  for (const char* sub : {"images", "masks", "brats", "nnunet/imagesTr", "nnunet/labelsTr"}) {
    fs::create_directories(root / sub, ec);
    if (ec) throw UsageError("cannot create '" + (root / sub).string() + "': " + ec.message());
  }
  Rng rng(o.seed);
  for (int i = 0; i < o.images; ++i) WriteImagePair(root, i, o.image_size, rng);
  for (int i = 0; i < o.cases; ++i) WriteCase(root / "brats", root / "nnunet", i, o.case_size, rng);
  WriteFileAtomic((root / "nnunet" / "dataset.json").string(),
                  "{\"channel_names\": {\"0\": \"FLAIR\", \"1\": \"T1w\", \"2\": \"T1gd\", "
                  "\"3\": \"T2w\"},\n \"labels\": {\"background\": 0, \"necrotic core\": 1, "
                  "\"oedema\": 2, \"enhancing tumour\": 3},\n \"numTraining\": " +
                      std::to_string(o.cases) + ", \"file_ending\": \".nii.gz\"}\n");
}

int MakeSampleDataCommand(int argc, char** argv) {
  cxxopts::Options options("unet-pipeline make-sample-data",
                           "Write a small sample dataset (PNG images with masks, NIfTI cases).");
  options.add_options()("dir", "output folder", cxxopts::value<std::string>())(
      "images", "2-D image/mask pairs", cxxopts::value<int>()->default_value("48"))(
      "cases", "3-D BraTS-layout cases", cxxopts::value<int>()->default_value("4"))(
      "seed", "generator seed", cxxopts::value<uint64_t>()->default_value("1"))("h,help",
                                                                                "this help");
  options.parse_positional({"dir"});
  options.positional_help("DIR");
  const auto parsed =
      ParseCommandLine(options, argc, argv, "unet-pipeline make-sample-data --help");
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  if (!args.count("dir")) throw UsageError("make-sample-data needs a folder: make-sample-data DIR");
  SampleDataOptions o;
  o.images = args["images"].as<int>();
  o.cases = args["cases"].as<int>();
  o.seed = args["seed"].as<uint64_t>();
  if (o.images < 1 || o.cases < 0) {
    throw UsageError("make-sample-data: --images must be >= 1 and --cases >= 0 (got " +
                     std::to_string(o.images) + ", " + std::to_string(o.cases) + ")");
  }
  const std::string dir = args["dir"].as<std::string>();
  WriteSampleData(dir, o);
  std::cout << "wrote " << o.images << " images (4-channel " << o.image_size << "x" << o.image_size
            << " PNG) with masks to " << dir << "/images and " << dir << "/masks, and " << o.cases
            << " BraTS-layout NIfTI cases (" << o.case_size << "^3) to " << dir
            << "/brats, the same in nnU-Net's raw layout to " << dir << "/nnunet\n";
  return 0;
}

}  // namespace up
