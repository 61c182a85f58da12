// What the nnU-Net readers' tests share: writing a file the reader will
// find, and the one-line UsageError a bad file must give.
#pragma once

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "common/base/errors.h"

#define EXPECT_HAS(message, piece) \
  EXPECT_NE((message).find(piece), std::string::npos) << "message: " << (message)

namespace up::nnunet_test {

// Writes `text` to `path`, making its folder.
inline void WriteText(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

// The UsageError message of `f` (one line, exit code 2), or "<no error>"; a
// yaml-cpp exception (a missing key read as if it were there) fails the test
// instead of escaping.
inline std::string UsageErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_EQ(e.exit_code(), 2);
    return message;
  } catch (const YAML::Exception& e) {
    ADD_FAILURE() << "a YAML::Exception escaped, not a UsageError: " << e.what();
    return "<YAML::Exception>";
  }
  return "<no error>";
}

}  // namespace up::nnunet_test
