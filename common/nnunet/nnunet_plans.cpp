// nnU-Net plans; see nnunet_plans.h. yaml-cpp reads the JSON (YAML 1.2 is a
// superset of it).
#include "common/nnunet/nnunet_plans.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "common/base/errors.h"
#include "common/base/fs_util.h"

namespace up {
namespace {

[[noreturn]] void Fail(const std::string& where, const std::string& what) {
  throw UsageError("config: " + where + ": " + what);
}

std::string FlowText(const YAML::Node& node) {
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

// The class name without its module path ("...unet.ResidualEncoderUNet").
std::string ShortName(const std::string& dotted) {
  const size_t dot = dotted.rfind('.');
  return dot == std::string::npos ? dotted : dotted.substr(dot + 1);
}

long long Integer(const YAML::Node& node, const std::string& where) {
  if (!node.IsScalar()) Fail(where, FlowText(node) + " is not an integer");
  try {
    size_t used = 0;
    const long long v = std::stoll(node.Scalar(), &used);
    if (used != node.Scalar().size()) throw std::invalid_argument("trailing");
    return v;
  } catch (const std::exception&) {
    Fail(where, "'" + node.Scalar() + "' is not an integer");
  }
}

int Bounded(const YAML::Node& node, const std::string& where, long long max) {
  const long long v = Integer(node, where);
  if (v < 1 || v > max)
    Fail(where, std::to_string(v) + ": must be in [1, " + std::to_string(max) + "]");
  return static_cast<int>(v);
}

double Number(const YAML::Node& node, const std::string& where) {
  if (!node.IsScalar()) Fail(where, FlowText(node) + " is not a number");
  try {
    size_t used = 0;
    const double v = std::stod(node.Scalar(), &used);
    if (used != node.Scalar().size() || !std::isfinite(v)) throw std::invalid_argument("bad");
    return v;
  } catch (const std::exception&) {
    Fail(where, "'" + node.Scalar() + "' is not a number");
  }
}

bool Boolean(const YAML::Node& node, const std::string& where) {
  if (node.IsScalar()) {
    const std::string& s = node.Scalar();
    if (s == "true" || s == "True") return true;
    if (s == "false" || s == "False") return false;
  }
  Fail(where, FlowText(node) + " is not true or false");
}

// One `item` for each entry of a list, or `count` copies of one for a
// scalar; a list of another length fails with `wrong_length(its length)`.
template <typename T, typename Item, typename WrongLength>
std::vector<T> OneOrList(const YAML::Node& node, size_t count, const std::string& where, Item item,
                         WrongLength wrong_length) {
  std::vector<T> out;
  if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i)
      out.push_back(item(node[i], where + "[" + std::to_string(i) + "]"));
  } else {
    out.assign(count, item(node, where));
  }
  if (out.size() != count) Fail(where, wrong_length(out.size()));
  return out;
}

std::string WrongStageCount(size_t has, size_t count) {
  return "has " + std::to_string(has) + " entries; expected " + std::to_string(count) +
         " (one per stage)";
}

// An int, or a list of `count` ints; each in [1, max].
std::vector<int> PerStage(const YAML::Node& node, size_t count, const std::string& where,
                          long long max) {
  return OneOrList<int>(
      node, count, where,
      [max](const YAML::Node& n, const std::string& w) { return Bounded(n, w, max); },
      [count](size_t has) { return WrongStageCount(has, count); });
}

// kernel_sizes / strides: an int, a list of ints (one per stage), or a list
// of per-axis lists; each in [1, max].
std::vector<std::vector<int>> PerStageAxis(const YAML::Node& node, size_t count, int dims,
                                           const std::string& where, long long max) {
  const size_t axes = static_cast<size_t>(dims);
  auto per_axis = [&](const YAML::Node& n, const std::string& w) {
    return OneOrList<int>(
        n, axes, w,
        [max](const YAML::Node& x, const std::string& xw) { return Bounded(x, xw, max); },
        [&](size_t has) {
          return FlowText(n) + " has " + std::to_string(has) + " axes; the conv_op is " +
                 std::to_string(dims) + "-D";
        });
  };
  return OneOrList<std::vector<int>>(node, count, where, per_axis,
                                     [count](size_t has) { return WrongStageCount(has, count); });
}

// "torch.nn.modules.conv.Conv3d", "torch.nn.Conv3d" or "Conv3d" -> "Conv3d";
// null -> "".
std::string OpName(const YAML::Node& node, const std::string& where) {
  if (!node.IsDefined() || node.IsNull()) return "";
  if (!node.IsScalar()) Fail(where, FlowText(node) + " is not an op name");
  return ShortName(node.Scalar());
}

void ReadNorm(const YAML::Node& kw, int dims, NnunetArchitecture* a, const std::string& where) {
  const std::string d = std::to_string(dims);
  const std::string op = OpName(kw["norm_op"], where + ".norm_op");
  if (op.empty()) {
    a->norm = "none";
  } else if (op == "InstanceNorm" + d + "d") {
    a->norm = "instance";
    a->norm_affine = false;  // torch's default for instance norm
  } else if (op == "BatchNorm" + d + "d") {
    a->norm = "batch";
  } else {
    Fail(where + ".norm_op", "'" + op + "' is not built; supported: InstanceNorm" + d +
                                 "d, BatchNorm" + d + "d or null (matching the " + d +
                                 "-D conv_op)");
  }
  const YAML::Node args = kw["norm_op_kwargs"];
  if (!args.IsDefined() || args.IsNull()) return;
  if (!args.IsMap()) Fail(where + ".norm_op_kwargs", FlowText(args) + " is not a mapping");
  for (const auto& kv : args) {
    const std::string key = kv.first.Scalar();
    const std::string w = where + ".norm_op_kwargs." + key;
    if (key == "eps") {
      a->norm_eps = Number(kv.second, w);
    } else if (key == "affine") {
      a->norm_affine = Boolean(kv.second, w);
    } else if (key == "momentum" && a->norm == "batch") {
      a->norm_momentum = Number(kv.second, w);
    } else {
      Fail(w, "not supported for " + op + "; supported: eps, affine" +
                  (a->norm == "batch" ? std::string(", momentum") : std::string()));
    }
  }
}

void ReadNonlin(const YAML::Node& kw, NnunetArchitecture* a, const std::string& where) {
  const std::string op = OpName(kw["nonlin"], where + ".nonlin");
  if (op.empty()) {
    a->nonlin = "none";
  } else if (op == "LeakyReLU") {
    a->nonlin = "leaky_relu";
  } else if (op == "ReLU") {
    a->nonlin = "relu";
  } else {
    Fail(where + ".nonlin", "'" + op + "' is not built; supported: LeakyReLU, ReLU or null");
  }
  const YAML::Node args = kw["nonlin_kwargs"];
  if (!args.IsDefined() || args.IsNull()) return;
  if (!args.IsMap()) Fail(where + ".nonlin_kwargs", FlowText(args) + " is not a mapping");
  for (const auto& kv : args) {
    const std::string key = kv.first.Scalar();
    const std::string w = where + ".nonlin_kwargs." + key;
    if (key == "inplace") {
      Boolean(kv.second, w);  // in place or not, the values are the same
    } else if (key == "negative_slope" && a->nonlin == "leaky_relu") {
      a->negative_slope = Number(kv.second, w);
    } else {
      Fail(w, "not supported for " + op + "; supported: inplace" +
                  (a->nonlin == "leaky_relu" ? std::string(", negative_slope") : std::string()));
    }
  }
}

std::string IntsText(const std::vector<int>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

std::string NestedText(const std::vector<std::vector<int>>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + IntsText(v[i]);
  return out + "]";
}

std::string Real(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

}  // namespace

NnunetArchitecture ParseNnunetArchitecture(const YAML::Node& node, const std::string& where) {
  if (!node.IsMap())
    Fail(where,
         "expected a mapping with network_class_name and arch_kwargs (a plan's "
         "configurations.NAME.architecture)");
  NnunetArchitecture a;
  const YAML::Node cls = node["network_class_name"];
  if (!cls.IsDefined() || !cls.IsScalar()) Fail(where + ".network_class_name", "missing");
  a.network_class = ShortName(cls.Scalar());
  if (a.network_class != "PlainConvUNet" && a.network_class != "ResidualEncoderUNet")
    Fail(where + ".network_class_name",
         "'" + cls.Scalar() +
             "' is not built; supported: dynamic_network_architectures' PlainConvUNet and "
             "ResidualEncoderUNet");
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    if (key != "network_class_name" && key != "arch_kwargs" && key != "_kw_requires_import")
      Fail(where + "." + key,
           "not an entry of a plan's architecture; expected network_class_name, arch_kwargs, "
           "_kw_requires_import");
  }
  const YAML::Node kw = node["arch_kwargs"];
  const std::string w = where + ".arch_kwargs";
  if (!kw.IsDefined() || !kw.IsMap()) Fail(w, "missing (a mapping of the network's arguments)");

  const bool residual = a.network_class == "ResidualEncoderUNet";
  const std::string blocks_key = residual ? "n_blocks_per_stage" : "n_conv_per_stage";
  const std::set<std::string> known{
      "n_stages",   "features_per_stage",       "conv_op",   "kernel_sizes", "strides",
      blocks_key,   "n_conv_per_stage_decoder", "conv_bias", "norm_op",      "norm_op_kwargs",
      "dropout_op", "dropout_op_kwargs",        "nonlin",    "nonlin_kwargs"};
  for (const auto& kv : kw) {
    const std::string key = kv.first.Scalar();
    if (!known.count(key)) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      Fail(w + "." + key,
           "not an argument of " + a.network_class + " that is built; supported: " + list);
    }
  }
  auto need = [&](const std::string& key) {
    const YAML::Node n = kw[key];
    if (!n.IsDefined()) Fail(w + "." + key, "missing");
    return n;
  };

  const std::string conv = OpName(need("conv_op"), w + ".conv_op");
  if (conv == "Conv2d") {
    a.dims = 2;
  } else if (conv == "Conv3d") {
    a.dims = 3;
  } else {
    Fail(w + ".conv_op", "'" + conv + "' is not built; supported: Conv2d, Conv3d");
  }
  const long long n = Integer(need("n_stages"), w + ".n_stages");
  if (n < 2 || n > 10) Fail(w + ".n_stages", std::to_string(n) + ": must be in [2, 10]");
  const size_t stages = static_cast<size_t>(n);
  a.features = PerStage(need("features_per_stage"), stages, w + ".features_per_stage", 1 << 16);
  a.kernel_sizes = PerStageAxis(need("kernel_sizes"), stages, a.dims, w + ".kernel_sizes", 31);
  for (size_t s = 0; s < stages; ++s)
    for (int k : a.kernel_sizes[s])
      if (k % 2 == 0)
        Fail(w + ".kernel_sizes[" + std::to_string(s) + "]",
             IntsText(a.kernel_sizes[s]) + ": every kernel size must be odd");
  a.strides = PerStageAxis(need("strides"), stages, a.dims, w + ".strides", 8);
  a.blocks = PerStage(need(blocks_key), stages, w + "." + blocks_key, 64);
  a.decoder_convs =
      PerStage(need("n_conv_per_stage_decoder"), stages - 1, w + ".n_conv_per_stage_decoder", 64);
  if (kw["conv_bias"].IsDefined()) a.conv_bias = Boolean(kw["conv_bias"], w + ".conv_bias");
  ReadNorm(kw, a.dims, &a, w);
  if (!OpName(kw["dropout_op"], w + ".dropout_op").empty())
    Fail(w + ".dropout_op",
         FlowText(kw["dropout_op"]) +
             ": dropout is not built (it would make the stages draw different random masks "
             "from the single-process trainer); set it to null, as nnU-Net's planners do");
  ReadNonlin(kw, &a, w);
  return a;
}

NnunetPlan ReadNnunetPlan(const std::string& path, const std::string& configuration) {
  const std::string where = "model.plans = '" + path + "'";
  std::string text;
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || !std::filesystem::is_regular_file(path, ec))
    Fail(where, "not a readable file; give the path of an nnU-Net plans JSON");
  if (size > (64u << 20)) Fail(where, "larger than 64 MiB; is it a plans JSON?");
  try {
    text = ReadFile(path);
  } catch (const Error& e) {
    throw UsageError("config: " + where + ": cannot read it (" + e.what() +
                     "); give the path of an nnU-Net plans JSON");
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    Fail(where, std::string("not valid JSON: ") + e.what());
  }
  if (!root.IsMap() || !root["configurations"].IsMap())
    Fail(where, "has no 'configurations' mapping; is it an nnU-Net plans file?");
  const YAML::Node configs = root["configurations"];
  YAML::Node c = configs[configuration];
  if (!c.IsDefined()) {
    std::string names;
    for (const auto& kv : configs) names += (names.empty() ? "" : ", ") + kv.first.Scalar();
    throw UsageError("config: model.configuration = '" + configuration + "': not in " + path +
                     "; it has " + names);
  }
  const std::string cw = where + ": configurations." + configuration;
  // A configuration may inherit from another (nnU-Net's "inherits_from"): a
  // key it does not set comes from its parent, then the parent's parent.
  // `cur.reset` moves the handle; `cur = ...` would overwrite the node it
  // points at (yaml-cpp's assignment), turning the child into its parent.
  auto lookup = [&](const std::string& key) {
    std::set<std::string> seen{configuration};
    YAML::Node cur;
    cur.reset(c);
    while (!cur[key].IsDefined() && cur["inherits_from"].IsDefined()) {
      const std::string parent = cur["inherits_from"].Scalar();
      if (!seen.insert(parent).second || !configs[parent].IsDefined())
        Fail(cw, "inherits_from '" + parent + "', which is missing or circular");
      cur.reset(configs[parent]);
    }
    return cur[key];
  };

  NnunetPlan plan;
  const YAML::Node arch = lookup("architecture");
  if (!arch.IsDefined()) Fail(cw, "has no architecture");
  plan.architecture = ParseNnunetArchitecture(arch, cw + ".architecture");
  const YAML::Node patch = lookup("patch_size");
  if (!patch.IsDefined() || !patch.IsSequence()) Fail(cw, "has no patch_size list");
  for (size_t i = 0; i < patch.size(); ++i)
    plan.patch_size.push_back(static_cast<int>(
        Bounded(patch[i], cw + ".patch_size[" + std::to_string(i) + "]", 1 << 16)));
  if (plan.patch_size.size() != static_cast<size_t>(plan.architecture.dims))
    Fail(cw + ".patch_size", "has " + std::to_string(plan.patch_size.size()) +
                                 " axes; the architecture is " +
                                 std::to_string(plan.architecture.dims) + "-D");
  const YAML::Node batch = lookup("batch_size");
  if (batch.IsDefined()) plan.batch_size = Bounded(batch, cw + ".batch_size", 1 << 16);
  const YAML::Node dice = lookup("batch_dice");
  if (dice.IsDefined()) plan.batch_dice = Boolean(dice, cw + ".batch_dice");
  return plan;
}

std::string NnunetArchitectureText(const NnunetArchitecture& a) {
  const std::string d = std::to_string(a.dims);
  const bool residual = a.network_class == "ResidualEncoderUNet";
  auto q = [](const std::string& s) { return "\"" + s + "\""; };
  std::string norm = "null";
  std::string norm_kwargs = "null";
  if (a.norm != "none") {
    norm = q(a.norm == "instance" ? "torch.nn.modules.instancenorm.InstanceNorm" + d + "d"
                                  : "torch.nn.modules.batchnorm.BatchNorm" + d + "d");
    norm_kwargs = "{\"eps\": " + Real(a.norm_eps) +
                  ", \"affine\": " + (a.norm_affine ? "true" : "false") +
                  (a.norm == "batch" ? ", \"momentum\": " + Real(a.norm_momentum) : "") + "}";
  }
  std::string nonlin = "null";
  std::string nonlin_kwargs = "null";
  if (a.nonlin == "leaky_relu") {
    nonlin = q("torch.nn.LeakyReLU");
    nonlin_kwargs = "{\"inplace\": true, \"negative_slope\": " + Real(a.negative_slope) + "}";
  } else if (a.nonlin == "relu") {
    nonlin = q("torch.nn.ReLU");
    nonlin_kwargs = "{\"inplace\": true}";
  }
  // JSON, which is also YAML: the plan's own form of it.
  return "{\"network_class_name\": " +
         q("dynamic_network_architectures.architectures.unet." + a.network_class) +
         ", \"arch_kwargs\": {\"n_stages\": " + std::to_string(a.stages()) +
         ", \"features_per_stage\": " + IntsText(a.features) +
         ", \"conv_op\": " + q("torch.nn.modules.conv.Conv" + d + "d") +
         ", \"kernel_sizes\": " + NestedText(a.kernel_sizes) +
         ", \"strides\": " + NestedText(a.strides) + ", " +
         q(residual ? "n_blocks_per_stage" : "n_conv_per_stage") + ": " + IntsText(a.blocks) +
         ", \"n_conv_per_stage_decoder\": " + IntsText(a.decoder_convs) +
         ", \"conv_bias\": " + (a.conv_bias ? "true" : "false") + ", \"norm_op\": " + norm +
         ", \"norm_op_kwargs\": " + norm_kwargs +
         ", \"dropout_op\": null, \"dropout_op_kwargs\": null, \"nonlin\": " + nonlin +
         ", \"nonlin_kwargs\": " + nonlin_kwargs +
         "}, \"_kw_requires_import\": [\"conv_op\", \"norm_op\", \"dropout_op\", \"nonlin\"]}";
}

std::vector<int> StageScale(const NnunetArchitecture& a, int stage) {
  std::vector<int> scale(static_cast<size_t>(a.dims), 1);
  for (int s = 0; s <= stage; ++s)
    for (int d = 0; d < a.dims; ++d) scale[d] *= a.strides[s][d];
  return scale;
}

}  // namespace up
