// See tensor_file.h.
#include "common/model/tensor_file.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <cstdio>
#include <sstream>

#include "common/base/errors.h"
#include "common/base/fs_util.h"
#include "common/base/json_writer.h"

namespace up {

// torch::pickle_save tags dicts with their type (a global that
// torch.load(weights_only=True) refuses); pickled untagged, they are plain dicts.
void SavePickledValue(const std::string& path, const c10::IValue& value) {
  std::vector<char> pickled;
  torch::jit::Pickler pickler(
      [&](const char* bytes, size_t n) { pickled.insert(pickled.end(), bytes, bytes + n); },
      /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
      /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  std::string file;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* bytes, size_t n) {
    file.append(static_cast<const char*>(bytes), n);
    return n;
  });
  torch::jit::writeArchiveAndTensors("data", pickled.data(), pickled.size(), pickler.tensorData(),
                                     writer);
  writer.writeEndOfFile();
  WriteFileAtomic(path, file);
}

void SaveTensorFile(const std::string& path, const NamedTensors& tensors) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [name, t] : tensors) dict.insert(name, t.detach().cpu().contiguous().clone());
  SavePickledValue(path, dict);
}

NamedTensors LoadTensorFile(const std::string& path) {
  const std::string bytes = ReadFile(path);
  c10::IValue value;
  try {
    value = torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  } catch (const c10::Error& e) {
    std::string what = e.what_without_backtrace();
    throw UsageError("'" + path + "' is not a tensor file: " + what.substr(0, what.find('\n')));
  }
  if (!value.isGenericDict()) throw UsageError("'" + path + "' does not hold a dict of tensors");
  NamedTensors out;
  for (const auto& item : value.toGenericDict()) {
    if (!item.key().isString() || !item.value().isTensor())
      throw UsageError("'" + path + "' holds an entry that is not name -> tensor");
    out.emplace_back(item.key().toStringRef(), item.value().toTensor());
  }
  return out;
}

std::string DTypeName(c10::ScalarType type) {
  switch (type) {
    case torch::kFloat32:
      return "float32";
    case torch::kFloat64:
      return "float64";
    case torch::kFloat16:
      return "float16";
    case torch::kBFloat16:
      return "bfloat16";
    case torch::kInt64:
      return "int64";
    case torch::kInt32:
      return "int32";
    case torch::kUInt8:
      return "uint8";
    case torch::kBool:
      return "bool";
    default:
      return c10::toString(type);
  }
}

std::string DescribeTensorsJson(const NamedTensors& tensors) {
  std::string out = "[";
  for (const auto& [name, t] : tensors) {
    std::string shape = "[";
    for (int64_t d : t.sizes()) shape += (shape.size() > 1 ? "," : "") + std::to_string(d);
    JsonWriter w;
    w.Field("name", name).Raw("shape", shape + "]").Field("dtype", DTypeName(t.scalar_type()));
    out += (out.size() > 1 ? "," : "") + w.str();
  }
  return out + "]";
}

std::string DescribeTensor(const std::string& name, const torch::Tensor& t) {
  std::ostringstream s;
  s << name << " " << t.sizes() << " " << DTypeName(t.scalar_type());
  if (t.numel() > 0 && t.scalar_type() != torch::kBool) {
    const torch::Tensor d = t.detach().to(torch::kFloat64);  // same shape
    char stats[160];
    std::snprintf(stats, sizeof(stats), " min %.6g max %.6g mean %.6g std %.6g",
                  d.min().item<double>(), d.max().item<double>(), d.mean().item<double>(),
                  t.numel() > 1 ? d.std().item<double>() : 0.0);
    s << stats;
  }
  return s.str();
}

}  // namespace up
