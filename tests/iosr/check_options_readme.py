#!/usr/bin/env python3
"""Checks the README's IOSR options table against IOSR's options table.

Usage: check_options_readme.py OPTIONS_TABLE_PROGRAM README

OPTIONS_TABLE_PROGRAM (tests/iosr/options_table.c) prints the table of
iosr/common/opts.c, each option with its default and whether `iosr set`
changes it, and the IOSR_* names read elsewhere (iosr/common/env.c). The
README's table is the first one after its "### IOSR" heading; a row is
| `IOSR_NAME` | default | run time | meaning |, its default the first
`quoted` word of its cell. Reported, one line each, exit status 1:
- an option of the table with no row, or whose default or run-time cell
  differs from the table's;
- a documented name read elsewhere (IOSR_SWAP, IOSR_SOCKET, IOSR_APP,
  IOSR_RECONNECT_MS, IOSR_LOG) with no row, or with a run-time cell other
  than "—" (iosr set cannot change it);
- a row whose name is neither.
"""
import re
import subprocess
import sys


def program_table(prog):
    options, others = {}, {}
    for line in subprocess.run([prog], check=True, capture_output=True, text=True).stdout.splitlines():
        f = line.split()
        if f[0] == "option":
            options[f[1]] = (f[2], f[3])
        elif f[0] == "other":
            others[f[1]] = f[2] == "documented"
    return options, others


def readme_rows(path):
    text = open(path, encoding="utf-8").read()
    m = re.search(r"^### IOSR\n(.*?)(?=^#)", text, re.M | re.S)
    if not m:
        sys.exit("%s: no '### IOSR' section" % path)
    rows, in_table = {}, False
    for line in m.group(1).splitlines():
        if not line.startswith("|"):
            if in_table:
                break
            continue
        in_table = True
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        name = re.fullmatch(r"`(IOSR_[A-Z0-9_]+)`", cells[0])
        if not name or len(cells) < 4:
            continue  # the header and its rule
        quoted = re.search(r"`([^`]*)`", cells[1])
        rows[name.group(1)] = (quoted.group(1) if quoted else cells[1], cells[2])
    return rows


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.splitlines()[2])
    options, others = program_table(sys.argv[1])
    rows = readme_rows(sys.argv[2])
    errors = []
    for name, (default, runtime) in options.items():
        if name not in rows:
            errors.append("%s: an option with no row in the README (default %s, run time %s)" %
                          (name, default, runtime))
            continue
        if rows[name][0] != default:
            errors.append("%s: the README's default is '%s', the table's %s" % (name, rows[name][0], default))
        if rows[name][1] != runtime:
            errors.append("%s: the README's run time is '%s', the table's %s" % (name, rows[name][1], runtime))
    for name, documented in others.items():
        if documented and name not in rows:
            errors.append("%s: read by iosrd, libiosr or iosr, with no row in the README" % name)
        elif name in rows and rows[name][1] != "—":
            errors.append("%s: not an option of the table, but its run time is '%s' (want —)" % (name, rows[name][1]))
    for name in rows:
        if name not in options and name not in others:
            errors.append("%s: in the README, but neither an option nor read elsewhere" % name)
    for e in errors:
        print(e)
    print("%d options, %d names read elsewhere, %d README rows%s" %
          (len(options), len(others), len(rows), ": they agree" if not errors else ""))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
