// The run configuration's types: what each section holds, with its default
// (config_file.h reads, checks and writes them). A Config that
// exists is valid: only LoadConfig makes one from user input.
//
// Torch-free on purpose: the launcher validates before it starts any process.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/formats/torchscript_bundle.h"
#include "common/nnunet/nnunet_plans.h"

namespace up {

struct ModelConfig {
  std::string kind = "classic";              // classic | nnunet | torchscript
  int dims = 2;                              // 2 or 3 (nnunet: from the architecture)
  int in_channels = 4;                       // >= 1
  int num_classes = 3;                       // >= 2
  std::vector<int> features{8, 16, 32, 64};  // channels per level, 1..8 levels, each >= 1
  std::string norm = "batch";                // batch | group | instance
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
  std::string kind = "synthetic";  // synthetic | folder | nifti | cache | nnunet
  std::string path;                // folder, nifti, cache: the dataset root (required for them)
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
    return validation > 0 || !validation_cases.empty() || (kind == "nnunet" && fold != "all");
  }
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
  std::string preset = "none";
  std::string optimizer = "adam";        // adam | sgd
  double momentum = 0.9;                 // sgd only, [0, 1)
  bool nesterov = false;                 // sgd only
  double weight_decay = 0.0;             // >= 0
  std::string lr_schedule = "constant";  // constant | cosine | poly
  // poly: lr * (1 - epoch / epochs)^poly_exponent, epoch = step / steps_per_epoch
  // (nnU-Net's PolyLRScheduler, stepped once an epoch); 0: an epoch is a step.
  int steps_per_epoch = 0;
  double poly_exponent = 0.9;
  int warmup_steps = 0;                   // >= 0, < steps
  double grad_clip = 0.0;                 // max global grad norm; 0 = off
  std::string loss = "ce";                // ce | ce_dice
  bool batch_dice = true;                 // ce_dice: Dice over the batch (else per sample)
  bool deep_supervision = false;          // a loss at every decoder resolution (nnunet)
  std::string precision = "fp32";         // fp32 | bf16 | fp16 (with a dynamic loss scale)
  double loss_scale_init = 65536.0;       // fp16: the first loss scale, > 0
  int loss_scale_growth_interval = 2000;  // fp16: double the scale after this many finite steps
  int64_t memory_budget = 0;              // bytes each device of the run holds; 0 = its own size
  // single-process: off | levels | blocks (each level's, or each block's,
  // activations recomputed in backward; blocks: model.kind classic or nnunet)
  std::string checkpointing = "off";
  // single-process: off | on, with checkpointing: each unit's kept input in
  // host memory until its backward (activation_offload.h)
  std::string offload = "off";
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
  std::string nnunet = "on";
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
  std::string transport = "shm";     // shm | cuda_ipc | gloo | nccl
  std::string activations = "keep";  // keep | recompute
  // recompute: the unit whose input is kept and whose activations are
  // rebuilt one at a time in backward: level | block (classic, nnunet)
  std::string recompute_unit = "level";
  // off | on, with recompute: what a stage keeps of each unit in its B and FB
  // waits in host memory until that unit's backward (activation_offload.h)
  std::string offload = "off";
  std::string schedule = "sequential";  // sequential | gpipe | 1f1b
  std::string lock = "auto";            // auto | on | off
  std::string park = "auto";            // auto | always | never
  std::string prefetch = "off";         // off | on: the next stage unparks before its turn
  double timeout_s = 120.0;             // every wait's limit, > 0
  // More than two stages (pipeline_layout.h): each half cut into parts at
  // the given level indices (the decoder's counted in the order it runs
  // them), or balanced when no cuts are given. Not given: the cuts' count
  // + 1 (1 without cuts).
  int encoder_parts = 1;
  int decoder_parts = 1;
  // What the cuts not given balance: each part's estimated peak memory
  // (memory), or its forward and backward time measured on the stage's
  // device at the start of the run (time: launcher/time_balance.h).
  std::string balance = "memory";
  std::vector<int> encoder_cuts;
  std::vector<int> decoder_cuts;
  // listed: pipeline.devices / pipeline.nodes name every stage in pipeline
  // order; mirrored: they name the encoder parts, and each decoder part sits
  // with the encoder part whose largest skip it takes.
  std::string placement = "listed";
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
