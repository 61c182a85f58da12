#!/usr/bin/env python3
"""scripts/install-deps.sh --train (what scripts/train.sh runs first) and the torch already there.

usage: install_test.py SOURCE_DIR uses-installed|pinned-without

  uses-installed  a venv that has torch 2.11 is UP_PYTHON: install-deps makes
                  .venv see that torch (no pip runs: the index is switched
                  off, so any download would fail), twice (the second finds
                  it done), and CMake's FindLibTorch finds that LibTorch
                  through .venv
  pinned-without  a venv with no torch, and one with a torch older than the
                  pin: install-deps goes for the pinned wheel into .venv (and,
                  with no index, fails saying so)

Each runs in a scratch copy of install-deps.sh, packages.sh and cmake/ (the
checkout's own .venv is never touched). The Debian packages must be there
already (CI's install-deps put them there); the test refuses to run apt.
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import venvs  # noqa: E402

PINNED = "2.11.0"


def fail(what):
    sys.exit(f"install_test: {what}")


def scratch_checkout(src, root):
    os.makedirs(os.path.join(root, "scripts"))
    for name in ("install-deps.sh", "packages.sh"):
        shutil.copy2(os.path.join(src, "scripts", name), os.path.join(root, "scripts", name))
    shutil.copytree(os.path.join(src, "cmake"), os.path.join(root, "cmake"))
    return root


def install_deps(checkout, python):
    """Runs install-deps --train with UP_PYTHON=python and no package index."""
    env = dict(os.environ, UP_PYTHON=python, PIP_NO_INDEX="1", PIP_FIND_LINKS="",
               PIP_INDEX_URL="http://127.0.0.1:9/", SUDO_ASKPASS="/bin/false")
    env.pop("VIRTUAL_ENV", None)
    # apt-get would mean a Debian package is missing: not this test's business.
    bin_dir = os.path.join(checkout, "no-apt")
    os.makedirs(bin_dir, exist_ok=True)
    for tool in ("apt-get", "sudo"):
        with open(os.path.join(bin_dir, tool), "w") as f:
            f.write(f"#!/bin/sh\necho 'install_test: {tool} called: a Debian package is "
                    "missing' >&2\nexit 1\n")
        os.chmod(os.path.join(bin_dir, tool), 0o755)
    env["PATH"] = bin_dir + os.pathsep + env["PATH"]
    done = subprocess.run([os.path.join(checkout, "scripts", "install-deps.sh"), "--train"],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=600)
    log_path = os.path.join(checkout, ".install-deps.log")
    log = open(log_path).read() if os.path.exists(log_path) else ""
    print(f"install-deps (exit {done.returncode}):\n{done.stdout}")
    return done.returncode, done.stdout, log


def venv_python(checkout, code):
    return subprocess.run([os.path.join(checkout, ".venv", "bin", "python"), "-c", code],
                          capture_output=True, text=True)


def find_libtorch(checkout):
    """LibTorch's library folder as CMake's FindLibTorch finds it from checkout."""
    with open(os.path.join(checkout, "CMakeLists.txt"), "w") as f:
        f.write("cmake_minimum_required(VERSION 3.18)\nproject(probe CXX)\n"
                "include(cmake/FindLibTorch.cmake)\n"
                "file(WRITE ${CMAKE_BINARY_DIR}/torch_lib_dir.txt \"${UP_TORCH_LIB_DIR}\")\n")
    build = os.path.join(checkout, "probe-build")
    env = dict(os.environ)
    env.pop("Torch_DIR", None)
    env.pop("CMAKE_PREFIX_PATH", None)
    done = subprocess.run(["cmake", "-S", checkout, "-B", build], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    if done.returncode != 0:
        fail(f"cmake could not find LibTorch through the linked .venv:\n{done.stdout[-3000:]}")
    return open(os.path.join(build, "torch_lib_dir.txt")).read().strip()


def uses_installed(src, tmp):
    user = venvs.make_venv(os.path.join(tmp, "user-env"), ["torch"])
    real_torch = subprocess.run([user, "-c", "import torch, os; print(os.path.realpath("
                                 "os.path.dirname(torch.__file__)))"],
                                check=True, capture_output=True, text=True).stdout.strip()
    checkout = scratch_checkout(src, os.path.join(tmp, "checkout"))
    rc, out, log = install_deps(checkout, user)
    if rc != 0:
        fail(f"install-deps failed with torch {PINNED} in UP_PYTHON:\n{log[-3000:]}")
    if "installing torch" in out or "pip install" in log:
        fail("install-deps went for a torch download although UP_PYTHON has torch " + PINNED)
    if "no torch download" not in out:
        fail("install-deps did not say it uses the torch already installed")
    seen = venv_python(checkout, "import torch, os, sys; print(torch.__version__); "
                                 "print(os.path.realpath(os.path.dirname(torch.__file__))); "
                                 "print(torch.utils.cmake_prefix_path)")
    if seen.returncode != 0:
        fail(f".venv does not import torch after install-deps:\n{seen.stderr}")
    version, where, prefix = seen.stdout.split()
    if where != real_torch:
        fail(f".venv imports the torch at {where}, not UP_PYTHON's ({real_torch})")
    site = venvs.site_packages(os.path.join(checkout, ".venv"))
    if os.path.exists(os.path.join(site, "torch")):
        fail(f".venv holds a torch of its own ({site}/torch)")
    print(f"install_test: .venv imports torch {version} from {where}, none of its own")
    rc, out, _ = install_deps(checkout, user)
    if rc != 0 or "creating .venv" in out or "installing torch" in out:
        fail("a second install-deps did not find everything in place")
    lib_dir = os.path.realpath(find_libtorch(checkout))
    if lib_dir != os.path.join(real_torch, "lib"):
        fail(f"FindLibTorch found LibTorch at {lib_dir}, not the installed torch's "
             f"{real_torch}/lib")
    print(f"install_test: ok: the build links {lib_dir} (torch prefix {prefix})")


def pinned_without(src, tmp):
    bare = venvs.make_venv(os.path.join(tmp, "bare-env"))
    old = venvs.make_venv(os.path.join(tmp, "old-env"))
    fake = os.path.join(venvs.site_packages(os.path.join(tmp, "old-env")), "torch")
    os.makedirs(fake)
    with open(os.path.join(fake, "__init__.py"), "w") as f:
        f.write('__version__ = "2.10.0"  # older than the pin: install-deps must not use it\n')
    for name, python in (("no torch", bare), ("torch 2.10.0", old)):
        checkout = scratch_checkout(src, os.path.join(tmp, name.replace(" ", "-")))
        rc, out, log = install_deps(checkout, python)
        if f"installing torch=={PINNED} into .venv" not in out:
            fail(f"with {name} in UP_PYTHON, install-deps did not go for the pinned torch")
        if rc == 0:
            fail(f"with {name} and no index, install-deps claims to have installed torch")
        if f"torch=={PINNED}" not in log:
            fail(f"with {name}, pip was not asked for torch=={PINNED}:\n{log[-2000:]}")
        print(f"install_test: with {name}: the pinned torch, as it should (no index: refused)")
    print("install_test: ok")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, what = os.path.abspath(sys.argv[1]), sys.argv[2]
    checks = {"uses-installed": uses_installed, "pinned-without": pinned_without}
    if what not in checks:
        fail(f"unknown check {what!r}; one of {', '.join(checks)}")
    with tempfile.TemporaryDirectory() as tmp:
        checks[what](src, tmp)


if __name__ == "__main__":
    main()
