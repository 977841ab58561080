#!/usr/bin/env python3
"""Checks that the libraries' folders include only the layers below them.

Usage: check-layers.py [ROOT]      check the tree at ROOT (default: this repository)
       check-layers.py --self-test plant includes against the layers (and one malformed table) in
                                   scratch trees and check each verdict

The layers are the tables of the "Layers" section of docs/design/architecture.md, one table per
library (jwmalloc/, iosr/): each row gives a layer number and the folders at that layer. include/
is layer 0 of both, the only folder the two libraries share.

Every file of include/, jwmalloc/, iosr/ and the verifier's seam verify/include/ with a name ending
in .c .h .inc .cc .cpp .hpp .def or .S is read as the preprocessor reads it: a UTF-8 byte order mark
dropped, backslash-newlines joined, comments replaced by a space, the lines under "#if 0" left out.
Each #include or #include_next (also spelled "# include" or "%:include") is resolved as the build
resolves it: "name" in the file's own folder, then include/, the library's own folder and the seam;
<name> in the same folders but the first. A file may include a header of its own folder or of a
folder at a lower layer of its own library; include/ only include/. Reported, as FILE:LINE: message:

  - an include of a higher layer, of another folder of the same layer, of the other library's
    folders, or of a folder in no layer (a link is judged by the file it points to);
  - a "name" found neither in the tree nor in the system's include folders; an include whose
    argument is neither "name" nor <name> (a macro: the checker cannot follow it);
    a <name> that is not in the tree is a system header and is accepted;
  - a file in a folder that no row lists;
  - an extern declaration in a .c file of a symbol defined (at the first column, in a .c file of
    jwmalloc/ or iosr/) in a folder that is not below the file's: the design's way up is a
    declaration in a header of the lower folder (backend/upcalls.h), not a local extern.

Headers of verify/include/ are the verifier's seam (its build supplies common/atomic.h's
model-checked atomics there): any file may include them, and they may include only include/,
themselves and system headers.

Exit status: 0 when nothing is reported, 1 when something is, 2 on bad usage or bad input: a ROOT
that is not a directory or has neither jwmalloc/ nor iosr/, a missing document or section, a table
row without a number or a backticked folder ending in "/", a folder in two rows, a listed folder
that does not exist (one line naming the row).
"""
import glob
import os
import re
import shutil
import sys
import tempfile

LIBRARIES = ("jwmalloc", "iosr")
SHARED = "include"  # layer 0 of both tables
SEAMS = ("verify/include",)
DOC = os.path.join("docs", "design", "architecture.md")
SOURCE = re.compile(r"\.(c|h|inc|cc|cpp|hpp|def|S)$")
SYSTEM_DIRS = (["/usr/local/include", "/usr/include"] + sorted(glob.glob("/usr/include/*-linux-gnu*"))
               + sorted(glob.glob("/usr/lib/gcc/*/*/include")))
DIRECTIVE = re.compile(r"^\s*(?:#|%:)\s*(\w+)(.*)$", re.S)
ARGUMENT = re.compile(r'^\s*(?:"([^"\n]+)"|<([^>\n]+)>)')


class BadInput(Exception):
    """A tree or a table the checker cannot judge: exit 2."""


# --- the tables -------------------------------------------------------------------------------

def read_layers(root):
    """{folder: layer} from the Layers section's tables; raises BadInput on a malformed one."""
    path = os.path.join(root, DOC)
    try:
        text = open(path, encoding="utf-8").read().lstrip("\ufeff")
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput("cannot read %s: %s" % (path, getattr(e, "strerror", None) or e))
    m = re.search(r"^## Layers[ \t]*\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    if not m:
        raise BadInput("%s has no '## Layers' section" % path)
    first = text.count("\n", 0, m.start(1)) + 1
    tables, current = [], None
    for n, line in enumerate(m.group(1).split("\n"), first):
        if line.lstrip().startswith("|"):
            if current is None:
                current = []
                tables.append(current)
            current.append((n, line.strip()))
        else:
            current = None
    layers, seen = {}, {}  # folder -> layer; folder -> (table, line)
    for t, table in enumerate(tables):
        libraries = set()
        # The first row names the columns, the second is the --- row.
        for n, line in table[2:]:
            cells = [c.strip() for c in line.strip("|").split("|")]
            where = "%s:%d: row | %s |" % (DOC, n, " | ".join(cells[:2]))
            if len(cells) < 2:
                raise BadInput("%s: no column of folders" % where)
            if not re.fullmatch(r"\d+", cells[0]):
                raise BadInput("%s: the layer %r is not a number" % (where, cells[0]))
            items = [i.strip() for i in cells[1].split(",")]
            for item in items:
                f = re.fullmatch(r"`([^`]+)`", item)
                if not f:
                    raise BadInput("%s: %r is not a folder in backticks" % (where, item))
                if not f.group(1).endswith("/"):
                    raise BadInput("%s: folder `%s` has no trailing /" % (where, f.group(1)))
                folder = f.group(1).rstrip("/")
                top = folder.split("/")[0]
                if folder != SHARED and top not in LIBRARIES:
                    raise BadInput("%s: %s/ is neither include/ nor a folder of %s" % (where, folder,
                                                                                        " or ".join(LIBRARIES)))
                if folder in seen and (folder != SHARED or seen[folder][0] == t or layers[folder] != int(cells[0])):
                    raise BadInput("%s: %s/ is also in the row of line %d" % (where, folder, seen[folder][1]))
                if not os.path.isdir(os.path.join(root, folder)):
                    raise BadInput("%s: folder %s/ does not exist" % (where, folder))
                if folder != SHARED:
                    libraries.add(top)
                if len(libraries) > 1:
                    raise BadInput("%s: the table mixes %s: one table per library" % (where, " and ".join(
                        sorted(libraries))))
                layers[folder], seen[folder] = int(cells[0]), (t, n)
    if not layers:
        raise BadInput("the Layers section of %s has no rows" % path)
    return layers


def library(folder):
    top = folder.split("/")[0]
    return top if top in LIBRARIES else None


def refusal(folder, target, layers):
    """Why a file of folder may not use target (a file path), or None when it may."""
    tfolder = os.path.dirname(target)
    if tfolder == folder or tfolder in SEAMS:
        return None
    if folder in SEAMS:
        return None if tfolder == SHARED else "the seam %s/ may include only include/ and itself" % folder
    if tfolder not in layers:
        return "whose folder %s/ is in no layer of %s" % (tfolder, DOC)
    lf, lt = layers[folder], layers[tfolder]
    if library(folder) and library(tfolder) and library(folder) != library(tfolder):
        return "%s/ and %s/ are separate libraries: only include/ is shared" % (library(folder),
                                                                                 library(tfolder))
    if lt > lf:
        return "layer %d (%s/) is above this file's layer %d (%s/)" % (lt, tfolder, lf, folder)
    if lt == lf:
        return "%s/ and %s/ are both at layer %d (same layer) and may not include each other" % (
            tfolder, folder, lf)
    return None


# --- reading a file as the preprocessor does --------------------------------------------------

def logical_lines(text):
    """[(line, text)]: BOM dropped, backslash-newlines joined, comments replaced by a space
    (string and character literals kept whole). The line is that of the text's first character."""
    text = text.lstrip("\ufeff").replace("\r\n", "\n")
    out, starts, line, i, n = [], [1], 1, 0, len(text)
    quote = None  # the quote character while inside a literal
    while i < n:
        c = text[i]
        if c == "\\" and text.startswith("\n", i + 1):
            line, i = line + 1, i + 2
            continue
        if c == "\n":
            line += 1
            quote = None
            out.append("\n")
            starts.append(line)
        elif quote:
            out.append(c)
            if c == "\\" and i + 1 < n and text[i + 1] != "\n":
                out.append(text[i + 1])
                i += 1
            elif c == quote:
                quote = None
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            line += text.count("\n", i, end)
            out.append(" ")
            i = end
            continue
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":  # a backslash-newline continues the comment
                if text.startswith("\\\n", i):
                    line, i = line + 1, i + 1
                i += 1
            out.append(" ")
            continue
        else:
            # A quote opens a literal, but for the digit separators of a number (C23, C++14: 1'000).
            if c == '"' or (c == "'" and not re.search(r"(?<![\w.])\.?\d[\w.']*$", text[max(0, i - 40):i])):
                quote = c
            out.append(c)
        i += 1
    return list(zip(starts, "".join(out).split("\n")))


def includes(text):
    """[(line, directive, argument text)] of the #include and #include_next lines not under #if 0."""
    found, depth, skip = [], 0, None
    for line, t in logical_lines(text):
        m = DIRECTIVE.match(t)
        if not m:
            continue
        d, rest = m.group(1), m.group(2)
        if d in ("if", "ifdef", "ifndef"):
            depth += 1
            if skip is None and d == "if" and rest.strip() == "0":
                skip = depth
        elif d in ("elif", "else") and skip == depth:
            skip = None
        elif d == "endif":
            skip = None if skip == depth else skip
            depth -= 1
        elif skip is None and d in ("include", "include_next"):
            found.append((line, d, rest))
    return found


def code_lines(text):
    """[(line, text)] of the lines that are not preprocessor lines, comments removed."""
    return [(n, t) for n, t in logical_lines(text) if not DIRECTIVE.match(t)]


# --- resolving and checking -------------------------------------------------------------------

def resolve(root, src, name, angle):
    """(path as found, path of the file it is) of an include's name in the tree, or None."""
    top = src.split("/")[0]
    bases = [] if angle else [os.path.dirname(src)]
    bases += [SHARED] + ([top] if top in LIBRARIES else list(LIBRARIES)) + list(SEAMS)
    real_root = os.path.realpath(root)
    for base in bases:
        cand = os.path.normpath(os.path.join(base, name))
        if cand.startswith("..") or os.path.isabs(cand) or not os.path.isfile(os.path.join(root, cand)):
            continue
        return cand, os.path.relpath(os.path.realpath(os.path.join(root, cand)), real_root)
    return None


def sources(root):
    for top in (SHARED,) + LIBRARIES + SEAMS:
        for dirpath, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            for f in sorted(files):
                full = os.path.join(dirpath, f)
                if SOURCE.search(f) and not os.path.islink(full):
                    yield os.path.relpath(full, root)


def check_file(root, src, text, layers):
    folder = os.path.dirname(src)
    if folder not in layers and folder not in SEAMS:
        return ["%s:1: folder %s/ is in no layer of %s" % (src, folder, DOC)]
    errors = []
    for line, d, rest in includes(text):
        where = "%s:%d: #%s %s" % (src, line, d, rest.strip())
        arg = ARGUMENT.match(rest)
        if not arg:
            errors.append("%s: the argument is neither \"...\" nor <...> (a macro?): the checker cannot follow it"
                          % where)
            continue
        name, angle = arg.group(1) or arg.group(2), arg.group(2) is not None
        found = resolve(root, src, name, angle)
        if found is None:
            if not angle and not any(os.path.isfile(os.path.join(d_, name)) for d_ in SYSTEM_DIRS):
                errors.append("%s: names no file of the tree or of the system's include folders" % where)
            continue  # a system header
        path, real = found
        shown = path if path == real else "%s (a link to %s)" % (path, real)
        if real.startswith(".."):
            errors.append("%s: includes %s, outside the tree" % (where, shown))
            continue
        why = refusal(folder, real, layers)
        if why:
            errors.append("%s: includes %s: %s" % (where, shown, why))
    return errors


def definitions(texts):
    """{symbol: [file]} of the functions and variables defined at the first column of .c files."""
    head = re.compile(r"^(?!(?:extern|static|typedef|return)\b)(?:__attribute__\s*\(\(.*?\)\)\s*)?"
                      r"(?:[A-Za-z_][\w \t*]*?[\s*])?(\w+)\s*"
                      r"(?:\([^;{}]*\)\s*\{|(?:\[[^\]]*\]\s*)*(?:=[^;]*)?;)", re.M | re.S)
    defs = {}
    for src, text in texts.items():
        if src.endswith(".c") and library(src):
            body = "\n".join(t for _, t in code_lines(text))
            for m in head.finditer(body):
                defs.setdefault(m.group(1), []).append(src)
    return defs


def extern_name(decl):
    """The name an extern declaration declares (the text after extern, up to the ;)."""
    decl = re.sub(r"__attribute__\s*\(\(.*?\)\)", " ", decl)
    pointer = re.search(r"\(\s*\*\s*(?:const\s+)?([A-Za-z_]\w*)\s*\)", decl)  # void (*hook)(void)
    if pointer:
        return pointer.group(1)
    fn = re.search(r"\b([A-Za-z_]\w*)\s*\(", decl)
    if fn:
        return fn.group(1)
    names = re.findall(r"\b([A-Za-z_]\w*)\b", re.sub(r"\[.*?\]|=.*", "", decl))
    return names[-1] if names else None


def check_externs(texts, layers):
    defs, errors = definitions(texts), []
    for src, text in texts.items():
        folder = os.path.dirname(src)
        if not src.endswith(".c") or folder not in layers or not library(src):
            continue
        for line, t in code_lines(text):
            for m in re.finditer(r"\bextern\s+(?!\")([^;{}]*);", t):
                name = extern_name(m.group(1))
                homes = defs.get(name, [])
                if src in homes:
                    continue
                whys = [refusal(folder, d, layers) for d in homes]
                if homes and all(whys):
                    errors.append("%s:%d: extern %s is defined in %s: %s; a call or use up is declared in "
                                  "a header of %s/ (as backend/upcalls.h), not in a .c file"
                                  % (src, line, name, homes[0], whys[0], folder))
    return errors


def check(root):
    if not any(os.path.isdir(os.path.join(root, lib)) for lib in LIBRARIES):
        raise BadInput("%s has neither %s" % (root, " nor ".join(l + "/" for l in LIBRARIES)))
    layers = read_layers(root)
    texts = {}
    for src in sources(root):
        with open(os.path.join(root, src), encoding="utf-8", errors="replace") as fh:
            texts[src] = fh.read()
    errors = []
    for src, text in texts.items():
        errors += check_file(root, src, text, layers)
    return errors + check_externs(texts, layers)


# --- the self-test ----------------------------------------------------------------------------

BASE = {"include/jwmalloc.h": "", "jwmalloc/api/top.h": "", "jwmalloc/common/c.h": "",
        "iosr/sched/s.h": "", "iosr/engine/e.h": "",
        "jwmalloc/api/ok.c": '#include "../common/c.h"\n#include "jwmalloc.h"\n#include <stdio.h>\n'}
# name: (files to add, edit of the document or None, expected: (path, words of the report),
#        "accepted" or ("bad input", words))
CASES = {
    "upward": ({"jwmalloc/common/x.h": '#include "../api/top.h"\n'}, None,
               ("jwmalloc/common/x.h", "is above")),
    "same layer": ({"iosr/slots/x.h": '#include "sched/s.h"\n'}, None, ("iosr/slots/x.h", "same layer")),
    "unknown folder": ({"jwmalloc/common/x.h": '#include "../nowhere/n.h"\n', "jwmalloc/nowhere/n.h": ""},
                       None, ("jwmalloc/common/x.h", "in no layer")),
    "missing header": ({"jwmalloc/api/x.c": '#include "gone.h"\n'}, None, ("jwmalloc/api/x.c", "names no file")),
    "angle-bracket project include": ({"jwmalloc/common/x.c": "#include <api/top.h>\n"}, None,
                                      ("jwmalloc/common/x.c", "is above")),
    "cross-library include": ({"jwmalloc/api/x.c": '#include "../../iosr/engine/e.h"\n'}, None,
                              ("jwmalloc/api/x.c", "separate libraries")),
    "include in a comment": ({"jwmalloc/common/x.c": '/* e.g.\n#include "../api/top.h"\n */\n'
                                                     '// #include "../api/top.h"\n'}, None, "accepted"),
    "BOM and #  include": ({"jwmalloc/common/x.c": '\ufeff#  include "../api/top.h"\n'}, None,
                           ("jwmalloc/common/x.c:1:", "is above")),
    "upward through include/": ({"include/launder.h": '#include "../jwmalloc/api/top.h"\n',
                                 "jwmalloc/common/x.c": '#include "launder.h"\n'}, None,
                                ("include/launder.h", "is above")),
    "macro argument": ({"jwmalloc/common/x.c": '#define UP "../api/top.h"\n#include UP\n'}, None,
                       ("jwmalloc/common/x.c:2:", "a macro")),
    "local extern of an upper symbol": ({"jwmalloc/api/v.c": "int jw_top_value = 1;\n",
                                         "jwmalloc/common/x.c": "int f(void) { extern int jw_top_value;"
                                                                " return jw_top_value; }\n"}, None,
                                        ("jwmalloc/common/x.c:1:", "extern jw_top_value")),
    "malformed row": ({}, lambda doc: doc.replace("| 5 | `jwmalloc/reclaim/` |", "| five | `jwmalloc/reclaim/` |"),
                      ("bad input", "not a number")),
    "clean": ({}, None, "accepted"),
}


def self_test(real_root):
    failed = 0
    doc = open(os.path.join(real_root, DOC), encoding="utf-8").read()
    folders = read_layers(real_root)
    for name, (files, edit, expect) in CASES.items():
        tmp = tempfile.mkdtemp(prefix="check-layers-")
        try:
            os.makedirs(os.path.join(tmp, os.path.dirname(DOC)))
            with open(os.path.join(tmp, DOC), "w", encoding="utf-8") as fh:
                fh.write(edit(doc) if edit else doc)
            for folder in folders:
                os.makedirs(os.path.join(tmp, folder), exist_ok=True)
            for p, t in list(BASE.items()) + list(files.items()):
                os.makedirs(os.path.join(tmp, os.path.dirname(p)), exist_ok=True)
                with open(os.path.join(tmp, p), "w", encoding="utf-8") as fh:
                    fh.write(t)
            try:
                errors, bad = check(tmp), None
            except BadInput as e:
                errors, bad = [], str(e)
            if expect == "accepted":
                ok, got = not errors and not bad, "accepted"
            elif expect[0] == "bad input":
                ok, got = bad is not None and expect[1] in bad, "bad input (exit 2)" if bad else "no exit 2"
            else:
                ok = any(e.startswith(expect[0]) and expect[1] in e for e in errors)
                got = "refused" if errors else ("bad input (exit 2)" if bad else "accepted")
            print("%-5s %-32s %s: %s" % ("ok" if ok else "FAIL", name, got, "; ".join(errors) or bad or "-"))
            failed += not ok
        finally:
            shutil.rmtree(tmp)
    print("check-layers self-test: %s" % ("%d case(s) FAILED" % failed if failed else "every case as expected"))
    return 1 if failed else 0


def main(argv):
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if len(argv) > 1 and argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    try:
        if len(argv) == 2 and argv[1] == "--self-test":
            return self_test(here)
        if len(argv) > 2 or (len(argv) == 2 and argv[1].startswith("-")):
            print("usage: check-layers.py [ROOT] | --self-test", file=sys.stderr)
            return 2
        root = argv[1] if len(argv) == 2 else here
        if not os.path.isdir(root):
            raise BadInput("%s is not a directory" % root)
        errors = check(root)
    except BadInput as e:
        print("check-layers: %s" % e, file=sys.stderr)
        return 2
    for e in errors:
        print(e)
    print("check-layers: %d finding(s) against the layers of %s" % (len(errors), DOC)
          if errors else "check-layers: every include goes to its own folder or a layer below")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
