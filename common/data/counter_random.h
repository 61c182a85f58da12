// Counter-based random numbers for the data path: SplitMix64 steps a 64-bit
// state, so a draw depends on the state it starts from alone (seed and
// stream position), never on what another process drew before.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace up {

inline uint64_t SplitMix(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// A permutation of 0..n-1, Fisher-Yates driven by SplitMix from `state`.
inline std::vector<int64_t> SeededPermutation(int64_t n, uint64_t state) {
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[static_cast<size_t>(i)] = i;
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(perm[static_cast<size_t>(i)], perm[SplitMix(state) % static_cast<uint64_t>(i + 1)]);
  return perm;
}

// Uniform in [0, 1) with 53 random bits.
inline double Uniform(uint64_t& state) {
  return static_cast<double>(SplitMix(state) >> 11) * (1.0 / 9007199254740992.0);
}

}  // namespace up
