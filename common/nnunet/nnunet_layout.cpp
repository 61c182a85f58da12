// See nnunet_layout.h.
#include "common/nnunet/nnunet_layout.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>

#include "common/base/errors.h"
#include "common/base/fs_util.h"

namespace up {
namespace {

namespace fs = std::filesystem;

// "Run this to make it": the command that writes what is missing.
std::string PreprocessHint(int id, const std::string& configuration) {
  return "run `nnUNetv2_plan_and_preprocess -d " + (id > 0 ? std::to_string(id) : "ID") + " -c " +
         configuration + "` first";
}

YAML::Node LoadJson(const std::string& path, const std::string& hint) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    throw UsageError("nnU-Net: '" + path + "' is missing; " + hint);
  try {
    return YAML::Load(ReadFile(path));
  } catch (const YAML::Exception& e) {
    throw UsageError("nnU-Net: '" + path + "' is not valid JSON (" + e.what() + "); " + hint);
  }
}

// "Dataset001_Sample" -> 1; 0 when the name is not nnU-Net's.
int DatasetId(const std::string& name) {
  if (name.rfind("Dataset", 0) != 0 || name.size() < 11 || name[10] != '_') return 0;
  const std::string digits = name.substr(7, 3);
  if (!std::all_of(digits.begin(), digits.end(), [](char ch) { return std::isdigit(ch) != 0; }))
    return 0;
  return std::stoi(digits);
}

// A small non-negative number (at most 6 digits, so std::stoi cannot overflow).
bool AllDigits(const std::string& s) {
  return !s.empty() && s.size() <= 6 &&
         std::all_of(s.begin(), s.end(), [](char ch) { return std::isdigit(ch) != 0; });
}

// The dataset's folder, by path, number or name: fills preprocessed, name,
// id and dir.
void LocateDataset(const std::string& dataset, const std::string& preprocessed,
                   const std::string& configuration, NnunetDataset* d) {
  std::error_code ec;
  if (dataset.empty()) {
    throw UsageError(
        "data.dataset is empty; name the nnU-Net dataset (Dataset001_Sample, or its number 1)");
  }
  if (dataset.find('/') != std::string::npos) {  // a path
    d->dir = fs::absolute(dataset, ec).lexically_normal().string();
    if (!d->dir.empty() && d->dir.back() == '/') d->dir.pop_back();
    d->name = fs::path(d->dir).filename().string();
    d->preprocessed = fs::path(d->dir).parent_path().string();
    d->id = DatasetId(d->name);
    if (!fs::is_directory(d->dir, ec)) {
      throw UsageError("data.dataset = '" + dataset + "': no such folder; " +
                       PreprocessHint(d->id, configuration));
    }
    return;
  }
  if (preprocessed.empty()) {
    throw UsageError("data.dataset = '" + dataset +
                     "': nnUNet_preprocessed is not set; export nnUNet_preprocessed=DIR (as for "
                     "nnU-Net) or set data.preprocessed");
  }
  d->preprocessed = fs::absolute(preprocessed, ec).lexically_normal().string();
  if (!fs::is_directory(d->preprocessed, ec)) {
    throw UsageError("nnUNet_preprocessed = '" + preprocessed + "': no such folder; " +
                     PreprocessHint(AllDigits(dataset) ? std::stoi(dataset) : 0, configuration));
  }
  if (AllDigits(dataset)) {
    d->id = std::stoi(dataset);
    const std::string prefix = "Dataset" +
                               std::string(d->id < 10    ? "00"
                                           : d->id < 100 ? "0"
                                                         : "") +
                               std::to_string(d->id) + "_";
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator(d->preprocessed, ec)) {
      const std::string n = e.path().filename().string();
      if (e.is_directory() && n.rfind(prefix, 0) == 0) found.push_back(n);
    }
    if (found.empty()) {
      throw UsageError("data.dataset = " + dataset + ": no " + prefix + "* folder in '" +
                       d->preprocessed + "'; " + PreprocessHint(d->id, configuration));
    }
    if (found.size() > 1) {
      std::sort(found.begin(), found.end());
      throw UsageError("data.dataset = " + dataset + ": '" + d->preprocessed + "' has " + found[0] +
                       " and " + found[1] + "; name the one to train on");
    }
    d->name = found[0];
  } else {
    d->name = dataset;
    d->id = DatasetId(dataset);
  }
  d->dir = (fs::path(d->preprocessed) / d->name).string();
  if (!fs::is_directory(d->dir, ec)) {
    throw UsageError("data.dataset = '" + dataset + "': no folder '" + d->dir + "'; " +
                     PreprocessHint(d->id, configuration));
  }
}

// dataset.json's channel_names (or the older modality), by index.
void ReadChannels(const YAML::Node& ds, const std::string& hint, NnunetDataset* d) {
  const YAML::Node channels =
      ds["channel_names"].IsDefined() ? ds["channel_names"] : ds["modality"];
  if (!channels.IsDefined() || !channels.IsMap() || channels.size() == 0) {
    throw UsageError("nnU-Net: '" + d->dir + "/dataset.json' has no channel_names; " + hint);
  }
  d->channel_names.resize(channels.size());
  for (const auto& kv : channels) {
    const std::string key = kv.first.Scalar();
    if (!AllDigits(key) || std::stoul(key) >= channels.size()) {
      throw UsageError("nnU-Net: '" + d->dir + "/dataset.json': channel_names key '" + key +
                       "' is not 0.." + std::to_string(channels.size() - 1));
    }
    d->channel_names[std::stoul(key)] = kv.second.Scalar();
  }
}

// A label's value, 0..255; `where` starts the error line.
int LabelValue(const YAML::Node& n, const std::string& label, const std::string& where) {
  int v = -1;
  try {
    v = n.as<int>();
  } catch (const YAML::Exception&) {
  }
  if (v < 0 || v > 255)
    throw UsageError(where + "label '" + label + "' = " + n.Scalar() + "; expected 0..255");
  return v;
}

// Region-based labels (nnU-Net's LabelManager): every foreground entry a
// region (a single value too), painted by regions_class_order.
void ReadRegions(const YAML::Node& ds, const YAML::Node& labels, const std::string& where,
                 NnunetDataset* d) {
  int largest = 0;
  for (const auto& kv : labels) {
    const std::string label = kv.first.Scalar();
    std::vector<int> members;
    if (kv.second.IsSequence()) {
      for (const auto& m : kv.second) members.push_back(LabelValue(m, label, where));
    } else {
      members.push_back(LabelValue(kv.second, label, where));
    }
    std::sort(members.begin(), members.end());
    members.erase(std::unique(members.begin(), members.end()), members.end());
    if (members == std::vector<int>{0}) continue;  // background
    for (int v : members) largest = std::max(largest, v);
    d->regions.push_back(members);
  }
  const YAML::Node order = ds["regions_class_order"];
  if (!order.IsDefined() || !order.IsSequence() || order.size() != d->regions.size()) {
    throw UsageError(where +
                     "region-based labels need regions_class_order with one label per "
                     "region (" +
                     std::to_string(d->regions.size()) + ")");
  }
  for (const auto& v : order)
    d->regions_class_order.push_back(LabelValue(v, "regions_class_order", where));
  for (int v = 0; v <= largest; ++v) d->label_names.push_back("label " + std::to_string(v));
}

// Plain labels: 0..K-1, each once; label_names by value.
void ReadPlainLabels(const YAML::Node& labels, const std::string& where, NnunetDataset* d) {
  std::map<int, std::string> by_value;
  for (const auto& kv : labels) {
    const std::string label = kv.first.Scalar();
    const YAML::Node value = kv.second.IsSequence() ? kv.second[0] : kv.second;
    int v = -1;
    try {
      v = value.as<int>();
    } catch (const YAML::Exception&) {
    }
    if (v < 0 || v >= static_cast<int>(labels.size()) || by_value.count(v)) {
      throw UsageError(where + "label '" + label + "' = " + value.Scalar() +
                       "; labels must be 0.." + std::to_string(labels.size() - 1) + ", each once");
    }
    by_value[v] = label;
  }
  for (const auto& [v, name] : by_value) d->label_names.push_back(name);
}

// dataset.json's labels: plain, or regions when an entry lists several values.
void ReadLabels(const YAML::Node& ds, NnunetDataset* d) {
  const YAML::Node labels = ds["labels"];
  if (!labels.IsDefined() || !labels.IsMap() || labels.size() < 2) {
    throw UsageError("nnU-Net: '" + d->dir +
                     "/dataset.json' needs labels with background and at least one class");
  }
  const std::string where = "nnU-Net: '" + d->dir + "/dataset.json': ";
  bool regions = false;
  for (const auto& kv : labels)
    regions = regions || (kv.second.IsSequence() && kv.second.size() > 1);
  if (labels["ignore"].IsDefined()) {
    throw UsageError(where +
                     "has an ignore label, which is not built yet; train on a "
                     "dataset.json without it");
  }
  if (regions) {
    ReadRegions(ds, labels, where, d);
  } else {
    ReadPlainLabels(labels, where, d);
  }
}

// The plans: which folder holds this configuration's arrays (its
// data_identifier, its own or inherited). Fills plans_file, data_identifier
// and data_dir.
void ReadDataFolder(const std::string& hint, NnunetDataset* d) {
  const std::string& plans = d->plans;
  const std::string& configuration = d->configuration;
  d->plans_file = d->dir + "/" + plans + ".json";
  std::error_code ec;
  if (!fs::is_regular_file(d->plans_file, ec)) {
    throw UsageError("data.plans = " + plans + ": no plans file '" + d->plans_file + "'; " +
                     (plans == "nnUNetPlans"
                          ? hint
                          : "run `nnUNetv2_plan_and_preprocess -d " + std::to_string(d->id) +
                                " -pl <planner>` first"));
  }
  const YAML::Node plan = LoadJson(d->plans_file, hint);
  const YAML::Node configs = plan["configurations"];
  if (!configs.IsDefined() || !configs.IsMap() || !configs[configuration].IsDefined()) {
    std::string names;
    if (configs.IsDefined() && configs.IsMap())
      for (const auto& kv : configs) names += (names.empty() ? "" : ", ") + kv.first.Scalar();
    throw UsageError("data.configuration = " + configuration + ": not in '" + d->plans_file +
                     "' (it has " + (names.empty() ? "none" : names) + ")");
  }
  YAML::Node c = configs[configuration];
  if (c["previous_stage"].IsDefined() && !c["previous_stage"].IsNull()) {
    throw UsageError("data.configuration = " + configuration + ": a cascade stage (it takes " +
                     c["previous_stage"].Scalar() +
                     "'s predictions as an input), which is not built; train " +
                     c["previous_stage"].Scalar() + " or 3d_fullres");
  }
  std::set<std::string> seen{configuration};
  while (!c["data_identifier"].IsDefined() && c["inherits_from"].IsDefined()) {
    const std::string parent = c["inherits_from"].Scalar();
    if (!seen.insert(parent).second || !configs[parent].IsDefined()) break;
    c.reset(configs[parent]);  // move the handle; `=` would overwrite the node
  }
  d->data_identifier = c["data_identifier"].IsDefined() ? c["data_identifier"].Scalar()
                                                        : plans + "_" + configuration;
  d->data_dir = d->dir + "/" + d->data_identifier;
  if (!fs::is_directory(d->data_dir, ec)) {
    throw UsageError("data.configuration = " + configuration + ": '" + d->data_dir +
                     "' is missing (planned, not preprocessed); " + hint);
  }
}

}  // namespace

NnunetDataset FindNnunetDataset(const std::string& dataset, const std::string& preprocessed,
                                const std::string& plans, const std::string& configuration) {
  NnunetDataset d;
  d.plans = plans;
  d.configuration = configuration;
  LocateDataset(dataset, preprocessed, configuration, &d);
  const std::string hint = PreprocessHint(d.id, configuration);
  const YAML::Node ds = LoadJson(d.dir + "/dataset.json", hint);
  ReadChannels(ds, hint, &d);
  ReadLabels(ds, &d);
  ReadDataFolder(hint, &d);
  return d;
}

std::vector<NnunetCaseFiles> ListNnunetCases(const NnunetDataset& d) {
  std::vector<NnunetCaseFiles> cases;
  std::error_code ec;
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(d.data_dir, ec)) names.insert(e.path().filename());
  const std::string hint = PreprocessHint(d.id, d.configuration);
  for (const std::string& n : names) {
    auto ends = [&](const std::string& s) {
      return n.size() > s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0;
    };
    std::string stem;
    std::vector<std::string> files;
    if (ends(".b2nd") && !ends("_seg.b2nd")) {
      stem = n.substr(0, n.size() - 5);
      files = {stem + ".b2nd", stem + "_seg.b2nd", stem + ".pkl"};
    } else if (ends(".npz")) {
      stem = n.substr(0, n.size() - 4);
      files = {stem + ".npz", stem + ".pkl"};
    } else {
      continue;
    }
    NnunetCaseFiles c;
    c.name = stem;
    for (const std::string& f : files) {
      if (!names.count(f)) {
        throw UsageError("nnU-Net: case " + stem + " in '" + d.data_dir + "' has no " + f +
                         " (an interrupted preprocessing?); " + hint);
      }
      c.files.push_back(d.data_dir + "/" + f);
    }
    cases.push_back(std::move(c));
  }
  if (cases.empty()) {
    throw UsageError("nnU-Net: '" + d.data_dir + "' holds no preprocessed case (.b2nd or .npz); " +
                     hint);
  }
  return cases;
}

NnunetFold ReadNnunetFold(const std::string& splits_file, const std::string& fold) {
  NnunetFold out;
  if (fold == "all") return out;
  const YAML::Node splits =
      LoadJson(splits_file, "delete it to have nnU-Net's 5-fold split written again, or fix it");
  if (!splits.IsSequence() || splits.size() == 0)
    throw UsageError("nnU-Net: '" + splits_file + "' is not a list of folds");
  const size_t k = AllDigits(fold) ? std::stoul(fold) : splits.size();
  if (k >= splits.size()) {
    throw UsageError("data.fold = " + fold + ": '" + splits_file + "' has folds 0.." +
                     std::to_string(splits.size() - 1) + "; choose one of them or all");
  }
  for (const auto& [key, into] : {std::pair{"train", &out.train}, std::pair{"val", &out.val}}) {
    const YAML::Node list = splits[k].IsMap() ? splits[k][key] : YAML::Node();
    if (!list.IsDefined() || !list.IsSequence()) {
      throw UsageError("nnU-Net: '" + splits_file + "': fold " + fold + " has no '" + key +
                       "' list");
    }
    for (const auto& n : list) into->push_back(n.Scalar());
  }
  return out;
}

std::string NnunetTrainerFolder(const std::string& trainer, const std::string& plans,
                                const std::string& configuration) {
  return trainer + "__" + plans + "__" + configuration;
}

}  // namespace up
