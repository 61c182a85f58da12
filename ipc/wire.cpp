// WireWriter / WireReader implementation (see wire.h): memcpy of host-order
// scalars, with every read checked against the bytes that remain.
#include "ipc/wire.h"

#include <cstring>
#include <limits>
#include <utility>

#include "common/base/errors.h"

// Scalars travel in host byte order (wire.h): both ends must share it.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the wire format is little-endian: build on a little-endian machine");

namespace up::ipc {

void WireWriter::Append(const void* data, size_t size) {
  bytes_.append(static_cast<const char*>(data), size);
}

WireWriter& WireWriter::U32(uint32_t value) { return Put(value); }
WireWriter& WireWriter::U64(uint64_t value) { return Put(value); }
WireWriter& WireWriter::I64(int64_t value) { return Put(value); }
WireWriter& WireWriter::F64(double value) { return Put(value); }

WireWriter& WireWriter::Str(const std::string& value) {
  if (value.size() > std::numeric_limits<uint32_t>::max()) {
    throw UsageError("wire string of " + std::to_string(value.size()) +
                     " bytes is too long; the limit is 4 GiB - 1");
  }
  U32(static_cast<uint32_t>(value.size()));
  Append(value.data(), value.size());
  return *this;
}

WireWriter& WireWriter::F32Vec(const std::vector<float>& values) {
  U64(values.size());
  Append(values.data(), values.size() * sizeof(float));
  return *this;
}

WireWriter& WireWriter::I64Vec(const std::vector<int64_t>& values) {
  U64(values.size());
  Append(values.data(), values.size() * sizeof(int64_t));
  return *this;
}

std::string WireWriter::Take() {
  std::string out = std::move(bytes_);
  bytes_.clear();
  return out;
}

WireReader::WireReader(const std::string& bytes, std::string what)
    : bytes_(bytes), what_(std::move(what)) {}

void WireReader::Malformed(const std::string& detail) const {
  throw RuntimeError("malformed " + what_ + ": " + detail);
}

void WireReader::Read(void* out, size_t size, const char* field) {
  if (size > remaining()) {
    Malformed(std::string(field) + " needs " + std::to_string(size) + " bytes at offset " +
              std::to_string(offset_) + " but only " + std::to_string(remaining()) +
              " remain (truncated message)");
  }
  if (size > 0) std::memcpy(out, bytes_.data() + offset_, size);
  offset_ += size;
}

size_t WireReader::ReadCount(size_t elem_size, const char* field) {
  uint64_t count = 0;
  Read(&count, sizeof(count), field);
  // Divide rather than multiply so a forged count cannot overflow.
  if (count > remaining() / elem_size) {
    Malformed(std::string(field) + " claims " + std::to_string(count) + " elements of " +
              std::to_string(elem_size) + " bytes but only " + std::to_string(remaining()) +
              " bytes remain");
  }
  return static_cast<size_t>(count);
}

uint32_t WireReader::U32() { return Get<uint32_t>("u32"); }
uint64_t WireReader::U64() { return Get<uint64_t>("u64"); }
int64_t WireReader::I64() { return Get<int64_t>("i64"); }
double WireReader::F64() { return Get<double>("f64"); }

std::string WireReader::Str() {
  uint32_t length = 0;
  Read(&length, sizeof(length), "string length");
  if (length > remaining()) {
    Malformed("string claims " + std::to_string(length) + " bytes but only " +
              std::to_string(remaining()) + " remain");
  }
  std::string value(bytes_.data() + offset_, length);
  offset_ += length;
  return value;
}

std::vector<float> WireReader::F32Vec() {
  const size_t count = ReadCount(sizeof(float), "f32 vector");
  std::vector<float> values(count);
  Read(values.data(), count * sizeof(float), "f32 vector data");
  return values;
}

std::vector<int64_t> WireReader::I64Vec() {
  const size_t count = ReadCount(sizeof(int64_t), "i64 vector");
  std::vector<int64_t> values(count);
  Read(values.data(), count * sizeof(int64_t), "i64 vector data");
  return values;
}

void WireReader::ExpectDone() {
  if (!done()) Malformed(std::to_string(remaining()) + " trailing bytes");
}

}  // namespace up::ipc
