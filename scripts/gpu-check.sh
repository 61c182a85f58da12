#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU and possibly no package
# registry (only its own Python torch, CMake and a compiler).
#
#   scripts/gpu-check.sh fetch   # here, with apt: downloads the Debian .debs into .debs/
#   scripts/gpu-check.sh run     # there: unpacks them into a private prefix, builds against
#                                # the LibTorch of that machine's Python torch, runs the
#                                # GPU-labelled tests, trains brats16g under a 16 GiB cap with
#                                # the pipeline and tries --single-process, and writes
#                                # ${OUT:-gpu-results}/gpu-check.json
set -euo pipefail
cd "$(dirname "$0")/.."
DEBS=(libboost1.74-dev libcxxopts-dev libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 libyaml-cpp-dev
      libyaml-cpp0.7 libgtest-dev libgmock-dev libpng-dev libpng16-16 libgloo-dev)

case "${1:-run}" in
fetch)
  mkdir -p .debs && cd .debs
  apt-get download "${DEBS[@]}"
  echo "gpu-check: .debs/ ready; carry it to the GPU machine"
  ;;
run)
  OUT_DIR="${OUT:-gpu-results}"
  mkdir -p "$OUT_DIR"
  PREFIX="$PWD/.gpu-prefix"
  if [ -d .debs ]; then
    mkdir -p "$PREFIX"
    for f in .debs/*.deb; do dpkg -x "$f" "$PREFIX"; done
  fi
  TORCH_DIR="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')/Torch"
  echo "gpu-check: LibTorch at $TORCH_DIR"
  export LD_LIBRARY_PATH="$PREFIX/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTorch_DIR="$TORCH_DIR" \
    -DCMAKE_PREFIX_PATH="$PREFIX/usr;$PREFIX/usr/lib/x86_64-linux-gnu/cmake" \
    -DCMAKE_CXX_FLAGS="-isystem $PREFIX/usr/include" >"$OUT_DIR/configure.log" 2>&1
  cmake --build build-gpu -j "$(nproc)" >"$OUT_DIR/build.log" 2>&1
  (cd build-gpu && ctest -L gpu --output-on-failure) >"$OUT_DIR/gpu-tests.log" 2>&1 || true
  B=build-gpu/bin/unet-pipeline
  export UP_DEVICE_MEMORY_CAP_GIB=16
  run() {  # name, extra args...
    local name=$1; shift
    local start=$SECONDS
    if "$B" train --config configs/brats16g.yaml --out "$OUT_DIR/$name" "$@" >"$OUT_DIR/$name.log" 2>&1; then
      echo "{\"run\":\"$name\",\"ok\":true,\"wall_s\":$((SECONDS-start)),\"summary\":$(cat "$OUT_DIR/$name/summary.json")}"
    else
      oom=$(grep -c -i "out of memory" "$OUT_DIR/$name.log" || true)
      echo "{\"run\":\"$name\",\"ok\":false,\"out_of_memory\":$([ "$oom" -gt 0 ] && echo true || echo false),\"wall_s\":$((SECONDS-start))}"
    fi
  }
  {
    echo "["
    run pipeline; echo ","
    run single --single-process
    echo "]"
  } >"$OUT_DIR/gpu-check.json"
  "$B" plan --config configs/brats16g.yaml --gpu-mem 16GiB >"$OUT_DIR/plan.txt"
  cat "$OUT_DIR/gpu-check.json"
  ;;
*)
  echo "usage: scripts/gpu-check.sh fetch|run" >&2
  exit 2
  ;;
esac
