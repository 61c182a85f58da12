#!/usr/bin/env python3
"""Every binary that loads LibTorch lists libstdc++ before it in DT_NEEDED.

The dynamic linker binds each symbol to its first definition in load order,
and some LibTorch builds (2.11's libtorch.so) export an unversioned copy of
std::filesystem; libstdc++ first keeps our calls in libstdc++
(cmake/FindLibTorch.cmake). Usage: check_needed.py BIN_DIR [BIN_DIR...]
"""
import os
import subprocess
import sys

TORCH = ("libtorch", "libc10")


def needed(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True)
    if out.returncode != 0:
        return None  # not an ELF file (a script)
    return [line.split("[", 1)[1].rstrip("]") for line in out.stdout.splitlines()
            if "(NEEDED)" in line]


def main(dirs):
    checked, bad = 0, []
    for d in dirs:
        for name in sorted(os.listdir(d)):
            path = os.path.join(d, name)
            if not os.path.isfile(path) or not os.access(path, os.X_OK):
                continue
            libs = needed(path)
            if not libs or not any(l.startswith(TORCH) for l in libs):
                continue
            checked += 1
            first_torch = next(i for i, l in enumerate(libs) if l.startswith(TORCH))
            stdcxx = next((i for i, l in enumerate(libs) if l.startswith("libstdc++")), None)
            if stdcxx is None or stdcxx > first_torch:
                bad.append(f"{path}: libstdc++ is not ahead of {libs[first_torch]} in DT_NEEDED "
                           f"({', '.join(libs[:first_torch + 1])}...)")
    for line in bad:
        print(line)
    if checked == 0:
        print("check_needed: no binary that loads LibTorch found in", ", ".join(dirs))
        return 1
    if bad:
        print(f"{len(bad)} of {checked} binaries would bind std::filesystem to LibTorch's copy")
        return 1
    print(f"check_needed: all {checked} binaries that load LibTorch list libstdc++ first")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
