# The Debian 12 packages unet-pipeline needs: the one list. Sourced (not run)
# by scripts/install-deps.sh, which installs both groups, and by
# scripts/gpu-check.sh, whose `fetch` downloads LIBRARY_PACKAGES and the
# closure of their dependencies as .debs for a machine without a registry.
# A library added here reaches the GPU machine with no second edit.
# shellcheck shell=bash disable=SC2034  # the arrays are read by the sourcing script

# Tools to build and test: the compiler, CMake, ninja (scripts/gpu-check.sh
# configures with -G Ninja), ccache, Python for the venv and the reference
# scripts, and clang with its sanitizer and libFuzzer runtimes
# (scripts/quality.sh). A GPU machine brings its own compiler, CMake and
# ninja, so these are never shipped as .debs.
TOOL_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  python3 python3-venv python3-pip
)
# Only for the tests' quality gates (scripts/quality.sh): scripts/train.sh
# (install-deps.sh --train) leaves them out.
TEST_TOOL_PACKAGES=(
  clang libclang-rt-14-dev
)

# Libraries the build finds (cmake/Dependencies.cmake, ipc/CMakeLists.txt):
# Boost, cxxopts, spdlog, yaml-cpp, GoogleTest/GoogleMock, libpng, zlib, the
# Gloo headers and the NIfTI library.
LIBRARY_PACKAGES=(
  libboost-dev libcxxopts-dev libspdlog-dev libyaml-cpp-dev libgtest-dev libgmock-dev
  libpng-dev zlib1g-dev libgloo-dev libnifti2-dev
)

# What every Linux machine with a C++ compiler already has, so `gpu-check.sh
# fetch` leaves it out of the .deb set and does not follow its dependencies:
# the C library and its headers (and what libc6-dev pulls: kernel headers,
# libcrypt, libnsl/libtirpc and, through them, Kerberos and OpenSSL), GCC's
# runtime libraries and libstdc++'s headers, and Debian's own base system
# (dpkg, debconf, adduser/passwd and PAM, which packages need to *install*,
# not to be unpacked into a prefix and linked against). Shipping a second
# libc or libstdc++ would shadow the machine's own.
BASE_PACKAGES=(
  libc6 libc6-dev libc-dev-bin linux-libc-dev libcrypt1 libcrypt-dev
  libnsl2 libnsl-dev libtirpc3 libtirpc-dev libtirpc-common rpcsvc-proto
  gcc-12-base libgcc-s1 libgcc-12-dev libstdc++6 libstdc++-12-dev
  libgomp1 libatomic1 libitm1 libquadmath0 libasan8 liblsan0 libtsan2 libubsan1
  dpkg tar debconf cdebconf adduser passwd install-info
)
