// SHA-256 (FIPS 180-4), written for this project so that run folders and the
// stage handshake can hash configs and checkpoints without extra libraries.
//
// Contracts: Update() may be called any number of times with chunks of any
// size (including 0); the digest equals that of the concatenated bytes.
// Finish() pads, returns the 32-byte digest and resets the object so it can
// hash a new message. Not thread-safe; use one object per thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace up {

class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t n);
  std::array<uint8_t, 32> Finish();

 private:
  void Reset();
  void Compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_;
  size_t buffered_ = 0;       // bytes waiting in buffer_
  uint64_t total_bytes_ = 0;  // message length so far
};

// Lower-case hex of a digest (64 characters).
std::string ToHex(const std::array<uint8_t, 32>& digest);

// Lower-case hex SHA-256 of `bytes`.
std::string Sha256Hex(const std::string& bytes);

}  // namespace up
