#!/usr/bin/env python3
"""Runs README.md's commands as it prints them, so a README command that stops
working fails the tests. Only step counts are shortened (train.steps=N -> 3),
and the quick start's run goes into a scratch folder.

usage: run_readme.py SOURCE_DIR BUILD_DIR quick-start|own-data|commands

  quick-start  the quick start's training command (scripts/train.sh: installs
               what is missing, builds the programs into BUILD_DIR, trains)
  own-data     the "Your own data" block, line for line, in a scratch folder
               that sees the checkout's scripts/, configs/ and .venv/ and
               BUILD_DIR's programs as build/bin/
  commands     the "Commands" block names exactly the commands
               `unet-pipeline --help` lists
"""
import json
import os
import re
import subprocess
import sys
import tempfile


def fail(what):
    sys.exit(f"run_readme: {what}")


def section_blocks(readme, title):
    """The fenced code blocks of the README section `## title`, as text."""
    text = open(readme).read()
    start = text.find(f"\n## {title}\n")
    if start < 0:
        fail(f"README.md has no section '## {title}'")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end > 0 else len(text)]
    return re.findall(r"```sh\n(.*?)```", section, re.S)


def shorten_steps(script):
    return re.sub(r"train\.steps=\d+", "train.steps=3", script)


def run(script, cwd, env, what):
    print(f"run_readme: {what}:\n{script}", flush=True)
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=900)
    print(done.stdout[-6000:])
    if done.returncode != 0:
        fail(f"{what} exited {done.returncode}")
    return done.stdout


def quick_start(src, build):
    blocks = section_blocks(os.path.join(src, "README.md"), "Quick start")
    commands = [l.split("#")[0].strip() for l in blocks[0].splitlines()]
    train = [c for c in commands if c.startswith("scripts/train.sh")]
    if len(train) != 1:
        fail(f"the quick start has no single scripts/train.sh line: {commands}")
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, UP_BUILD_DIR=build)
        out = os.path.join(tmp, "quick")
        run(f"{train[0]} --set train.steps=3 --out {out}", src, env, "the quick start")
        summary = os.path.join(out, "summary.json")
        if not os.path.exists(summary) or json.load(open(summary)).get("steps") != 3:
            fail(f"the quick start left no summary.json of 3 steps in {out}")


def own_data(src, build):
    blocks = section_blocks(os.path.join(src, "README.md"), "Your own data")
    if len(blocks) != 1:
        fail(f"'Your own data' should hold one block of commands, it holds {len(blocks)}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("scripts", "configs", ".venv"):
            os.symlink(os.path.join(src, name), os.path.join(tmp, name))
        os.makedirs(os.path.join(tmp, "build"))
        os.symlink(os.path.join(build, "bin"), os.path.join(tmp, "build", "bin"))
        env = dict(os.environ)
        env.pop("UP_BUILD_DIR", None)
        output = run(shorten_steps(blocks[0]), tmp, env, "Your own data")
        for made in ("runs/sample/summary.json", "runs/sample/curves.svg", "runs/sample/model.pt"):
            if not os.path.exists(os.path.join(tmp, made)):
                fail(f"'Your own data' did not make {made}")
        if not os.listdir(os.path.join(tmp, "runs/sample/pred")):
            fail("'Your own data' predicted nothing into runs/sample/pred")
        if "torch.Size([1, 3, 64, 64])" not in output:
            fail("the exported weights did not load into the Python U-Net and give 3 classes")


def commands(src, build):
    blocks = section_blocks(os.path.join(src, "README.md"), "Commands")
    listed = {m for b in blocks for m in re.findall(r"^unet-pipeline ([a-z][a-z-]*)", b, re.M)}
    helped = subprocess.run([os.path.join(build, "bin", "unet-pipeline"), "--help"],
                            capture_output=True, text=True, check=True).stdout
    known = set(re.findall(r"^  ([a-z][a-z-]*) ", helped, re.M))
    if listed != known:
        fail(f"README lists {sorted(listed - known)} that --help does not, and --help "
             f"{sorted(known - listed)} that README does not")
    print(f"run_readme: README and --help list the same {len(known)} commands")


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    src, build, what = sys.argv[1:]
    checks = {"quick-start": quick_start, "own-data": own_data, "commands": commands}
    if what not in checks:
        fail(f"unknown check {what!r}; one of {', '.join(checks)}")
    checks[what](os.path.abspath(src), os.path.abspath(build))


if __name__ == "__main__":
    main()
