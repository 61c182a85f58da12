#!/usr/bin/env python3
"""bench/report.py over the results committed in bench/results/ must write
docs/BENCHMARKS.md exactly as committed (the GPU check's section carried over
from the committed file) and README.md's "which way to train" table exactly as
committed between its bench:ways markers; every result file must have a row in
the Machine section and every target a verdict. On a difference it prints the
first lines of a unified diff and the command that regenerates the file.

usage: check_report.py SOURCE_DIR
"""
import difflib
import json
import os
import shutil
import subprocess
import sys
import tempfile

WAYS_BEGIN, WAYS_END = "<!-- bench:ways:begin -->", "<!-- bench:ways:end -->"
REGENERATE = "python3 bench/report.py bench/results docs/BENCHMARKS.md --readme README.md"


def fail(what):
    sys.exit(f"check_report: {what}")


def diff_or_none(committed, rendered, name):
    if committed == rendered:
        return None
    lines = list(difflib.unified_diff(committed.splitlines(), rendered.splitlines(),
                                      f"{name} (committed)", f"{name} (report.py)", lineterm=""))
    return "\n".join(lines[:40])


def between(text, begin, end):
    a, b = text.find(begin), text.find(end)
    return text[a:b + len(end)] if a != -1 and b > a else None


def render(src, tmp):
    """report.py into copies of the committed files; their rendered text."""
    doc, readme = os.path.join(tmp, "BENCHMARKS.md"), os.path.join(tmp, "README.md")
    shutil.copy(os.path.join(src, "docs", "BENCHMARKS.md"), doc)
    shutil.copy(os.path.join(src, "README.md"), readme)
    done = subprocess.run([sys.executable, os.path.join(src, "bench", "report.py"),
                           os.path.join(src, "bench", "results"), doc, "--readme", readme],
                          capture_output=True, text=True)
    if done.returncode != 0:
        fail(f"report.py exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return open(doc).read(), open(readme).read()


def check_machine_rows(src, text):
    results = os.path.join(src, "bench", "results")
    start = text.index("## Machine")
    machine = text[start:text.index("\n## ", start + 1)]
    for name in sorted(os.listdir(results)):
        if not name.endswith(".json"):
            continue
        d = json.load(open(os.path.join(results, name)))
        prov = d.get("provenance") or {}
        for field in ("commit", "date"):
            if not prov.get(field):
                fail(f"{name} names no {field} in its provenance")
        if not (prov.get("command") or prov.get("commands")):
            fail(f"{name} names no command in its provenance")
        if not (d.get("machine") or prov.get("machine")):
            fail(f"{name} names no machine")
        if f"| `{name}` | {prov['commit']} |" not in machine:
            fail(f"the Machine section has no row for {name}")


def main():
    src = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        doc, readme = render(src, tmp)
    committed_doc = open(os.path.join(src, "docs", "BENCHMARKS.md")).read()
    committed_readme = open(os.path.join(src, "README.md")).read()
    d = diff_or_none(committed_doc, doc, "docs/BENCHMARKS.md")
    if d:
        fail(f"docs/BENCHMARKS.md is not what report.py writes; edit bench/text/ or "
             f"bench/results/, then run `{REGENERATE}`\n{d}")
    block = between(committed_readme, WAYS_BEGIN, WAYS_END)
    if block is None:
        fail(f"README.md has no {WAYS_BEGIN} ... {WAYS_END} block for the ways table")
    d = diff_or_none(block, between(readme, WAYS_BEGIN, WAYS_END), "README.md ways table")
    if d:
        fail(f"README.md's ways table is not what report.py writes; run `{REGENERATE}`\n{d}")
    check_machine_rows(src, doc)
    verdicts = doc.count("**met**") + doc.count("**missed**")
    targets = doc.count("Target")
    if targets == 0 or verdicts < targets:
        fail(f"{targets} target lines but {verdicts} verdicts")
    print(f"check_report: docs/BENCHMARKS.md ({len(doc.splitlines())} lines) and README's ways "
          f"table are report.py's; {verdicts} verdicts, machine rows ok")


if __name__ == "__main__":
    main()
