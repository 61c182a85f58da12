// Wire: a tiny binary codec for control messages between the launcher and
// the stages, on one machine or across machines (TCP). Values are stored in
// host byte order, and the project builds only where that is little-endian
// (a static_assert in wire.cpp), so both ends of any link agree.
//
// WireWriter appends fixed-size scalars, length-prefixed strings (u32 length)
// and count-prefixed vectors (u64 count) to a byte string it owns. WireReader
// reads them back in the same order from a string it does not own (the
// caller keeps it alive); every read is bounds-checked, and a length or count
// larger than the bytes that remain throws RuntimeError("malformed <what>:
// ...") before anything is allocated, so a forged message cannot make the
// reader allocate a huge buffer. Neither class is thread-safe; separate
// objects may be used from separate threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace up::ipc {

class WireWriter {
 public:
  WireWriter() = default;

  WireWriter& U32(uint32_t value);
  WireWriter& U64(uint64_t value);
  WireWriter& I64(int64_t value);
  WireWriter& F64(double value);
  // u32 byte length, then the bytes. UsageError if longer than 4 GiB - 1.
  WireWriter& Str(const std::string& value);
  // u64 element count, then the elements.
  WireWriter& F32Vec(const std::vector<float>& values);
  WireWriter& I64Vec(const std::vector<int64_t>& values);

  const std::string& bytes() const { return bytes_; }
  // Moves the encoded bytes out; the writer is empty afterwards.
  std::string Take();

 private:
  void Append(const void* data, size_t size);
  template <typename T>
  WireWriter& Put(T value) {  // a fixed-size value in host byte order
    Append(&value, sizeof(value));
    return *this;
  }

  std::string bytes_;
};

class WireReader {
 public:
  // `bytes` must outlive the reader. `what` names the message in errors,
  // e.g. "step request from the launcher".
  WireReader(const std::string& bytes, std::string what);
  // A temporary would dangle.
  WireReader(std::string&& bytes, std::string what) = delete;
  WireReader(const WireReader&) = delete;
  WireReader& operator=(const WireReader&) = delete;

  // Each getter throws RuntimeError("malformed <what>: ...") if the bytes
  // that remain are too few.
  uint32_t U32();
  uint64_t U64();
  int64_t I64();
  double F64();
  std::string Str();
  std::vector<float> F32Vec();
  std::vector<int64_t> I64Vec();

  // True once every byte has been read.
  bool done() const { return offset_ == bytes_.size(); }
  size_t remaining() const { return bytes_.size() - offset_; }
  // Throws RuntimeError("malformed <what>: N trailing bytes") unless done().
  void ExpectDone();

 private:
  // Copies `size` bytes into `out` and advances; `field` names the value.
  void Read(void* out, size_t size, const char* field);
  template <typename T>
  T Get(const char* field) {
    T value{};
    Read(&value, sizeof(value), field);
    return value;
  }
  // Reads a u64 count and checks count * elem_size fits in what remains.
  size_t ReadCount(size_t elem_size, const char* field);
  [[noreturn]] void Malformed(const std::string& detail) const;

  const std::string& bytes_;
  std::string what_;
  size_t offset_ = 0;
};

}  // namespace up::ipc
