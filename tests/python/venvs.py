"""Throwaway Python environments for the package and install tests.

make_venv(path, ["torch", "monai"]) makes a venv whose site-packages holds
exactly those distributions and what they require (markers evaluated, no
extras), each one's files symlinked from the Python running this (.venv):
a fresh environment with torch in it, made in seconds and without an index.
"""
import os
import subprocess
import sys
import sysconfig
from importlib import metadata

from packaging.requirements import Requirement


def closure(names):
    """The distributions names require, names included, as metadata.Distribution.

    A requirement with extras (torch's `cuda-toolkit[cublas, ...]`) brings
    what those extras require too, as pip would check.
    """
    seen, todo, out = {}, [(n, ()) for n in names], []
    while todo:
        name, extras = todo.pop()
        dist = metadata.distribution(name)
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key in seen and set(extras) <= seen[key]:
            continue
        if key not in seen:
            out.append(dist)
        seen[key] = seen.get(key, set()) | set(extras)
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or any(req.marker.evaluate({"extra": e})
                                         for e in ("",) + tuple(extras)):
                todo.append((req.name, tuple(req.extras)))
    return out


def site_packages(venv):
    return subprocess.run([os.path.join(venv, "bin", "python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()


def make_venv(path, names=(), pip=False):
    """A venv at path holding the distributions names and their requirements (and pip)."""
    subprocess.run([sys.executable, "-m", "venv", path] + ([] if pip else ["--without-pip"]),
                   check=True)
    site = site_packages(path)
    here = sysconfig.get_paths()["purelib"]
    for dist in closure(names):
        tops = {str(f).split("/")[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops:
            source, target = os.path.join(here, top), os.path.join(site, top)
            if os.path.exists(source) and not os.path.lexists(target):
                os.symlink(source, target)
    return os.path.join(path, "bin", "python")
