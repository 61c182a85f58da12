// See checkpoint_manifest.h.
#include "common/run/checkpoint_manifest.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>

#include "common/base/errors.h"
#include "common/base/fs_util.h"
#include "common/base/json_writer.h"
#include "common/base/sha256.h"

namespace up {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void Bad(const std::string& what) { throw RuntimeError("manifest " + what); }

bool IsHex64(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

bool IsPlainFileName(const std::string& s) {
  if (s.empty() || s.size() > 64 || s == "." || s == "..") return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

// The scalar at `key` as T; Bad() names the key when it is missing or of
// another type.
template <typename T>
T Get(const YAML::Node& node, const std::string& key, const char* expected) {
  const YAML::Node value = node[key];
  if (!value || !value.IsScalar()) Bad("field '" + key + "' is missing, expected " + expected);
  try {
    return value.as<T>();
  } catch (const YAML::Exception&) {
    Bad("field '" + key + "' is '" + value.Scalar() + "', expected " + expected);
  }
}

std::string Hex64(const YAML::Node& node, const std::string& key) {
  const std::string value = Get<std::string>(node, key, "64 lowercase hex digits");
  if (!IsHex64(value))
    Bad("field '" + key + "' is '" + value.substr(0, 80) + "', expected 64 lowercase hex digits");
  return value;
}

}  // namespace

std::string ManifestJson(const CheckpointManifest& m) {
  std::string files = "{";
  for (size_t i = 0; i < m.files.size(); ++i) {
    JsonWriter entry;
    entry.Field("bytes", m.files[i].bytes).Field("sha256", m.files[i].sha256);
    files += (i ? ",\"" : "\"") + m.files[i].name + "\":" + entry.str();
  }
  files += "}";
  JsonWriter out;
  out.Field("format", kManifestFormat)
      .Field("version", kManifestVersion)
      .Field("step", m.step)
      .Field("model_signature", m.model_signature)
      .Field("config_sha256", m.config_sha256)
      .Raw("files", files);
  return out.str();
}

CheckpointManifest ParseManifest(const std::string& text) {
  if (text.size() > kMaxManifestBytes) {
    Bad("is " + std::to_string(text.size()) + " bytes, expected at most " +
        std::to_string(kMaxManifestBytes));
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    Bad("is not JSON: " + std::string(e.what()));
  }
  if (!root.IsMap()) Bad("is not a JSON object");
  if (Get<std::string>(root, "format", kManifestFormat) != kManifestFormat)
    Bad("field 'format' is not '" + std::string(kManifestFormat) + "'");
  const int version = Get<int>(root, "version", "1");
  if (version != kManifestVersion)
    Bad("version is " + std::to_string(version) + ", expected " + std::to_string(kManifestVersion) +
        " (written by another unet-pipeline version)");
  CheckpointManifest m;
  m.step = Get<int64_t>(root, "step", "a step >= 0");
  if (m.step < 0) Bad("field 'step' is " + std::to_string(m.step) + ", expected >= 0");
  m.model_signature = Hex64(root, "model_signature");
  m.config_sha256 = Hex64(root, "config_sha256");
  const YAML::Node files = root["files"];
  if (!files || !files.IsMap() || files.size() == 0 || files.size() > kMaxManifestFiles) {
    Bad("field 'files' is not an object of 1 to " + std::to_string(kMaxManifestFiles) + " files");
  }
  for (const auto& entry : files) {
    ManifestFile f;
    if (!entry.first.IsScalar()) Bad("has a file name that is not a string");
    f.name = entry.first.Scalar();
    if (!IsPlainFileName(f.name))
      Bad("file name '" + f.name.substr(0, 80) + "' is not a plain file name");
    if (!entry.second.IsMap()) Bad("entry of '" + f.name + "' is not an object");
    f.bytes = Get<uint64_t>(entry.second, "bytes", "a byte count");
    f.sha256 = Hex64(entry.second, "sha256");
    m.files.push_back(std::move(f));
  }
  return m;
}

int64_t StepOfCheckpointDir(const std::string& name) {
  if (name.rfind("step-", 0) != 0 || name.size() <= 5 || name.size() > 5 + 18) return -1;
  const std::string digits = name.substr(5);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return std::stoll(digits);
}

std::string VerifyCheckpointFiles(const std::string& dir, const CheckpointManifest& manifest) {
  for (const ManifestFile& f : manifest.files) {
    const fs::path path = fs::path(dir) / f.name;
    std::error_code ec;
    const uint64_t size = fs::file_size(path, ec);
    if (ec) return "'" + f.name + "' is missing";
    // The size first: a file is read (and hashed) only once its size is right.
    if (size != f.bytes) {
      return "'" + f.name + "' has " + std::to_string(size) + " bytes, the manifest says " +
             std::to_string(f.bytes) + " (truncated or overwritten)";
    }
    if (Sha256Hex(ReadFile(path.string())) != f.sha256)
      return "'" + f.name + "' does not match its sha256 (corrupt)";
  }
  return "";
}

}  // namespace up
