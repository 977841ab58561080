#!/usr/bin/env python3
"""Adversarial cases for scripts/check-layers.py (from breaker25's review; test
repo.include_layers_cases).

Usage: layers_cases.py [REPO]    (default: the repository holding this script)

Each case plants a few files in a scratch tree (REPO's architecture.md copied in, every folder
its tables list created), runs check-layers.py on it and, where the case is about an include the
compiler follows, asks gcc (-H -E with the build's include path: include/ then the system's
folder) whether the planted file really reaches the upward header. A case prints one line:

  ok     the checker's verdict is the right one (exit 1 to refuse, 0 to accept)
  FN     the checker accepts a tree that breaks the layers (and gcc confirms the include)
  FP     the checker refuses a tree that keeps the layers (or the include gcc never reads)
  ERR    the checker exits 2 (bad input) on a well-formed tree
  CASE   gcc contradicts the case: it does not read a header the case says it reaches, or reads
         one the case says it never does

Without gcc the cases are judged all the same, unconfirmed. Exit status: 0 when every case is
ok, 1 otherwise.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join("docs", "design", "architecture.md")

# The upward header every case tries to reach from jwmalloc/common/ (layer 1).
TOP = "jwmalloc/api/top.h"
BASE = {
    "include/jwmalloc.h": "",
    TOP: "int api_top_marker;\n",
    "jwmalloc/common/c.h": "",
    "iosr/engine/e.h": "int iosr_engine_marker;\n",
    "iosr/common/ic.h": "",
    "jwmalloc/os/o.h": "int jw_os_marker;\n",
}

# name: (files to add {path: text or ('symlink', target)}, file to compile or None,
#        header gcc must reach for the include to be real, checker should refuse?)
CASES = {
    # --- upward includes the checker does not see (false negatives) ---
    "angle brackets, resolved by -Ijwmalloc": (
        {"jwmalloc/common/x.c": "#include <api/top.h>\n"}, "jwmalloc/common/x.c", TOP, True),
    "no space after include": (
        {"jwmalloc/common/x.c": '#include"../api/top.h"\n'}, "jwmalloc/common/x.c", TOP, True),
    "comment between # and include": (
        {"jwmalloc/common/x.c": '#/**/include "../api/top.h"\n'}, "jwmalloc/common/x.c", TOP, True),
    "digraph %:include": (
        {"jwmalloc/common/x.c": '%:include "../api/top.h"\n'}, "jwmalloc/common/x.c", TOP, True),
    "macro as the include name": (
        {"jwmalloc/common/x.c": '#define UP "../api/top.h"\n#include UP\n'}, "jwmalloc/common/x.c", TOP, True),
    "line continuation": (
        {"jwmalloc/common/x.c": '#include \\\n  "../api/top.h"\n'}, "jwmalloc/common/x.c", TOP, True),
    "UTF-8 byte order mark on line 1": (
        {"jwmalloc/common/x.c": '\ufeff#include "../api/top.h"\n'}, "jwmalloc/common/x.c", TOP, True),
    "#include_next": (
        {"jwmalloc/common/x.c": '#include "w.h"\n', "jwmalloc/common/w.h": '#include_next <api/top.h>\n'},
        "jwmalloc/common/x.c", TOP, True),
    "launder through a header in include/ (not scanned)": (
        {"include/launder.h": '#include "../jwmalloc/api/top.h"\n',
         "jwmalloc/common/x.c": '#include "launder.h"\n'}, "jwmalloc/common/x.c", TOP, True),
    "launder through a .def file (extension not scanned)": (
        {"jwmalloc/common/t.def": '#include "../api/top.h"\n',
         "jwmalloc/common/x.c": '#include "t.def"\n'}, "jwmalloc/common/x.c", TOP, True),
    "launder through a .hpp header": (
        {"jwmalloc/common/t.hpp": '#include "../api/top.h"\n',
         "jwmalloc/common/x.c": '#include "t.hpp"\n'}, "jwmalloc/common/x.c", TOP, True),
    "a .cpp file in a low layer": (
        {"jwmalloc/common/x.cpp": '#include "../api/top.h"\n'}, "jwmalloc/common/x.cpp", TOP, True),
    "an assembler .S file in a low layer": (
        {"jwmalloc/common/x.S": '#include "../api/top.h"\n'}, "jwmalloc/common/x.S", TOP, True),
    "control: symlinked folder inside the lower folder": (
        {"jwmalloc/common/up": ("symlink", "../api"),
         "jwmalloc/common/x.c": '#include "up/top.h"\n'}, "jwmalloc/common/x.c", TOP, True),
    "symlinked header inside the lower folder": (
        {"jwmalloc/common/top.h": ("symlink", "../api/top.h"),
         "jwmalloc/common/x.c": '#include "top.h"\n'}, "jwmalloc/common/x.c", TOP, True),
    "jwmalloc includes IOSR internals (lower number, other library)": (
        {"jwmalloc/api/x.c": '#include "../../iosr/engine/e.h"\n'}, "jwmalloc/api/x.c", "iosr/engine/e.h", True),
    "IOSR includes jwmalloc internals (lower number, other library)": (
        {"iosr/engine/x.c": '#include "../../jwmalloc/os/o.h"\n'}, "iosr/engine/x.c", "jwmalloc/os/o.h", True),
    "verify/include seam launders an upward include": (
        {"verify/include/launder.h": '#include "api/top.h"\n',
         "jwmalloc/common/x.c": '#include "launder.h"\n'}, "jwmalloc/common/x.c", TOP, True),
    # --- controls: upward includes the checker does refuse ---
    "control: plain upward": (
        {"jwmalloc/common/x.c": '#include "../api/top.h"\n'}, "jwmalloc/common/x.c", TOP, True),
    "control: ../ chain that leaves and re-enters": (
        {"jwmalloc/common/x.c": '#include "../../jwmalloc/common/../api/top.h"\n'}, "jwmalloc/common/x.c", TOP, True),
    "control: CRLF line endings": (
        {"jwmalloc/common/x.c": '#include "../api/top.h"\r\n'}, "jwmalloc/common/x.c", TOP, True),
    "control: # include with spaces and a tab": (
        {"jwmalloc/common/x.c": '  #  \tinclude "../api/top.h"\n'}, "jwmalloc/common/x.c", TOP, True),
    "control: .inc file in a low layer": (
        {"jwmalloc/common/t.inc": '#include "../api/top.h"\n',
         "jwmalloc/common/x.c": '#include "t.inc"\n'}, "jwmalloc/common/x.c", TOP, True),
    "control: nested folder jwmalloc/common/sub/": (
        {"jwmalloc/common/sub/s.h": '#include "../../api/top.h"\n'}, None, None, True),
    "control: transitive through a scanned lower header": (
        {"jwmalloc/os/bad.h": '#include "../api/top.h"\n',
         "jwmalloc/pages/x.c": '#include "../os/bad.h"\n'}, "jwmalloc/pages/x.c", TOP, True),
    # --- includes the compiler never follows, or follows fine (false positives) ---
    "upward include inside a block comment": (
        {"jwmalloc/common/x.c": '/* an example:\n#include "../api/top.h"\n */\n'}, "jwmalloc/common/x.c", TOP, False),
    "upward include under #if 0": (
        {"jwmalloc/common/x.c": '#if 0\n#include "../api/top.h"\n#endif\n'}, "jwmalloc/common/x.c", TOP, False),
    "upward include in the #else of #if 0": (
        {"jwmalloc/common/x.c": '#if 0\n#include "c.h"\n#else\n#include "../api/top.h"\n#endif\n'},
        "jwmalloc/common/x.c", TOP, True),
    "local extern of a variable defined above (no include at all)": (
        {"jwmalloc/api/v.c": "int jw_top_value = 1;\n",
         "jwmalloc/common/x.c": "int f(void) {\n  extern int jw_top_value;\n  return jw_top_value;\n}\n"},
        None, None, True),
    "control: extern of a variable defined below": (
        {"jwmalloc/common/v.c": "int jw_low_value = 1;\n",
         "jwmalloc/api/x.c": "extern int jw_low_value;\nint f(void) { return jw_low_value; }\n"},
        None, None, False),
    "control: system headers in angle brackets": (
        {"jwmalloc/common/x.c": "#include <stdio.h>\n#include <sys/mman.h>\n#include <stddef.h>\n"},
        "jwmalloc/common/x.c", None, False),
    "system header written with quotes": (
        {"jwmalloc/common/x.c": '#include "stdint.h"\n'}, "jwmalloc/common/x.c", None, False),
}


def table_folders(repo):
    """The folders the Layers tables list: the checker wants each one to exist."""
    text = open(os.path.join(repo, DOC), encoding="utf-8").read()
    section = re.search(r"^## Layers\n(.*?)(?=^## |\Z)", text, re.M | re.S).group(1)
    return {f for row in re.findall(r"^\|\s*\d+\s*\|([^|]*)\|", section, re.M)
            for f in re.findall(r"`([^`]+)/`", row)}


def plant(tmp, files):
    for p, t in files.items():
        full = os.path.join(tmp, p)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if isinstance(t, tuple):
            os.symlink(t[1], full)
        else:
            with open(full, "w", encoding="utf-8", newline="") as fh:
                fh.write(t)


def gcc_reaches(tmp, src, header):
    """(compiled, True when gcc, with the build's include path, opens header while reading src);
    (None, None) without gcc."""
    if shutil.which("gcc") is None:
        return None, None
    system = src.split("/")[0]
    lang = {".cpp": "c++", ".S": "assembler-with-cpp"}.get(os.path.splitext(src)[1], "c")
    inc = ["-Iinclude", "-I" + system]
    cmd = ["gcc", "-x", lang, "-std=gnu11" if lang == "c" else "-std=gnu++17", "-H", "-E", "-w"]
    if lang == "assembler-with-cpp":
        cmd = ["gcc", "-x", lang, "-H", "-E", "-w"]
    if os.path.isdir(os.path.join(tmp, "verify/include")):
        inc = ["-Iverify/include"] + inc  # the verifier's build: its seam first
    r = subprocess.run(cmd + inc + [src, "-o", os.devnull], cwd=tmp, capture_output=True, text=True)
    opened = [os.path.normpath(l.split(" ", 1)[1]) for l in r.stderr.splitlines() if l.startswith(".")]
    return r.returncode == 0, any(os.path.realpath(os.path.join(tmp, o)) == os.path.realpath(os.path.join(tmp, header))
                                  for o in opened) if header else False


def main(argv):
    repo = argv[1] if len(argv) > 1 else HERE
    checker = os.path.join(repo, "scripts", "check-layers.py")
    wrong = 0
    folders = table_folders(repo)
    for name, (files, src, header, should_refuse) in CASES.items():
        tmp = tempfile.mkdtemp(prefix="layers-case-")
        try:
            os.makedirs(os.path.join(tmp, os.path.dirname(DOC)))
            shutil.copy(os.path.join(repo, DOC), os.path.join(tmp, DOC))
            for f in folders:
                os.makedirs(os.path.join(tmp, f), exist_ok=True)
            plant(tmp, BASE)
            plant(tmp, files)
            r = subprocess.run([sys.executable, checker, tmp], capture_output=True, text=True)
            refused = r.returncode == 1
            compiled, reached = gcc_reaches(tmp, src, header) if src else (True, None)
            if header is None:
                reached = None
            if r.returncode not in (0, 1):
                verdict = "ERR"
            elif reached is not None and reached != should_refuse:
                verdict = "CASE"
            elif refused == should_refuse:
                verdict = "ok"
            else:
                verdict = "FN" if should_refuse else "FP"
            wrong += verdict != "ok"
            if compiled is None:
                gcc = "no gcc"
            else:
                gcc = ("-" if compiled else "gcc error") if header is None else \
                    ("gcc reads %s" % header if reached else "gcc does not read it") + ("" if compiled else " (gcc error)")
            first = ((r.stdout + r.stderr).splitlines() or [""])[0]
            print("%-4s %-62s checker %-8s %s | %s" % (verdict, name, "refuses" if refused else "accepts", gcc,
                                                       first if r.returncode else ""))
        finally:
            shutil.rmtree(tmp)
    print("%d case(s) where check-layers.py gives the wrong verdict" % wrong)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
