#!/usr/bin/env python3
"""The longest production source files and functions: a report, not a gate.

  scripts/size_report.py [--top N] [ROOT]

Reads the C++ under common/ ipc/ stage/ encoder_proc/ decoder_proc/ launcher/
bench/ (tests and fuzz targets are not production code) and prints the N
longest files (lines) and the N longest function bodies (lines from the
signature's opening brace to its closing one, lambdas and nested blocks
counted in their function). The house's aim (docs/ARCHITECTURE.md): files
under about 600 lines, functions under about 150. The parse is a brace count
that skips comments, strings and character literals; a macro that opens a
brace it does not close would confuse it, and the project has none.
"""
import os
import re
import sys

PRODUCTION = ("common", "ipc", "stage", "encoder_proc", "decoder_proc", "launcher", "bench")
ENDINGS = (".h", ".cpp", ".cu")
KEYWORDS_NOT_FUNCTIONS = ("if", "for", "while", "switch", "catch", "do", "else", "try")


def strip(text):
    """The text with comments, strings and character literals blanked (lines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            k = text.find("(", i)
            delim = ")" + text[i + 2:k] + '"'
            j = text.find(delim, k)
            j = n if j < 0 else j + len(delim)
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def block_kind(header):
    """What a '{' opens, from the text since the last ';', '{' or '}'."""
    h = " ".join(header.split())
    if not h:
        return "other", ""
    if re.search(r"\bnamespace\b", h) or h.startswith('extern "C"'):
        return "scope", ""
    paren = h.find("(")
    head = h if paren < 0 else h[:paren]
    if re.search(r"\b(class|struct|union|enum)\b", head):
        return "scope", ""
    if paren < 0 or h.endswith("=") or re.search(r"=\s*$", h):
        return "other", ""
    words = re.findall(r"[A-Za-z_~][\w:~]*|operator\S*", head)
    if not words or words[-1] in KEYWORDS_NOT_FUNCTIONS or "=" in head.split("(")[0][-2:]:
        return "other", ""
    return "function", words[-1]


def functions(path):
    text = strip(open(path, encoding="utf-8", errors="replace").read())
    stack = []  # (kind, name, start line)
    header_start = 0
    line = 1
    found = []
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c == "{":
            inside_function = any(k == "function" for k, _, _ in stack)
            kind, name = ("other", "") if inside_function else block_kind(text[header_start:i])
            stack.append((kind, name, line))
            header_start = i + 1
        elif c == "}":
            if stack:
                kind, name, start = stack.pop()
                if kind == "function":
                    found.append((line - start + 1, name, start))
            header_start = i + 1
        elif c == ";":
            header_start = i + 1
        elif c == "#" and (i == 0 or text[i - 1] == "\n"):
            header_start = text.find("\n", i) + 1 if text.find("\n", i) >= 0 else i + 1
    return found


def main(argv):
    top = 15
    args = argv[1:]
    if args[:1] == ["--top"]:
        top = int(args[1])
        args = args[2:]
    root = args[0] if args else os.path.join(os.path.dirname(__file__), "..")
    files, funcs = [], []
    for folder in PRODUCTION:
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            for name in sorted(names):
                if not name.endswith(ENDINGS):
                    continue
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root)
                with open(full, encoding="utf-8", errors="replace") as f:
                    files.append((sum(1 for _ in f), rel))
                funcs += [(n, f"{rel}:{start}", fn) for n, fn, start in functions(full)]
    files.sort(reverse=True)
    funcs.sort(reverse=True)
    print(f"size report: {len(files)} production files, {len(funcs)} functions "
          "(aim: files under ~600 lines, functions under ~150)")
    print(f"longest files:")
    for n, rel in files[:top]:
        print(f"  {n:5d}  {rel}")
    print(f"longest functions:")
    for n, where, name in funcs[:top]:
        print(f"  {n:5d}  {name}  ({where})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
