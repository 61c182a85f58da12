// Loading the run configuration (config_file.h): the sources flattened
// (config_sources.h), then read family by family onto a default Config in
// the order their defaults depend on each other (an nnU-Net dataset names
// the model; a model's plan or bundle sets data and train defaults; a
// preset sets train defaults), each key by its table row (config_keys.h);
// the rules that tie several keys together are checked last
// (config_rules.h).
#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>

#include "common/base/errors.h"
#include "common/config/config_file.h"
#include "common/config/config_reader.h"
#include "common/config/config_rules.h"
#include "common/layout/model_geometry.h"
#include "common/nnunet/nnunet_layout.h"

namespace up {
namespace {

constexpr size_t kMaxConfigBytes = 1 << 20;

// "model, data, train, ..." for the top level's error lines.
std::vector<std::string> TopLevelSections() {
  std::vector<std::string> out;
  for (const std::string& s : ConfigSections())
    if (!s.empty() && s.find('.') == std::string::npos) out.push_back(s);
  return out;
}

// torchscript: the bundle fixes dims, channels and classes; a config may
// repeat them but not contradict them.
void PinToBundle(const Reader& r, const std::string& key, int* field, int bundle_value,
                 const std::string& what) {
  if (r.Has(key)) {
    r.Int(key, field, {INT_MIN, INT_MAX});
    if (*field != bundle_value)
      r.FailAt(key, "",
               what + " (model.path's manifest.json); leave it out or set it to " +
                   std::to_string(bundle_value));
  }
  *field = bundle_value;
}

void ReadTorchscriptModel(const Reader& r, Config* c) {
  ModelConfig* m = &c->model;
  r.Key("model.path", c);
  m->bundle = ReadTorchscriptBundle(m->path);
  m->path = m->bundle.dir;
  const TorchscriptBundle& b = m->bundle;
  PinToBundle(r, "model.dims", &m->dims, b.dims, "the bundle is " + std::to_string(b.dims) + "-D");
  PinToBundle(r, "model.in_channels", &m->in_channels, b.in_channels,
              "the bundle's first level takes " + std::to_string(b.in_channels) + " channels");
  PinToBundle(r, "model.num_classes", &m->num_classes, b.num_classes,
              "the bundle's heads give " + std::to_string(b.num_classes) + " classes");
  // The example's patch is the default; any multiple of the downsampling works.
  c->data.size.assign(m->bundle.example.begin() + 2, m->bundle.example.end());
}

// Reads model.*; for nnunet also the plan, whose patch and batch sizes become
// the defaults of data.size, train.batch_size and train.batch_dice; for
// torchscript the bundle's manifest.
void ReadModel(const Reader& r, Config* c) {
  ModelConfig* m = &c->model;
  r.Key("model.kind", c);
  r.CheckApplies("model", *c);
  r.Key("model.memory", c);
  if (m->kind == ModelKind::kTorchscript) {
    ReadTorchscriptModel(r, c);
    return;
  }
  r.Key("model.in_channels", c);
  r.Key("model.num_classes", c);  // >= 2 without regions (ReadRegions)
  if (m->kind == ModelKind::kClassic) {
    for (const char* key : {"model.dims", "model.features", "model.norm", "model.groups"})
      r.Key(key, c);
    return;
  }
  r.Key("model.plans", c);
  r.Key("model.configuration", c);
  const bool has_arch = r.Has("model.architecture") && !r.Node("model.architecture").IsNull();
  if (m->plans.empty() == !has_arch) {
    r.FailAt("model.plans", Quote(m->plans),
             m->plans.empty() ? "model.kind = nnunet needs model.plans (an nnU-Net plans JSON) and "
                                "model.configuration (e.g. 3d_fullres)"
                              : "give model.plans or model.architecture, not both");
  }
  if (has_arch) {
    m->nnunet = ParseNnunetArchitecture(r.Node("model.architecture"), "model.architecture");
  } else {
    const NnunetPlan plan = ReadNnunetPlan(m->plans, m->configuration);
    m->nnunet = plan.architecture;
    c->data.size = plan.patch_size;
    c->train.batch_size = plan.batch_size;
    c->train.batch_dice = plan.batch_dice;
    // The plan's batch may not split into the default micro-batches.
    if (c->train.batch_size % c->train.micro_batches != 0) c->train.micro_batches = 1;
  }
  if (r.Has("model.dims")) {
    r.Key("model.dims", c);
    if (m->dims != m->nnunet.dims)
      r.FailAt("model.dims", "",
               "the nnU-Net architecture is " + std::to_string(m->nnunet.dims) +
                   "-D (its conv_op); leave model.dims out or set it to " +
                   std::to_string(m->nnunet.dims));
  }
  m->dims = m->nnunet.dims;
  c->train.deep_supervision = true;   // as nnU-Net trains,
  c->train.loss = LossKind::kCeDice;  // with its Dice + CE (DC_and_CE_loss)
}

std::string AbsolutePath(const std::string& path) {
  if (path.empty()) return path;
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

// data.kind = nnunet, read before the model: the dataset's plans become
// model.plans (and model.kind nnunet), its channels and labels the defaults
// of model.in_channels and model.num_classes. Names resolve to paths here, so
// the dump (which every stage loads) holds the paths.
// Returns the dataset (nullopt for other kinds) for CheckNnunetModel.
std::optional<NnunetDataset> ReadNnunetData(const Reader& r, Config* c) {
  DataConfig* d = &c->data;
  r.Key("data.kind", c);
  if (d->kind != DataKind::kNnunet) {
    r.CheckApplies("data", *c);
    return std::nullopt;
  }
  if (r.Has("data.path")) {
    r.FailAt("data.path", "",
             "data.kind = nnunet reads data.dataset (Dataset001_Sample, its number, or the "
             "preprocessed dataset's folder); drop data.path");
  }
  if (r.Has("data.validation")) {
    r.FailAt("data.validation", "",
             "data.kind = nnunet holds out data.fold's validation cases (splits_final.json); "
             "drop data.validation");
  }
  r.CheckApplies("data", *c);
  for (const char* key : {"data.dataset", "data.plans", "data.configuration"}) r.Key(key, c);
  d->preprocessed = EnvOr("nnUNet_preprocessed", "");
  d->results = EnvOr("nnUNet_results", "");
  for (const char* key : {"data.preprocessed", "data.results", "data.cache"}) r.Key(key, c);
  if (r.Has("data.fold")) {
    const YAML::Node& n = r.Node("data.fold");
    const std::string v = n.IsScalar() ? n.Scalar() : "";
    const bool digits = !v.empty() && v.size() < 4 &&
                        std::all_of(v.begin(), v.end(), [](char ch) { return std::isdigit(ch); });
    if (v != "all" && !(digits && std::stoi(v) <= 4))
      r.FailAt("data.fold", "", "expected a fold 0..4 (nnU-Net's 5-fold split) or all");
    d->fold = digits ? std::to_string(std::stoi(v)) : v;
  }
  NnunetDataset ds;
  try {
    ds = FindNnunetDataset(d->dataset, d->preprocessed, d->plans, d->configuration);
  } catch (const UsageError& e) {
    ConfigFail(e.what());
  }
  d->dataset = ds.dir;
  d->preprocessed = ds.preprocessed;
  d->results = AbsolutePath(d->results);
  d->cache = d->cache.empty() ? ds.data_dir + ".unet-pipeline" : AbsolutePath(d->cache);

  ModelConfig* m = &c->model;
  if (!r.Has("model.kind")) m->kind = ModelKind::kNnunet;
  if (m->kind == ModelKind::kNnunet && !r.Has("model.plans") && !r.Has("model.architecture"))
    m->plans = ds.plans_file;
  if (!r.Has("model.configuration")) m->configuration = d->configuration;
  m->in_channels = static_cast<int>(ds.channel_names.size());
  m->num_classes = ds.outputs();
  return ds;
}

// After the model: what it takes and predicts is what the dataset holds.
void CheckNnunetModel(const Reader& r, const Config& c, const std::optional<NnunetDataset>& found) {
  if (!found) return;
  const NnunetDataset& ds = *found;
  const int channels = static_cast<int>(ds.channel_names.size());
  const int classes = ds.outputs();
  if (c.model.in_channels != channels)
    r.FailAt("model.in_channels", "",
             ds.name + "'s dataset.json has " + std::to_string(channels) +
                 " channel(s); leave model.in_channels out or set it to " +
                 std::to_string(channels));
  if (c.model.num_classes != classes)
    r.FailAt("model.num_classes", "",
             ds.name + "'s dataset.json has " + std::to_string(classes) +
                 (ds.regions.empty() ? " labels" : " regions") +
                 "; leave model.num_classes out or set it to " + std::to_string(classes));
}

// model.regions and model.regions_class_order (an nnunet dataset's own unless
// given).
void ReadRegions(const Reader& r, const std::optional<NnunetDataset>& found, Config* c) {
  ModelConfig* m = &c->model;
  if (found && !r.Has("model.regions")) {
    m->regions = found->regions;
    m->regions_class_order = found->regions_class_order;
  }
  if (r.Has("model.regions")) {
    const YAML::Node& node = r.Node("model.regions");
    const std::string what =
        "expected a list of regions, each a list of the classes 1..255 it holds (e.g. [[1, 2, "
        "3], [2, 3], [3]])";
    m->regions.clear();
    if (!node.IsSequence() && !node.IsNull()) r.FailAt("model.regions", "", what);
    for (const auto& region : node) {
      if (!region.IsSequence() || region.size() == 0) r.FailAt("model.regions", "", what);
      std::vector<int> members;
      for (const auto& v : region) {
        long long x = 0;
        if (ParseInteger(v, &x) != Parsed::kOk || x < 1 || x > 255)
          r.FailAt("model.regions", "", what);
        members.push_back(static_cast<int>(x));
      }
      m->regions.push_back(members);
    }
  }
  r.Key("model.regions_class_order", c);
  const size_t n = m->regions.size();
  if (n == 0 && m->num_classes < 2) {
    r.FailAt("model.num_classes", std::to_string(m->num_classes),
             "must be >= 2 (class 0 is the background; a single output needs model.regions)");
  }
  if (n == 0) {
    if (!m->regions_class_order.empty())
      r.FailAt("model.regions_class_order", IntList(m->regions_class_order),
               "applies only with model.regions");
    return;
  }
  if (m->regions_class_order.size() != n) {
    r.FailAt("model.regions_class_order", IntList(m->regions_class_order),
             "needs one class per region of model.regions (" + std::to_string(n) + ")");
  }
  if (m->num_classes != static_cast<int>(n)) {
    r.FailAt(
        "model.num_classes", std::to_string(m->num_classes),
        "with model.regions the network has one output per region; set it to " + std::to_string(n));
  }
}

void ReadData(const Reader& r, Config* c) {
  DataConfig* d = &c->data;
  r.Section("data", c);
  r.SpatialSize("data.size", &d->size, c->model.dims);
  if (d->foreground_fraction > 1) {
    r.FailAt("data.foreground_fraction", FormatDouble(d->foreground_fraction),
             "must be in [0, 1]: the share of patches centred on a foreground voxel (nnU-Net: "
             "0.33)");
  }
  if (r.Has("data.augment")) {
    r.Subset("data.augment", &d->augment, AugmentationNames());
  } else if (d->kind == DataKind::kNifti || d->kind == DataKind::kCache) {
    d->augment = AugmentationNames();
  } else if (d->kind == DataKind::kNnunet) {
    // nnU-Net's own (nnUNetTrainer.get_training_transforms): no quarter turns.
    d->augment = {"scale",      "rotate",   "mirror", "noise",          "blur",
                  "brightness", "contrast", "lowres", "gamma_inverted", "gamma"};
  }
  if (r.Has("data.validation")) {
    const YAML::Node& node = r.Node("data.validation");
    const std::string what =
        "expected a share of the cases in [0, 1) (nnU-Net's folds: 0.2) or a list of case names";
    if (node.IsSequence()) {
      d->validation_cases.clear();
      for (const auto& item : node) {
        if (!item.IsScalar() || item.Scalar().empty()) r.FailAt("data.validation", "", what);
        d->validation_cases.push_back(item.Scalar());
      }
      d->validation = 0;
    } else if (node.IsNull()) {
      d->validation = 0;
      d->validation_cases.clear();
    } else {
      r.Real("data.validation", &d->validation, {0.0, false, true, 1.0});  // or names, above
      d->validation_cases.clear();
    }
  }
}

// train.preset = nnunet: nnUNetTrainer's recipe (nnunetv2 2.x) as defaults.
void ApplyNnunetPreset(ModelKind model_kind, TrainConfig* t) {
  t->optimizer = Optimizer::kSgd;
  t->lr = 1e-2;
  t->momentum = 0.99;
  t->nesterov = true;
  t->weight_decay = 3e-5;
  t->lr_schedule = LrSchedule::kPoly;
  t->poly_exponent = 0.9;
  t->steps_per_epoch = 250;  // num_iterations_per_epoch
  t->steps = 1000 * 250;     // num_epochs
  t->grad_clip = 12;
  t->micro_batches = 1;  // the plan's batch in one step, Dice over it as nnU-Net's
  t->loss = LossKind::kCeDice;
  if (model_kind == ModelKind::kNnunet) t->deep_supervision = true;
}

void ReadTrain(const Reader& r, Config* c) {
  TrainConfig* t = &c->train;
  t->preset = c->data.kind == DataKind::kNnunet ? Preset::kNnunet : Preset::kNone;
  r.Key("train.preset", c);
  if (t->preset == Preset::kNnunet) ApplyNnunetPreset(c->model.kind, t);
  r.Section("train", c);
  if (r.Has("train.epochs")) {
    int epochs = 0;
    r.Int("train.epochs", &epochs, {1, INT_MAX});
    if (r.Has("train.steps"))
      r.FailAt("train.epochs", "", "give train.epochs or train.steps, not both");
    const int64_t steps = static_cast<int64_t>(epochs) * std::max(1, t->steps_per_epoch);
    if (steps > INT_MAX)
      r.FailAt("train.epochs", "", "makes more than " + std::to_string(INT_MAX) + " steps");
    t->steps = static_cast<int>(steps);
  }
  if (t->nesterov && (t->optimizer != Optimizer::kSgd || t->momentum <= 0))
    r.FailAt("train.nesterov", "true",
             "needs train.optimizer = sgd with train.momentum > 0 (nnU-Net: 0.99)");
}

void ReadPipeline(const Reader& r, Config* c) {
  PipelineConfig* p = &c->pipeline;
  r.Section("pipeline", c);
  // Parts not given: as many as the cuts make.
  const struct {
    const char* parts_key;
    const char* cuts_key;
    int* parts;
    const std::vector<int>* cuts;
  } halves[] = {
      {"pipeline.encoder_parts", "pipeline.cuts.encoder", &p->encoder_parts, &p->encoder_cuts},
      {"pipeline.decoder_parts", "pipeline.cuts.decoder", &p->decoder_parts, &p->decoder_cuts}};
  for (const auto& h : halves) {
    const int from_cuts = static_cast<int>(h.cuts->size()) + 1;
    if (!r.Has(h.parts_key)) {
      *h.parts = from_cuts;
    } else if (!h.cuts->empty() && *h.parts != from_cuts) {
      r.FailAt(h.cuts_key, "",
               "makes " + std::to_string(from_cuts) + " parts, but " + h.parts_key + " is " +
                   std::to_string(*h.parts) + "; give one cut fewer than parts, or leave " +
                   h.parts_key + " out");
    }
  }
}

Config Resolve(const YAML::Node* root, const std::string& origin, const std::string& base_dir,
               const std::vector<std::string>& overrides) {
  GivenKeys given;
  if (root) FlattenInto(*root, "", origin, &given);
  AnchorModelPaths(base_dir, &given);
  for (const auto& o : overrides) ApplyOverride(o, &given);

  Reader reader(std::move(given));
  Config c;
  const std::optional<NnunetDataset> nnunet_data = ReadNnunetData(reader, &c);
  ReadModel(reader, &c);
  CheckNnunetModel(reader, c, nnunet_data);
  ReadRegions(reader, nnunet_data, &c);
  ReadData(reader, &c);
  ReadTrain(reader, &c);
  reader.Section("checkpoint", &c);
  reader.Section("validate", &c);
  ReadPipeline(reader, &c);
  CheckConsistency(reader, c);
  return c;
}

}  // namespace

Config LoadConfigFromString(const std::string& yaml_text, const std::string& origin,
                            const std::vector<std::string>& overrides,
                            const std::string& base_dir) {
  YAML::Node root = ParseYaml(yaml_text, origin);
  const std::string expected = "expected a mapping with keys " + Join(TopLevelSections(), ", ");
  if (!root.IsDefined() || root.IsNull()) {
    ConfigFail(origin + ": empty (no keys); " + expected + ", or {} for all defaults");
  }
  if (!root.IsMap()) {
    ConfigFail(origin + ": top level is " + (root.IsSequence() ? "a list" : "a scalar") + "; " +
               expected);
  }
  return Resolve(&root, origin, base_dir, overrides);
}

Config LoadConfig(const std::string& path, const std::vector<std::string>& overrides) {
  if (path.empty()) return Resolve(nullptr, "", "", overrides);
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) ConfigFail("cannot read '" + path + "': " + std::strerror(errno));
  std::string text;
  char buf[65536];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, file)) > 0) {
    text.append(buf, n);
    if (text.size() > kMaxConfigBytes) {
      std::fclose(file);
      ConfigFail("'" + path + "' is larger than " + std::to_string(kMaxConfigBytes >> 20) +
                 " MiB; is it a config file?");
    }
  }
  int read_errno = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (read_errno != 0) ConfigFail("cannot read '" + path + "': " + std::strerror(read_errno));
  const size_t slash = path.rfind('/');
  return LoadConfigFromString(text, path, overrides,
                              slash == std::string::npos ? "." : path.substr(0, slash));
}

std::vector<std::string> RejoinOverrides(const std::vector<std::string>& pieces) {
  std::vector<std::string> out;
  int open = 0;  // unclosed [ and { in out.back()
  for (const std::string& piece : pieces) {
    if (!out.empty() && (open > 0 || piece.find('=') == std::string::npos)) {
      out.back() += "," + piece;
    } else {
      out.push_back(piece);
    }
    open = 0;
    for (char c : out.back()) open += (c == '[' || c == '{') - (c == ']' || c == '}');
  }
  return out;
}

const std::vector<std::string>& ConfigKeys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> out;
    for (const ConfigKey& k : ConfigKeyTable()) out.push_back(k.path);
    return out;
  }();
  return keys;
}

AutoDevices ResolveAutoDevices(Config* config, int cuda_devices, bool cuda_built) {
  PipelineConfig& p = config->pipeline;
  std::vector<std::string*> fields{&p.encoder.device, &p.decoder.device};
  for (std::string& d : p.devices) fields.push_back(&d);
  AutoDevices out;
  for (std::string* d : fields) {
    if (*d != "auto") continue;
    out.chosen = cuda_devices > 0 ? "cuda" : "cpu";
    *d = out.chosen;
  }
  if (out.chosen.empty()) return out;
  if (cuda_devices > 0) {
    out.why = "device auto: cuda (LibTorch sees " + std::to_string(cuda_devices) +
              " CUDA device(s); the stages use cuda:0";
    if (p.stages() > 1 && p.devices.empty()) out.why += " and take turns on it";
    out.why += "; pipeline.devices spreads them over more)";
  } else if (cuda_built) {
    out.why =
        "device auto: cpu (this LibTorch has CUDA but sees no CUDA device: no GPU, no driver, "
        "or CUDA_VISIBLE_DEVICES hides them)";
  } else {
    out.why = "device auto: cpu (this LibTorch was built without CUDA)";
  }
  return out;
}

}  // namespace up
