#!/usr/bin/env python3
"""Checks the documented IOSR options against IOSR's options table.

Usage: check_options_documented.py OPTIONS_TABLE_PROGRAM DOC...

OPTIONS_TABLE_PROGRAM (tests/iosr/options_table.c) prints the table of
iosr/common/opts.c, each option with its default and whether `iosr set`
changes it, and the IOSR_* names read elsewhere (iosr/common/env.c). Each
DOC (the README, docs/usage/iosr.md) has one options table: its rows are
| `IOSR_NAME` | default | run time | meaning |, a row's default the first
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


def doc_rows(path):
    """{name: (default, run time)} of the rows whose first cell is `IOSR_NAME`."""
    rows = {}
    for line in open(path, encoding="utf-8"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        name = re.fullmatch(r"`(IOSR_[A-Z0-9_]+)`", cells[0]) if cells else None
        if not name or len(cells) < 4:
            continue
        quoted = re.search(r"`([^`]*)`", cells[1])
        rows[name.group(1)] = (quoted.group(1) if quoted else cells[1], cells[2])
    return rows


def check(path, options, others):
    rows = doc_rows(path)
    errors = []
    for name, (default, runtime) in options.items():
        if name not in rows:
            errors.append("%s: an option with no row (default %s, run time %s)" % (name, default, runtime))
            continue
        if rows[name][0] != default:
            errors.append("%s: the documented default is '%s', the table's %s" % (name, rows[name][0], default))
        if rows[name][1] != runtime:
            errors.append("%s: the documented run time is '%s', the table's %s" % (name, rows[name][1], runtime))
    for name, documented in others.items():
        if documented and name not in rows:
            errors.append("%s: read by iosrd, libiosr or iosr, with no row" % name)
        elif name in rows and rows[name][1] != "—":
            errors.append("%s: not an option of the table, but its run time is '%s' (want —)" % (name, rows[name][1]))
    for name in rows:
        if name not in options and name not in others:
            errors.append("%s: documented, but neither an option nor read elsewhere" % name)
    for e in errors:
        print("%s: %s" % (path, e))
    print("%s: %d rows for %d options and %d names read elsewhere%s" %
          (path, len(rows), len(options), len(others), ", they agree" if not errors else ""))
    return len(errors)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.splitlines()[2])
    options, others = program_table(sys.argv[1])
    # A table that printed nothing would agree with any document that lists
    # nothing: IOSR has more than 20 options.
    if len(options) < 20:
        print("%s printed %d options, fewer than IOSR has" % (sys.argv[1], len(options)))
        return 1
    errors = sum(check(path, options, others) for path in sys.argv[2:])
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
