// The CUDA caching allocator's setting: expandable segments unless the user
// chose otherwise (cuda_allocator_config.h).
#include "common/device/cuda_allocator_config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

namespace up {
namespace {

// Restores an environment variable as it was when the test began.
class SavedVar {
 public:
  explicit SavedVar(const char* name) : name_(name) {
    if (const char* v = std::getenv(name)) value_ = v;
    unsetenv(name);
  }
  ~SavedVar() {
    if (value_) {
      setenv(name_, value_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> value_;
};

TEST(CudaAllocatorConfig, ExpandableSegmentsWhenTheUserSetNothing) {
  SavedVar cuda("PYTORCH_CUDA_ALLOC_CONF"), any("PYTORCH_ALLOC_CONF");
  EXPECT_EQ(CudaAllocatorConfigText(),
            "PYTORCH_CUDA_ALLOC_CONF unset (PyTorch's fixed-size segments)");
  UseCudaAllocatorDefaults();
  ASSERT_NE(std::getenv("PYTORCH_CUDA_ALLOC_CONF"), nullptr);
  EXPECT_STREQ(std::getenv("PYTORCH_CUDA_ALLOC_CONF"), "expandable_segments:True");
  EXPECT_EQ(CudaAllocatorConfigText(), "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
}

TEST(CudaAllocatorConfig, TheUsersSettingStaysUnderEitherName) {
  SavedVar cuda("PYTORCH_CUDA_ALLOC_CONF"), any("PYTORCH_ALLOC_CONF");
  setenv("PYTORCH_CUDA_ALLOC_CONF", "garbage_collection_threshold:0.6", 1);
  UseCudaAllocatorDefaults();
  EXPECT_STREQ(std::getenv("PYTORCH_CUDA_ALLOC_CONF"), "garbage_collection_threshold:0.6");
  unsetenv("PYTORCH_CUDA_ALLOC_CONF");
  setenv("PYTORCH_ALLOC_CONF", "expandable_segments:False", 1);
  UseCudaAllocatorDefaults();
  EXPECT_EQ(std::getenv("PYTORCH_CUDA_ALLOC_CONF"), nullptr) << "the newer name is the user's";
  EXPECT_EQ(CudaAllocatorConfigText(), "PYTORCH_ALLOC_CONF=expandable_segments:False");
}

}  // namespace
}  // namespace up
