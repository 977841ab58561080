#!/usr/bin/env python3
"""Checks that no source file is over 800 lines and no C function over 150.

Usage: check-sizes.py [ROOT]      (default: this repository)

Files: in a git checkout, those git lists under ROOT (tracked, and untracked but not ignored:
git ls-files -z, so any file name is read); elsewhere every file below ROOT. A source is a name
ending in .c .h .inc .cc .cpp .hpp .def .S (C, C++, assembler), .py or .sh; links are skipped.
Each source over 800 lines is reported.

Functions, in C and C++ sources (.c .h .inc .cc .cpp .hpp): comments, string and character
literals and preprocessor lines are blanked first, line numbers kept; then the braces are
matched. A function is a { ... } at the outermost level (or directly inside extern "C" { } or a
namespace) whose head, the text since the last ";", "{" or "}" (K&R parameter declarations
included), has an identifier followed by "(" outside any parentheses, and is no struct, union,
enum or class body and no initializer (an "=" outside parentheses). Its name is the last such
identifier (attributes and all-capitals macros only when there is no other); its span runs from
the line of its "{" to the line of the matching "}". Since preprocessor lines are blanked, an
#ifdef between the head and its brace is read through and a brace inside a #define is not
counted; a #define longer than a function may be is reported itself (a function that a macro
writes is measured as the macro).

Reported, as FILE:LINE: message: a file over the file limit (line 1), a function over the
function limit (the line of its name), and braces that do not balance (an #if with a brace in
each branch): the functions after that point are not measured. The exit status is then 1.
Exit 2: bad usage, or a ROOT that is not a directory or holds no source.
"""
import bisect
import os
import re
import subprocess
import sys

MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 150
SOURCE = re.compile(r"\.(c|h|inc|cc|cpp|hpp|def|S|py|sh)$")
C_LIKE = re.compile(r"\.(c|h|inc|cc|cpp|hpp)$")

# What blank() replaces: the alternatives that only move the scan on (identifiers, numbers with
# their digit separators) keep a character literal from starting inside them.
TOKEN = re.compile(r"""
    (?P<pp>^[ \t]*(?:\#|%:)(?:\\\n|/\*.*?(?:\*/|\Z)|"(?:\\.|[^"\\\n])*"?|'(?:\\.|[^'\\\n])*'?|[^\n])*)
  | (?P<block>/\*.*?(?:\*/|\Z))
  | (?P<line>//(?:\\\n|[^\n])*)
  | (?P<raw>(?:u8|[uUL])?R"(?P<delim>[^()\\\s"]{0,16})\(.*?\)(?P=delim)")
  | (?P<ident>[A-Za-z_]\w*)
  | (?P<num>\.?\d(?:[eEpP][+-]|[\w.'])*)
  | (?P<str>"(?:\\.|[^"\\\n])*"?)
  | (?P<chr>'(?:\\.|[^'\\\n])*'?)
""", re.M | re.S | re.X)
# Identifiers before "(" that are not a function's name.
NOT_NAMES = {"__attribute__", "__attribute", "__declspec", "__asm__", "__asm", "asm", "alignas", "_Alignas",
             "__typeof__", "__typeof", "typeof", "decltype", "noexcept", "throw", "sizeof", "_Static_assert",
             "static_assert", "if", "for", "while", "switch", "return", "void", "char", "short", "int", "long",
             "float", "double", "signed", "unsigned", "const", "volatile", "_Bool", "bool", "auto"}

# The head of a K&R definition so far: "name(a, b) int a" (a declaration after the parameters).
KNR = re.compile(r"[A-Za-z_]\w*\s*\([\s\w,]*\)\s*(?!__attribute|__asm|asm\b)[A-Za-z_][\w\s*,\[\]]*$")


def blank(text):
    """(text with comments, literals and preprocessor lines turned into spaces, newlines kept,
    [(offset, name, lines) of each #define])."""
    macros = []

    def repl(m):
        if m.lastgroup in ("ident", "num"):
            return m.group()
        d = re.match(r"\s*(?:#|%:)\s*define\s+(\w+)", m.group()) if m.lastgroup == "pp" else None
        if d:
            macros.append((m.start(), d.group(1), m.group().count("\n") + 1))
        return re.sub(r"[^\n]", " ", m.group())
    return TOKEN.sub(repl, text), macros


def outside_parens(head):
    """head with what is inside parentheses blanked, the parentheses kept."""
    out, depth = [], 0
    for c in head:
        if c == ")":
            depth -= 1
        out.append(c if depth <= 0 or c == "\n" else " ")
        if c == "(":
            depth += 1
    return "".join(out)


def classify(head):
    """("function", name, offset of the name in head), ("scope", ...) or ("other", ...)."""
    flat = outside_parens(re.sub(r"\boperator\s*(?:\(\)|[^\w\s(]+)", lambda m: "operator" + " " * (len(
        m.group()) - 8), head))
    if re.search(r"\bextern\s*$", flat) or re.search(r"\bnamespace\b[\w\s:]*$", flat):
        return "scope", None, 0
    if re.search(r"\b(struct|union|enum|class)\b[^()]*$", flat) or re.search(r"(?<![=!<>])=(?!=)", flat):
        return "other", None, 0
    names = [m for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", flat) if m.group(1) not in NOT_NAMES]
    lower = [m for m in names if not re.fullmatch(r"[A-Z0-9_]+", m.group(1))]
    best = (lower or names or [None])[-1]
    if best:
        return "function", best.group(1), best.start(1)
    pointer = re.search(r"\(\s*\*+\s*([A-Za-z_]\w*)\s*\(", head)  # int (*handler(int sig))(int)
    return ("function", pointer.group(1), pointer.start(1)) if pointer else ("other", None, 0)


def functions(code):
    """([(name, name offset, { offset, } offset)], offset where the braces stop balancing or None)."""
    stack, found, head = [], [], 0  # stack: (kind, name, name offset, { offset)
    for m in re.finditer(r"[{};]", code):
        c = m.group()
        if c == "{":
            if all(s[0] == "scope" for s in stack):
                kind, name, at = classify(code[head:m.start()])
                stack.append((kind, name, head + at, m.start()))
            else:
                stack.append(("other", None, 0, m.start()))
        elif c == "}":
            if not stack:
                return found, m.start()
            kind, name, at, opened = stack.pop()
            if kind == "function":
                found.append((name, at, opened, m.start()))
        elif all(s[0] == "scope" for s in stack) and KNR.search(outside_parens(code[head:m.start()])):
            continue  # "int f(a) int a;": a K&R declaration of the parameters, the head goes on
        head = m.end()
    return found, (stack[0][3] if stack else None)


def check_file(root, path):
    with open(os.path.join(root, path), "rb") as fh:
        text = fh.read().decode("utf-8", errors="replace").replace("\r\n", "\n")
    errors = []
    lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    if lines > MAX_FILE_LINES:
        errors.append("%s:1: %d lines, over %d" % (path, lines, MAX_FILE_LINES))
    if not C_LIKE.search(path):
        return errors
    code, macros = blank(text.lstrip("\ufeff"))
    newlines = [m.start() for m in re.finditer("\n", code)]

    def line(offset):
        return bisect.bisect_left(newlines, offset) + 1

    found, stuck = functions(code)
    for name, at, opened, closed in found:
        span = line(closed) - line(opened) + 1
        if span > MAX_FUNCTION_LINES:
            errors.append("%s:%d: function %s spans %d lines, over %d"
                          % (path, line(at), name, span, MAX_FUNCTION_LINES))
    for at, name, span in macros:  # a function a macro writes is measured as the macro
        if span > MAX_FUNCTION_LINES:
            errors.append("%s:%d: macro %s spans %d lines, over %d" % (path, line(at), name, span,
                                                                      MAX_FUNCTION_LINES))
    if stuck is not None:
        errors.append("%s:%d: the braces do not balance from here (a brace in each branch of an #if?): "
                      "the functions after it are not measured" % (path, line(stuck)))
    return errors


def sources(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, check=True).stdout
        paths = [os.fsdecode(p) for p in out.split(b"\0") if p]
    except (OSError, subprocess.CalledProcessError):
        paths = []
        for d, dirs, files in os.walk(root):
            dirs[:] = sorted(x for x in dirs if not x.startswith("."))
            paths += [os.path.relpath(os.path.join(d, f), root) for f in files]
    return sorted(p for p in set(paths) if SOURCE.search(p) and os.path.isfile(os.path.join(root, p))
                  and not os.path.islink(os.path.join(root, p)))


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
    paths = sources(root)
    if not paths:
        print("check-sizes: %s holds no source file (%s)" % (root, SOURCE.pattern), file=sys.stderr)
        return 2
    errors = []
    for p in paths:
        errors += check_file(root, p)
    for e in errors:
        print(e)
    print("check-sizes: %d finding(s) in %d source(s)" % (len(errors), len(paths)) if errors else
          "check-sizes: %d source(s), none over %d lines, no function over %d"
          % (len(paths), MAX_FILE_LINES, MAX_FUNCTION_LINES))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
