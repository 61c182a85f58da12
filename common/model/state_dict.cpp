// See state_dict.h.
#include "common/model/state_dict.h"

#include <algorithm>
#include <map>

#include "common/model/bundle_unet.h"
#include "common/model/nnunet_unet.h"

namespace up {

NamedTensors MergedStateDict(const ModelConfig& model, const torch::nn::Module& encoder,
                             const torch::nn::Module& decoder) {
  NamedTensors out;
  for (const auto& [name, t] : NamedState(encoder))
    out.emplace_back("encoder." + name, t.detach().cpu().contiguous());
  for (const auto& [name, t] : NamedState(decoder))
    out.emplace_back("decoder." + name, t.detach().cpu().contiguous());
  if (model.kind == ModelKind::kTorchscript) {
    // Only the user's own keys: their unsplit module loads it with strict=True.
    std::map<std::string, torch::Tensor> by_name(out.begin(), out.end());
    NamedTensors keyed;
    for (const auto& [name, key] : BundleStateDictKeys(model))
      keyed.emplace_back(key, by_name.at(name));
    std::sort(keyed.begin(), keyed.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    return keyed;
  }
  if (model.kind == ModelKind::kNnunet) {
    std::map<std::string, torch::Tensor> by_name(out.begin(), out.end());
    std::vector<std::string> names;
    for (const auto& [name, t] : out) names.push_back(name);
    for (const auto& [alias, name] : NnunetStateDictAliases(model, names))
      out.emplace_back(alias, by_name.at(name));
  }
  return out;
}

}  // namespace up
