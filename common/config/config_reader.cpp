// The generic reads of config_reader.h: a key read by its table row.
#include "common/config/config_reader.h"

#include <stdexcept>

namespace up {
namespace {

template <typename V>
V* FieldIn(const ConfigKey& key, Config* c) {
  return &std::get<FieldOf<V>>(key.field)(*c);
}

bool InSection(const ConfigKey& key, const std::string& section) {
  return key.path.compare(0, section.size() + 1, section + ".") == 0;
}

}  // namespace

void Reader::Key(const ConfigKey& key, Config* c) const {
  const std::string& path = key.path;
  if (!Has(path)) return;
  switch (key.type) {
    case KeyType::kInt:
      return Int(path, FieldIn<int>(key, c), key.ints);
    case KeyType::kUInt64:
      return UInt64(path, FieldIn<uint64_t>(key, c));
    case KeyType::kReal: {
      const double zero = 0.0;
      return Real(path, FieldIn<double>(key, c), key.reals, key.null_is_zero ? &zero : nullptr);
    }
    case KeyType::kBool:
      return Bool(path, FieldIn<bool>(key, c));
    case KeyType::kChoice: {
      const ChoiceField& field = std::get<ChoiceField>(key.field);
      std::string name = key.choices[static_cast<size_t>(field.get(*c))];
      Enum(path, &name, key.choices);
      const auto at = std::find(key.choices.begin(), key.choices.end(), name);
      return field.set(*c, static_cast<int>(at - key.choices.begin()));
    }
    case KeyType::kSubset:
      return Subset(path, FieldIn<std::vector<std::string>>(key, c), key.choices);
    case KeyType::kString:
      return String(path, FieldIn<std::string>(key, c));
    case KeyType::kDevice:
      return Device(path, FieldIn<std::string>(key, c));
    case KeyType::kDeviceList:
      return DeviceSeq(path, FieldIn<std::vector<std::string>>(key, c));
    case KeyType::kIntList:
      return IntSeq(path, FieldIn<std::vector<int>>(key, c), static_cast<size_t>(key.ints.lo),
                    static_cast<size_t>(key.ints.hi), key.list_min);
    case KeyType::kSpatialSize:
      return SpatialSize(path, FieldIn<std::vector<int>>(key, c), c->model.dims);
    case KeyType::kByteSize:
      return ByteSize(path, FieldIn<int64_t>(key, c));
    case KeyType::kRegions:
    case KeyType::kArchitecture:
    case KeyType::kValidation:
    case KeyType::kFold:
    case KeyType::kEpochs:
      break;
  }
  throw std::logic_error("config: " + path + " has no generic reader; its family reads it");
}

void Reader::Section(const std::string& section, Config* c) const {
  for (const ConfigKey& key : ConfigKeyTable())
    if (!key.by_hand && InSection(key, section)) Key(key, c);
}

void Reader::CheckApplies(const std::string& section, const Config& c) const {
  for (const ConfigKey& key : ConfigKeyTable()) {
    if (!InSection(key, section) || !Has(key.path) || Applies(key.when, c)) continue;
    FailAt(key.path, "",
           "applies only to " + AppliesText(key.when) + " (" + InsteadText(key.when, c) + ")");
  }
}

}  // namespace up
