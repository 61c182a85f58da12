// The rules that tie several keys together (config_rules.h), by family.
#include "common/config/config_rules.h"

#include <numeric>
#include <string>

#include "common/layout/model_geometry.h"
#include "common/layout/pipeline_layout.h"

namespace up {
namespace {

// "nearest valid: a or b" for the multiples of `step` around `value`.
std::string NearestMultiples(long long value, long long step) {
  long long below = value / step * step;
  long long above = below + step;
  if (below < 1) return "nearest valid: " + std::to_string(above);
  return "nearest valid: " + std::to_string(below) + " or " + std::to_string(above);
}

// "nearest valid: a or b" for the divisors of `n` around `value`.
std::string NearestDivisors(long long value, long long n) {
  long long below = 0;
  long long above = 0;
  auto consider = [&](long long d) {
    if (d <= value && d > below) below = d;
    if (d >= value && (above == 0 || d < above)) above = d;
  };
  for (long long d = 1; d * d <= n; ++d) {
    if (n % d != 0) continue;
    consider(d);
    consider(n / d);
  }
  if (above == 0) return "nearest valid: " + std::to_string(below);
  return "nearest valid: " + std::to_string(below) + " or " + std::to_string(above);
}

// validate.* only where cases are held out.
void CheckValidateRules(const Reader& r, const Config& c) {
  for (const char* key : {"validate.every", "validate.overlap"}) {
    if (r.Has(key) && !c.data.HasValidation()) {
      r.FailAt(key, "",
               "there is no validation without data.validation; set it to a share of the cases "
               "(0.2) or a list of case names");
    }
  }
  if (r.Has("validate.nnunet") && (c.data.kind != DataKind::kNnunet || c.data.AllFolds())) {
    r.FailAt(
        "validate.nnunet", Quote(NameOf(c.validate.nnunet)),
        c.data.kind != DataKind::kNnunet
            ? "nnU-Net's validation folder is for data.kind: nnunet; drop the key"
            : "data.fold: all holds out no cases to validate; give a fold 0..4 or drop the key");
  }
}

// The model's norm groups and heads.
void CheckModelRules(const Reader& r, const Config& c) {
  const ModelConfig& m = c.model;
  if (m.norm == Norm::kGroup) {
    long long g = 2LL * m.features.back();
    for (int f : m.features) g = std::gcd(g, static_cast<long long>(f));
    if (g % m.groups != 0) {
      r.FailAt("model.groups", std::to_string(m.groups),
               "must divide every model.features entry " + IntList(m.features) + " and 2*" +
                   std::to_string(m.features.back()) + " when model.norm = group; " +
                   NearestDivisors(m.groups, g));
    }
  }

  if (m.memory == ModelMemory::kLean && m.kind == ModelKind::kTorchscript) {
    r.FailAt("model.memory", Quote(NameOf(m.memory)),
             "needs model.kind = classic or nnunet: a TorchScript bundle's blocks are its own "
             "code, which this project cannot rewrite; set model.memory: default");
  }
  if (m.memory == ModelMemory::kLean && c.train.precision != Precision::kFp32) {
    r.FailAt("model.memory", Quote(NameOf(m.memory)),
             "trains in fp32 only for now (train.precision is '" + NameOf(c.train.precision) +
                 "'); set train.precision: fp32 or model.memory: default");
  }
  if (c.train.deep_supervision && m.kind == ModelKind::kClassic) {
    r.FailAt("train.deep_supervision", "true",
             "needs model.kind = nnunet or torchscript (the classic U-Net has one head); set it "
             "to false");
  }
  if (c.train.deep_supervision && m.kind == ModelKind::kTorchscript &&
      static_cast<int>(m.bundle.heads.size()) != m.bundle.levels()) {
    std::string have;
    for (const BundleLevel& h : m.bundle.heads)
      have += (have.empty() ? "" : ", ") + std::to_string(h.level);
    r.FailAt("train.deep_supervision", "true",
             "needs a head at every decoder level 0.." + std::to_string(m.bundle.levels() - 1) +
                 "; the bundle has heads at " + have +
                 "; export the model with its deep-supervision heads, or set it to false");
  }
}

// The data against the model: paths, channels, classes and patch sizes.
void CheckDataRules(const Reader& r, const Config& c) {
  const ModelConfig& m = c.model;
  if (c.data.kind != DataKind::kSynthetic && c.data.kind != DataKind::kNnunet &&
      c.data.path.empty()) {
    r.FailAt("data.path", Quote(c.data.path),
             "must name the dataset root when data.kind = " + NameOf(c.data.kind));
  }
  if (c.data.kind == DataKind::kFolder && m.dims != 2) {
    r.FailAt("model.dims", std::to_string(m.dims),
             "must be 2 when data.kind = folder (PNG images are 2-D); use data.kind = nifti for "
             "3-D volumes");
  }
  if (c.data.kind == DataKind::kNifti) {
    // BraTS: four modalities in, labels 0, 1, 2, 4 out (classes 0..3);
    // model.dims 2 trains on slices of the volumes.
    if (m.in_channels != 4) {
      r.FailAt("model.in_channels", std::to_string(m.in_channels),
               "must be 4 when data.kind = nifti (flair, t1, t1ce, t2)");
    }
    if (m.regions.empty() && m.num_classes != 4) {
      r.FailAt("model.num_classes", std::to_string(m.num_classes),
               "must be 4 when data.kind = nifti (BraTS labels 0, 1, 2, 4 become classes 0..3)");
    }
    if (!m.regions.empty() && MaskClasses(m) != 4) {
      r.FailAt("model.regions", "",
               "must name classes up to 3 when data.kind = nifti (BraTS labels 0, 1, 2, 4 become "
               "classes 0..3; whole tumour, core, enhancing: [[1, 2, 3], [1, 3], [3]])");
    }
  }
  if (m.kind != ModelKind::kClassic) {
    const std::vector<int> total = PatchMultiple(m);
    for (size_t d = 0; d < c.data.size.size(); ++d) {
      if (c.data.size[d] % total[d] != 0) {
        r.FailAt("data.size", IntList(c.data.size),
                 "axis " + std::to_string(d) + " must be divisible by " + std::to_string(total[d]) +
                     (m.kind == ModelKind::kNnunet
                          ? ", the product of the architecture's strides on it; "
                          : ", the bundle's downsampling on it; ") +
                     NearestMultiples(c.data.size[d], total[d]));
      }
    }
  }
  if (m.kind == ModelKind::kClassic) {
    const int factor = 1 << static_cast<int>(m.features.size());
    for (int s : c.data.size) {
      if (s % factor != 0) {
        r.FailAt("data.size", IntList(c.data.size),
                 "each spatial size must be divisible by 2^levels = " + std::to_string(factor) +
                     " (model.features has " + std::to_string(m.features.size()) + " levels); " +
                     NearestMultiples(s, factor));
      }
    }
  }
}

// Batches, micro-batches and replicas; warm-up within the steps.
void CheckBatchRules(const Reader& r, const Config& c) {
  const TrainConfig& t = c.train;
  if (t.micro_batches > t.batch_size) {
    r.FailAt("train.micro_batches", std::to_string(t.micro_batches),
             "must be <= train.batch_size (" + std::to_string(t.batch_size) + ")");
  }
  if (t.batch_size % t.micro_batches != 0) {
    r.FailAt("train.batch_size", std::to_string(t.batch_size),
             "must be divisible by train.micro_batches (" + std::to_string(t.micro_batches) +
                 "); " + NearestMultiples(t.batch_size, t.micro_batches));
  }
  const int shards = t.micro_batches * c.pipeline.replicas;  // micro-batches of a whole batch
  if (c.pipeline.replicas > 1 && t.batch_size % shards != 0) {
    r.FailAt("train.batch_size", std::to_string(t.batch_size),
             "must be divisible by pipeline.replicas x train.micro_batches (" +
                 std::to_string(c.pipeline.replicas) + " x " + std::to_string(t.micro_batches) +
                 " = " + std::to_string(shards) + "); " + NearestMultiples(t.batch_size, shards));
  }
  if (t.warmup_steps >= t.steps) {
    r.FailAt("train.warmup_steps", std::to_string(t.warmup_steps),
             "must be < train.steps (" + std::to_string(t.steps) + ")");
  }
}

// What the stages keep, recompute and offload, and how they take turns.
void CheckActivationRules(const Reader& r, const Config& c) {
  const ModelConfig& m = c.model;
  const TrainConfig& t = c.train;
  const PipelineConfig& p = c.pipeline;
  if (p.lock == Lock::kOn && p.schedule != Schedule::kSequential) {
    r.FailAt("pipeline.lock", Quote(NameOf(p.lock)),
             "cannot be on with pipeline.schedule = " + NameOf(p.schedule) +
                 " (overlapped schedules need the lock off or stages on different devices); "
                 "set pipeline.lock to auto or off, or pipeline.schedule to sequential");
  }
  // Blocks inside a level: the classic U-Net's conv-norm-ReLU and nnU-Net's
  // conv blocks and residual blocks; a TorchScript bundle's level is one file.
  if (m.kind == ModelKind::kTorchscript) {
    if (t.checkpointing == Checkpointing::kBlocks) {
      r.FailAt("train.checkpointing", Quote(NameOf(t.checkpointing)),
               "needs blocks inside the levels, and a torchscript bundle's level is one opaque "
               "module; use levels");
    }
    if (p.recompute_unit == RecomputeUnit::kBlock) {
      r.FailAt("pipeline.recompute_unit", Quote(NameOf(p.recompute_unit)),
               "needs blocks inside the levels, and a torchscript bundle's level is one opaque "
               "module; use level");
    }
  }
  if (p.recompute_unit != RecomputeUnit::kLevel && p.activations != Activations::kRecompute) {
    r.FailAt("pipeline.recompute_unit", Quote(NameOf(p.recompute_unit)),
             "applies only with pipeline.activations = recompute (keep recomputes nothing); set "
             "pipeline.activations to recompute");
  }
  if (t.offload == OnOff::kOn && t.checkpointing == Checkpointing::kOff) {
    r.FailAt("train.offload", Quote(NameOf(t.offload)),
             "parks what checkpointing keeps (each unit's input), and without it autograd keeps "
             "every activation itself; set train.checkpointing to levels or blocks");
  }
  if (p.offload == OnOff::kOn && p.activations != Activations::kRecompute) {
    r.FailAt("pipeline.offload", Quote(NameOf(p.offload)),
             "parks what recompute keeps (each unit's input), and with keep autograd holds every "
             "saved tensor itself; set pipeline.activations to recompute");
  }
}

}  // namespace

void CheckConsistency(const Reader& r, const Config& c) {
  CheckValidateRules(r, c);
  CheckModelRules(r, c);
  CheckDataRules(r, c);
  CheckBatchRules(r, c);
  CheckActivationRules(r, c);
  // The parts, cuts and placement lists against the model's levels.
  ResolveLayout(c);
}

}  // namespace up
