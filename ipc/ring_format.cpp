// DType sizes and RunId helpers for the ring layout (see ring_format.h).
//
// Stateless and thread-safe; RunId::Random opens /dev/urandom on each call and
// closes it before returning.
#include "ipc/ring_format.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/base/errors.h"

namespace up::ipc {

bool IsKnownDType(DType dtype) {
  const auto v = static_cast<uint8_t>(dtype);
  return v >= static_cast<uint8_t>(DType::kFloat32) && v <= static_cast<uint8_t>(DType::kUInt8);
}

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kFloat64:
    case DType::kInt64:
      return 8;
    case DType::kUInt8:
      return 1;
  }
  throw UsageError("unknown tensor dtype code " + std::to_string(static_cast<int>(dtype)) +
                   "; expected 1..7 (float32, float16, bfloat16, float64, int64, int32, uint8)");
}

bool TensorBytes(DType dtype, const int64_t* shape, size_t ndim, uint64_t* bytes) {
  if (!IsKnownDType(dtype)) return false;
  uint64_t n = DTypeSize(dtype);
  for (size_t i = 0; i < ndim; ++i) {
    if (shape[i] < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(shape[i]), &n)) {
      return false;
    }
  }
  *bytes = n;
  return true;
}

bool RunId::operator==(const RunId& other) const {
  return std::memcmp(bytes, other.bytes, sizeof(bytes)) == 0;
}

bool RunId::IsZero() const {
  for (uint8_t b : bytes) {
    if (b != 0) return false;
  }
  return true;
}

std::string RunId::Hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * sizeof(bytes));
  for (uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0xF]);
  }
  return out;
}

namespace {

// RAII for a file descriptor opened here.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string EntryProblem(const TensorEntry& e, uint64_t payload_bytes) {
  if (strnlen(e.name, kNameBytes) == kNameBytes) return "name is unterminated, expected a NUL";
  if (!IsKnownDType(e.dtype)) {
    return "dtype is " + std::to_string(static_cast<int>(e.dtype)) + ", expected 1..7";
  }
  if (e.ndim > kMaxDims) return "ndim is " + std::to_string(e.ndim) + ", expected <= 8";
  uint64_t bytes = 0;
  if (!TensorBytes(e.dtype, e.shape, e.ndim, &bytes)) {
    return "shape is negative or overflows, expected non-negative dims";
  }
  if (e.bytes != bytes) {
    return "bytes is " + std::to_string(e.bytes) + ", expected " + std::to_string(bytes);
  }
  if (e.offset % kPayloadAlign != 0 || e.offset > payload_bytes ||
      e.bytes > payload_bytes - e.offset) {
    return "offset is " + std::to_string(e.offset) + ", expected 64-aligned with offset + " +
           std::to_string(e.bytes) + " bytes <= " + std::to_string(payload_bytes);
  }
  return "";
}

}  // namespace

std::string SlotHeaderProblem(const SlotHeader& h, const RunId& run_id, uint64_t seq,
                              uint64_t slot_payload_bytes) {
  auto is = [](const char* field, const std::string& value, const std::string& want) {
    return std::string(field) + " is " + value + ", expected " + want;
  };
  if (h.magic != kRingMagic) return is("magic", std::to_string(h.magic), "the ring magic");
  if (h.version != kRingVersion) return is("version", std::to_string(h.version), "1");
  if (h.run_id != run_id) return is("run_id", h.run_id.Hex(), run_id.Hex());
  if (h.seq != seq) return is("seq", std::to_string(h.seq), std::to_string(seq));
  const auto dir = static_cast<uint32_t>(h.direction);
  if (dir != 1 && dir != 2) return is("direction", std::to_string(dir), "1 or 2");
  if (h.n_tensors > kMaxTensors) return is("n_tensors", std::to_string(h.n_tensors), "<= 24");
  if (h.payload_bytes > slot_payload_bytes) {
    return is("payload_bytes", std::to_string(h.payload_bytes),
              "<= " + std::to_string(slot_payload_bytes));
  }
  for (uint32_t i = 0; i < h.n_tensors; ++i) {
    const std::string problem = EntryProblem(h.tensors[i], h.payload_bytes);
    if (!problem.empty()) return "tensors[" + std::to_string(i) + "]." + problem;
  }
  return "";
}

RunId RunId::Random() {
  Fd fd(::open("/dev/urandom", O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    throw RuntimeError(std::string("cannot open /dev/urandom to make a run id: ") +
                       std::strerror(errno) + "; check that /dev is mounted in this environment");
  }
  RunId id{};
  size_t got = 0;
  while (got < sizeof(id.bytes)) {
    const ssize_t n = ::read(fd.get(), id.bytes + got, sizeof(id.bytes) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw RuntimeError(std::string("cannot read /dev/urandom to make a run id: ") +
                         (n < 0 ? std::strerror(errno) : "end of file") +
                         "; check that /dev/urandom is a working random device");
    }
    got += static_cast<size_t>(n);
  }
  return id;
}

RunId RunId::FromHex(const std::string& hex) {
  if (hex.size() != 2 * sizeof(RunId::bytes)) {
    throw UsageError("run id '" + hex + "' has " + std::to_string(hex.size()) +
                     " characters; expected 32 hex digits (as printed by the launcher)");
  }
  RunId id{};
  for (size_t i = 0; i < sizeof(id.bytes); ++i) {
    const int hi = HexValue(hex[2 * i]);
    const int lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      throw UsageError("run id '" + hex + "' has a non-hex character at position " +
                       std::to_string(hi < 0 ? 2 * i : 2 * i + 1) + "; expected 32 hex digits");
    }
    id.bytes[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return id;
}

}  // namespace up::ipc
