# Locates LibTorch and defines the imported target `torch`.
#
# Search order: Torch_DIR / CMAKE_PREFIX_PATH when given (a LibTorch from
# pytorch.org or a GPU machine's own torch), then the project's `.venv/`
# (where scripts/install-deps.sh puts the pinned wheel, or links the torch
# another Python already has: then `.venv/bin/python -c 'import torch'` finds
# it), then whatever `python3 -c 'import torch'` finds. Stops with one clear
# message otherwise.
set(_up_torch_hints "")
file(GLOB _up_venv_torch "${PROJECT_SOURCE_DIR}/.venv/lib/python3*/site-packages/torch/share/cmake")
list(APPEND _up_torch_hints ${_up_venv_torch})
if(NOT Torch_DIR AND NOT _up_venv_torch)
  find_program(_up_python3 NAMES python3)
  foreach(_up_python "${PROJECT_SOURCE_DIR}/.venv/bin/python" "${_up_python3}")
    if(NOT EXISTS "${_up_python}")
      continue()
    endif()
    execute_process(
      COMMAND ${_up_python} -c "import torch, sys; sys.stdout.write(torch.utils.cmake_prefix_path)"
      OUTPUT_VARIABLE _up_py_torch_prefix ERROR_QUIET RESULT_VARIABLE _up_py_rc)
    if(_up_py_rc EQUAL 0 AND _up_py_torch_prefix)
      list(APPEND _up_torch_hints "${_up_py_torch_prefix}")
      break()
    endif()
  endforeach()
endif()

# Caffe2's config looks for the CUDA toolkit; point it at the usual place.
if(NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()

find_package(Torch QUIET HINTS ${_up_torch_hints})
if(NOT Torch_FOUND)
  message(FATAL_ERROR
    "LibTorch not found. Run scripts/install-deps.sh (installs the pinned torch wheel into .venv/), "
    "or pass -DTorch_DIR=<libtorch>/share/cmake/Torch (LibTorch 2.11 or newer).")
endif()
if(Torch_VERSION VERSION_LESS 2.11)
  message(FATAL_ERROR "LibTorch ${Torch_VERSION} is too old: unet-pipeline needs 2.11 or newer.")
endif()
get_filename_component(UP_TORCH_LIB_DIR "${TORCH_LIBRARY}" DIRECTORY)

# A wheel's LibTorch finds its CUDA libraries (cuDNN, NCCL, cuBLAS...) in the
# sibling nvidia/* packages. Resolve them there at link time too, ahead of any
# older copy in /usr/local/cuda, so the binaries see the libraries torch was
# built against.
file(GLOB UP_TORCH_NVIDIA_LIB_DIRS LIST_DIRECTORIES true "${UP_TORCH_LIB_DIR}/../../nvidia/*/lib")
set(UP_TORCH_RPATH_LINK "")
foreach(_dir ${UP_TORCH_NVIDIA_LIB_DIRS})
  get_filename_component(_dir "${_dir}" REALPATH)
  string(APPEND UP_TORCH_RPATH_LINK " -Wl,-rpath-link,${_dir}")
endforeach()
string(APPEND CMAKE_EXE_LINKER_FLAGS "${UP_TORCH_RPATH_LINK}")

# libstdc++ first on every binary's link line and so first among its
# DT_NEEDED entries. Some LibTorch builds (2.11's libtorch.so) carry a static
# copy of std::filesystem and export it unversioned. Without this, the static
# linker resolves our std::filesystem calls against libtorch.so (which it then
# keeps as needed, though nothing else of it is used), and the dynamic linker
# binds them to that copy, which jumps to a null address.
# tests/common/model/libstdcxx_binding_test.cpp and the `needed_order` test
# fail when a binary is not immune.
string(APPEND CMAKE_EXE_LINKER_FLAGS " -Wl,--push-state,--no-as-needed,-lstdc++,--pop-state")
string(APPEND CMAKE_SHARED_LINKER_FLAGS "${UP_TORCH_RPATH_LINK}")
message(STATUS "LibTorch ${Torch_VERSION} at ${UP_TORCH_LIB_DIR} (CUDA: ${CAFFE2_USE_CUDA})")
