#!/usr/bin/env bash
# Installs everything unet-pipeline needs on Debian 12, idempotently:
#   - Debian packages (scripts/packages.sh: TOOL_PACKAGES, the compiler, CMake,
#     ninja, ccache; LIBRARY_PACKAGES, Boost, cxxopts, spdlog, yaml-cpp,
#     GoogleTest, libpng, Gloo headers, the NIfTI library; TEST_TOOL_PACKAGES,
#     clang with its sanitizer and libFuzzer runtimes for scripts/quality.sh),
#     running `apt-get update` only when a package is missing;
#   - torch, whose LibTorch is what we build against: the one the Python
#     running this (python3, or UP_PYTHON=...) already imports when it is the
#     pinned version or newer, seen from .venv/ through a .pth file (no second
#     torch, no download); else the pinned PyPI wheel into .venv/. Then the
#     tests' Python references into .venv/.
#   scripts/install-deps.sh           # everything (scripts/test.sh)
#   scripts/install-deps.sh --train   # what training needs (scripts/train.sh):
#                                     # no clang, no Python references
# Set UP_SKIP_TORCH=1 to skip torch (e.g. when Torch_DIR points elsewhere).
# Each step says what it installs; apt's and pip's output goes to
# .install-deps.log, and a failure prints its last lines and that path.
set -euo pipefail
cd "$(dirname "$0")/.."
TRAIN_ONLY=0
for arg in "$@"; do
  case "$arg" in
    --train) TRAIN_ONLY=1 ;;
    *) echo "install-deps: unknown argument $arg (expected --train)" >&2; exit 2 ;;
  esac
done
LOG="$PWD/.install-deps.log"
: >"$LOG"
# logged WHAT CMD...: runs CMD with its output in the log; on failure, says so.
logged() {
  local what="$1"
  shift
  if ! "$@" >>"$LOG" 2>&1; then
    tail -n 15 "$LOG" >&2
    echo "install-deps: failed while $what; the whole output is in $LOG" >&2
    exit 1
  fi
}

# Pinned to the GPU machine's torch (scripts/gpu-check.sh builds against that
# machine's own LibTorch); UP_TORCH_VERSION=... tries another.
TORCH_VERSION="${UP_TORCH_VERSION:-2.11.0}"
# The package list lives in scripts/packages.sh, shared with scripts/gpu-check.sh.
# shellcheck source=scripts/packages.sh
source scripts/packages.sh
APT_PACKAGES=("${TOOL_PACKAGES[@]}" "${LIBRARY_PACKAGES[@]}")
[ "$TRAIN_ONLY" = 1 ] || APT_PACKAGES+=("${TEST_TOOL_PACKAGES[@]}")

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  logged "updating apt's package lists" $SUDO apt-get update -qq
  logged "installing ${missing[*]}" \
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ ! -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
  echo "install-deps: warning: no CUDA toolkit found (expected /usr/local/cuda); the CUDA build of LibTorch needs its headers to compile" >&2
fi

# Whether .venv holds every NAME==VERSION given, at exactly that version.
pinned_installed() {
  .venv/bin/python - "$@" 2>/dev/null <<'PY'
import sys
from importlib.metadata import version
for spec in sys.argv[1:]:
    name, want = spec.split("==")
    if version(name) != want:
        sys.exit(1)
PY
}

# pip_pinned WHAT SPEC...: the test tools' NAME==VERSION SPECs into .venv
# (everything but --train), each pinned, so no dependency is resolved; a
# no-op when all are there already.
pip_pinned() {
  local what=$1
  shift
  if [ "$TRAIN_ONLY" = 0 ] && ! pinned_installed "$@"; then
    echo "install-deps: installing $what"
    logged "installing $what" \
      .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps "$@"
  fi
}

# The .pth file through which .venv sees another Python's site-packages.
LINK_PTH=unet_pipeline_torch.pth
TORCH_PYTHON="${UP_PYTHON:-python3}"

# torch_at PYTHON: prints "VERSION X.Y SITE..." when PYTHON imports a torch of
# the pinned version or newer (SITE: the folders it and its dependencies are
# in), else fails.
torch_at() {
  "$1" - "$TORCH_VERSION" 2>/dev/null <<'PY'
import os, re, sys
def parts(v):
    return [int(p) for p in re.findall(r"\d+", v.split("+")[0])[:3]]
import torch
if parts(torch.__version__) < parts(sys.argv[1]):
    sys.exit(1)
sites = [os.path.dirname(os.path.dirname(torch.__file__))]
sites += [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and os.path.isdir(p)]
print(torch.__version__.split("+")[0], "%d.%d" % sys.version_info[:2],
      *dict.fromkeys(os.path.abspath(p) for p in sites))
PY
}

# Whether .venv imports a torch to build against: its own at exactly the
# pinned version, or a linked one at that version or newer.
venv_torch_ok() {
  if ls .venv/lib/python3*/site-packages/"$LINK_PTH" >/dev/null 2>&1; then
    torch_at .venv/bin/python >/dev/null
  else
    .venv/bin/python -c "import torch, sys; sys.exit(0 if torch.__version__.split('+')[0] == '${TORCH_VERSION}' else 1)" 2>/dev/null
  fi
}

# link_torch PYTHON VERSION X.Y SITE...: .venv (made by PYTHON when missing)
# sees SITE... after its own site-packages; no pip on the way.
link_torch() {
  local python="$1" version="$2" xy="$3"
  shift 3
  if [ ! -x .venv/bin/python ]; then
    echo "install-deps: creating .venv on ${python}'s torch ${version} (no torch download)"
    # Without ensurepip (some hosted runtimes) .venv takes pip from the linked site.
    "$python" -m venv .venv >>"$LOG" 2>&1 || logged "creating .venv" "$python" -m venv --without-pip .venv
  elif [ "$(.venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')" != "$xy" ]; then
    return 1
  else
    echo "install-deps: .venv sees ${python}'s torch ${version} (no torch download)"
  fi
  local site
  site="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  printf '%s\n' "$@" >"$site/$LINK_PTH"
}

if [ "${UP_SKIP_TORCH:-0}" != "1" ]; then
  if [ -x .venv/bin/python ] && venv_torch_ok; then
    :  # .venv imports the torch to build against
  elif found="$(torch_at "$TORCH_PYTHON")" && link_torch "$TORCH_PYTHON" $found; then
    venv_torch_ok || { echo "install-deps: .venv does not import ${TORCH_PYTHON}'s torch after linking it; remove .venv and run again" >&2; exit 1; }
  else
    if [ ! -x .venv/bin/python ]; then
      echo "install-deps: creating .venv"
      logged "creating .venv" python3 -m venv .venv
    fi
    echo "install-deps: installing torch==${TORCH_VERSION} into .venv (large download, once; ${TORCH_PYTHON} has no torch ${TORCH_VERSION} or newer to use)"
    logged "installing torch==${TORCH_VERSION}" \
      .venv/bin/python -m pip install -q --disable-pip-version-check "torch==${TORCH_VERSION}"
  fi
  # The reference implementations the parity tests compare against (tests
  # only), without their optional dependencies: timm would bring a torchvision
  # that replaces the pinned torch.
  PY_TEST_PACKAGES=("dynamic-network-architectures==0.4.4" "einops==0.8.2" "numpy==2.4.6"
                    "monai==1.6.1")
  pip_pinned "the parity tests' references: ${PY_TEST_PACKAGES[*]}" "${PY_TEST_PACKAGES[@]}"
  # nnU-Net v2 itself: `data.kind: nnunet` reads its preprocessed cases with
  # it, and the tests run its planner, trainer and predictor against this
  # project's: nnunetv2 and exactly what those import (found by importing
  # them), each pinned and without its optional dependencies: nnunetv2's full
  # set would replace the pinned torch.
  PY_PREDICTOR_PACKAGES=("nnunetv2==2.8.1" "acvl_utils==0.2.6" "batchgenerators==0.25.5"
                         "batchgeneratorsv2==0.3.6" "blosc2==4.15.0" "cloudpickle==3.1.3"
                         "connected-components-3d==4.1.1" "cycler==0.12.1" "fonttools==4.68.0"
                         "httpx==0.29.0" "idna==3.20" "joblib==1.6.0" "kiwisolver==1.5.1"
                         "lazy_loader==0.6" "matplotlib==3.11.2" "msgpack==1.2.4"
                         "narwhals==2.29.0" "ndindex==1.10.1" "nibabel==5.4.2" "packaging==26.4"
                         "pandas==3.1.1" "pillow==13.0.0" "pyparsing==3.3.3"
                         "python-dateutil==4.0.0" "scikit-image==0.26.0" "scikit-learn==1.9.1"
                         "scipy==1.17.1" "seaborn==0.13.2" "simpleitk==2.5.7" "six==1.17.0"
                         "threadpoolctl==3.8.0" "tifffile==2026.3.3" "tqdm==4.70.1")
  pip_pinned "nnU-Net v2 (nnunetv2 and what it imports) for data.kind: nnunet and the tests" \
    "${PY_PREDICTOR_PACKAGES[@]}"
  # The notebook test's executor (nbclient, a Python kernel) and `wheel`, which
  # setuptools 65 needs to build the package editable (`pip install -e .`) in
  # the package test's venv: each pinned, without optional dependencies.
  PY_NOTEBOOK_PACKAGES=("nbclient==0.11.0" "ipykernel==7.4.0" "nbformat==5.11.1" "wheel==0.48.0"
                        "comm==0.2.3" "debugpy==1.8.22" "fastjsonschema==2.22.3" "ipython==9.19.1"
                        "jsonschema==4.26.0" "jupyter_client==8.10.0" "jupyter_core==5.9.1"
                        "matplotlib-inline==0.2.2" "nest-asyncio2==1.7.4" "pyzmq==27.3.0"
                        "tornado==6.6.1" "traitlets==5.16.1" "attrs==26.1.0"
                        "ipython_pygments_lexers==1.1.1" "jedi==0.20.1"
                        "jsonschema-specifications==2025.9.1" "pexpect==4.9.0" "platformdirs==4.14.9"
                        "prompt_toolkit==3.0.53" "psutil==7.2.2" "Pygments==2.21.0"
                        "referencing==0.37.0" "rpds-py==2026.9.1" "stack-data==0.6.3"
                        "asttokens==3.0.2" "executing==2.3.0" "parso==0.8.7" "ptyprocess==0.7.0"
                        "wcwidth==0.9.5" "pure_eval==0.2.4" "tzdata==2026.6")
  pip_pinned "the notebook test's executor (nbclient, ipykernel) and wheel" \
    "${PY_NOTEBOOK_PACKAGES[@]}"
fi
echo "install-deps: ok"
