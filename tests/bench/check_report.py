#!/usr/bin/env python3
"""bench/report.py over the results committed in bench/results/: it must read
every file there as run-all.sh wrote it, name each result's machine, give every
target a verdict, and carry the GPU check's section of the file it replaces
over as it stands.

usage: check_report.py SOURCE_DIR
"""
import json
import os
import subprocess
import sys
import tempfile


def fail(what):
    sys.exit(f"check_report: {what}")


def main():
    src = sys.argv[1]
    results = os.path.join(src, "bench", "results")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "BENCHMARKS.md")
        gpu = "<!-- gpu-check:begin -->\n\n## GPU check\n\nkept as it was\n\n<!-- gpu-check:end -->"
        with open(out, "w") as f:
            f.write("# old\n\n" + gpu + "\n")
        done = subprocess.run([sys.executable, os.path.join(src, "bench", "report.py"), results, out],
                              capture_output=True, text=True)
        if done.returncode != 0:
            fail(f"report.py exited {done.returncode}: {done.stderr.strip()[-2000:]}")
        text = open(out).read()
    if "# old" in text:
        fail("the old file's text outside the GPU section was kept")
    if not text.rstrip().endswith(gpu):
        fail("the GPU check's section was not carried over as it stood")
    machine = text[text.index("## Machine"):text.index("\n## ", text.index("## Machine") + 1)]
    for name in sorted(os.listdir(results)):
        if not name.endswith(".json"):
            continue
        m = json.load(open(os.path.join(results, name))).get("machine")
        if m and f"| `{name}` | {m['cpu_model']}" not in machine:
            fail(f"the Machine section has no row for {name} ({m['cpu_model']})")
    verdicts = text.count("**met**") + text.count("**missed**")
    targets = text.count("Target")
    if targets == 0 or verdicts < targets:
        fail(f"{targets} target lines but {verdicts} verdicts")
    print(f"check_report: {len(text.splitlines())} lines, {verdicts} verdicts, machine rows ok")


if __name__ == "__main__":
    main()
