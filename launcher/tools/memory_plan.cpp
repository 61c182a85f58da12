// See memory_plan.h.
#include "launcher/tools/memory_plan.h"

#include <algorithm>
#include <cmath>

#include "common/errors.h"
#include "common/model_geometry.h"

namespace up {
namespace {

int64_t Pow(int64_t base, int exp) {
  int64_t r = 1;
  for (int i = 0; i < exp; ++i) r *= base;
  return r;
}

int64_t Voxels(const Config& c, int level) {
  int64_t v = 1;
  for (int s : c.data.size) v *= s >> level;
  return v;
}

// A double convolution in -> out: two bias-free 3^d convs, two norms.
void AddDoubleConv(const Config& c, int64_t in, int64_t out, int64_t voxels, StageCounts* s) {
  const int64_t k = Pow(3, c.model.dims);
  s->parameters += k * in * out + k * out * out + 4 * out;         // convs + two affine norms
  if (c.model.norm == "batch") s->buffer_elements += 4 * out + 2;  // running mean/var (+ counters)
  s->activation_elements += in * voxels + 4 * out * voxels;
  s->largest_tensor = std::max(s->largest_tensor, std::max(in, out) * voxels);
}

int BytesPerActivation(const Config& c) { return c.train.precision == "fp32" ? 4 : 2; }

int64_t StateBytes(const Config& c, const StageCounts& s) {
  const int64_t optimizer_copies = c.train.optimizer == "adam" ? 2 : (c.train.momentum > 0 ? 1 : 0);
  return 4 * (s.parameters * (2 + optimizer_copies) + s.buffer_elements);
}

int64_t VoxelsAt(const Config& c, const std::vector<int>& scale) {
  int64_t v = 1;
  for (size_t d = 0; d < c.data.size.size(); ++d) v *= c.data.size[d] / scale[d];
  return v;
}

int64_t Product(const std::vector<int>& v) {
  int64_t r = 1;
  for (int x : v) r *= x;
  return r;
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

StageCounts NnunetEncoderCounts(const Config& c) {
  const NnunetArchitecture& a = c.model.nnunet;
  StageCounts s;
  int64_t in = c.model.in_channels;
  s.activation_elements += in * VoxelsAt(c, StageScale(a, 0));  // the input, kept by conv 1
  const bool residual = a.network_class == "ResidualEncoderUNet";
  if (residual) {  // the stem: one conv at full resolution
    AddNnunetConv(c, in, a.features[0], Product(a.kernel_sizes[0]), a.conv_bias,
                  VoxelsAt(c, StageScale(a, 0)), &s);
    in = a.features[0];
  }
  for (int st = 0; st < a.stages(); ++st) {
    const int64_t f = a.features[st];
    const int64_t k = Product(a.kernel_sizes[st]);
    const int64_t v = VoxelsAt(c, StageScale(a, st));
    for (int b = 0; b < a.blocks[st]; ++b) {
      const int64_t block_in = b == 0 ? in : f;
      AddNnunetConv(c, block_in, f, k, a.conv_bias, v, &s);
      if (!residual) continue;
      AddNnunetConv(c, f, f, k, a.conv_bias, v, &s);  // conv2
      const bool strided = b == 0 && Product(a.strides[st]) > 1;
      if (strided) s.activation_elements += block_in * v;                 // the pooled skip
      if (block_in != f) AddNnunetConv(c, block_in, f, 1, false, v, &s);  // projection
      s.activation_elements += f * v;  // the sum, which the nonlin overwrites
    }
    in = f;
  }
  return s;
}

StageCounts NnunetDecoderCounts(const Config& c) {
  const NnunetArchitecture& a = c.model.nnunet;
  StageCounts s;
  const int n = a.stages();
  const int heads = c.train.deep_supervision ? n - 1 : 1;
  for (int i = n - 2; i >= 0; --i) {
    const int64_t below = a.features[i + 1];
    const int64_t f = a.features[i];
    const int64_t v = VoxelsAt(c, StageScale(a, i));
    s.parameters += below * f * Product(a.strides[i + 1]) + (a.conv_bias ? f : 0);  // transpconv
    s.activation_elements += 3 * f * v;  // the upsampled tensor and the concatenation
    for (int b = 0; b < a.decoder_convs[n - 2 - i]; ++b)
      AddNnunetConv(c, b == 0 ? 2 * f : f, f, Product(a.kernel_sizes[i]), a.conv_bias, v, &s);
    s.parameters += f * c.model.num_classes + c.model.num_classes;        // seg layer (all exist)
    if (i < heads) s.activation_elements += 2 * c.model.num_classes * v;  // logits, softmax
    s.largest_tensor = std::max(s.largest_tensor, 2 * f * v);
  }
  return s;
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

StageCounts BundleEncoderCounts(const Config& c) {
  StageCounts s;
  const TorchscriptBundle& b = c.model.bundle;
  const LevelGeometry g = Geometry(c.model);
  int64_t in = c.model.in_channels * VoxelsAt(c, std::vector<int>(c.data.size.size(), 1));
  for (size_t i = 0; i < b.encoder.size(); ++i) {
    AddBundleState(b.encoder[i], &s);
    const int64_t out = b.encoder[i].output[1] * VoxelsAt(c, g.scale[i]);
    s.activation_elements += in + 4 * out;
    s.largest_tensor = std::max({s.largest_tensor, in, out});
    in = out;
  }
  return s;
}

StageCounts BundleDecoderCounts(const Config& c) {
  StageCounts s;
  const TorchscriptBundle& b = c.model.bundle;
  const LevelGeometry g = Geometry(c.model);
  for (int i = b.levels() - 1; i >= 0; --i) {
    const BundleLevel& l = b.decoder[static_cast<size_t>(i)];
    AddBundleState(l, &s);
    const int64_t out = l.output[1] * VoxelsAt(c, g.scale[static_cast<size_t>(i)]);
    s.activation_elements += 6 * out;
    s.largest_tensor = std::max(s.largest_tensor, 2 * out);
  }
  for (const BundleLevel& h : b.heads) {
    AddBundleState(h, &s);
    if (h.level == 0 || c.train.deep_supervision)
      s.activation_elements +=
          2 * c.model.num_classes * VoxelsAt(c, g.scale[static_cast<size_t>(h.level)]);
  }
  return s;
}

}  // namespace

StageCounts EncoderCounts(const Config& c) {
  if (c.model.kind == "torchscript") return BundleEncoderCounts(c);
  if (c.model.kind == "nnunet") return NnunetEncoderCounts(c);
  StageCounts s;
  int64_t in = c.model.in_channels;
  const int levels = static_cast<int>(c.model.features.size());
  for (int i = 0; i < levels; ++i) {
    const int64_t f = c.model.features[i];
    AddDoubleConv(c, in, f, Voxels(c, i), &s);
    s.activation_elements += 2 * f * Voxels(c, i + 1);  // max-pool indices (int64 = 2 floats)
    in = f;
  }
  AddDoubleConv(c, in, 2 * in, Voxels(c, levels), &s);
  return s;
}

StageCounts DecoderCounts(const Config& c) {
  if (c.model.kind == "torchscript") return BundleDecoderCounts(c);
  if (c.model.kind == "nnunet") return NnunetDecoderCounts(c);
  StageCounts s;
  const int levels = static_cast<int>(c.model.features.size());
  int64_t in = 2 * c.model.features.back();
  for (int i = levels - 1; i >= 0; --i) {
    const int64_t f = c.model.features[i];
    s.parameters += in * f * Pow(2, c.model.dims) + f;  // transposed conv + bias
    AddDoubleConv(c, 2 * f, f, Voxels(c, i), &s);       // its input is the concatenation
    in = f;
  }
  s.parameters += c.model.features[0] * c.model.num_classes + c.model.num_classes;  // 1x1 head
  s.activation_elements += 2 * c.model.num_classes * Voxels(c, 0);  // logits, softmax
  s.largest_tensor = std::max(s.largest_tensor, 2 * c.model.features[0] * Voxels(c, 0));
  return s;
}

std::vector<PlanRow> PlanMemory(const Config& c, int64_t budget) {
  const StageCounts enc = EncoderCounts(c), dec = DecoderCounts(c);
  const int64_t n = c.train.batch_size / c.train.micro_batches;  // samples per micro-batch
  const int64_t m = c.train.micro_batches;
  const int64_t a = BytesPerActivation(c);
  const LevelGeometry g = Geometry(c.model);
  int64_t boundary = g.bottleneck_channels * VoxelsAt(c, g.scale.back());
  for (int i = 0; i < g.levels(); ++i) boundary += g.skip_channels[i] * VoxelsAt(c, g.scale[i]);
  const int64_t boundary_bytes = boundary * n * a;

  std::vector<PlanRow> rows;
  PlanRow single{"single-process", "forward+backward of one micro-batch"};
  single.state_bytes = StateBytes(c, enc) + StateBytes(c, dec);
  single.activation_bytes = (enc.activation_elements + dec.activation_elements) * n * a;
  single.workspace_bytes = 2 * std::max(enc.largest_tensor, dec.largest_tensor) * n * a;
  single.context_bytes = kContextAllowanceBytes;
  rows.push_back(single);

  // Checkpointing per level keeps each level's input (about the boundary:
  // the skips and the bottleneck, and the decoder levels' outputs of the same
  // sizes) and recomputes one level at a time: the largest is the decoder's
  // full-resolution level (its 2F-wide concatenation, two F-wide convs).
  PlanRow ckpt{"single-process checkpointing", "backward of the full-resolution level"};
  ckpt.state_bytes = single.state_bytes;
  ckpt.activation_bytes = 2 * boundary_bytes + 7 * g.skip_channels[0] * Voxels(c, 0) * n * a;
  ckpt.workspace_bytes = single.workspace_bytes;
  ckpt.context_bytes = kContextAllowanceBytes;
  rows.push_back(ckpt);

  for (const char* policy : {"keep", "recompute"}) {
    const bool keep = std::string(policy) == "keep";
    // Encoder turns: its state, its activations (all micro-batches with keep,
    // one at a time with recompute), the boundary it writes out.
    const int64_t enc_acts = enc.activation_elements * n * a * (keep ? m : 1);
    const int64_t enc_turn =
        StateBytes(c, enc) + enc_acts + boundary_bytes + 2 * enc.largest_tensor * n * a;
    // Decoder turn: its state and one micro-batch's activations, the boundary
    // and its gradients on the device; with keep, the encoder's kept
    // activations stay on the device too (autograd's saved tensors cannot be parked).
    const int64_t kept_from_encoder = keep ? enc.activation_elements * n * a * m : 0;
    const int64_t dec_turn = StateBytes(c, dec) + dec.activation_elements * n * a +
                             kept_from_encoder + 2 * boundary_bytes +
                             2 * dec.largest_tensor * n * a;
    PlanRow row{std::string("pipeline ") + policy,
                dec_turn >= enc_turn ? "decoder turn" : "encoder turn"};
    const bool dec_peak = dec_turn >= enc_turn;
    row.state_bytes = dec_peak ? StateBytes(c, dec) : StateBytes(c, enc);
    row.activation_bytes =
        dec_peak ? dec.activation_elements * n * a + kept_from_encoder : enc_acts;
    row.boundary_bytes = dec_peak ? 2 * boundary_bytes : boundary_bytes;
    row.workspace_bytes = 2 * (dec_peak ? dec.largest_tensor : enc.largest_tensor) * n * a;
    row.context_bytes = 2 * kContextAllowanceBytes;  // two processes, two contexts
    rows.push_back(row);
  }
  for (PlanRow& r : rows) {
    r.peak_bytes =
        r.state_bytes + r.activation_bytes + r.boundary_bytes + r.workspace_bytes + r.context_bytes;
    r.fits = r.peak_bytes <= budget;
  }
  return rows;
}

}  // namespace up
