// The configuration's keys, each declared once: its dotted path, its type,
// what it accepts (range or choices), when it applies, whether it enters the
// run's compatibility hash, its one-line meaning, and the Config field that
// holds it. The field's C++ initializer (config.h) is its default.
//
// Everything else follows from this table: the reader (config_load.cpp)
// reads each key by its type and range, the dump (DumpConfig) writes every
// key that applies in table order, ConfigHash hashes the keys marked for it,
// an unknown key's "did you mean" comes from it, and tests/docs checks
// docs/CONFIG.md's rows (key, default) against it.
#pragma once

#include <climits>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "common/config/config.h"

namespace up {

enum class KeyType {
  kInt,          // an integer in `ints`
  kUInt64,       // any integer in [0, 2^64)
  kReal,         // a finite number in `reals`
  kBool,         // true | false (on | off)
  kChoice,       // one of `choices` (an enum field: ChoiceField)
  kSubset,       // a list of distinct `choices`
  kString,       // any string (null: "")
  kDevice,       // auto | cpu | cuda | cuda:N
  kDeviceList,   // a list of devices
  kIntList,      // `ints.lo`..`ints.hi` entries, each >= `list_min`
  kSpatialSize,  // one integer for every axis, or model.dims of them
  kByteSize,     // 16GiB, 1.5GB or bytes; null: 0
  // Read by hand in config_load.cpp (their shape is their own):
  kRegions,       // model.regions: a list of class lists
  kArchitecture,  // model.architecture: nnU-Net's architecture mapping
  kValidation,    // data.validation: a share or a list of case names
  kFold,          // data.fold: 0..4 or all
  kEpochs,        // train.epochs: resolved into train.steps, never written
};

// When a key applies; giving a key that does not apply is an error, and the
// dump writes only the keys that apply.
enum class When {
  kAlways,
  kClassicModel,      // model.kind = classic
  kNnunetModel,       // model.kind = nnunet
  kTorchscriptModel,  // model.kind = torchscript
  kNnunetData,        // data.kind = nnunet
  kNotNnunetData,     // data.kind != nnunet
  kValidation,        // data.validation (or an nnU-Net fold) holds cases out
  kNnunetFold,        // data.kind = nnunet with a fold 0..4
};

bool Applies(When when, const Config& c);
// "model.kind = classic" (what must hold), and what holds instead.
std::string AppliesText(When when);
std::string InsteadText(When when, const Config& c);

struct IntRange {
  long long lo;
  long long hi;  // INT_MAX: no upper bound
  std::string Text() const;
  bool Holds(long long v) const { return v >= lo && v <= hi; }
};

struct RealRange {
  double lo;
  bool lo_open;   // lo itself excluded
  bool has_hi;    // otherwise unbounded above
  double hi = 0;  // always excluded
  std::string Text() const;
  bool Holds(double v) const { return (lo_open ? v > lo : v >= lo) && (!has_hi || v < hi); }
};

template <typename T>
using FieldOf = T& (*)(Config&);

// A choice key's enum field, as the index of its value among the choices.
struct ChoiceField {
  int (*get)(const Config&);
  void (*set)(Config&, int);
};
// Where a key's value lives in a Config (monostate: the keys read by hand
// that have no single field, and train.epochs).
using ConfigField =
    std::variant<std::monostate, FieldOf<int>, FieldOf<int64_t>, FieldOf<uint64_t>, FieldOf<double>,
                 FieldOf<bool>, FieldOf<std::string>, FieldOf<std::vector<int>>,
                 FieldOf<std::vector<std::string>>, ChoiceField>;

struct ConfigKey {
  std::string path;  // "train.lr"
  KeyType type;
  ConfigField field;
  std::string doc;  // one line: what it means
  IntRange ints{INT_MIN, INT_MAX};
  RealRange reals{0.0, false, false};
  std::vector<std::string> choices;
  int list_min = 0;           // kIntList: each entry >= this
  bool null_is_zero = false;  // kReal: null reads as 0
  When when = When::kAlways;
  bool in_hash = true;  // enters ConfigHash: changes what the run trains
  // A key added after runs existed: at its default it does not enter the
  // hash, so those runs keep their hash and resume.
  bool hashed_at_default = true;
  bool by_hand = false;  // read by its family's reader, not by the generic loop
  bool written = true;   // the dump writes it (when it applies)
  // The default as docs/CONFIG.md shows it where it is not the value of a
  // config loaded from nothing ("$nnUNet_preprocessed"); empty: that value.
  std::string shown_default;

  // What the key accepts, as the error lines and listings say it.
  std::string Accepts() const;
};

// Every key, in dump order.
const std::vector<ConfigKey>& ConfigKeyTable();
// The key at `path`, or nullptr.
const ConfigKey* FindConfigKey(const std::string& path);
// Every key whose value is a mapping of further keys ("" is the top level),
// derived from the table's paths.
const std::vector<std::string>& ConfigSections();

// The key's value in `c` as the dump writes it (YAML flow text).
std::string KeyValueText(const ConfigKey& key, const Config& c);

// The key's default as docs/CONFIG.md's default column shows it: its
// shown_default, or its value in `defaults` (LoadConfig of nothing)
// unquoted, `""` for an empty string.
std::string ShownDefault(const ConfigKey& key, const Config& defaults);

}  // namespace up
