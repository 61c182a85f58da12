// Level geometry; see model_geometry.h.
#include "common/layout/model_geometry.h"

namespace up {

LevelGeometry Geometry(const ModelConfig& model) {
  LevelGeometry g;
  if (model.kind == ModelKind::kNnunet) {
    const NnunetArchitecture& a = model.nnunet;
    for (int s = 0; s + 1 < a.stages(); ++s) g.skip_channels.push_back(a.features[s]);
    g.bottleneck_channels = a.features.back();
    for (int s = 0; s < a.stages(); ++s) g.scale.push_back(StageScale(a, s));
    g.decoder_channels = g.skip_channels;         // decoder stage i ends at skip i's width
    g.head.assign(g.skip_channels.size(), true);  // a seg layer per decoder stage
    return g;
  }
  if (model.kind == ModelKind::kTorchscript) {
    const TorchscriptBundle& b = model.bundle;
    for (int i = 0; i < b.levels(); ++i)
      g.skip_channels.push_back(b.encoder[static_cast<size_t>(i)].output[1]);
    g.bottleneck_channels = b.encoder.back().output[1];
    g.scale = b.Scale();
    for (int i = 0; i < b.levels(); ++i) {
      g.decoder_channels.push_back(b.decoder[static_cast<size_t>(i)].output[1]);
      g.head.push_back(b.HeadAt(i) != nullptr);
    }
    return g;
  }
  const int levels = static_cast<int>(model.features.size());
  for (int f : model.features) g.skip_channels.push_back(f);
  g.bottleneck_channels = 2 * model.features.back();
  g.decoder_channels = g.skip_channels;
  g.head.assign(g.skip_channels.size(), false);
  g.head[0] = true;  // one 1x1 head at full resolution
  for (int i = 0; i <= levels; ++i) g.scale.emplace_back(static_cast<size_t>(model.dims), 1 << i);
  return g;
}

}  // namespace up
