// Our std::filesystem calls must reach libstdc++ whichever LibTorch is
// loaded: 2.11's libtorch.so exports an unversioned copy of 64
// std::filesystem functions that would otherwise win the dynamic linker's
// first-definition lookup (cmake/FindLibTorch.cmake puts libstdc++ first).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>

namespace {

std::string ObjectDefining(void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "(unknown)";
  return info.dli_fname;
}

TEST(LibstdcxxBinding, FilesystemCallsReachLibstdcxx) {
  // Taking the address goes through the GOT: it is what a call would bind to.
  using RemoveAll = std::uintmax_t (*)(const std::filesystem::path&, std::error_code&);
  using CreateDirs = bool (*)(const std::filesystem::path&, std::error_code&);
  const RemoveAll remove_all = &std::filesystem::remove_all;
  const CreateDirs create_directories = &std::filesystem::create_directories;
  for (void* fn :
       {reinterpret_cast<void*>(remove_all), reinterpret_cast<void*>(create_directories)}) {
    const std::string object = ObjectDefining(fn);
    EXPECT_NE(object.find("libstdc++"), std::string::npos)
        << "a std::filesystem function binds to " << object;
  }
  // And the calls work (they crashed when bound to libtorch.so's copy).
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("up-binding-" + std::to_string(::getpid()));
  std::error_code ec;
  ASSERT_TRUE(std::filesystem::create_directories(dir / "a" / "b", ec)) << ec.message();
  EXPECT_EQ(std::filesystem::remove_all(dir, ec), 3u) << ec.message();
  // Where libtorch.so is loaded at all (the linker now resolves these symbols
  // in libstdc++ first, so it may not be), its copy must not have won.
  if (void* libtorch = dlopen("libtorch.so", RTLD_NOW | RTLD_NOLOAD)) {
    std::cout << "[ INFO     ] libtorch.so is loaded; its std::filesystem did not win\n";
    dlclose(libtorch);
  }
}

}  // namespace
