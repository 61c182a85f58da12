// The config's sources (a YAML file or text, then `--set` overrides) read
// into one map from dotted key path ("train.lr") to the YAML node given for
// it; a later source replaces an earlier one key by key. Unknown keys (with
// the table's nearest key as a hint), duplicate keys, sections that are not
// mappings and YAML that is not one document fail here, each with one line.
// Internal to common/config/.
#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <vector>

namespace up {

using GivenKeys = std::map<std::string, YAML::Node>;

// The one YAML document in `text`; `origin` names it in errors.
YAML::Node ParseYaml(const std::string& text, const std::string& origin);

// Adds every key of the mapping `node` (the section `prefix`, "" for the
// top level) to `given`.
void FlattenInto(const YAML::Node& node, const std::string& prefix, const std::string& origin,
                 GivenKeys* given);

// One "a.b.c=value" override (value parsed as YAML) into `given`.
void ApplyOverride(const std::string& override_text, GivenKeys* given);

// A relative model.plans or model.path in a config file names a file beside
// that config (`base_dir`).
void AnchorModelPaths(const std::string& base_dir, GivenKeys* given);

// "expected a mapping with keys a, b, c" for `section`.
std::string SectionExpectation(const std::string& section);

}  // namespace up
