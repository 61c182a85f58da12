// The run configuration read and written: one YAML file, plus
// `--set key.path=value` overrides.
//
// LoadConfig() merges, in order: the built-in defaults, the YAML file, then each
// override (its value parsed as YAML, so `--set model.features=[8,16,32]`
// works). It then validates everything at once, the model's levels and the
// pipeline's parts included (common/layout/), and throws up::UsageError with
// one line naming the key path, the value and what is expected (unknown keys
// with a "did you mean" hint, wrong types, out-of-range and inconsistent
// values with the nearest valid ones).
#pragma once

#include <string>
#include <vector>

#include "common/config/config.h"

namespace up {

// Loads `path` (may be empty: defaults only) and applies `overrides`, each
// "a.b.c=value". Throws up::UsageError on any problem.
Config LoadConfig(const std::string& path, const std::vector<std::string>& overrides);

// Same, from YAML text already in memory (tests, and configs carried in a
// checkpoint). `origin` names the source in error messages.
// A relative model.plans is taken from `base_dir` (LoadConfig: the config
// file's folder; empty: the current directory).
Config LoadConfigFromString(const std::string& yaml_text, const std::string& origin,
                            const std::vector<std::string>& overrides,
                            const std::string& base_dir = "");

// `--set` values as the user typed them. cxxopts splits a repeated option's
// values at commas, so `--set model.features=[8,16]` arrives as
// "model.features=[8" and "16]": a piece is joined back onto the previous one
// while that has an open [ or {, or when the piece has no '=' of its own.
std::vector<std::string> RejoinOverrides(const std::vector<std::string>& pieces);

// `auto` devices (the default) made concrete for this machine: "cuda" (every
// stage on the first GPU, taking turns under the pipeline's defaults) when
// LibTorch sees `cuda_devices` > 0, else "cpu". Changes every auto in
// pipeline.stages.*.device and pipeline.devices; `why` is the line the
// launcher logs first ("" when nothing was auto). Pure: the caller counts.
struct AutoDevices {
  std::string chosen;  // "cuda" | "cpu"; "" when nothing was auto
  std::string why;
};
AutoDevices ResolveAutoDevices(Config* config, int cuda_devices, bool cuda_built);

// Every key LoadConfig reads ("model.dims", ...), in dump order
// (config_keys.h has each key's type, range and meaning).
const std::vector<std::string>& ConfigKeys();

// The resolved config as YAML: every key that applies to it
// (config_keys.h's When), in the table's order; written to the run folder
// and loadable by LoadConfig, which reads it back to an equal Config.
std::string DumpConfig(const Config& config);

// The run's compatibility hash (64 hex digits): the SHA-256 of the keys that
// change what a run trains (the table's in_hash: not train.steps,
// checkpoint.*, validate.*, pipeline.timeout_s, data.workers, where files
// go). Two configs with the same hash train the same weights; a checkpoint's
// manifest carries it (the stages' handshake compares whole dumps). A hash of this version's
// table: compare config.yaml files across versions.
std::string ConfigHash(const Config& config);

}  // namespace up
