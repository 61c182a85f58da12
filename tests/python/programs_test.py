#!/usr/bin/env python3
"""unet_pipeline.programs: building missing programs once, and a failure's one line.

usage: programs_test.py SOURCE_DIR

Against a fake checkout (UP_SOURCE_DIR) whose scripts/install-deps.sh and
scripts/build.sh stand in for the real ones: a missing program makes
ensure_built run install-deps --train with this Python as UP_PYTHON, then
build.sh --programs, whose counter lines feed the bar; the programs there, it
runs nothing; a build that fails is one RunError with the build's last line;
a program that exits 2 is one RunError with its `unet-pipeline: error:` line.
"""
import os
import sys
import tempfile

INSTALL_DEPS = """#!/bin/sh
echo "install-deps: UP_PYTHON=$UP_PYTHON args=$*" >> calls.log
echo "install-deps: ok"
"""
BUILD_OK = """#!/bin/sh
echo "build.sh $*" >> calls.log
echo "build: configuring build (log: build/build.log)"
echo "build: [1/2] Building CXX object launcher/cli/main.cpp.o"
mkdir -p build/bin
for p in unet-pipeline encoder_proc decoder_proc; do
  printf '#!/bin/sh\\necho "[launcher] a log line" >&2\\necho "unet-pipeline: error: config: train.steps = 0: must be >= 1" >&2\\nexit 2\\n' > build/bin/$p
  chmod +x build/bin/$p
done
echo "build: [2/2] Linking CXX executable bin/unet-pipeline"
"""
BUILD_FAILS = """#!/bin/sh
echo "build.sh $*" >> calls.log
echo "build: [1/9] Building CXX object common/base/errors.cpp.o"
echo "build: failed; the first errors are above, the whole output is in build/build.log" >&2
exit 1
"""


def fake_checkout(root, build_script):
    os.makedirs(os.path.join(root, "scripts"))
    for name, text in (("install-deps.sh", INSTALL_DEPS), ("build.sh", build_script)):
        path = os.path.join(root, "scripts", name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o755)
    return root


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.path.insert(0, os.path.join(os.path.abspath(sys.argv[1]), "python"))
    from unet_pipeline import programs  # noqa: PLC0415

    failures = []

    def check(what, ok):
        if not ok:
            failures.append(what)

    os.environ.pop("UP_BUILD_DIR", None)
    with tempfile.TemporaryDirectory() as tmp:
        good = fake_checkout(os.path.join(tmp, "good"), BUILD_OK)
        os.environ["UP_SOURCE_DIR"] = good
        path = programs.ensure_built(progress=False)
        check("ensure_built returns build/bin/unet-pipeline",
              path == os.path.join(good, "build", "bin", "unet-pipeline"))
        calls = open(os.path.join(good, "calls.log")).read().splitlines()
        check(f"install-deps --train with this Python, then build.sh --programs: {calls}",
              calls == [f"install-deps: UP_PYTHON={sys.executable} args=--train",
                        "build.sh --programs"])
        programs.ensure_built(progress=False)
        check("a second call builds again",
              len(open(os.path.join(good, "calls.log")).read().splitlines()) == 2)
        try:
            programs.run(["train"])
            failures.append("a program that exits 2 raised nothing")
        except programs.RunError as e:
            check(f"the refusal's message is the program's error line: {e}",
                  str(e) == "unet-pipeline: error: config: train.steps = 0: must be >= 1")

        bad = fake_checkout(os.path.join(tmp, "bad"), BUILD_FAILS)
        os.environ["UP_SOURCE_DIR"] = bad
        try:
            programs.ensure_built(progress=False)
            failures.append("a failed build raised nothing")
        except programs.RunError as e:
            check(f"a failed build's message is its last line: {e}",
                  str(e).startswith("build: failed;") and "\n" not in str(e))

        os.environ["UP_SOURCE_DIR"] = tmp
        try:
            programs.source_dir()
            failures.append("a folder without scripts/build.sh was taken for a checkout")
        except programs.RunError as e:
            check(f"no checkout names the folder: {e}", tmp in str(e))

    for line in failures:
        print(f"failed: {line}")
    if failures:
        sys.exit(f"programs_test: {len(failures)} failures")
    print("programs_test: ok")


if __name__ == "__main__":
    main()
