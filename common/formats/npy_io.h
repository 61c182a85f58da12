// NumPy .npy files (format 1.0) of little-endian float32 or uint8 arrays:
// what the preprocessed cache stores, so `numpy.load(path, mmap_mode="r")`
// maps a case without reading it, and so does this project.
//
// Torch-free. Writing is atomic (fs_util.h). Reading checks the magic, the
// header and that the file holds exactly the bytes its shape needs; every
// failure is a UsageError naming the file (a damaged cache is rebuilt, never
// half-read).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace up {

enum class NpyType { kFloat32, kUInt8 };

struct NpyHeader {
  NpyType type = NpyType::kFloat32;
  std::vector<int64_t> shape;  // C order
  int64_t data_offset = 0;     // bytes before the array
  int64_t bytes() const;       // of the array
};

void WriteNpy(const std::string& path, NpyType type, const std::vector<int64_t>& shape,
              const void* data);

NpyHeader ReadNpyHeader(const std::string& path);

// The whole array; `out` is resized to the header's bytes.
NpyHeader ReadNpy(const std::string& path, std::vector<uint8_t>* out);

}  // namespace up
