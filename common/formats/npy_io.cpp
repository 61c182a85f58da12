// See npy_io.h.
#include "common/formats/npy_io.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include "common/base/errors.h"
#include "common/base/fs_util.h"

namespace up {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

const char* Descr(NpyType t) { return t == NpyType::kFloat32 ? "<f4" : "|u1"; }

[[noreturn]] void Bad(const std::string& path, const std::string& what) {
  throw UsageError("cache file '" + path + "' " + what +
                   "; run `unet-pipeline preprocess` again to rebuild it");
}

}  // namespace

int64_t NpyHeader::bytes() const {
  int64_t n = type == NpyType::kFloat32 ? 4 : 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void WriteNpy(const std::string& path, NpyType type, const std::vector<int64_t>& shape,
              const void* data) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() > 1) dims.resize(dims.size() - 1);  // "(4, 8, 8)" but "(4,)"
  std::string dict = "{'descr': '" + std::string(Descr(type)) +
                     "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic (6) + version (2) + length (2) + dict + '\n', padded to 64 bytes.
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string bytes(kMagic, 6);
  bytes += '\x01';
  bytes += '\x00';
  bytes += static_cast<char>(dict.size() & 0xff);
  bytes += static_cast<char>((dict.size() >> 8) & 0xff);
  bytes += dict;
  NpyHeader h;
  h.type = type;
  h.shape = shape;
  bytes.append(static_cast<const char*>(data), static_cast<size_t>(h.bytes()));
  WriteFileAtomic(path, bytes);
}

NpyHeader ReadNpyHeader(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) Bad(path, "cannot be read");
  char head[10];
  if (!f.read(head, 10) || std::memcmp(head, kMagic, 6) != 0 || head[6] != 1)
    Bad(path, "is not a .npy file (version 1.0)");
  const size_t len = static_cast<uint8_t>(head[8]) | (static_cast<uint8_t>(head[9]) << 8);
  std::string dict(len, '\0');
  if (!f.read(dict.data(), static_cast<std::streamsize>(len))) Bad(path, "has a cut header");
  NpyHeader h;
  h.data_offset = static_cast<int64_t>(10 + len);
  if (dict.find("'descr': '<f4'") != std::string::npos) {
    h.type = NpyType::kFloat32;
  } else if (dict.find("'descr': '|u1'") != std::string::npos) {
    h.type = NpyType::kUInt8;
  } else {
    Bad(path, "holds neither float32 ('<f4') nor uint8 ('|u1')");
  }
  if (dict.find("'fortran_order': False") == std::string::npos) Bad(path, "is not in C order");
  std::smatch m;
  static const std::regex shape_re(R"('shape': \(([0-9, ]*)\))");
  if (!std::regex_search(dict, m, shape_re)) Bad(path, "has no shape in its header");
  const std::string dims = m[1];
  static const std::regex num_re("[0-9]+");
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), num_re);
       it != std::sregex_iterator(); ++it)
    h.shape.push_back(std::stoll(it->str()));
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || static_cast<int64_t>(size) != h.data_offset + h.bytes()) {
    Bad(path, "is " + std::to_string(ec ? 0 : size) + " bytes but its header needs " +
                  std::to_string(h.data_offset + h.bytes()));
  }
  return h;
}

NpyHeader ReadNpy(const std::string& path, std::vector<uint8_t>* out) {
  const NpyHeader h = ReadNpyHeader(path);
  std::ifstream f(path, std::ios::binary);
  f.seekg(h.data_offset);
  out->resize(static_cast<size_t>(h.bytes()));
  if (!f.read(reinterpret_cast<char*>(out->data()), h.bytes())) Bad(path, "is cut short");
  return h;
}

}  // namespace up
