#!/usr/bin/env python3
"""Checks that libiosr.so exports exactly the functions include/iosr.h declares.

Usage: check_exports.py NM LIBIOSR_SO IOSR_H

Runs `NM -D --defined-only LIBIOSR_SO` and compares the symbols it defines
with the functions declared in IOSR_H (every `iosr_NAME(` outside comments),
both ways: a symbol exported but not declared (an internal function leaking,
which a program loading libiosr could collide with) and a function declared
but not exported (an API call missing from iosr/libiosr.map) are each
reported on a line of their own, and the exit status is 1. The version
node's own symbol (type A, e.g. LIBIOSR_1) is not a function and is skipped.
"""
import re
import subprocess
import sys


def declared(header):
    text = open(header, encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return set(re.findall(r"\b(iosr_\w+)\s*\(", text))


def exported(nm, lib):
    out = subprocess.run([nm, "-D", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 3 or parts[1] == "A":
            continue
        names.add(parts[2].split("@")[0])
    return names


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.splitlines()[2])
    nm, lib, header = sys.argv[1:]
    want, have = declared(header), exported(nm, lib)
    errors = ["exported but not declared in %s: %s" % (header, n) for n in sorted(have - want)]
    errors += ["declared in %s but not exported: %s" % (header, n) for n in sorted(want - have)]
    for e in errors:
        print(e)
    if not want:
        errors.append("no function found in %s" % header)
        print(errors[-1])
    print("%s: %d symbols exported, %d functions declared%s" %
          (lib, len(have), len(want), ", the same" if not errors else ""))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
