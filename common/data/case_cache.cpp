// See case_cache.h.
#include "common/data/case_cache.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>

#include "common/base/errors.h"
#include "common/base/fs_util.h"
#include "common/base/json_writer.h"
#include "common/base/sha256.h"
#include "common/formats/npy_io.h"

namespace up {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "unet-pipeline-cache";
// 2: z-scored as nnU-Net does (over the filled union of the channels' non-zero
// voxels, population standard deviation).
constexpr int kVersion = 2;
constexpr int64_t kLocationsPerClass = 10000;

std::string IntArray(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

template <size_t N>
std::string RealArray(const std::array<double, N>& v) {
  std::string s = "[";
  for (size_t i = 0; i < N; ++i) s += (i ? "," : "") + JsonWriter::FormatDouble(v[i]);
  return s + "]";
}

std::vector<int64_t> Ints(const YAML::Node& n) {
  std::vector<int64_t> v;
  for (const auto& x : n) v.push_back(x.as<int64_t>());
  return v;
}

template <size_t N>
std::array<double, N> Reals(const YAML::Node& n) {
  std::array<double, N> v{};
  if (!n.IsSequence() || n.size() != N) throw YAML::Exception(YAML::Mark(), "expected a list");
  for (size_t i = 0; i < N; ++i) v[i] = n[i].as<double>();
  return v;
}

// What changes when any input does (or the preprocessing does).
std::string SourceStamp(const RawCase& c) {
  std::vector<std::string> files = c.images;
  files.push_back(c.labels);
  return FilesStamp(std::string(kFormat) + " " + std::to_string(kVersion), files);
}

std::string FileSha256(const std::string& path) { return Sha256Hex(ReadFile(path)); }

void WriteMeta(const std::string& path, const CacheCaseMeta& m) {
  const NiftiSpace& s = m.space;
  std::string srow = "[";
  for (int r = 0; r < 3; ++r) srow += (r ? "," : "") + RealArray(s.srow[r]);
  srow += "]";
  JsonWriter locations;
  for (size_t k = 1; k < m.class_locations.size(); ++k)
    locations.Raw(std::to_string(k), IntArray(m.class_locations[k]));
  JsonWriter w;
  w.Field("format", kFormat)
      .Field("version", kVersion)
      .Field("name", m.name)
      .Field("channels", m.channels)
      .Raw("shape", IntArray(m.shape))
      .Raw("original_shape", IntArray(m.original_shape))
      .Raw("crop_begin", IntArray(m.crop_begin))
      .Raw("spacing", RealArray(m.spacing))
      .Field("qform_code", s.qform_code)
      .Field("sform_code", s.sform_code)
      .Raw("quatern", RealArray(s.quatern))
      .Raw("qoffset", RealArray(s.qoffset))
      .Field("qfac", s.qfac)
      .Raw("srow", srow)
      .Field("source_stamp", m.source_stamp)
      .Field("image_sha256", m.image_sha256)
      .Field("labels_sha256", m.labels_sha256)
      .Raw("class_locations", locations.str());
  WriteFileAtomic(path, w.str() + "\n");
}

// Up to kLocationsPerClass flat indices of each class k >= 1, evenly spread
// over the class's voxels in row-major order.
std::vector<std::vector<int64_t>> ClassLocations(const torch::Tensor& labels, int64_t classes) {
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(classes));
  const torch::Tensor flat = labels.reshape({-1});
  for (int64_t k = 1; k < classes; ++k) {
    torch::Tensor idx = torch::nonzero(flat == k).flatten();
    if (idx.numel() > kLocationsPerClass) {
      idx = idx.index_select(
          0, torch::linspace(0, static_cast<double>(idx.numel() - 1), kLocationsPerClass)
                 .round()
                 .to(torch::kInt64));
    }
    idx = idx.contiguous();
    out[static_cast<size_t>(k)].assign(idx.data_ptr<int64_t>(),
                                       idx.data_ptr<int64_t>() + idx.numel());
  }
  return out;
}

}  // namespace

std::string FilesStamp(const std::string& header, const std::vector<std::string>& files) {
  std::string text = header + "\n";
  for (const std::string& f : files) {
    struct stat st {};
    if (::stat(f.c_str(), &st) != 0) throw UsageError("cannot stat input file '" + f + "'");
    text += f + "\n" + std::to_string(st.st_size) + "\n" + std::to_string(st.st_mtim.tv_sec) + "." +
            std::to_string(st.st_mtim.tv_nsec) + "\n";
  }
  return Sha256Hex(text);
}

void NonzeroBox(const torch::Tensor& image, std::vector<int64_t>* begin,
                std::vector<int64_t>* size) {
  const torch::Tensor any = (image != 0).any(0);  // (D, H, W)
  begin->assign(3, 0);
  size->assign(image.sizes().begin() + 1, image.sizes().end());
  if (!any.any().item<bool>()) return;
  for (int64_t a = 0; a < 3; ++a) {
    std::vector<int64_t> others;
    for (int64_t b = 0; b < 3; ++b)
      if (b != a) others.push_back(b);
    const torch::Tensor on = any.any(others[1]).any(others[0]);  // (extent of a)
    const torch::Tensor idx = torch::nonzero(on).flatten();
    (*begin)[a] = idx.min().item<int64_t>();
    (*size)[a] = idx.max().item<int64_t>() - (*begin)[a] + 1;
  }
}

torch::Tensor BoxView(const torch::Tensor& t, const std::vector<int64_t>& begin,
                      const std::vector<int64_t>& size) {
  const int64_t lead = t.dim() - static_cast<int64_t>(size.size());
  torch::Tensor v = t;
  for (size_t a = 0; a < size.size(); ++a)
    v = v.narrow(lead + static_cast<int64_t>(a), begin[a], size[a]);
  return v;
}

torch::Tensor ReadNpyTensor(const std::string& path) {
  auto* bytes = new std::vector<uint8_t>();
  const NpyHeader h = ReadNpy(path, bytes);
  return torch::from_blob(
      bytes->data(), h.shape, [bytes](void*) { delete bytes; },
      h.type == NpyType::kFloat32 ? torch::kFloat32 : torch::kUInt8);
}

CacheIndex ReadCacheIndex(const std::string& cache) {
  const std::string index = (fs::path(cache) / "cache.json").string();
  std::error_code ec;
  if (!fs::is_regular_file(index, ec)) {
    throw UsageError("'" + cache +
                     "' has no cache.json; write the cache with `unet-pipeline preprocess "
                     "--input RAW --out " +
                     cache + "`");
  }
  CacheIndex out;
  try {
    const YAML::Node n = YAML::Load(ReadFile(index));
    for (const auto& c : n["cases"]) out.cases.push_back(c.as<std::string>());
    out.label_values = Ints(n["label_values"]);
  } catch (const YAML::Exception& e) {
    throw UsageError("cache file '" + index + "' is damaged (" + e.what() +
                     "); run `unet-pipeline preprocess` again");
  }
  return out;
}

CacheCaseMeta ReadCaseMeta(const std::string& case_dir) {
  const std::string path = (fs::path(case_dir) / "case.json").string();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    throw UsageError("cache case '" + case_dir +
                     "' has no case.json; run `unet-pipeline preprocess` again to complete it");
  }
  CacheCaseMeta m;
  try {
    const YAML::Node n = YAML::Load(ReadFile(path));
    if (!n["format"] || n["format"].as<std::string>() != kFormat ||
        n["version"].as<int>() != kVersion)
      throw YAML::Exception(YAML::Mark(), "not format " + std::string(kFormat) + " v" +
                                              std::to_string(kVersion) +
                                              " (written by another version)");
    m.name = n["name"].as<std::string>();
    m.channels = n["channels"].as<int64_t>();
    m.shape = Ints(n["shape"]);
    m.original_shape = Ints(n["original_shape"]);
    m.crop_begin = Ints(n["crop_begin"]);
    m.spacing = Reals<3>(n["spacing"]);
    m.space.qform_code = n["qform_code"].as<int>();
    m.space.sform_code = n["sform_code"].as<int>();
    m.space.quatern = Reals<3>(n["quatern"]);
    m.space.qoffset = Reals<3>(n["qoffset"]);
    m.space.qfac = n["qfac"].as<double>();
    for (int r = 0; r < 3; ++r) m.space.srow[r] = Reals<4>(n["srow"][r]);
    m.source_stamp = n["source_stamp"].as<std::string>();
    m.image_sha256 = n["image_sha256"].as<std::string>();
    m.labels_sha256 = n["labels_sha256"].as<std::string>();
    for (const auto& kv : n["class_locations"]) {
      const size_t k = kv.first.as<size_t>();
      if (m.class_locations.size() <= k) m.class_locations.resize(k + 1);
      m.class_locations[k] = Ints(kv.second);
    }
    if (m.shape.size() != 3 || m.original_shape.size() != 3 || m.crop_begin.size() != 3)
      throw YAML::Exception(YAML::Mark(), "shapes must have 3 entries");
  } catch (const YAML::Exception& e) {
    throw UsageError("cache file '" + path + "' is damaged (" + e.what() +
                     "); run `unet-pipeline preprocess` again to rebuild it");
  }
  return m;
}

std::string VerifyCachedCase(const std::string& case_dir, const CacheCaseMeta& meta) {
  const std::string image = (fs::path(case_dir) / "image.npy").string();
  const std::string labels = (fs::path(case_dir) / "labels.npy").string();
  try {
    std::vector<int64_t> image_shape{meta.channels};
    image_shape.insert(image_shape.end(), meta.shape.begin(), meta.shape.end());
    if (ReadNpyHeader(image).shape != image_shape) return "'" + image + "' has another shape";
    if (ReadNpyHeader(labels).shape != meta.shape) return "'" + labels + "' has another shape";
  } catch (const UsageError& e) {
    return e.what();
  }
  if (FileSha256(image) != meta.image_sha256) return "'" + image + "' does not match its SHA-256";
  if (FileSha256(labels) != meta.labels_sha256)
    return "'" + labels + "' does not match its SHA-256";
  return "";
}

CacheOutcome PreprocessCase(const RawDataset& dataset, const RawCase& c, const std::string& cache,
                            std::string* why) {
  const fs::path dir = fs::path(cache) / c.name;
  const std::string stamp = SourceStamp(c);
  why->clear();
  std::error_code ec;
  const bool existed = fs::exists(dir / "case.json", ec);
  if (existed) {
    try {
      const CacheCaseMeta old = ReadCaseMeta(dir.string());
      if (old.source_stamp != stamp) {
        *why = "its inputs changed";
      } else {
        *why = VerifyCachedCase(dir.string(), old);
        if (why->empty()) return CacheOutcome::kUpToDate;
      }
    } catch (const UsageError& e) {
      *why = e.what();
    }
  }

  const BratsCase raw = LoadRawCase(c, dataset.label_values, /*with_labels=*/true);
  CacheCaseMeta m;
  m.name = c.name;
  m.channels = raw.image.size(0);
  m.original_shape.assign(raw.image.sizes().begin() + 1, raw.image.sizes().end());
  m.spacing = raw.spacing;
  m.space = raw.space;
  m.source_stamp = stamp;
  std::vector<int64_t> size;
  NonzeroBox(raw.image, &m.crop_begin, &size);
  const torch::Tensor image = BoxView(raw.image, m.crop_begin, size).contiguous();  // (C, D, H, W)
  const torch::Tensor labels =
      BoxView(raw.labels, m.crop_begin, size).to(torch::kUInt8).contiguous();  // (D, H, W)
  m.shape = size;
  m.class_locations =
      ClassLocations(labels.to(torch::kInt64), static_cast<int64_t>(dataset.label_values.size()));

  fs::create_directories(dir, ec);
  if (ec) throw RuntimeError("cannot create cache folder '" + dir.string() + "': " + ec.message());
  fs::remove(dir / "case.json", ec);  // incomplete until the new one is written
  std::vector<int64_t> image_shape{m.channels};
  image_shape.insert(image_shape.end(), size.begin(), size.end());
  WriteNpy((dir / "image.npy").string(), NpyType::kFloat32, image_shape, image.data_ptr<float>());
  WriteNpy((dir / "labels.npy").string(), NpyType::kUInt8, size, labels.data_ptr<uint8_t>());
  m.image_sha256 = FileSha256((dir / "image.npy").string());
  m.labels_sha256 = FileSha256((dir / "labels.npy").string());
  WriteMeta((dir / "case.json").string(), m);
  return existed ? CacheOutcome::kRebuilt : CacheOutcome::kWritten;
}

void WriteCacheIndex(const RawDataset& dataset, const std::string& cache) {
  auto strings = [](const std::vector<std::string>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + JsonWriter::Quote(v[i]);
    return s + "]";
  };
  std::vector<std::string> names;
  for (const RawCase& c : dataset.cases) names.push_back(c.name);
  JsonWriter w;
  w.Field("format", kFormat)
      .Field("version", kVersion)
      .Field("layout", dataset.layout)
      .Raw("channel_names", strings(dataset.channel_names))
      .Raw("class_names", strings(dataset.class_names))
      .Raw("label_values", IntArray(dataset.label_values))
      .Raw("cases", strings(names));
  WriteFileAtomic((fs::path(cache) / "cache.json").string(), w.str() + "\n");
}

CacheDataset::CacheDataset(const ModelConfig& model, const DataConfig& data) : root_(data.path) {
  const CacheIndex index = ReadCacheIndex(root_);
  label_values_ = index.label_values;
  const std::vector<std::string>& names = index.cases;
  const int64_t classes = static_cast<int64_t>(index.label_values.size());
  if (names.empty()) throw UsageError("data.path = " + root_ + ": the cache lists no cases");
  if (model.regions.empty() && classes != model.num_classes) {
    throw UsageError("data.path = " + root_ + ": the cache has " + std::to_string(classes) +
                     " classes but model.num_classes = " + std::to_string(model.num_classes) +
                     "; set --set model.num_classes=" + std::to_string(classes));
  }
  if (!model.regions.empty() && classes != MaskClasses(model)) {
    throw UsageError("data.path = " + root_ + ": the cache has classes 0.." +
                     std::to_string(classes - 1) + " but model.regions name classes up to " +
                     std::to_string(MaskClasses(model) - 1) + "; fix model.regions");
  }
  for (const std::string& name : names) {
    const std::string dir = (fs::path(root_) / name).string();
    CacheCaseMeta m = ReadCaseMeta(dir);
    if (m.channels != model.in_channels) {
      throw UsageError("cache case '" + dir + "' has " + std::to_string(m.channels) +
                       " channels but model.in_channels = " + std::to_string(model.in_channels) +
                       "; set --set model.in_channels=" + std::to_string(m.channels));
    }
    for (const char* file : {"image.npy", "labels.npy"}) {
      const std::string path = (fs::path(dir) / file).string();
      const NpyHeader h = ReadNpyHeader(path);  // whole, with the bytes its shape needs
      if (std::vector<int64_t>(h.shape.end() - 3, h.shape.end()) != m.shape) {
        throw UsageError("cache file '" + path +
                         "' does not have the shape case.json gives; run "
                         "`unet-pipeline preprocess` again to rebuild it");
      }
    }
    cases_.push_back(std::move(m));
  }
}

Sample CacheDataset::Get(int64_t index) const { return GetParts(index, SampleParts::kBoth); }

Sample CacheDataset::GetParts(int64_t index, SampleParts parts) const {
  const CacheCaseMeta& m = cases_.at(static_cast<size_t>(index));
  const fs::path dir = fs::path(root_) / m.name;
  Sample s;
  if (parts != SampleParts::kMasks)
    s.image = ReadNpyTensor((dir / "image.npy").string());  // (C, D, H, W)
  if (parts != SampleParts::kImages)
    s.mask = ReadNpyTensor((dir / "labels.npy").string()).to(torch::kInt64);  // (D, H, W)
  s.class_locations = m.class_locations;
  return s;
}

}  // namespace up
