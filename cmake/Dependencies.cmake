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

# NIfTI (nifti2_io reads NIfTI-1 and -2). Found by hand: Debian 12's
# NIFTIConfig.cmake names library files that the package does not install.
find_path(UP_NIFTI_INCLUDE_DIR nifti2_io.h PATH_SUFFIXES nifti)
find_library(UP_NIFTI2_LIBRARY nifti2)
find_library(UP_ZNZ_LIBRARY znz)
if(NOT UP_NIFTI_INCLUDE_DIR OR NOT UP_NIFTI2_LIBRARY OR NOT UP_ZNZ_LIBRARY)
  message(FATAL_ERROR "NIfTI library not found (nifti2_io.h, libnifti2, libznz): install it with "
                      "`apt-get install libnifti2-dev` (or run scripts/install-deps.sh).")
endif()
add_library(up_nifti INTERFACE IMPORTED)
target_include_directories(up_nifti INTERFACE ${UP_NIFTI_INCLUDE_DIR})
target_link_libraries(up_nifti INTERFACE ${UP_NIFTI2_LIBRARY} ${UP_ZNZ_LIBRARY})

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
