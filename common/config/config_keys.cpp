// The key table (see config_keys.h). A row reads: path, field, one line of
// meaning, then what it accepts and the flags that differ from a plain key.
#include "common/config/config_keys.h"

#include <algorithm>

#include "common/config/config_text.h"
#include "common/nnunet/nnunet_plans.h"

namespace up {
namespace {

// A row under construction: chained setters for what differs from a plain
// key.
struct Row : ConfigKey {
  Row(std::string p, KeyType t, ConfigField f, std::string d) {
    path = std::move(p);
    type = t;
    field = f;
    doc = std::move(d);
  }
  // A choice key: its enum field and the enum's names.
  Row(std::string p, KeyType t, ChoiceField f, std::vector<std::string> names, std::string d)
      : Row(std::move(p), t, ConfigField(f), std::move(d)) {
    choices = std::move(names);
  }
  Row& Ints(long long lo, long long hi = INT_MAX) {
    ints = {lo, hi};
    return *this;
  }
  Row& Reals(double lo, bool lo_open, bool has_hi = false, double hi = 0) {
    reals = {lo, lo_open, has_hi, hi};
    return *this;
  }
  Row& Choices(std::vector<std::string> c) {
    choices = std::move(c);
    return *this;
  }
  Row& Entries(long long min_count, long long max_count, int entry_min) {
    ints = {min_count, max_count};
    list_min = entry_min;
    return *this;
  }
  Row& Only(When w) {
    when = w;
    return *this;
  }
  Row& NullIsZero() {
    null_is_zero = true;
    return *this;
  }
  Row& NotHashed() {
    in_hash = false;
    return *this;
  }
  Row& NotHashedAtDefault() {
    hashed_at_default = false;
    return *this;
  }
  Row& ByHand() {
    by_hand = true;
    return *this;
  }
  Row& NotWritten() {
    written = false;
    return *this;
  }
  Row& Shown(std::string text) {
    shown_default = std::move(text);
    return *this;
  }
};

// The field of `c` at `member` (captureless, so it converts to FieldOf<T>).
#define UP_FIELD(member)     \
  +[](Config & c) -> auto& { \
    return c.member;         \
  }

// clang-format off
template <typename E>
std::vector<std::string> NamesOf() {
  return {std::begin(ChoiceNames<E>::names), std::end(ChoiceNames<E>::names)};
}

// The enum field of `c` at `member`, and its YAML names (config.h).
#define UP_CHOICE(member)                                                             \
  ChoiceField{+[](const Config& c) { return static_cast<int>(c.member); },           \
              +[](Config& c, int v) { c.member = static_cast<decltype(c.member)>(v); }}, \
      NamesOf<decltype(Config{}.member)>()
// clang-format on

using T = KeyType;

std::vector<Row> ModelKeys() {
  return {
      Row("model.kind", T::kChoice, UP_CHOICE(model.kind),
          "which U-Net: built from features, "
          "an nnU-Net plan, or a TorchScript bundle")

          .ByHand(),
      Row("model.dims", T::kInt, UP_FIELD(model.dims), "2 for images, 3 for volumes")
          .Ints(2, 3)
          .ByHand(),
      Row("model.in_channels", T::kInt, UP_FIELD(model.in_channels), "input channels")
          .Ints(1)
          .ByHand(),
      Row("model.num_classes", T::kInt, UP_FIELD(model.num_classes),
          "output classes (with model.regions: regions)")
          .Ints(1)
          .ByHand(),
      Row("model.features", T::kIntList, UP_FIELD(model.features), "channels per level")
          .Entries(1, 8, 1)
          .Only(When::kClassicModel),
      Row("model.norm", T::kChoice, UP_CHOICE(model.norm), "the normalisation after each conv")

          .Only(When::kClassicModel),
      Row("model.groups", T::kInt, UP_FIELD(model.groups), "GroupNorm groups")
          .Ints(1)
          .Only(When::kClassicModel),
      Row("model.memory", T::kChoice, UP_CHOICE(model.memory),
          "the blocks as written, or lean blocks that hold less")
          .NotHashedAtDefault(),
      Row("model.regions", T::kRegions, {}, "region-based training: the classes of each output")
          .ByHand(),
      Row("model.regions_class_order", T::kIntList, UP_FIELD(model.regions_class_order),
          "the class each region paints")
          .Entries(0, 255, 1)
          .ByHand(),
      Row("model.plans", T::kString, UP_FIELD(model.plans), "an nnU-Net plans JSON")
          .Only(When::kNnunetModel)
          .ByHand()
          .NotWritten(),
      Row("model.configuration", T::kString, UP_FIELD(model.configuration),
          "the plans' configuration")
          .Only(When::kNnunetModel)
          .ByHand(),
      Row("model.architecture", T::kArchitecture, {}, "the plan's architecture mapping itself")
          .Only(When::kNnunetModel)
          .Shown("null")
          .ByHand(),
      Row("model.path", T::kString, UP_FIELD(model.path), "a TorchScript bundle folder")
          .Only(When::kTorchscriptModel)
          .ByHand(),
  };
}

std::vector<Row> DataKeys() {
  return {
      Row("data.kind", T::kChoice, UP_CHOICE(data.kind), "where samples come from")

          .ByHand(),
      Row("data.path", T::kString, UP_FIELD(data.path), "the dataset root")
          .Only(When::kNotNnunetData),
      Row("data.size", T::kSpatialSize, UP_FIELD(data.size), "the patch's spatial size").ByHand(),
      Row("data.samples", T::kInt, UP_FIELD(data.samples), "synthetic: distinct samples").Ints(1),
      Row("data.foreground_fraction", T::kReal, UP_FIELD(data.foreground_fraction),
          "the share of patches centred on foreground")
          .Reals(0.0, false),
      Row("data.augment", T::kSubset, UP_FIELD(data.augment), "augmentations of each patch")
          .Choices(AugmentationNames())
          .ByHand(),
      Row("data.validation", T::kValidation, {}, "cases held out: a share or names")
          .Only(When::kNotNnunetData)
          .ByHand(),
      Row("data.workers", T::kInt, UP_FIELD(data.workers), "background loader threads")
          .Ints(0, 64)
          .NotHashed(),
      Row("data.dataset", T::kString, UP_FIELD(data.dataset), "the nnU-Net dataset")
          .Only(When::kNnunetData)
          .ByHand(),
      Row("data.plans", T::kString, UP_FIELD(data.plans), "the plans identifier")
          .Only(When::kNnunetData)
          .ByHand(),
      Row("data.configuration", T::kString, UP_FIELD(data.configuration),
          "the plans' configuration")
          .Only(When::kNnunetData)
          .ByHand(),
      Row("data.fold", T::kFold, UP_FIELD(data.fold), "the fold held out: 0..4, or all")
          .Only(When::kNnunetData)
          .ByHand(),
      Row("data.preprocessed", T::kString, UP_FIELD(data.preprocessed),
          "nnU-Net's preprocessed root")
          .Only(When::kNnunetData)
          .Shown("$nnUNet_preprocessed")
          .ByHand(),
      Row("data.results", T::kString, UP_FIELD(data.results), "where the fold is filed")
          .Only(When::kNnunetData)
          .Shown("$nnUNet_results")
          .ByHand()
          .NotHashed(),
      Row("data.cache", T::kString, UP_FIELD(data.cache), "where the cases are converted")
          .Only(When::kNnunetData)
          .Shown("<dataset>/<data_identifier>.unet-pipeline")
          .ByHand()
          .NotHashed(),
  };
}

std::vector<Row> TrainKeys() {
  return {
      Row("train.batch_size", T::kInt, UP_FIELD(train.batch_size), "samples per optimizer step")
          .Ints(1),
      Row("train.micro_batches", T::kInt, UP_FIELD(train.micro_batches),
          "micro-batches per step (per replica)")
          .Ints(1),
      Row("train.steps", T::kInt, UP_FIELD(train.steps), "optimizer steps of the run")
          .Ints(1)
          .NotHashed(),
      Row("train.epochs", T::kEpochs, {}, "instead of steps: epochs of steps_per_epoch")
          .Shown("null")
          .ByHand()
          .NotWritten()
          .NotHashed(),
      Row("train.lr", T::kReal, UP_FIELD(train.lr), "learning rate").Reals(0.0, true),
      Row("train.optimizer", T::kChoice, UP_CHOICE(train.optimizer), "the optimizer"),
      Row("train.momentum", T::kReal, UP_FIELD(train.momentum), "sgd's momentum")
          .Reals(0.0, false, true, 1.0),
      Row("train.nesterov", T::kBool, UP_FIELD(train.nesterov), "sgd: Nesterov momentum"),
      Row("train.weight_decay", T::kReal, UP_FIELD(train.weight_decay), "L2 weight decay")
          .Reals(0.0, false),
      Row("train.lr_schedule", T::kChoice, UP_CHOICE(train.lr_schedule),
          "the learning rate's "
          "course"),
      Row("train.steps_per_epoch", T::kInt, UP_FIELD(train.steps_per_epoch),
          "steps an epoch (poly, train.epochs); 0: a step")
          .Ints(0),
      Row("train.poly_exponent", T::kReal, UP_FIELD(train.poly_exponent), "poly's exponent")
          .Reals(0.0, false),
      Row("train.preset", T::kChoice, UP_CHOICE(train.preset),
          "nnunet: nnUNetTrainer's recipe as the train defaults")

          .ByHand(),
      Row("train.warmup_steps", T::kInt, UP_FIELD(train.warmup_steps), "linear warm-up steps")
          .Ints(0),
      Row("train.grad_clip", T::kReal, UP_FIELD(train.grad_clip),
          "the global gradient norm's limit; 0: off")
          .Reals(0.0, false)
          .NullIsZero(),
      Row("train.loss", T::kChoice, UP_CHOICE(train.loss), "the loss"),
      Row("train.batch_dice", T::kBool, UP_FIELD(train.batch_dice),
          "ce_dice: Dice over the batch, else per sample"),
      Row("train.deep_supervision", T::kBool, UP_FIELD(train.deep_supervision),
          "a loss at every decoder resolution"),
      Row("train.precision", T::kChoice, UP_CHOICE(train.precision), "the compute precision"),
      Row("train.loss_scale.init", T::kReal, UP_FIELD(train.loss_scale_init),
          "fp16: the first loss scale")
          .Reals(0.0, true),
      Row("train.loss_scale.growth_interval", T::kInt, UP_FIELD(train.loss_scale_growth_interval),
          "fp16: finite steps before it doubles")
          .Ints(1),
      Row("train.memory_budget", T::kByteSize, UP_FIELD(train.memory_budget),
          "each device's size; null: its own")
          .NotHashed(),
      Row("train.checkpointing", T::kChoice, UP_CHOICE(train.checkpointing),
          "single-process: what backward recomputes"),
      Row("train.offload", T::kChoice, UP_CHOICE(train.offload),
          "single-process: checkpointed inputs in host memory"),
      Row("train.seed", T::kUInt64, UP_FIELD(train.seed), "seeds weights, order and data"),
      Row("train.threads", T::kInt, UP_FIELD(train.threads), "torch threads per process")
          .Ints(1, 256),
  };
}

std::vector<Row> CheckpointKeys() {
  return {
      Row("checkpoint.every", T::kInt, UP_FIELD(checkpoint.every),
          "save every N steps; 0: at "
          "the end")
          .Ints(0)
          .NotHashed(),
      Row("checkpoint.keep", T::kInt, UP_FIELD(checkpoint.keep), "newest checkpoints kept")
          .Ints(1)
          .NotHashed(),
  };
}

std::vector<Row> ValidateKeys() {
  return {
      Row("validate.every", T::kInt, UP_FIELD(validate.every),
          "validate every N steps; 0: after the last")
          .Ints(0)
          .Only(When::kValidation)
          .NotHashed(),
      Row("validate.overlap", T::kReal, UP_FIELD(validate.overlap), "sliding-window overlap")
          .Reals(0.0, false, true, 1.0)
          .Only(When::kValidation)
          .NotHashed(),
      Row("validate.nnunet", T::kChoice, UP_CHOICE(validate.nnunet),
          "nnU-Net's validation folder after the run")

          .Only(When::kNnunetFold)
          .NotHashed(),
  };
}

std::vector<Row> PipelineKeys() {
  return {
      Row("pipeline.transport", T::kChoice, UP_CHOICE(pipeline.transport),
          "how boundary tensors travel"),
      Row("pipeline.activations", T::kChoice, UP_CHOICE(pipeline.activations),
          "keep activations, or recompute them in backward"),
      Row("pipeline.recompute_unit", T::kChoice, UP_CHOICE(pipeline.recompute_unit),
          "recompute: what is kept and rebuilt"),
      Row("pipeline.offload", T::kChoice, UP_CHOICE(pipeline.offload),
          "recompute: kept inputs in host memory"),
      Row("pipeline.schedule", T::kChoice, UP_CHOICE(pipeline.schedule), "the stages' schedule"),
      Row("pipeline.lock", T::kChoice, UP_CHOICE(pipeline.lock), "device turn-taking"),
      Row("pipeline.park", T::kChoice, UP_CHOICE(pipeline.park),
          "training state in host memory off turn"),
      Row("pipeline.prefetch", T::kChoice, UP_CHOICE(pipeline.prefetch),
          "the next stage unparks during this turn"),
      Row("pipeline.timeout_s", T::kReal, UP_FIELD(pipeline.timeout_s), "every wait's limit")
          .Reals(0.0, true)
          .NotHashed(),
      Row("pipeline.encoder_parts", T::kInt, UP_FIELD(pipeline.encoder_parts),
          "the encoder's stages")
          .Ints(1, 64),
      Row("pipeline.decoder_parts", T::kInt, UP_FIELD(pipeline.decoder_parts),
          "the decoder's stages")
          .Ints(1, 64),
      Row("pipeline.replicas", T::kInt, UP_FIELD(pipeline.replicas),
          "data-parallel copies of the pipeline")
          .Ints(1, 64),
      Row("pipeline.balance", T::kChoice, UP_CHOICE(pipeline.balance),
          "what cuts not given balance"),
      Row("pipeline.cuts.encoder", T::kIntList, UP_FIELD(pipeline.encoder_cuts),
          "where each encoder part after the first starts")
          .Entries(0, 63, 1),
      Row("pipeline.cuts.decoder", T::kIntList, UP_FIELD(pipeline.decoder_cuts),
          "the same, decoder levels in the order they run")
          .Entries(0, 63, 1),
      Row("pipeline.placement", T::kChoice, UP_CHOICE(pipeline.placement),
          "what pipeline.devices and .nodes name"),
      Row("pipeline.devices", T::kDeviceList, UP_FIELD(pipeline.devices),
          "each stage's device, in pipeline order"),
      Row("pipeline.nodes", T::kIntList, UP_FIELD(pipeline.nodes), "each stage's node rank")
          .Entries(0, 128, 0),
      Row("pipeline.stages.encoder.device", T::kDevice, UP_FIELD(pipeline.encoder.device),
          "the encoder parts' device"),
      Row("pipeline.stages.encoder.node", T::kInt, UP_FIELD(pipeline.encoder.node),
          "the node running the encoder")
          .Ints(0),
      Row("pipeline.stages.decoder.device", T::kDevice, UP_FIELD(pipeline.decoder.device),
          "the decoder parts' device"),
      Row("pipeline.stages.decoder.node", T::kInt, UP_FIELD(pipeline.decoder.node),
          "the node running the decoder")
          .Ints(0),
  };
}

std::vector<ConfigKey> MakeTable() {
  std::vector<ConfigKey> table;
  for (auto family : {ModelKeys, DataKeys, TrainKeys, CheckpointKeys, ValidateKeys, PipelineKeys})
    for (Row& row : family()) table.push_back(std::move(row));
  return table;
}

#undef UP_FIELD
#undef UP_CHOICE

}  // namespace

bool Applies(When when, const Config& c) {
  switch (when) {
    case When::kAlways:
      return true;
    case When::kClassicModel:
      return c.model.kind == ModelKind::kClassic;
    case When::kNnunetModel:
      return c.model.kind == ModelKind::kNnunet;
    case When::kTorchscriptModel:
      return c.model.kind == ModelKind::kTorchscript;
    case When::kNnunetData:
      return c.data.kind == DataKind::kNnunet;
    case When::kNotNnunetData:
      return c.data.kind != DataKind::kNnunet;
    case When::kValidation:
      return c.data.HasValidation();
    case When::kNnunetFold:
      return c.data.kind == DataKind::kNnunet && !c.data.AllFolds();
  }
  return true;
}

std::string AppliesText(When when) {
  switch (when) {
    case When::kAlways:
      return "every config";
    case When::kClassicModel:
      return "model.kind = classic";
    case When::kNnunetModel:
      return "model.kind = nnunet";
    case When::kTorchscriptModel:
      return "model.kind = torchscript";
    case When::kNnunetData:
      return "data.kind = nnunet";
    case When::kNotNnunetData:
      return "data.kind other than nnunet";
    case When::kValidation:
      return "data.validation";
    case When::kNnunetFold:
      return "data.kind = nnunet with a fold 0..4";
  }
  return "";
}

std::string InsteadText(When when, const Config& c) {
  switch (when) {
    case When::kClassicModel:
    case When::kNnunetModel:
    case When::kTorchscriptModel:
      return "model.kind is " + NameOf(c.model.kind);
    case When::kNnunetData:
    case When::kNotNnunetData:
      return "data.kind is " + NameOf(c.data.kind);
    case When::kNnunetFold:
      return c.data.kind != DataKind::kNnunet ? "data.kind is " + NameOf(c.data.kind)
                                              : "data.fold is all";
    case When::kValidation:
      return "no data.validation";
    case When::kAlways:
      break;
  }
  return "";
}

std::string IntRange::Text() const {
  if (hi == INT_MAX) return ">= " + std::to_string(lo);
  if (hi == lo + 1) return std::to_string(lo) + " or " + std::to_string(hi);
  return "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

std::string RealRange::Text() const {
  if (!has_hi) return (lo_open ? "> " : ">= ") + FormatDouble(lo);
  return std::string(lo_open ? "in (" : "in [") + FormatDouble(lo) + ", " + FormatDouble(hi) + ")";
}

std::string ConfigKey::Accepts() const {
  switch (type) {
    case T::kInt:
      return "an integer " + ints.Text();
    case T::kUInt64:
      return "an integer in [0, 18446744073709551615]";
    case T::kReal:
      return "a number " + reals.Text() + (null_is_zero ? " (null: 0)" : "");
    case T::kBool:
      return "true or false";
    case T::kChoice:
      return "one of " + Join(choices, ", ");
    case T::kSubset:
      return "a list of some of " + Join(choices, ", ");
    case T::kString:
      return "a string";
    case T::kDevice:
      return "auto, cpu, cuda or cuda:N";
    case T::kDeviceList:
      return "a list of devices, one per stage";
    case T::kIntList:
      return "a list of " + std::to_string(ints.lo) + " to " + std::to_string(ints.hi) +
             " integers >= " + std::to_string(list_min);
    case T::kSpatialSize:
      return "an integer (all axes) or a list of model.dims integers";
    case T::kByteSize:
      return "a size like 16GiB or a number of bytes (null: none)";
    case T::kRegions:
      return "a list of regions, each a list of classes 1..255";
    case T::kArchitecture:
      return "nnU-Net's architecture mapping (network_class_name, arch_kwargs)";
    case T::kValidation:
      return "a share in [0, 1) or a list of case names (null: none)";
    case T::kFold:
      return "a fold 0..4 or all";
    case T::kEpochs:
      return "an integer >= 1";
  }
  return "";
}

const std::vector<ConfigKey>& ConfigKeyTable() {
  static const std::vector<ConfigKey> table = MakeTable();
  return table;
}

const ConfigKey* FindConfigKey(const std::string& path) {
  for (const ConfigKey& k : ConfigKeyTable())
    if (k.path == path) return &k;
  return nullptr;
}

const std::vector<std::string>& ConfigSections() {
  static const std::vector<std::string> sections = [] {
    std::vector<std::string> out{""};
    for (const ConfigKey& k : ConfigKeyTable()) {
      for (std::string s = SectionOfKey(k.path); !s.empty(); s = SectionOfKey(s))
        if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
    }
    return out;
  }();
  return sections;
}

namespace {

template <typename V>
const V& ValueOf(const ConfigKey& key, const Config& c) {
  // The table's accessors take a Config&; reading through one changes nothing.
  return std::get<FieldOf<V>>(key.field)(const_cast<Config&>(c));
}

std::string QuotedList(const std::vector<std::string>& values) {
  std::vector<std::string> quoted;
  for (const std::string& v : values) quoted.push_back(Quote(v));
  return "[" + Join(quoted, ", ") + "]";
}

}  // namespace

std::string KeyValueText(const ConfigKey& key, const Config& c) {
  switch (key.type) {
    case T::kInt:
      return std::to_string(ValueOf<int>(key, c));
    case T::kUInt64:
      return std::to_string(ValueOf<uint64_t>(key, c));
    case T::kReal:
      return FormatDouble(ValueOf<double>(key, c));
    case T::kBool:
      return ValueOf<bool>(key, c) ? "true" : "false";
    case T::kChoice:
      return Quote(key.choices[static_cast<size_t>(std::get<ChoiceField>(key.field).get(c))]);
    case T::kString:
    case T::kDevice:
    case T::kFold:
      return Quote(ValueOf<std::string>(key, c));
    case T::kSubset:
      return "[" + Join(ValueOf<std::vector<std::string>>(key, c), ", ") + "]";
    case T::kDeviceList:
      return QuotedList(ValueOf<std::vector<std::string>>(key, c));
    case T::kIntList:
    case T::kSpatialSize:
      return IntList(ValueOf<std::vector<int>>(key, c));
    case T::kByteSize: {
      const int64_t bytes = ValueOf<int64_t>(key, c);
      return bytes > 0 ? std::to_string(bytes) : "null";
    }
    case T::kRegions: {
      std::vector<std::string> regions;
      for (const std::vector<int>& region : c.model.regions) regions.push_back(IntList(region));
      return "[" + Join(regions, ", ") + "]";
    }
    case T::kArchitecture:
      return NnunetArchitectureText(c.model.nnunet);
    case T::kValidation:
      if (!c.data.validation_cases.empty()) return QuotedList(c.data.validation_cases);
      return c.data.validation > 0 ? FormatDouble(c.data.validation) : "null";
    case T::kEpochs:
      return "null";
  }
  return "";
}

std::string ShownDefault(const ConfigKey& key, const Config& defaults) {
  if (!key.shown_default.empty()) return key.shown_default;
  std::string text = KeyValueText(key, defaults);
  const bool quoted = text.size() >= 2 && text.front() == '"' && text.back() == '"';
  if (quoted && text.size() > 2) text = text.substr(1, text.size() - 2);
  return text;
}

}  // namespace up
