#!/usr/bin/env python3
"""Checks over README.md and docs/*.md that a reader would otherwise find broken.

usage: check_docs.py SOURCE_DIR links|openings|gpu-status

  links       every relative link names a file that exists, and every #anchor a
              heading (GitHub's slugs) of the page it points into
  openings    every docs/ page opens, under its title, with who it is for (a
              paragraph starting "For ") and then its commands (a code block)
  gpu-status  while docs/BENCHMARKS.md's GPU check says no GPU has run, every
              page that speaks of GPUs carries the one status line, once; once
              a GPU has run, no page carries it
"""
import os
import re
import sys

GPU_STATUS = "**On a GPU: designed and built, not yet run.**"
NO_GPU_YET = "No GPU has run `scripts/gpu-check.sh run` yet"


def pages(src):
    docs = os.path.join(src, "docs")
    return [os.path.join(src, "README.md")] + sorted(
        os.path.join(docs, n) for n in os.listdir(docs) if n.endswith(".md"))


def prose_lines(text):
    """(line number, line) outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    seen = {}
    found = set()
    for _, line in prose_lines(open(path).read()):
        m = re.match(r"#{1,6} (.*)", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def check_links(src):
    bad = []
    count = 0
    for page in pages(src):
        for number, line in prose_lines(open(page).read()):
            line = re.sub(r"`[^`]*`", "", line)
            for target in re.findall(r"\]\(([^)\s]+)\)", line):
                if re.match(r"[a-z]+:", target):
                    continue
                count += 1
                path, _, anchor = target.partition("#")
                where = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
                rel = os.path.relpath(page, src)
                if not os.path.exists(where):
                    bad.append(f"{rel}:{number}: {target}: no such file")
                elif anchor and where.endswith(".md") and anchor not in anchors(where):
                    bad.append(f"{rel}:{number}: {target}: no heading with that anchor in "
                               f"{os.path.relpath(where, src)}")
    return bad, f"{count} relative links"


def check_openings(src):
    bad = []
    docs = [p for p in pages(src) if os.path.basename(p) != "README.md"]
    for page in docs:
        lines = open(page).read().split("\n")
        rel = os.path.relpath(page, src)
        if not lines[0].startswith("# "):
            bad.append(f"{rel}: does not start with a title")
            continue
        body = [l for l in lines[1:40]]
        first = next((l for l in body if l.strip()), "")
        if not first.startswith("For "):
            bad.append(f"{rel}: the paragraph under the title does not say who it is for "
                       f"(starts {first[:40]!r}, expected 'For ...')")
        heading = next((i for i, l in enumerate(body) if l.startswith("#")), len(body))
        if not any(l.startswith("```") for l in body[:heading]):
            bad.append(f"{rel}: no commands (a code block) before its first section")
    return bad, f"{len(docs)} pages"


def check_gpu_status(src):
    bench = open(os.path.join(src, "docs", "BENCHMARKS.md")).read()
    no_gpu_yet = NO_GPU_YET in bench
    bad = []
    speaking = 0
    for page in pages(src):
        text = open(page).read()
        rel = os.path.relpath(page, src)
        marks = text.count(GPU_STATUS)
        if not no_gpu_yet:
            if marks:
                bad.append(f"{rel}: says no GPU has run, but docs/BENCHMARKS.md has the GPU "
                           "check's results: drop the status line")
            continue
        if not re.search(r"\bGPUs?\b|\bCUDA\b|\bcuda\b", text):
            continue
        speaking += 1
        if marks != 1:
            bad.append(f"{rel}: speaks of GPUs and carries the status line {marks} times "
                       f"(once: {GPU_STATUS!r})")
    state = "no GPU run yet" if no_gpu_yet else "a GPU has run"
    return bad, f"{state}; {speaking} pages speak of GPUs"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, what = sys.argv[1], sys.argv[2]
    checks = {"links": check_links, "openings": check_openings, "gpu-status": check_gpu_status}
    if what not in checks:
        sys.exit(f"check_docs: unknown check {what!r}; one of {', '.join(checks)}")
    bad, summary = checks[what](src)
    for line in bad:
        print(line)
    if bad:
        sys.exit(f"check_docs {what}: {len(bad)} problems")
    print(f"check_docs {what}: ok ({summary})")


if __name__ == "__main__":
    main()
