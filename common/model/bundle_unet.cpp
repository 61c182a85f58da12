// TorchScript bundles as U-Net levels; see bundle_unet.h.
#include "common/model/bundle_unet.h"

#include <filesystem>

#include "common/model/level_format.h"
#include "common/model/unet.h"

namespace up {
namespace {

Level LoadLevel(torch::nn::Module* owner, const std::string& name, const TorchscriptBundle& b,
                const BundleLevel& level) {
  LevelRun run;
  const std::string path = (std::filesystem::path(b.dir) / level.file).string();
  std::shared_ptr<torch::nn::Module> module = TorchscriptFormat().Load(path, level, &run);
  owner->register_module(name, module);
  return {{module.get()}, std::move(run)};
}

}  // namespace

void BuildBundleEncoder(UNetEncoderImpl* enc, const ModelConfig& c) {
  const TorchscriptBundle& b = c.bundle;
  for (size_t i = 0; i < b.encoder.size(); ++i)
    enc->AddLevel(LoadLevel(enc, "enc" + std::to_string(i), b, b.encoder[i]));
}

void BuildBundleDecoder(UNetDecoderImpl* dec, const ModelConfig& c) {
  const TorchscriptBundle& b = c.bundle;
  for (int i = b.levels() - 1; i >= 0; --i) {
    const std::string idx = std::to_string(i);
    Level level = LoadLevel(dec, "dec" + idx, b, b.decoder[static_cast<size_t>(i)]);
    Level head;
    if (const BundleLevel* h = b.HeadAt(i)) head = LoadLevel(dec, "head" + idx, b, *h);
    dec->SetLevel(i, std::move(level), std::move(head));
  }
}

void CheckBundleLevels(const ModelConfig& c) {
  const TorchscriptBundle& b = c.bundle;
  for (const auto* list : {&b.encoder, &b.decoder, &b.heads}) {
    for (const BundleLevel& l : *list) {
      torch::nn::Module scratch;
      LoadLevel(&scratch, "level", b, l);
    }
  }
}

std::vector<std::pair<std::string, std::string>> BundleStateDictKeys(const ModelConfig& c) {
  std::vector<std::pair<std::string, std::string>> out;
  auto add = [&out](const std::string& prefix, const BundleLevel& l) {
    for (const BundleTensor& t : l.state)
      for (const std::string& key : t.keys) out.emplace_back(prefix + t.name, key);
  };
  const TorchscriptBundle& b = c.bundle;
  for (const BundleLevel& l : b.encoder) add("encoder.enc" + std::to_string(l.level) + ".", l);
  for (const BundleLevel& l : b.decoder) add("decoder.dec" + std::to_string(l.level) + ".", l);
  for (const BundleLevel& l : b.heads) add("decoder.head" + std::to_string(l.level) + ".", l);
  return out;
}

}  // namespace up
