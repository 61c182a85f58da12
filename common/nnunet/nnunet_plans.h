// nnU-Net v2 plans: the architecture of one configuration, read from the
// plans JSON that nnU-Net's planners write (nnUNetPlans.json,
// nnUNetResEncUNetLPlans.json, ...), into what model.kind = nnunet builds.
//
// Two network classes of dynamic_network_architectures are built:
// PlainConvUNet and ResidualEncoderUNet, with every `arch_kwargs` entry they
// take from a plan. Anything else (another class, an unknown entry, an op we
// do not build) is a UsageError naming the entry and what is supported.
//
// Torch-free: the launcher reads plans before it starts any process.
#pragma once

#include <string>
#include <vector>

namespace YAML {
class Node;
}

namespace up {

struct NnunetArchitecture {
  std::string network_class = "PlainConvUNet";  // PlainConvUNet | ResidualEncoderUNet
  int dims = 3;                                 // from conv_op: Conv2d or Conv3d
  std::vector<int> features;                    // features_per_stage, n_stages entries
  std::vector<std::vector<int>> kernel_sizes;   // [stage][axis]
  std::vector<std::vector<int>> strides;        // [stage][axis]; stage 0 usually 1
  std::vector<int> blocks;         // n_conv_per_stage (plain) or n_blocks_per_stage (residual)
  std::vector<int> decoder_convs;  // n_conv_per_stage_decoder, n_stages - 1 entries
  bool conv_bias = false;
  std::string norm = "instance";  // instance | batch | none
  double norm_eps = 1e-5;
  double norm_momentum = 0.1;  // batch norm only
  bool norm_affine = true;
  std::string nonlin = "leaky_relu";  // leaky_relu | relu | none
  double negative_slope = 0.01;       // leaky_relu only

  int stages() const { return static_cast<int>(features.size()); }
};

// What model.plans contributes: the architecture and the defaults of
// data.size, train.batch_size and train.batch_dice.
struct NnunetPlan {
  NnunetArchitecture architecture;
  std::vector<int> patch_size;
  int batch_size = 2;
  bool batch_dice = true;
};

// Reads configuration `configuration` of the plans file at `path`.
NnunetPlan ReadNnunetPlan(const std::string& path, const std::string& configuration);

// The `architecture` mapping of a plan ({network_class_name, arch_kwargs, ...});
// `where` prefixes error messages (e.g. "model.architecture").
NnunetArchitecture ParseNnunetArchitecture(const YAML::Node& node, const std::string& where);

// The architecture as a one-line YAML flow mapping in the plan's own format
// (network_class_name and arch_kwargs), which ParseNnunetArchitecture reads back.
std::string NnunetArchitectureText(const NnunetArchitecture& a);

// Cumulative downsampling per axis at encoder stage s: the product of
// strides[0..s].
std::vector<int> StageScale(const NnunetArchitecture& a, int stage);

}  // namespace up
