#!/usr/bin/env python3
"""Checks that the libraries' folders include only the layers below them.

Usage: check-layers.py [ROOT]      check the tree at ROOT (default: this repository)
       check-layers.py --self-test plant an upward, a sideways and an unknown include in a
                                   scratch tree and check that each one is refused

The layers are the tables of the "Layers" section of docs/design/architecture.md: each row
gives a layer number and the folders at that layer. A file may include (with #include "...")
a header of its own folder or of a folder at a lower layer; an include of a higher layer, of
another folder at the same layer (which would let two folders include each other), of a folder
missing from the tables, or of a header that does not exist, is reported as
FILE:LINE: message and the exit status is 1. Bad usage exits 2. Headers of verify/include/ are
the verifier's seam (it builds common/atomic.h over model-checked atomics) and are accepted.
"""
import os
import re
import shutil
import sys
import tempfile

SYSTEMS = ("jwmalloc", "iosr")  # each system's own folder is also an include root
# The verifier's build puts its model-checked atomics first on the include path
# (common/atomic.h includes them under JW_VERIFY): a seam, not a layer.
SEAMS = ("verify/include",)
DOC = os.path.join("docs", "design", "architecture.md")
SOURCE = re.compile(r"\.(c|h|inc|cc)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def read_layers(root):
    """{folder: layer} from the Layers section's tables."""
    path = os.path.join(root, DOC)
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as e:
        sys.exit("check-layers: cannot read %s: %s" % (path, e.strerror))
    m = re.search(r"^## Layers\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    if not m:
        sys.exit("check-layers: %s has no '## Layers' section" % path)
    layers = {}
    for row in re.finditer(r"^\|\s*(\d+)\s*\|([^|]*)\|", m.group(1), re.M):
        for folder in re.findall(r"`([^`]+)/`", row.group(2)):
            layers[folder] = int(row.group(1))
    if not layers:
        sys.exit("check-layers: the Layers section of %s has no rows" % path)
    return layers


def resolve(root, src, name):
    """The repository-relative path that #include "name" in src finds, or None."""
    system = src.split("/")[0]
    bases = [os.path.dirname(src), "include"]
    if system in SYSTEMS:
        bases.append(system)
    bases += SEAMS
    for base in bases:
        cand = os.path.normpath(os.path.join(base, name))
        if not cand.startswith("..") and os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def check(root):
    layers = read_layers(root)
    errors = []
    for system in SYSTEMS:
        for dirpath, _, files in os.walk(os.path.join(root, system)):
            for f in sorted(files):
                if not SOURCE.search(f):
                    continue
                src = os.path.relpath(os.path.join(dirpath, f), root)
                errors += check_file(root, src, layers)
    return errors


def check_file(root, src, layers):
    folder = os.path.dirname(src)
    if folder not in layers:
        return ["%s:1: folder %s/ is in no layer of %s" % (src, folder, DOC)]
    errors = []
    with open(os.path.join(root, src), encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = resolve(root, src, m.group(1))
            if target is None:
                errors.append('%s:%d: #include "%s" names no file of the tree' % (src, lineno, m.group(1)))
                continue
            tfolder = os.path.dirname(target)
            if tfolder == folder or tfolder in SEAMS:
                continue
            if tfolder not in layers:
                errors.append("%s:%d: includes %s, whose folder is in no layer of %s" % (src, lineno, target, DOC))
            elif layers[tfolder] > layers[folder]:
                errors.append("%s:%d: includes %s: layer %d (%s/) is above this file's layer %d (%s/)"
                              % (src, lineno, target, layers[tfolder], tfolder, layers[folder], folder))
            elif layers[tfolder] == layers[folder]:
                errors.append("%s:%d: includes %s: %s/ and %s/ are both at layer %d and may not include each other"
                              % (src, lineno, target, tfolder, folder, layers[folder]))
    return errors


def self_test(real_root):
    """Each planted include must be refused, and the clean scratch tree accepted."""
    cases = {
        "upward": ("jwmalloc/common/x.h", '#include "../api/top.h"\n', "is above"),
        "sideways": ("iosr/slots/x.h", '#include "sched/s.h"\n', "may not include each other"),
        "unknown folder": ("jwmalloc/common/x.h", '#include "../nowhere/n.h"\n', "in no layer"),
        "missing header": ("jwmalloc/api/x.c", '#include "gone.h"\n', "names no file"),
    }
    failed = 0
    for name, (path, text, expect) in list(cases.items()) + [("clean", (None, None, None))]:
        tmp = tempfile.mkdtemp(prefix="check-layers-")
        try:
            os.makedirs(os.path.join(tmp, os.path.dirname(DOC)))
            shutil.copy(os.path.join(real_root, DOC), os.path.join(tmp, DOC))
            base = {"jwmalloc/api/top.h": "", "jwmalloc/nowhere/n.h": "", "iosr/sched/s.h": "",
                    "jwmalloc/api/ok.c": '#include "../common/c.h"\n#include "jwmalloc.h"\n',
                    "jwmalloc/common/c.h": "", "include/jwmalloc.h": ""}
            if path:
                base[path] = text
            if name != "unknown folder":
                del base["jwmalloc/nowhere/n.h"]
            for p, t in base.items():
                os.makedirs(os.path.join(tmp, os.path.dirname(p)), exist_ok=True)
                open(os.path.join(tmp, p), "w").write(t)
            errors = check(tmp)
            if expect is None:
                ok = not errors
            else:
                ok = any(e.startswith(path) and expect in e for e in errors)
            print("%-15s %s: %s" % (name, "refused" if errors else "accepted", "; ".join(errors) or "-"))
            if not ok:
                print("self-test FAILED: %s" % name)
                failed += 1
        finally:
            shutil.rmtree(tmp)
    return 1 if failed else 0


def main(argv):
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if len(argv) > 1 and argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test(here)
    if len(argv) > 2 or (len(argv) == 2 and argv[1].startswith("-")):
        print("usage: check-layers.py [ROOT] | --self-test", file=sys.stderr)
        return 2
    root = argv[1] if len(argv) == 2 else here
    if not os.path.isdir(root):
        print("check-layers: %s is not a directory" % root, file=sys.stderr)
        return 2
    errors = check(root)
    for e in errors:
        print(e)
    print("check-layers: %d include(s) against the layers of %s" % (len(errors), DOC)
          if errors else "check-layers: every include goes to its own folder or a layer below")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
