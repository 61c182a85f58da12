// See level_counts.h.
#include "common/layout/level_counts.h"

#include <algorithm>

#include "common/layout/model_geometry.h"
#include "common/nnunet/nnunet_plans.h"

namespace up {
namespace {

int64_t Pow(int64_t base, int exp) {
  int64_t r = 1;
  for (int i = 0; i < exp; ++i) r *= base;
  return r;
}

int64_t Product(const std::vector<int>& v) {
  int64_t r = 1;
  for (int x : v) r *= x;
  return r;
}

// Ends a block that began when the level held `start` activation elements:
// `input` is what checkpointing the block keeps of it (its input), `held`
// what its rebuild holds besides the activations counted since `start` (the
// inputs its graph saves: an input nothing saves is let go once the block is
// rebuilt, level_checkpoint.h), `out` its output, whose gradient enters it.
// Its backward begins holding all of that and the gradient, and its last
// operation makes one more gradient of the output's size. `unsaved`: of the
// activations counted since `start`, what the rebuilt block's graph does not
// save (a lean block's output: NormAct saves only the norm's input).
void EndBlock(int64_t start, int64_t input, int64_t held, int64_t out, StageCounts* s,
              int64_t unsaved = 0) {
  s->block_checkpoint_elements += input;
  const int64_t block = s->activation_elements - start - unsaved + held + out;
  s->largest_block = std::max(s->largest_block, block);
  s->largest_backward = std::max(s->largest_backward, block + out);
}

// A convolution's backward inside a block, `in` -> `out` elements: its saved
// input, the gradients of its output and of its input, the kernel's copies of
// its input and its output's gradient for the weight gradient (oneDNN's
// blocked layout on AVX-512 CPUs; cuDNN's workspace on a GPU), and `held`,
// what the block's earlier operations still save then. Everything the
// block's later operations saved is gone by then: autograd frees each node's
// saved tensors as it runs, and nothing else holds the rebuilt block's
// (level_checkpoint.h).
void ConvBackward(int64_t in, int64_t out, int64_t held, StageCounts* s) {
  s->largest_backward = std::max(s->largest_backward, held + 3 * in + 2 * out);
}

// A lean concatenation convolution's backward (model.memory: lean,
// common/model/lean_block.h), its parts of `part` elements each: per part,
// its weight gradient (the part and the kernel's copy, the output's gradient
// and its copy) and then its input gradient once the part is let go. `held`:
// what the block's earlier operations save and the other part.
void LeanConcatBackward(int64_t part, int64_t out, int64_t held, StageCounts* s) {
  s->largest_backward = std::max(s->largest_backward, held + 2 * part + 2 * out);
}

// A level's checkpoint (its inputs) and its whole working set; a level that
// counted no blocks is its own block.
void EndLevel(int64_t input, StageCounts* s) {
  s->checkpoint_elements = input;
  s->largest_level = s->activation_elements + input;
  if (s->largest_block == 0) {
    s->largest_block = s->largest_level;
    s->block_checkpoint_elements = input;
  }
}

// A double convolution in -> out: two bias-free 3^d convs, two norms; each
// conv-norm-ReLU a block. `kept`: what checkpointing keeps of the first block
// (its inputs), `held`: what its rebuild holds besides its conv's input (an
// encoder level's input before the pooling; the decoder's level below, which
// the upsampling saves). `lean_concat`: the first conv takes its input as two
// halves without concatenating them (a lean decoder level): it saves the
// upsampled half, and the skip half, which its maker holds, is held too.
void AddDoubleConv(const Config& c, int64_t in, int64_t out, int64_t voxels, StageCounts* s,
                   int64_t kept, int64_t held, bool lean_concat = false) {
  const int64_t k = Pow(3, c.model.dims);
  s->parameters += k * in * out + k * out * out + 4 * out;  // convs + two affine norms
  if (c.model.norm == Norm::kBatch)
    s->buffer_elements += 4 * out + 2;  // running mean/var (+ counters)
  // Lean (model.memory), a block's output is not saved in its rebuild.
  const int64_t unsaved = c.model.memory == ModelMemory::kLean ? out * voxels : 0;
  int64_t start = s->activation_elements;
  if (lean_concat) {
    const int64_t part = in / 2 * voxels;
    s->activation_elements += part + 2 * out * voxels;
    EndBlock(start, kept, held + part, out * voxels, s, unsaved);
    LeanConcatBackward(part, out * voxels, held + part, s);
  } else {
    s->activation_elements += in * voxels + 2 * out * voxels;
    EndBlock(start, kept, held, out * voxels, s, unsaved);
    ConvBackward(in * voxels, out * voxels, held, s);
  }
  start = s->activation_elements;
  s->activation_elements += 2 * out * voxels;
  EndBlock(start, out * voxels, out * voxels, out * voxels, s, unsaved);  // its input
  ConvBackward(out * voxels, out * voxels, 0, s);
  s->largest_tensor = std::max(s->largest_tensor, std::max(in, out) * voxels);
}

// nnU-Net's ConvDropoutNormReLU in -> out at `voxels` (its output size):
// the conv's and the norm's outputs are kept (the nonlin runs in place).
void AddNnunetConv(const Config& c, int64_t in, int64_t out, int64_t kernel, bool bias,
                   int64_t voxels, StageCounts* s) {
  const NnunetArchitecture& a = c.model.nnunet;
  s->parameters += kernel * in * out + (bias ? out : 0);
  if (a.norm != "none") {
    if (a.norm_affine) s->parameters += 2 * out;
    if (a.norm == "batch") s->buffer_elements += 2 * out + 2;
  }
  s->activation_elements += (a.norm == "none" ? 1 : 2) * out * voxels;
  s->largest_tensor = std::max(s->largest_tensor, std::max(in, out) * voxels);
}

std::vector<StageCounts> NnunetEncoderLevels(const Config& c) {
  const NnunetArchitecture& a = c.model.nnunet;
  std::vector<StageCounts> levels(static_cast<size_t>(a.stages()));
  int64_t in = c.model.in_channels;
  levels[0].activation_elements += in * VoxelsAt(c, StageScale(a, 0));  // the input, kept
  // What each level takes in: the image, then the level above's output.
  std::vector<int64_t> level_input(static_cast<size_t>(a.stages()));
  level_input[0] = in * VoxelsAt(c, StageScale(a, 0));
  for (int st = 1; st < a.stages(); ++st)
    level_input[static_cast<size_t>(st)] = a.features[st - 1] * VoxelsAt(c, StageScale(a, st - 1));
  const bool residual = a.network_class == "ResidualEncoderUNet";
  if (residual) {  // the stem: one conv at full resolution, level 0's first block
    AddNnunetConv(c, in, a.features[0], Product(a.kernel_sizes[0]), a.conv_bias,
                  VoxelsAt(c, StageScale(a, 0)), &levels[0]);
    const int64_t stem_out = a.features[0] * VoxelsAt(c, StageScale(a, 0));
    EndBlock(level_input[0], level_input[0], level_input[0], stem_out, &levels[0]);  // its input
    ConvBackward(level_input[0], stem_out, 0, &levels[0]);
    in = a.features[0];
  }
  for (int st = 0; st < a.stages(); ++st) {
    StageCounts& s = levels[static_cast<size_t>(st)];
    const int64_t f = a.features[st];
    const int64_t k = Product(a.kernel_sizes[st]);
    const int64_t v = VoxelsAt(c, StageScale(a, st));
    for (int b = 0; b < a.blocks[st]; ++b) {
      const int64_t block_in = b == 0 ? in : f;
      const int64_t start = s.activation_elements;
      // A block's input: the level's (the stem's output at level 0 of a ResEnc) or the one
      // before's.
      const int64_t kept = b > 0 ? f * v : (residual && st == 0 ? f * v : level_input[st]);
      AddNnunetConv(c, block_in, f, k, a.conv_bias, v, &s);
      ConvBackward(kept, f * v, 0, &s);  // the first conv takes the block's input
      if (residual) {
        AddNnunetConv(c, f, f, k, a.conv_bias, v, &s);  // conv2
        // Its backward comes first: the block's input and the first norm's
        // input are still saved then.
        ConvBackward(f * v, f * v, kept + f * v, &s);
        const bool strided = b == 0 && Product(a.strides[st]) > 1;
        if (strided) s.activation_elements += block_in * v;                 // the pooled skip
        if (block_in != f) AddNnunetConv(c, block_in, f, 1, false, v, &s);  // projection
        s.activation_elements += f * v;  // the sum, which the nonlin overwrites
      }
      // Lean, a plain block's output (its norm's, the nonlin's) is not saved.
      const int64_t unsaved =
          !residual && c.model.memory == ModelMemory::kLean && a.norm != "none" ? f * v : 0;
      EndBlock(start, kept, kept, f * v, &s, unsaved);  // its input
    }
    EndLevel(level_input[static_cast<size_t>(st)], &s);
    in = f;
  }
  return levels;
}

std::vector<StageCounts> NnunetDecoderLevels(const Config& c) {
  const NnunetArchitecture& a = c.model.nnunet;
  const int n = a.stages();
  std::vector<StageCounts> levels(static_cast<size_t>(n - 1));
  const int heads = c.train.deep_supervision ? n - 1 : 1;
  for (int i = n - 2; i >= 0; --i) {
    StageCounts& s = levels[static_cast<size_t>(i)];
    const int64_t below = a.features[i + 1];
    const int64_t f = a.features[i];
    const int64_t v = VoxelsAt(c, StageScale(a, i));
    s.parameters += below * f * Product(a.strides[i + 1]) + (a.conv_bias ? f : 0);  // transpconv
    // Its inputs: the level below's output and skip i.
    const int64_t below_elements = below * VoxelsAt(c, StageScale(a, i + 1));
    const int64_t input = below_elements + f * v;
    // Lean: the first conv takes the upsampled tensor and the skip as they
    // are, and saves both (the skip's maker holds it anyway).
    const bool lean = c.model.memory == ModelMemory::kLean;
    const int64_t upsampled = s.activation_elements;
    s.activation_elements += f * v;  // the upsampled tensor, which the rebuild lets go
    const int64_t concatenated = s.activation_elements;
    if (!lean) s.activation_elements += 2 * f * v;  // the concatenation
    for (int b = 0; b < a.decoder_convs[n - 2 - i]; ++b) {
      // The first block is the upsampling, the concatenation and the first
      // conv block: its rebuild holds the level below's output (the
      // upsampling saves it), the concatenation on, and its output's gradient.
      const int64_t start = b > 0 ? s.activation_elements : (lean ? upsampled : concatenated);
      const int64_t held = b > 0 ? f * v : below_elements + (lean ? f * v : 0);
      AddNnunetConv(c, b == 0 ? 2 * f : f, f, Product(a.kernel_sizes[i]), a.conv_bias, v, &s);
      EndBlock(start, b == 0 ? input : f * v, held, f * v, &s,
               lean && a.norm != "none" ? f * v : 0);
      if (b == 0 && lean) {
        LeanConcatBackward(f * v, f * v, held, &s);
      } else {
        ConvBackward(b == 0 ? 2 * f * v : f * v, f * v, b == 0 ? below_elements : 0, &s);
      }
    }
    EndLevel(input, &s);
    s.parameters += f * c.model.num_classes + c.model.num_classes;        // seg layer (all exist)
    if (i < heads) s.activation_elements += 2 * c.model.num_classes * v;  // logits, softmax
    s.largest_tensor = std::max(s.largest_tensor, 2 * f * v);
  }
  return levels;
}

// torchscript: parameters and buffers exact (the manifest lists them); the
// activations are the classic formula on the levels' own shapes: a level
// whose output is F wide over V voxels keeps its input and ~4*F*V (a decoder
// level ~6*F*V: the concatenation too), a head its logits and softmax. The
// levels are the user's code: `plan` measures them, and that is the figure.
void AddBundleState(const BundleLevel& l, StageCounts* s) {
  for (const BundleTensor& t : l.state) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    (t.buffer ? s->buffer_elements : s->parameters) += n;
  }
}

std::vector<StageCounts> BundleEncoderLevels(const Config& c) {
  const TorchscriptBundle& b = c.model.bundle;
  std::vector<StageCounts> levels(b.encoder.size());
  const LevelGeometry g = Geometry(c.model);
  int64_t in = c.model.in_channels * VoxelsAt(c, std::vector<int>(c.data.size.size(), 1));
  for (size_t i = 0; i < b.encoder.size(); ++i) {
    StageCounts& s = levels[i];
    AddBundleState(b.encoder[i], &s);
    const int64_t out = b.encoder[i].output[1] * VoxelsAt(c, g.scale[i]);
    s.activation_elements += in + 4 * out;
    s.largest_tensor = std::max({s.largest_tensor, in, out});
    EndLevel(in, &s);
    in = out;
  }
  return levels;
}

std::vector<StageCounts> BundleDecoderLevels(const Config& c) {
  const TorchscriptBundle& b = c.model.bundle;
  std::vector<StageCounts> levels(static_cast<size_t>(b.levels()));
  const LevelGeometry g = Geometry(c.model);
  for (int i = b.levels() - 1; i >= 0; --i) {
    StageCounts& s = levels[static_cast<size_t>(i)];
    const BundleLevel& l = b.decoder[static_cast<size_t>(i)];
    AddBundleState(l, &s);
    const int64_t out = l.output[1] * VoxelsAt(c, g.scale[static_cast<size_t>(i)]);
    s.activation_elements += 6 * out;
    s.largest_tensor = std::max(s.largest_tensor, 2 * out);
    EndLevel(2 * out, &s);  // about its inputs: the level below's output and the skip
  }
  for (const BundleLevel& h : b.heads) {
    StageCounts& s = levels[static_cast<size_t>(h.level)];
    AddBundleState(h, &s);
    if (h.level == 0 || c.train.deep_supervision)
      s.activation_elements +=
          2 * c.model.num_classes * VoxelsAt(c, g.scale[static_cast<size_t>(h.level)]);
  }
  return levels;
}

StageCounts Sum(const std::vector<StageCounts>& levels) {
  StageCounts total;
  for (const StageCounts& l : levels) total.Merge(l);
  return total;
}

}  // namespace

void StageCounts::Merge(const StageCounts& o) {
  parameters += o.parameters;
  buffer_elements += o.buffer_elements;
  activation_elements += o.activation_elements;
  largest_tensor = std::max(largest_tensor, o.largest_tensor);
  checkpoint_elements += o.checkpoint_elements;
  block_checkpoint_elements += o.block_checkpoint_elements;
  largest_level = std::max(largest_level, o.largest_level);
  largest_block = std::max(largest_block, o.largest_block);
  largest_backward = std::max(largest_backward, o.largest_backward);
}

std::vector<StageCounts> EncoderLevelCounts(const Config& c) {
  if (c.model.kind == ModelKind::kTorchscript) return BundleEncoderLevels(c);
  if (c.model.kind == ModelKind::kNnunet) return NnunetEncoderLevels(c);
  const int levels = static_cast<int>(c.model.features.size());
  std::vector<StageCounts> out(static_cast<size_t>(levels + 1));
  int64_t in = c.model.in_channels;
  // Level i's input: the image, or level i - 1's output before the pooling.
  int64_t input = in * VoxelsAtLevel(c, 0);
  for (int i = 0; i < levels; ++i) {
    const int64_t f = c.model.features[i];
    StageCounts& s = out[static_cast<size_t>(i)];
    // The pooling saves the level's input (level 0's input is its conv's).
    AddDoubleConv(c, in, f, VoxelsAtLevel(c, i), &s, input, i == 0 ? 0 : input);
    EndLevel(input, &s);
    // The max-pool feeding level i + 1 runs there; its indices (int64 = 2 floats).
    out[static_cast<size_t>(i + 1)].activation_elements += 2 * f * VoxelsAtLevel(c, i + 1);
    input = f * VoxelsAtLevel(c, i);
    in = f;
  }
  AddDoubleConv(c, in, 2 * in, VoxelsAtLevel(c, levels), &out.back(), input, input);
  EndLevel(input, &out.back());
  return out;
}

std::vector<StageCounts> DecoderLevelCounts(const Config& c) {
  if (c.model.kind == ModelKind::kTorchscript) return BundleDecoderLevels(c);
  if (c.model.kind == ModelKind::kNnunet) return NnunetDecoderLevels(c);
  const int levels = static_cast<int>(c.model.features.size());
  std::vector<StageCounts> out(static_cast<size_t>(levels));
  int64_t in = 2 * c.model.features.back();
  for (int i = levels - 1; i >= 0; --i) {
    StageCounts& s = out[static_cast<size_t>(i)];
    const int64_t f = c.model.features[i];
    s.parameters += in * f * Pow(2, c.model.dims) + f;  // transposed conv + bias
    // Its inputs, the level below's output and skip i. Its first block's conv
    // takes their concatenation; the upsampling saves the level below's output,
    // and the upsampled tensor and the skip go once concatenated.
    const int64_t below = in * VoxelsAtLevel(c, i + 1);
    const int64_t input = below + f * VoxelsAtLevel(c, i);
    AddDoubleConv(c, 2 * f, f, VoxelsAtLevel(c, i), &s, input, below,
                  c.model.memory == ModelMemory::kLean);
    EndLevel(input, &s);
    in = f;
  }
  StageCounts& top = out[0];
  top.parameters += c.model.features[0] * c.model.num_classes + c.model.num_classes;  // 1x1 head
  top.activation_elements += 2 * c.model.num_classes * VoxelsAtLevel(c, 0);  // logits, softmax
  top.largest_tensor = std::max(top.largest_tensor, 2 * c.model.features[0] * VoxelsAtLevel(c, 0));
  return out;
}

StageCounts EncoderCounts(const Config& c) { return Sum(EncoderLevelCounts(c)); }
StageCounts DecoderCounts(const Config& c) { return Sum(DecoderLevelCounts(c)); }

int64_t FloorBytes(const Config& c) {
  const bool blocks = c.model.kind != ModelKind::kTorchscript;
  int64_t floor = 0;
  for (const std::vector<StageCounts>& half : {EncoderLevelCounts(c), DecoderLevelCounts(c)}) {
    for (const StageCounts& l : half) {
      // A level without blocks (or a kind that shows none): its working set
      // and a workspace of twice its largest tensor.
      const int64_t unit = blocks && l.largest_backward > 0
                               ? l.largest_backward
                               : l.largest_level + 2 * l.largest_tensor;
      floor = std::max(floor, unit);
    }
  }
  return floor * BytesPerActivation(c);
}

int64_t VoxelsAt(const Config& c, const std::vector<int>& scale) {
  int64_t v = 1;
  for (size_t d = 0; d < c.data.size.size(); ++d) v *= c.data.size[d] / scale[d];
  return v;
}

int64_t VoxelsAtLevel(const Config& c, int level) {
  int64_t v = 1;
  for (int s : c.data.size) v *= s >> level;
  return v;
}

int BytesPerActivation(const Config& c) { return c.train.precision == Precision::kFp32 ? 4 : 2; }

int64_t StateBytes(const Config& c, const StageCounts& s) {
  const int64_t optimizer_copies =
      c.train.optimizer == Optimizer::kAdam ? 2 : (c.train.momentum > 0 ? 1 : 0);
  return TurnStateBytes(s) + 4 * s.parameters * optimizer_copies;
}

int64_t TurnStateBytes(const StageCounts& s) { return 4 * (s.parameters * 2 + s.buffer_elements); }

}  // namespace up
