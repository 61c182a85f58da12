// The run configuration's types: what each section holds, with its default
// (config_file.h reads, checks and writes them). A Config that
// exists is valid: only LoadConfig makes one from user input.
//
// Torch-free on purpose: the launcher validates before it starts any process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "common/formats/torchscript_bundle.h"
#include "common/nnunet/nnunet_plans.h"

namespace up {

// The values of a choice key, each an enum class whose YAML names
// ChoiceNames<E>::names lists in the enum's order (config_keys.h reads and
// writes them by these names; nothing outside common/config/ compares a
// config value as a string).
template <typename E>
struct ChoiceNames;

#define UP_CONFIG_CHOICE(Enum, ...)                                   \
  template <>                                                         \
  struct ChoiceNames<Enum> {                                          \
    static constexpr const char* names[] = {__VA_ARGS__};             \
    static constexpr size_t count = sizeof(names) / sizeof(names[0]); \
  }

enum class ModelKind { kClassic, kNnunet, kTorchscript };
UP_CONFIG_CHOICE(ModelKind, "classic", "nnunet", "torchscript");
enum class Norm { kBatch, kGroup, kInstance };
UP_CONFIG_CHOICE(Norm, "batch", "group", "instance");
// model.memory: the model as written (bit for bit the reference's), or lean
// blocks that hold less for the same arithmetic in another order
// (common/model/lean_block.h).
enum class ModelMemory { kDefault, kLean };
UP_CONFIG_CHOICE(ModelMemory, "default", "lean");
enum class DataKind { kSynthetic, kFolder, kNifti, kCache, kNnunet };
UP_CONFIG_CHOICE(DataKind, "synthetic", "folder", "nifti", "cache", "nnunet");
enum class Preset { kNone, kNnunet };
UP_CONFIG_CHOICE(Preset, "none", "nnunet");
enum class Optimizer { kAdam, kSgd };
UP_CONFIG_CHOICE(Optimizer, "adam", "sgd");
enum class LrSchedule { kConstant, kCosine, kPoly };
UP_CONFIG_CHOICE(LrSchedule, "constant", "cosine", "poly");
enum class LossKind { kCe, kCeDice };
UP_CONFIG_CHOICE(LossKind, "ce", "ce_dice");
enum class Precision { kFp32, kBf16, kFp16 };
UP_CONFIG_CHOICE(Precision, "fp32", "bf16", "fp16");
enum class Checkpointing { kOff, kLevels, kBlocks };
UP_CONFIG_CHOICE(Checkpointing, "off", "levels", "blocks");
enum class OnOff { kOff, kOn };
UP_CONFIG_CHOICE(OnOff, "off", "on");
enum class ValidationFolder { kOn, kOff, kNpz };
UP_CONFIG_CHOICE(ValidationFolder, "on", "off", "npz");
enum class TransportKind { kShm, kCudaIpc, kGloo, kNccl };
UP_CONFIG_CHOICE(TransportKind, "shm", "cuda_ipc", "gloo", "nccl");
enum class Activations { kKeep, kRecompute };
UP_CONFIG_CHOICE(Activations, "keep", "recompute");
enum class RecomputeUnit { kLevel, kBlock };
UP_CONFIG_CHOICE(RecomputeUnit, "level", "block");
enum class Schedule { kSequential, kGpipe, k1f1b };
UP_CONFIG_CHOICE(Schedule, "sequential", "gpipe", "1f1b");
enum class Lock { kAuto, kOn, kOff };
UP_CONFIG_CHOICE(Lock, "auto", "on", "off");
enum class Park { kAuto, kAlways, kNever };
UP_CONFIG_CHOICE(Park, "auto", "always", "never");
enum class Balance { kMemory, kTime };
UP_CONFIG_CHOICE(Balance, "memory", "time");
enum class PlacementKind { kListed, kMirrored };
UP_CONFIG_CHOICE(PlacementKind, "listed", "mirrored");

#undef UP_CONFIG_CHOICE

// A choice's YAML name ("recompute"), for messages and logs.
template <typename E>
std::string NameOf(E value) {
  return ChoiceNames<E>::names[static_cast<size_t>(value)];
}

// Streams a choice by its name (Str(), logs, test failures).
template <typename E, typename = decltype(ChoiceNames<E>::count)>
std::ostream& operator<<(std::ostream& out, E value) {
  return out << ChoiceNames<E>::names[static_cast<size_t>(value)];
}

struct ModelConfig {
  ModelKind kind = ModelKind::kClassic;
  int dims = 2;                              // 2 or 3 (nnunet: from the architecture)
  int in_channels = 4;                       // >= 1
  int num_classes = 3;                       // >= 2
  std::vector<int> features{8, 16, 32, 64};  // channels per level, 1..8 levels, each >= 1
  Norm norm = Norm::kBatch;
  ModelMemory memory = ModelMemory::kDefault;
  int groups = 8;  // model.groups: GroupNorm groups; must divide every width
  // nnunet: model.plans (a plans JSON, read at load time) and
  // model.configuration name where `nnunet` came from; model.architecture
  // holds it resolved, so a dumped config no longer needs the file.
  std::string plans;
  std::string configuration = "3d_fullres";
  NnunetArchitecture nnunet;
  // torchscript: model.path (a bundle folder from scripts/export_unet.py,
  // made absolute) and what its manifest says; dims, in_channels and
  // num_classes are the bundle's.
  std::string path;
  TorchscriptBundle bundle;
  // Region-based training (nnU-Net's regions, e.g. BraTS' whole tumour, core
  // and enhancing): output r is region r, the mask classes regions[r]; the
  // loss is binary cross-entropy plus soft Dice on sigmoids, a voxel is in a
  // region when its sigmoid is over 0.5, and regions_class_order[r] is the
  // class region r paints (later regions over earlier) where a prediction
  // becomes classes. num_classes is then the number of regions. Empty: one
  // output per class, softmax.
  std::vector<std::vector<int>> regions;
  std::vector<int> regions_class_order;
};

// How many classes the masks hold: num_classes, or with regions one more
// than the largest class a region or regions_class_order names.
inline int MaskClasses(const ModelConfig& m) {
  if (m.regions.empty()) return m.num_classes;
  int largest = 0;
  for (const std::vector<int>& r : m.regions)
    for (int v : r) largest = v > largest ? v : largest;
  for (int v : m.regions_class_order) largest = v > largest ? v : largest;
  return largest + 1;
}

struct DataConfig {
  DataKind kind = DataKind::kSynthetic;
  std::string path;  // folder, nifti, cache: the dataset root (required for them)
  // nnunet (common/nnunet/nnunet_layout.h): nnU-Net's preprocessed dataset, resolved
  // when the config loads (names become paths; the dump holds the paths).
  std::string dataset;                       // Dataset001_Sample, 1, or a folder
  std::string plans = "nnUNetPlans";         // the plans identifier
  std::string configuration = "3d_fullres";  // the plans' configuration
  std::string fold = "0";                    // 0..4 of splits_final.json, or all
  std::string preprocessed;                  // default $nnUNet_preprocessed
  std::string results;                       // default $nnUNet_results
  std::string cache;  // the arrays converted once (default: beside nnU-Net's data folder)
  std::vector<int> size{64, 64};  // spatial size, `dims` entries (a scalar in YAML means all axes)
  int samples = 256;              // synthetic: number of distinct samples (>= 1)
  // Whole cases (nifti): the share of patches centred on a voxel of a random
  // foreground class present in the case (nnU-Net's oversampling), [0, 1].
  double foreground_fraction = 0.33;
  // Augmentations of each training patch (common/data/augment.h), in the
  // order applied; resolved: every one of AugmentationNames() for nifti and cache when the
  // key is not given, none otherwise.
  std::vector<std::string> augment;
  // Cases held out for validation (common/data/validation_split.h): a seeded
  // share in [0, 1), or (instead) these cases by name. Neither: none.
  double validation = 0;
  std::vector<std::string> validation_cases;
  // Background threads that prepare the next micro-batches while the current
  // one trains (common/data/batch_loader.h); 0: on the trainer's thread.
  int workers = 0;
  bool HasValidation() const {
    return validation > 0 || !validation_cases.empty() ||
           (kind == DataKind::kNnunet && !AllFolds());
  }
  // data.fold: all: every case trains, none is held out.
  bool AllFolds() const { return fold == "all"; }
};

// Every augmentation data.augment may name, in the order they are applied.
inline const std::vector<std::string>& AugmentationNames() {
  static const std::vector<std::string> names{"scale",  "rotate",         "rot90",      "mirror",
                                              "noise",  "blur",           "brightness", "contrast",
                                              "lowres", "gamma_inverted", "gamma"};
  return names;
}

struct TrainConfig {
  int batch_size = 8;     // >= 1
  int micro_batches = 2;  // >= 1, per replica: micro_batches x replicas divides batch_size
  int steps = 20;         // >= 1 optimizer steps
  double lr = 1e-3;       // > 0
  // none | nnunet: nnUNetTrainer's recipe as the defaults of the keys below
  // (the default with data.kind nnunet); any key given still wins.
  Preset preset = Preset::kNone;
  Optimizer optimizer = Optimizer::kAdam;
  double momentum = 0.9;      // sgd only, [0, 1)
  bool nesterov = false;      // sgd only
  double weight_decay = 0.0;  // >= 0
  LrSchedule lr_schedule = LrSchedule::kConstant;
  // poly: lr * (1 - epoch / epochs)^poly_exponent, epoch = step / steps_per_epoch
  // (nnU-Net's PolyLRScheduler, stepped once an epoch); 0: an epoch is a step.
  int steps_per_epoch = 0;
  double poly_exponent = 0.9;
  int warmup_steps = 0;    // >= 0, < steps
  double grad_clip = 0.0;  // max global grad norm; 0 = off
  LossKind loss = LossKind::kCe;
  bool batch_dice = true;                  // ce_dice: Dice over the batch (else per sample)
  bool deep_supervision = false;           // a loss at every decoder resolution (nnunet)
  Precision precision = Precision::kFp32;  // fp16: with a dynamic loss scale
  double loss_scale_init = 65536.0;        // fp16: the first loss scale, > 0
  int loss_scale_growth_interval = 2000;   // fp16: double the scale after this many finite steps
  int64_t memory_budget = 0;               // bytes each device of the run holds; 0 = its own size
  // single-process: each level's, or each block's, activations recomputed
  // in backward (blocks: model.kind classic or nnunet)
  Checkpointing checkpointing = Checkpointing::kOff;
  // single-process, with checkpointing: each unit's kept input in host
  // memory until its backward (activation_offload.h)
  OnOff offload = OnOff::kOff;
  uint64_t seed = 0;  // any
  int threads = 1;    // >= 1, torch intra-op threads per process
};

// The validation pass over data.validation's cases (sliding-window
// prediction of each whole case, Dice per class and region).
struct ValidateConfig {
  int every = 0;         // every N steps, and after the last; 0 = after the last only; >= 0
  double overlap = 0.5;  // sliding-window overlap, [0, 1)
  // data.kind nnunet with a fold: after the run, the fold's validation/
  // folder as nnUNetTrainer writes it (on), with its probabilities as
  // nnUNetv2_train --npz (npz), or none (off): common/nnunet/nnunet_validation.h
  ValidationFolder nnunet = ValidationFolder::kOn;
};

struct CheckpointConfig {
  int every = 0;  // save every N steps (0 = only at the end); >= 0
  int keep = 3;   // newest checkpoints kept; >= 1
};

struct StagePlacement {
  std::string device =
      "auto";    // auto | cpu | cuda | cuda:N (auto: see ResolveAutoDevices, config_file.h)
  int node = 0;  // node rank that runs the stage, >= 0
};

struct PipelineConfig {
  TransportKind transport = TransportKind::kShm;
  Activations activations = Activations::kKeep;
  // recompute: the unit whose input is kept and whose activations are
  // rebuilt one at a time in backward (block: classic, nnunet)
  RecomputeUnit recompute_unit = RecomputeUnit::kLevel;
  // with recompute: what a stage keeps of each unit in its B and FB waits in
  // host memory until that unit's backward (activation_offload.h)
  OnOff offload = OnOff::kOff;
  Schedule schedule = Schedule::kSequential;
  Lock lock = Lock::kAuto;
  Park park = Park::kAuto;
  OnOff prefetch = OnOff::kOff;  // on: the next stage unparks before its turn
  double timeout_s = 120.0;      // every wait's limit, > 0
  // More than two stages (pipeline_layout.h): each half cut into parts at
  // the given level indices (the decoder's counted in the order it runs
  // them), or balanced when no cuts are given. Not given: the cuts' count
  // + 1 (1 without cuts).
  int encoder_parts = 1;
  int decoder_parts = 1;
  // What the cuts not given balance: each part's estimated peak memory
  // (memory), or its forward and backward time measured on the stage's
  // device at the start of the run (time: launcher/time_balance.h).
  Balance balance = Balance::kMemory;
  std::vector<int> encoder_cuts;
  std::vector<int> decoder_cuts;
  // listed: pipeline.devices / pipeline.nodes name every stage in pipeline
  // order; mirrored: they name the encoder parts, and each decoder part sits
  // with the encoder part whose largest skip it takes.
  PlacementKind placement = PlacementKind::kListed;
  std::vector<std::string> devices;  // empty: the two-stage keys below
  std::vector<int> nodes;
  StagePlacement encoder{"auto", 0};  // every encoder part, unless pipeline.devices says
  StagePlacement decoder{"auto", 0};
  // Data-parallel copies of the whole pipeline (replica_group.h): each
  // takes 1/replicas of every batch; a stage's copies average their
  // gradients before the step.
  int replicas = 1;
  int stages() const { return encoder_parts + decoder_parts; }
};

struct Config {
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  CheckpointConfig checkpoint;
  PipelineConfig pipeline;
  ValidateConfig validate;
};

// A whole batch's micro-batches, every replica's (micro_batches per replica
// x replicas), and the samples in each: replica r takes micro-batches
// r*micro_batches .. (r+1)*micro_batches-1 of the batch.
inline int BatchMicroBatches(const Config& c) {
  return c.train.micro_batches * c.pipeline.replicas;
}
inline int MicroBatchSamples(const Config& c) { return c.train.batch_size / BatchMicroBatches(c); }

}  // namespace up
