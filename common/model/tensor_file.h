// `.pt` tensor files: a dict {name: tensor} pickled the way torch.save does,
// so Python's `torch.load(path, weights_only=True)` reads it, and C++ reads it
// back with LoadTensorFile. Used by recordings (`train --record`), replay,
// `check` and `inspect`. Tensors are written as contiguous CPU copies.
#pragma once

#include <string>

#include "common/model/digest.h"  // NamedTensors

namespace up {

// Writes atomically (temporary name, fsync, rename). RuntimeError on I/O.
void SaveTensorFile(const std::string& path, const NamedTensors& tensors);

// Any value torch.save could write (dicts, lists, tuples, strings, numbers,
// tensors), pickled untagged so that Python's torch.load returns plain
// dicts: e.g. the checkpoint nnU-Net's predictor reads. Atomic, as above.
void SavePickledValue(const std::string& path, const c10::IValue& value);

// In the order written. UsageError when the file is missing or is not a dict
// of tensors.
NamedTensors LoadTensorFile(const std::string& path);

// "float32", "int64", ... as torch names them.
std::string DTypeName(c10::ScalarType type);

// [{"name":..,"shape":[..],"dtype":..}, ...] for index files.
std::string DescribeTensorsJson(const NamedTensors& tensors);

// "name (4, 8, 64, 64) float32 min .. max .. mean .. std ..", one line.
std::string DescribeTensor(const std::string& name, const torch::Tensor& t);

}  // namespace up
