// Tests for up::Sha256: the FIPS 180-2 / NIST example vectors, and that
// incremental updates in arbitrary chunk sizes give the one-shot digest.
#include "common/base/sha256.h"

#include <gtest/gtest.h>

#include <string>

namespace up {
namespace {

TEST(Sha256Test, EmptyString) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256Test, Abc) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256Test, TwoBlockMessage448Bits) {
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256Test, OneMillionA) {
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, OneMillionAInOddChunks) {
  const std::string chunk(997, 'a');
  Sha256 hasher;
  size_t left = 1000000;
  while (left > 0) {
    size_t n = std::min(left, chunk.size());
    hasher.Update(chunk.data(), n);
    left -= n;
  }
  EXPECT_EQ(ToHex(hasher.Finish()),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, IncrementalEqualsOneShotForManyChunkSizes) {
  std::string message;
  for (int i = 0; i < 1000; ++i) message += static_cast<char>((i * 131 + 7) & 0xff);
  for (size_t length : {0u, 1u, 55u, 56u, 63u, 64u, 65u, 119u, 120u, 128u, 1000u}) {
    const std::string part = message.substr(0, length);
    const std::string expected = Sha256Hex(part);
    for (size_t chunk : {1u, 3u, 7u, 13u, 63u, 64u, 65u, 127u}) {
      Sha256 hasher;
      for (size_t at = 0; at < part.size(); at += chunk) {
        hasher.Update(part.data() + at, std::min(chunk, part.size() - at));
      }
      hasher.Update(part.data(), 0);  // empty updates change nothing
      EXPECT_EQ(ToHex(hasher.Finish()), expected) << "length " << length << " chunk " << chunk;
    }
  }
}

TEST(Sha256Test, FinishResetsForTheNextMessage) {
  Sha256 hasher;
  hasher.Update("xyz", 3);
  hasher.Finish();
  hasher.Update("abc", 3);
  EXPECT_EQ(ToHex(hasher.Finish()),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256Test, DifferentInputsDiffer) {
  EXPECT_NE(Sha256Hex("abc"), Sha256Hex("abd"));
  EXPECT_NE(Sha256Hex(std::string(64, '\0')), Sha256Hex(std::string(65, '\0')));
}

}  // namespace
}  // namespace up
