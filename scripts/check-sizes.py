#!/usr/bin/env python3
"""Checks that no source file is over 800 lines and no C function over 150.

Usage: check-sizes.py [ROOT]      (default: this repository)

Reads the C and C++ sources git tracks under ROOT (every one below it outside a
git checkout) and prints FILE:LINE: message for each file over the file limit
and each function whose body, from the line of its opening brace to the line of
its closing one, spans more than the function limit; the exit status is then 1.
A function is a definition that starts at the first column and whose closing
brace is the first "}" at the first column after it: the style of this tree.
Bad usage exits 2.
"""
import os
import re
import subprocess
import sys

MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 150
SOURCE = re.compile(r"\.(c|h|inc|cc)$")
# A definition's first line: a type and a name followed by "(", at column 0,
# not a declaration ending in ";" and not a preprocessor line or a comment.
HEAD = re.compile(r"^[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\s*\(")


def sources(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, text=True, check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        out = [os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs]
    return sorted(p for p in out if SOURCE.search(p) and os.path.isfile(os.path.join(root, p)))


def check_file(root, path):
    lines = open(os.path.join(root, path), encoding="utf-8", errors="replace").read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    errors = []
    if len(lines) > MAX_FILE_LINES:
        errors.append("%s:1: %d lines, over %d" % (path, len(lines), MAX_FILE_LINES))
    name, head_line, open_line = None, 0, 0
    for i, line in enumerate(lines, 1):
        text = line.rstrip()
        if name is None:
            m = HEAD.match(line)
            if m and not text.endswith((";", "}")) and m.group(1) not in ("if", "for", "while", "switch"):
                name, head_line, open_line = m.group(1), i, (i if text.endswith("{") else 0)
        elif open_line == 0:
            if text.endswith("{"):
                open_line = i
            elif text.endswith(";") or line.startswith("#"):
                name = None  # a declaration over several lines, not a definition
        elif line.startswith("}"):
            span = i - open_line + 1
            if span > MAX_FUNCTION_LINES:
                errors.append("%s:%d: function %s spans %d lines, over %d"
                              % (path, head_line, name, span, MAX_FUNCTION_LINES))
            name = None
    return errors


def main(argv):
    if len(argv) > 1 and argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(argv) > 2 or (len(argv) == 2 and argv[1].startswith("-")):
        print("usage: check-sizes.py [ROOT]", file=sys.stderr)
        return 2
    root = argv[1] if len(argv) == 2 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not os.path.isdir(root):
        print("check-sizes: %s is not a directory" % root, file=sys.stderr)
        return 2
    errors = []
    for p in sources(root):
        errors += check_file(root, p)
    for e in errors:
        print(e)
    print("check-sizes: %d file(s) or function(s) over the limits" % len(errors) if errors else
          "check-sizes: no file over %d lines, no function over %d" % (MAX_FILE_LINES, MAX_FUNCTION_LINES))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
