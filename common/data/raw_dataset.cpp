// See raw_dataset.h.
#include "common/data/raw_dataset.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "common/base/errors.h"
#include "common/base/fs_util.h"

namespace up {
namespace {

namespace fs = std::filesystem;

RawDataset ListBrats(const fs::path& dir) {
  RawDataset d;
  d.layout = "brats";
  d.channel_names.assign(kBratsModalities.begin(), kBratsModalities.end());
  d.class_names = {"background", "necrotic core", "oedema", "enhancing tumour"};
  d.label_values = kBratsLabels;
  std::vector<fs::path> folders;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory()) folders.push_back(e.path());
  std::sort(folders.begin(), folders.end());
  for (const fs::path& f : folders) {
    RawCase c;
    c.name = f.filename().string();
    for (const char* m : {"flair", "t1", "t1ce", "t2", "seg"}) {
      const std::optional<std::string> path = BratsFile(f.string(), m);
      if (!path) {
        throw UsageError("case '" + f.string() + "' has no " + m + " volume '" + c.name + "_" + m +
                         ".nii.gz'; a BraTS case holds flair, t1, t1ce, t2 and seg");
      }
      (std::string(m) == "seg" ? c.labels : c.images.emplace_back()) = *path;
    }
    d.cases.push_back(std::move(c));
  }
  return d;
}

// dataset.json's "name": value map, ordered by its integer values.
std::map<int64_t, std::string> IntMap(const YAML::Node& node, const std::string& json,
                                      const std::string& key) {
  if (!node[key] || !node[key].IsMap()) {
    throw UsageError("'" + json + "' has no \"" + key + "\" mapping; nnU-Net's dataset.json " +
                     "names \"channel_names\" and \"labels\"");
  }
  std::map<int64_t, std::string> out;
  for (const auto& kv : node[key]) {
    const bool channels = key == "channel_names";
    // channel_names: {"0": "T2"}; labels: {"background": 0}
    const YAML::Node& index_node = channels ? kv.first : kv.second;
    const YAML::Node& name_node = channels ? kv.second : kv.first;
    if (!index_node.IsScalar()) {
      throw UsageError("'" + json + "': \"" + key + "\" entry '" + name_node.as<std::string>() +
                       "' is not one integer (region-based labels are not supported)");
    }
    int64_t index = 0;
    try {
      index = index_node.as<int64_t>();
    } catch (const YAML::Exception&) {
      throw UsageError("'" + json + "': \"" + key + "\" entry '" + name_node.as<std::string>() +
                       "' has no integer index");
    }
    out[index] = name_node.as<std::string>();
  }
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    if (!out.count(i)) {
      throw UsageError("'" + json + "': \"" + key + "\" must number its entries 0.." +
                       std::to_string(out.size() - 1) + " without gaps; " + std::to_string(i) +
                       " is missing");
    }
  }
  return out;
}

RawDataset ListNnunet(const fs::path& dir) {
  const std::string json = (dir / "dataset.json").string();
  YAML::Node root;
  try {
    root = YAML::Load(ReadFile(json));
  } catch (const YAML::Exception& e) {
    throw UsageError("'" + json + "' is not valid JSON: " + e.what());
  }
  RawDataset d;
  d.layout = "nnunet";
  for (const auto& [i, name] : IntMap(root, json, "channel_names")) d.channel_names.push_back(name);
  for (const auto& [value, name] : IntMap(root, json, "labels")) {
    d.class_names.push_back(name);
    d.label_values.push_back(value);
  }
  const std::string ending =
      root["file_ending"] ? root["file_ending"].as<std::string>() : ".nii.gz";
  if (ending != ".nii.gz" && ending != ".nii") {
    throw UsageError("'" + json + "': file_ending '" + ending +
                     "' is not supported; convert the images to .nii.gz");
  }
  const fs::path images = dir / "imagesTr", labels = dir / "labelsTr";
  std::error_code ec;
  if (!fs::is_directory(images, ec) || !fs::is_directory(labels, ec)) {
    throw UsageError("'" + dir.string() +
                     "' has dataset.json but not both imagesTr/ and labelsTr/");
  }
  std::vector<fs::path> segs;
  for (const auto& e : fs::directory_iterator(labels)) {
    const std::string n = e.path().filename().string();
    if (e.is_regular_file() && n.size() > ending.size() &&
        n.compare(n.size() - ending.size(), ending.size(), ending) == 0)
      segs.push_back(e.path());
  }
  std::sort(segs.begin(), segs.end());
  for (const fs::path& seg : segs) {
    RawCase c;
    const std::string n = seg.filename().string();
    c.name = n.substr(0, n.size() - ending.size());
    c.labels = seg.string();
    for (size_t ch = 0; ch < d.channel_names.size(); ++ch) {
      char suffix[24];
      std::snprintf(suffix, sizeof suffix, "_%04zu", ch);
      const fs::path image = images / (c.name + suffix + ending);
      if (!fs::is_regular_file(image, ec)) {
        throw UsageError("case '" + c.name + "' has no channel " + std::to_string(ch) + " (" +
                         d.channel_names[ch] + ") image '" + image.string() +
                         "'; nnU-Net's layout holds imagesTr/CASE_XXXX" + ending +
                         " for every channel");
      }
      c.images.push_back(image.string());
    }
    d.cases.push_back(std::move(c));
  }
  return d;
}

}  // namespace

RawDataset ListRawDataset(const std::string& dir) {
  std::error_code ec;
  const fs::path root(dir);
  if (!fs::is_directory(root, ec))
    throw UsageError("--input " + dir + ": not a folder; give a BraTS or nnU-Net raw dataset");
  RawDataset d = fs::exists(root / "dataset.json", ec) ? ListNnunet(root) : ListBrats(root);
  if (d.cases.empty()) {
    throw UsageError("--input " + dir +
                     ": no cases; expected BraTS case folders (CASE/CASE_flair.nii.gz ...) or "
                     "nnU-Net's layout (dataset.json, imagesTr/, labelsTr/)");
  }
  return d;
}

}  // namespace up
