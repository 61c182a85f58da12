# Every external dependency, found once, each with a clear message when missing.
# scripts/install-deps.sh installs all of them on Debian 12.

macro(up_require package apt_package)
  find_package(${package} ${ARGN} QUIET)
  if(NOT ${package}_FOUND)
    message(FATAL_ERROR "${package} not found: install it with `apt-get install ${apt_package}` "
                        "(or run scripts/install-deps.sh).")
  endif()
endmacro()

find_package(Threads REQUIRED)
up_require(Boost libboost-dev)
if(NOT UP_TORCHFREE_ONLY)
  up_require(cxxopts libcxxopts-dev)
endif()
up_require(spdlog libspdlog-dev)
up_require(yaml-cpp libyaml-cpp-dev)
up_require(PNG libpng-dev)
if(UP_BUILD_TESTS)
  up_require(GTest libgtest-dev)
endif()

if(NOT UP_TORCHFREE_ONLY)
  include(FindLibTorch)
endif()

if(TARGET yaml-cpp::yaml-cpp)
  set(UP_YAML_TARGET yaml-cpp::yaml-cpp)
else()
  set(UP_YAML_TARGET yaml-cpp)
endif()

# Binaries find the LibTorch shared libraries without LD_LIBRARY_PATH.
set(CMAKE_BUILD_RPATH "${UP_TORCH_LIB_DIR}")
set(CMAKE_INSTALL_RPATH "${UP_TORCH_LIB_DIR}")
