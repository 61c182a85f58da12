// TorchScript bundle manifests; see torchscript_bundle.h.
#include "common/formats/torchscript_bundle.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include "common/base/errors.h"
#include "common/base/fs_util.h"
#include "common/base/sha256.h"
#include "common/base/shape_text.h"

namespace up {
namespace {

namespace fs = std::filesystem;

constexpr const char* kReexport = "; re-export it with scripts/export_unet.py";

class ManifestReader {
 public:
  explicit ManifestReader(std::string dir) : dir_(std::move(dir)) {}

  [[noreturn]] void Fail(const std::string& what) const {
    throw UsageError("config: model.path = '" + dir_ + "': " + what);
  }

  YAML::Node Need(const YAML::Node& map, const std::string& key, const std::string& where) const {
    const YAML::Node node = map[key];
    if (!node.IsDefined() || node.IsNull()) Fail(where + "has no '" + key + "'" + kReexport);
    return node;
  }

  int64_t Int(const YAML::Node& node, const std::string& where) const {
    try {
      return node.as<int64_t>();
    } catch (const YAML::Exception&) {
      Fail(where + " is not an integer" + kReexport);
    }
  }

  std::string Text(const YAML::Node& node, const std::string& where) const {
    if (!node.IsScalar()) Fail(where + " is not a string" + kReexport);
    return node.Scalar();
  }

  std::vector<int64_t> Shape(const YAML::Node& node, const std::string& where) const {
    if (!node.IsSequence()) Fail(where + " is not a list of sizes" + kReexport);
    std::vector<int64_t> out;
    for (const auto& v : node) {
      const int64_t s = Int(v, where);
      if (s < 0 || s > (int64_t{1} << 40)) Fail(where + " has a size out of range" + kReexport);
      out.push_back(s);
    }
    return out;
  }

  BundleLevel Level(const YAML::Node& node, const std::string& role) const {
    if (!node.IsMap()) Fail(role + ": an entry is not a mapping" + kReexport);
    BundleLevel l;
    l.file = Text(Need(node, "file", role + ": an entry "), role + ".file");
    const std::string w = l.file + ": ";
    if (l.file.empty() || l.file.find('/') != std::string::npos || l.file == "." || l.file == "..")
      Fail(role + ": file '" + l.file + "' is not a file name inside the bundle" + kReexport);
    l.bytes = Int(Need(node, "bytes", w), w + "bytes");
    l.sha256 = Text(Need(node, "sha256", w), w + "sha256");
    l.method = Text(Need(node, "method", w), w + "method");
    l.level = static_cast<int>(Int(Need(node, "level", w), w + "level"));
    const YAML::Node inputs = Need(node, "inputs", w);
    if (!inputs.IsSequence()) Fail(w + "inputs is not a list of shapes" + kReexport);
    for (const auto& s : inputs) l.inputs.push_back(Shape(s, w + "inputs"));
    l.output = Shape(Need(node, "output", w), w + "output");
    const YAML::Node state = Need(node, "state", w);
    if (!state.IsSequence()) Fail(w + "state is not a list" + kReexport);
    for (const auto& t : state) {
      BundleTensor b;
      b.name = Text(Need(t, "name", w + "a state entry "), w + "state.name");
      b.shape = Shape(Need(t, "shape", w + b.name + " "), w + b.name + ".shape");
      b.dtype = Text(Need(t, "dtype", w + b.name + " "), w + b.name + ".dtype");
      const std::string kind = Text(Need(t, "kind", w + b.name + " "), w + b.name + ".kind");
      if (kind != "parameter" && kind != "buffer")
        Fail(w + b.name + ".kind is '" + kind + "', not parameter or buffer" + kReexport);
      b.buffer = kind == "buffer";
      const YAML::Node keys = Need(t, "keys", w + b.name + " ");
      if (!keys.IsSequence() || keys.size() == 0)
        Fail(w + b.name + ".keys is not a non-empty list" + kReexport);
      for (const auto& k : keys) b.keys.push_back(Text(k, w + b.name + ".keys"));
      l.state.push_back(std::move(b));
    }
    return l;
  }

  // The SHA-256 of `path`, hashed once per process for a given size and
  // modification time: the launcher, bench and plan load a config many times.
  std::string FileSha256(const std::string& path, const std::string& file) const {
    static std::mutex mu;
    static std::map<std::string, std::string> known;  // "path|size|mtime" -> hex
    std::error_code ec;
    const auto mtime = fs::last_write_time(path, ec).time_since_epoch().count();
    const std::string key =
        path + "|" + std::to_string(fs::file_size(path, ec)) + "|" + std::to_string(mtime);
    {
      std::lock_guard<std::mutex> lock(mu);
      if (auto it = known.find(key); !ec && it != known.end()) return it->second;
    }
    std::ifstream in(path, std::ios::binary);
    Sha256 h;
    std::vector<char> buf(1 << 20);
    while (in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      h.Update(buf.data(), static_cast<size_t>(in.gcount()));
    }
    if (in.bad()) Fail(file + ": cannot read it");
    const std::string hex = ToHex(h.Finish());
    std::lock_guard<std::mutex> lock(mu);
    if (!ec) known[key] = hex;
    return hex;
  }

  // The file is there, with the manifest's size and SHA-256.
  void CheckFile(const BundleLevel& l) const {
    const fs::path path = fs::path(dir_) / l.file;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) Fail(l.file + ": missing; the manifest lists it");
    const auto size = static_cast<int64_t>(fs::file_size(path, ec));
    if (ec || size != l.bytes) {
      Fail(l.file + ": " + std::to_string(size) + " bytes, the manifest says " +
           std::to_string(l.bytes) + "; the file is not the one exported" + kReexport);
    }
    if (FileSha256(path.string(), l.file) != l.sha256)
      Fail(l.file + ": its SHA-256 is not the manifest's; the file is not the one exported" +
           kReexport);
  }

 private:
  std::string dir_;
};

std::vector<int64_t> Spatial(const std::vector<int64_t>& s) {
  return s.size() > 2 ? std::vector<int64_t>(s.begin() + 2, s.end()) : std::vector<int64_t>{};
}

}  // namespace

const BundleLevel* TorchscriptBundle::HeadAt(int level) const {
  for (const BundleLevel& h : heads)
    if (h.level == level) return &h;
  return nullptr;
}

std::vector<std::vector<int>> TorchscriptBundle::Scale() const {
  std::vector<std::vector<int>> out;
  for (const BundleLevel& e : encoder) {
    std::vector<int> s;
    for (int d = 0; d < dims; ++d) s.push_back(static_cast<int>(example[2 + d] / e.output[2 + d]));
    out.push_back(s);
  }
  return out;
}

namespace {

// The manifest of the bundle in `dir` (`dir_in` as given), parsed and of
// this build's format and version.
YAML::Node LoadManifest(const ManifestReader& r, const std::string& dir_in,
                        const std::string& dir) {
  std::error_code ec;
  if (dir_in.empty())
    r.Fail(
        "model.kind = torchscript needs model.path, a bundle folder written by "
        "scripts/export_unet.py");
  if (!fs::is_directory(dir, ec))
    r.Fail("not a folder; give the bundle folder that scripts/export_unet.py wrote");
  const fs::path manifest = fs::path(dir) / kBundleManifest;
  if (!fs::is_regular_file(manifest, ec))
    r.Fail(std::string("no ") + kBundleManifest +
           " in it; is it a bundle written by "
           "scripts/export_unet.py?");
  if (fs::file_size(manifest, ec) > (64u << 20))
    r.Fail(std::string(kBundleManifest) + " is larger than 64 MiB; is it a bundle manifest?");
  YAML::Node root;
  try {
    root = YAML::Load(ReadFile(manifest.string()));
  } catch (const YAML::Exception& e) {
    r.Fail(std::string(kBundleManifest) + ": not valid JSON: " + e.what());
  } catch (const Error& e) {
    r.Fail(std::string(kBundleManifest) + ": cannot read it (" + e.what() + ")");
  }
  const std::string m = std::string(kBundleManifest) + " ";
  if (!root.IsMap()) r.Fail(m + "is not a mapping" + kReexport);
  if (!root["format"].IsScalar() || root["format"].Scalar() != kBundleFormat)
    r.Fail(m + "is not a unet-pipeline TorchScript manifest (format '" +
           (root["format"].IsScalar() ? root["format"].Scalar() : std::string()) + "')" +
           kReexport);
  const int64_t version = r.Int(r.Need(root, "version", m), m + "version");
  if (version != kBundleVersion)
    r.Fail(m + "has version " + std::to_string(version) + "; this build reads version " +
           std::to_string(kBundleVersion) + kReexport);

  return root;
}

// The manifest's fields and level lists into `b`, each list's levels
// numbered 0.. without gaps or duplicates.
void ReadLevels(const ManifestReader& r, YAML::Node root, TorchscriptBundle& b) {
  const std::string m = std::string(kBundleManifest) + " ";
  b.source = root["source"].IsScalar() ? root["source"].Scalar() : "";
  b.factory = root["factory"].IsScalar() ? root["factory"].Scalar() : "";
  b.factory_kwargs = root["factory_kwargs"].IsScalar() ? root["factory_kwargs"].Scalar() : "{}";
  b.dims = static_cast<int>(r.Int(r.Need(root, "dims", m), m + "dims"));
  if (b.dims != 2 && b.dims != 3) r.Fail(m + "dims must be 2 or 3, not " + std::to_string(b.dims));
  b.example = r.Shape(r.Need(root, "example", m), m + "example");
  if (static_cast<int>(b.example.size()) != b.dims + 2)
    r.Fail(m + "example " + ShapeText(b.example) + " is not (N, C, *S) for " +
           std::to_string(b.dims) + "-D" + kReexport);
  for (const char* role : {"encoder", "decoder", "heads"}) {
    const YAML::Node list = r.Need(root, role, m);
    if (!list.IsSequence()) r.Fail(m + role + " is not a list" + kReexport);
    std::vector<BundleLevel>& out = std::string(role) == "encoder"   ? b.encoder
                                    : std::string(role) == "decoder" ? b.decoder
                                                                     : b.heads;
    for (const auto& e : list) out.push_back(r.Level(e, role));
  }
  if (b.encoder.size() < 2)
    r.Fail(m + "has " + std::to_string(b.encoder.size()) +
           " encoder levels; a U-Net has at least one level and the bottleneck" + kReexport);
  auto by_level = [](const BundleLevel& x, const BundleLevel& y) { return x.level < y.level; };
  std::sort(b.decoder.begin(), b.decoder.end(), by_level);
  std::sort(b.heads.begin(), b.heads.end(), by_level);
  const int levels = static_cast<int>(b.encoder.size()) - 1;
  for (int i = 0; i <= levels; ++i) {
    if (b.encoder[static_cast<size_t>(i)].level != i)
      r.Fail(b.encoder[static_cast<size_t>(i)].file + ": encoder level " +
             std::to_string(b.encoder[static_cast<size_t>(i)].level) + " listed as level " +
             std::to_string(i) + kReexport);
  }
  if (static_cast<int>(b.decoder.size()) != levels)
    r.Fail(m + "has " + std::to_string(b.decoder.size()) + " decoder levels for " +
           std::to_string(levels) + " skips; a U-Net has one per skip" + kReexport);
  for (int i = 0; i < levels; ++i) {
    if (b.decoder[static_cast<size_t>(i)].level != i)
      r.Fail(b.decoder[static_cast<size_t>(i)].file + ": decoder level " +
             std::to_string(b.decoder[static_cast<size_t>(i)].level) +
             " is a duplicate or out of range" + kReexport);
  }
  if (b.heads.empty() || b.heads[0].level != 0)
    r.Fail(m + "has no head at level 0 (full resolution)" + kReexport);
  for (size_t i = 0; i < b.heads.size(); ++i) {
    if (b.heads[i].level >= levels || (i > 0 && b.heads[i].level == b.heads[i - 1].level))
      r.Fail(b.heads[i].file + ": head level " + std::to_string(b.heads[i].level) +
             " is a duplicate or out of range" + kReexport);
  }
}

// Each level's inputs are the outputs of the levels that feed it.
void CheckLevelsFit(const ManifestReader& r, const TorchscriptBundle& b) {
  const int levels = static_cast<int>(b.encoder.size()) - 1;
  auto expect = [&](const BundleLevel& l, size_t arity) {
    if (l.inputs.size() != arity)
      r.Fail(l.file + ": takes " + std::to_string(l.inputs.size()) +
             " inputs; a level here takes " + std::to_string(arity) + kReexport);
  };
  auto feeds = [&](const BundleLevel& l, size_t input, const std::vector<int64_t>& given,
                   const std::string& from) {
    if (l.inputs[input] != given)
      r.Fail(l.file + ": input " + std::to_string(input) + " is " + ShapeText(l.inputs[input]) +
             ", but " + from + " is " + ShapeText(given) + "; its levels do not fit together" +
             kReexport);
  };
  for (int i = 0; i <= levels; ++i) {
    const BundleLevel& e = b.encoder[static_cast<size_t>(i)];
    expect(e, 1);
    feeds(e, 0, i == 0 ? b.example : b.encoder[static_cast<size_t>(i - 1)].output,
          i == 0 ? "the example input" : b.encoder[static_cast<size_t>(i - 1)].file + "'s output");
    if (static_cast<int>(e.output.size()) != b.dims + 2 || e.output[0] != b.example[0])
      r.Fail(e.file + ": output " + ShapeText(e.output) + " is not (N, C, *S) for the example" +
             kReexport);
    for (int d = 0; d < b.dims; ++d) {
      const int64_t s = e.output[static_cast<size_t>(2 + d)];
      if (s <= 0 || b.example[static_cast<size_t>(2 + d)] % s != 0)
        r.Fail(e.file + ": output " + ShapeText(e.output) + " does not divide the example " +
               ShapeText(b.example) + " on axis " + std::to_string(d) + kReexport);
    }
  }
  for (int i = levels - 1; i >= 0; --i) {
    const BundleLevel& l = b.decoder[static_cast<size_t>(i)];
    expect(l, 2);
    feeds(l, 0,
          i == levels - 1 ? b.encoder.back().output : b.decoder[static_cast<size_t>(i + 1)].output,
          i == levels - 1 ? b.encoder.back().file + "'s output (the bottleneck)"
                          : b.decoder[static_cast<size_t>(i + 1)].file + "'s output");
    feeds(
        l, 1, b.encoder[static_cast<size_t>(i)].output,
        "skip " + std::to_string(i) + " (" + b.encoder[static_cast<size_t>(i)].file + "'s output)");
    if (l.output.size() != l.inputs[1].size() || Spatial(l.output) != Spatial(l.inputs[1]))
      r.Fail(l.file + ": output " + ShapeText(l.output) + " is not at the resolution of skip " +
             std::to_string(i) + " " + ShapeText(l.inputs[1]) + kReexport);
  }
  for (const BundleLevel& h : b.heads) {
    expect(h, 1);
    const BundleLevel& from = b.decoder[static_cast<size_t>(h.level)];
    feeds(h, 0, from.output, from.file + "'s output");
    if (h.output.size() != from.output.size() || Spatial(h.output) != Spatial(from.output) ||
        h.output[1] != b.heads[0].output.at(1))
      r.Fail(h.file + ": output " + ShapeText(h.output) +
             " is not logits at the level's resolution" + kReexport);
  }
}

}  // namespace

TorchscriptBundle ReadTorchscriptBundle(const std::string& dir_in) {
  std::error_code ec;
  const std::string dir =
      dir_in.empty() ? dir_in : fs::absolute(dir_in, ec).lexically_normal().string();
  ManifestReader r(dir.empty() ? dir_in : dir);
  YAML::Node root = LoadManifest(r, dir_in, dir);
  TorchscriptBundle b;
  b.dir = dir;
  ReadLevels(r, root, b);
  CheckLevelsFit(r, b);
  b.in_channels = static_cast<int>(b.example[1]);
  b.num_classes = static_cast<int>(b.heads[0].output[1]);
  if (b.num_classes < 2)
    r.Fail(b.heads[0].file + ": " + std::to_string(b.num_classes) +
           " output channel(s); segmentation needs at least 2 classes (background and one)");
  std::vector<const BundleLevel*> all;
  for (const auto* list : {&b.encoder, &b.decoder, &b.heads})
    for (const BundleLevel& l : *list) all.push_back(&l);
  std::map<std::string, int> files;
  for (const BundleLevel* l : all) {
    if (files[l->file]++) r.Fail(l->file + ": listed twice" + kReexport);
    r.CheckFile(*l);
  }
  return b;
}

}  // namespace up
