#!/usr/bin/env python3
"""Adversarial cases for scripts/check-sizes.py (from breaker25's review; test
repo.file_sizes_cases).

Usage: sizes_cases.py [REPO]    (default: the repository holding this script)

Each case writes one source file into a scratch folder (not a git checkout, so the checker
walks it), runs check-sizes.py on it and compares the verdict with the truth by construction:

  ok   the checker's verdict is the right one
  FN   a function (or file) over the limit gets past it
  FP   it reports something over the limit that is not (or names the wrong function)

Every C case is valid C (C++ for .cc/.cpp) that gcc compiles; the script checks that with
gcc -fsyntax-only where gcc is installed (without it the cases are judged all the same). The
last case is a git checkout with a non-ASCII file name. Exit status 0 when every case is ok,
1 otherwise.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BODY = "".join("  x += %d;\n" % i for i in range(200))  # a 200-line body: over the 150 limit
SHORT = "".join("  x += %d;\n" % i for i in range(100))  # 100 lines: under it


def fn(head, body=BODY, open_="{", close="}"):
    return "%s%s\n  int x = 0;\n%s  return x;\n%s\n" % (head, open_, body, close)


# name: (file name, text, expected report: None for none, else a regex the report must match)
CASES = {
    # --- over-long functions that get past (false negatives) ---
    "GNU style: return type on its own line": (
        "a.c", fn("static int\nlong_gnu(void)\n"), r"long_gnu"),
    "attribute first on the line (as jwmalloc/os/os_swap.c:216)": (
        "a.c", fn("__attribute__((cold)) static int long_attr(void) "), r"long_attr"),
    "comment after the opening brace": (
        "a.c", fn("int long_comment(void) ", open_="{ /* the brace is not the last character */"),
        r"long_comment"),
    "brace on its own line with a comment": (
        "a.c", fn("int long_brace_comment(void)\n", open_="{ // why"), r"long_brace_comment"),
    "K&R definition": (
        "a.c", fn("int long_knr(a)\nint a;\n"), r"long_knr"),
    "#ifdef between the head and the brace": (
        "a.c", fn("int long_ifdef_head(void)\n#ifdef NEVER\n#endif\n"), r"long_ifdef_head"),
    "} at the first column inside the body (in a comment)": (
        "a.c", "int long_early_close(void) {\n  int x = 0;\n/* a block:\n}\n */\n" + BODY + "  return x;\n}\n",
        r"long_early_close"),
    "function indented (under #if, or in extern \"C\")": (
        "a.c", "  int long_indented(void) {\n  int x = 0;\n" + BODY + "  return x;\n  }\n", r"long_indented"),
    "function written by a macro (reported as the macro)": (
        "a.c", "#define DEFINE_LONG(name) \\\nint name(void) { \\\n  int x = 0; \\\n"
        + "".join("  x += %d; \\\n" % i for i in range(200)) + "  return x; \\\n}\nDEFINE_LONG(long_macro)\n",
        r"macro DEFINE_LONG spans"),
    "C++ member function in a .cc file": (
        "a.cc", "struct A { int long_member(); };\n" + fn("int A::long_member() "), r"long_member"),
    "a .cpp file (extension not read)": (
        "a.cpp", fn("int long_cpp() "), r"long_cpp"),
    "a .cpp file over 800 lines": (
        "b.cpp", "".join("int v%d;\n" % i for i in range(900)), r"900 lines"),
    "extern \"C\" around a long function": (
        "a.cc", 'extern "C" {\n' + fn("int long_extern_c() ") + "}\n", r"long_extern_c"),
    "a function that returns a struct pointer": (
        "a.c", "struct foo { int a; };\n" + fn("struct foo *long_struct_ret(void) ", "  (void)0;\n" + BODY)
        .replace("return x;", "return (struct foo *)0 + x;"), r"long_struct_ret"),
    "braces in string and character literals": (
        "a.c", fn("int long_literals(void) ", '  const char *s = "}}}";\n  char c = \'}\';\n  (void)s; (void)c;\n'
                  + BODY + "}\n" + "int after(void) {\n  int x = 0;\n"), r"long_literals"),
    "C++ digit separators and a '{' character": (
        "a.cc", fn("int long_separators() ", "  x += 1'000'000; char c = '{'; (void)c;\n" + BODY), r"long_separators"),
    "a #define with an open brace, then a long function": (
        "a.c", "#define OPEN {\n" + fn("int long_after_define(void) "), r"long_after_define"),
    "a macro invocation without a semicolon before the head": (
        "a.c", "#define DECLARE(x) int x;\nDECLARE(v)\n" + fn("int long_after_macro(void) "), r"long_after_macro"),
    "a brace in each branch of an #if (cannot be measured: reported)": (
        "a.c", "int cond(int y) {\n  int x = 0;\n#ifdef NEVER\n  if (y) {\n#else\n  if (!y) {\n#endif\n    x++;\n  }\n"
        "  return x;\n}\n", r"do not balance"),
    "a function that returns a function pointer": (
        "a.c", "static int g(int a) { return a; }\n"
        + fn("int (*long_fp_ret(void))(int) ").replace("return x;", "return x ? g : 0;"), r"long_fp_ret"),
    "a Python file over 800 lines": ("a.py", "".join("v%d = %d\n" % (i, i) for i in range(900)), r"a.py:1: 900 lines"),
    "a shell file over 800 lines": ("a.sh", "".join("v%d=%d\n" % (i, i) for i in range(900)), r"a.sh:1: 900 lines"),
    # --- reports that are not true, or name the wrong function (false positives) ---
    "one-liner with a trailing comment, then a long one (wrong name)": (
        "a.c", "int one(void) { return 1; } /* note */\n\n" + fn("int long_after(void) "), r"long_after"),
    "a 200-row table with an attribute": (
        "a.c", "static const int __attribute__((aligned(64))) table[] = {\n"
        + "".join("  %d,\n" % i for i in range(200)) + "};\n", None),
    "a 200-row table of function pointers": (
        "a.c", "static int f0(void) { return 0; }\nstatic int (*const handlers[])(void) = {\n"
        + "".join("  f0,\n" for _ in range(200)) + "};\nint use(void) { return handlers[0](); }\n", None),
    "closing brace indented, two short functions after it": (
        "a.c", "int first(void) {\n  int x = 0;\n" + SHORT + "  return x;\n  }\n"
        + fn("int second(void) ", SHORT), None),
    "a 200-line struct, then a short function": (
        "a.c", "struct big {\n" + "".join("  int f%d;\n" % i for i in range(200)) + "};\n"
        + fn("int short_after_struct(void) ", SHORT), None),
    "an enum of 200 members": (
        "a.c", "enum big {\n" + "".join("  E%d,\n" % i for i in range(200)) + "};\n", None),
    # --- controls ---
    "control: plain long function": ("a.c", fn("int long_plain(void) "), r"long_plain"),
    "control: brace on its own line": ("a.c", fn("int long_brace(void)\n"), r"long_brace"),
    "control: head over two lines": ("a.c", fn("int long_two(int a,\n             int b) "), r"long_two"),
    "control: CRLF": ("a.c", fn("int long_crlf(void) ").replace("\n", "\r\n"), r"long_crlf"),
    "control: 100-line function": ("a.c", fn("int short_one(void) ", SHORT), None),
}


def main(argv):
    repo = argv[1] if len(argv) > 1 else HERE
    checker = os.path.join(repo, "scripts", "check-sizes.py")
    wrong = 0
    for name, (fname, text, expect) in CASES.items():
        tmp = tempfile.mkdtemp(prefix="sizes-case-")
        try:
            path = os.path.join(tmp, fname)
            with open(path, "w", newline="") as fh:
                fh.write(text)
            lang = "c++" if fname.endswith((".cc", ".cpp")) else "c"
            if fname.endswith((".py", ".sh")):
                compiled = "not C"
            elif shutil.which("gcc") is None:
                compiled = "no gcc"
            else:
                cc = subprocess.run(["gcc", "-x", lang, "-fsyntax-only", "-w", path], capture_output=True, text=True)
                compiled = "compiles" if cc.returncode == 0 else "gcc error"
            r = subprocess.run([sys.executable, checker, tmp], capture_output=True, text=True)
            reports = [l for l in r.stdout.splitlines() if re.match(r".*:\d+: ", l)]
            if expect is None:
                good = not reports
            else:
                good = len(reports) == 1 and re.search(expect, reports[0]) is not None
            if compiled == "gcc error":
                verdict = "CASE"  # the case is no valid source
                wrong += 1
            elif good:
                verdict = "ok"
            else:
                verdict = "FN" if expect and not any(re.search(expect, l) for l in reports) and not reports else "FP"
                wrong += 1
            print("%-4s %-62s %s | %s" % (verdict, name, compiled,
                                          "; ".join(reports) or "no report"))
        finally:
            subprocess.run(["rm", "-rf", tmp])
    # In a git checkout the checker lists files with git ls-files, which quotes a path with a
    # non-ASCII byte or a tab ("caf\303\251.c"): that file is then skipped.
    tmp = tempfile.mkdtemp(prefix="sizes-case-git-")
    try:
        if shutil.which("git") is None:
            print("-    git checkout, file named caf\u00e9.c: no git, not run")
            return 1 if wrong else 0
        with open(os.path.join(tmp, "caf\u00e9.c"), "w") as fh:
            fh.write(fn("int long_utf8_name(void) "))
        subprocess.run(["git", "init", "-q", tmp], check=True)
        subprocess.run(["git", "-C", tmp, "add", "-A"], check=True)
        r = subprocess.run([sys.executable, checker, tmp], capture_output=True, text=True)
        reports = [l for l in r.stdout.splitlines() if re.match(r".*:\d+: ", l)]
        good = any("long_utf8_name" in l for l in reports)
        wrong += 0 if good else 1
        print("%-4s %-62s %s | %s" % ("ok" if good else "FN", "git checkout, file named caf\u00e9.c", "compiles",
                                      "; ".join(reports) or "no report"))
    finally:
        subprocess.run(["rm", "-rf", tmp])
    print("%d case(s) where check-sizes.py gives the wrong verdict" % wrong)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
