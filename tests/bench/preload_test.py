#!/usr/bin/env python3
"""Tests of the suite's preloads and the benchmarks built on them (tests/bench/CMakeLists.txt).

  preload_test.py BUILD preempt_smoke        the preemption benchmark works in every mode
  preload_test.py BUILD preempt_points       the preload reaches jwmalloc's named points and pauses there
  preload_test.py BUILD null_allocator       the null allocator keeps blocks apart and aligned
  preload_test.py BUILD harness_cost_report  run.py with the null allocator, then the harness-cost report

They assert that the pieces work and that their output is well formed, never a
duration or a rate. Exit 0 pass, 1 fail, 77 skip.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_test import JEMALLOC, SKIP, fail, kv, run  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def lib(build, name):
    return os.path.join(build, "lib", name)


def rptest(build, env, *args):
    cmd = [os.path.join(build, "bin", "jwb-rptest"), "--threads", "4", "--max", "16K", "--duration", "0.3",
           "--lat-every", "1", "--lat-slow", "1000000"] + list(args)
    p = run(cmd, env)
    return p, kv(p.stdout, "jwbench")


def t_preempt_smoke(build):
    """jwmalloc through its test hooks and jemalloc through the shim: every mode
    runs with intact blocks, the hooks are reached, pauses are taken (in the
    allocator's sections in section mode), and preempt.py writes its report."""
    hooks, shim = lib(build, "libjwmalloc_hooks.so"), lib(build, "libjwb_pause.so")
    for path in (hooks, shim):
        if not os.path.exists(path):
            fail("%s not built" % path)
    cases = [("jwmalloc", {"LD_PRELOAD": hooks}, "jw-locks")]
    if os.path.exists(JEMALLOC):
        cases.append(("jemalloc", {"LD_PRELOAD": shim + " " + JEMALLOC}, "shim"))
    for name, env, installed in cases:
        for mode in ("none", "random", "section"):
            p, r = rptest(build, env, "--pause", mode)
            print(name, mode, {k: r.get(k) for k in ("lat_samples", "lat_slow", "pauses", "hook_calls", "hook_pauses")})
            if p.returncode != 0 or r.get("check") != "ok":
                fail("%s, --pause %s: exit %d, check %s: %s" % (name, mode, p.returncode, r.get("check"),
                                                              p.stderr.strip()[-300:]))
            if int(r.get("lat_samples", 0)) < int(r.get("ops", 1)):
                fail("%s: not every call was timed (%s of %s)" % (name, r.get("lat_samples"), r.get("ops")))
            if installed not in r.get("hooks_installed", "") or int(r.get("hook_calls", 0)) <= 0:
                fail("%s, --pause %s: hooks %s, %s sections entered" % (name, mode, r.get("hooks_installed"),
                                                                       r.get("hook_calls")))
            pauses = int(r.get("pauses", -1))
            if mode == "none" and pauses != 0:
                fail("%s: %d pauses without --pause" % (name, pauses))
            if mode != "none" and pauses <= 0:
                fail("%s, --pause %s: no pause taken (%s ticks)" % (name, mode, r.get("pause_ticks")))
            if mode == "section" and r.get("hook_pauses", "none") == "none":
                fail("%s: section mode paused in no section" % name)
            if mode == "section" and int(r.get("lat_slow_own", 0)) <= 0:
                fail("%s: no timed call overlapped its own pause (the pause window is not recorded)" % name)
    p, r = rptest(build, {}, "--pause", "section")
    if p.returncode != 2 or "no section hook" not in p.stderr:
        fail("--pause section under glibc without the shim: exit %d, %s" % (p.returncode, p.stderr.strip()))
    out = tempfile.mkdtemp()
    try:
        names = [c[0] for c in cases]
        p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "suite", "preempt.py"), "--build", build,
                            "--allocators", ",".join(names), "--workloads", "rptest-16k", "--threads", "4",
                            "--duration", "0.3", "--repeat", "1", "--out", out], capture_output=True, text=True,
                           timeout=240)
        if p.returncode != 0:
            fail("preempt.py exited %d: %s" % (p.returncode, p.stderr.strip()[-400:]))
        with open(os.path.join(out, "raw", "preempt.jsonl")) as f:
            recs = [json.loads(x) for x in f if x.strip()]
        if len(recs) != 3 * len(names):
            fail("preempt.py: %d runs, expected %d" % (len(recs), 3 * len(names)))
        with open(os.path.join(out, "report.md")) as f:
            md = f.read()
        for want in ["## rptest-16k, 4 threads", "## Target", "| jwmalloc |"] + ["| %s |" % n for n in names]:
            if want not in md:
                fail("preempt.py's report lacks %r" % want)
        if md.count("| section |") != len(names):
            fail("preempt.py's report: %d section rows for %d allocators" % (md.count("| section |"), len(names)))
    finally:
        shutil.rmtree(out)
    return 0


def t_preempt_points(build):
    """Through libjwmalloc_hooks.so the benchmark reaches every named point of
    jwmalloc's test hooks (common/test_hooks.h), and section mode restricted to
    one point's kind pauses a thread there: the checker's flag (JWMALLOC_CHECK=1)
    and a reclaimer's batch in flight (1 ms reclaim cycles run by the freeing
    threads, memory freed in every trough), beside a backend lock holder's release (every unlock).
    The other hand-over point (a free that found the lock held) needs a race
    and is left to preempt_smoke's counts."""
    hooks = lib(build, "libjwmalloc_hooks.so")
    if not os.path.exists(hooks):
        fail("%s not built" % hooks)
    peak = [os.path.join(build, "bin", "jwb-peaktrough"), "--threads", "2", "--steady", "4M", "--cycles", "4",
            "--hold-ops", "3000", "--lat-every", "1", "--pause-every", "200", "--pause-ms", "0.2"]
    checked = [os.path.join(build, "bin", "jwb-rptest"), "--threads", "2", "--ops", "3000", "--lat-every", "1",
               "--pause-every", "200", "--pause-ms", "0.2"]
    cases = [("jw.be_checking", checked, {"JWMALLOC_CHECK": "1"}),
             # the freeing threads run the due cycles (no reclaim thread): on a busy machine a
             # thread of its own may not run within the workload at all (seen once beside stress-ng)
             ("jw.rc_batch", peak, {"JWMALLOC_RECLAIM_INTERVAL_MS": "1", "JWMALLOC_RECLAIM_THREAD": "0"}),
             ("jw.be_unlock", peak, {})]
    for kind, cmd, extra in cases:
        env = dict(extra, LD_PRELOAD=hooks)
        p = run(cmd + ["--pause", "section", "--pause-kinds", kind], env)
        r = kv(p.stdout, "jwbench")
        print(kind, {k: r.get(k) for k in ("hooks", "hook_pauses", "check")})
        if p.returncode != 0 or r.get("check") != "ok":
            fail("%s: exit %d, check %s: %s" % (kind, p.returncode, r.get("check"), p.stderr.strip()[-300:]))
        if kind + ":" not in r.get("hooks", ""):
            fail("%s: the point was not reached through the preload (hooks=%s)" % (kind, r.get("hooks")))
        paused = r.get("hook_pauses", "none")
        if not paused.startswith(kind + ":") or "," in paused:
            fail("%s: section mode restricted to it paused in %s" % (kind, paused))
    return 0


def t_null_allocator(build):
    """Under the null allocator, blocks of every form keep their size and
    alignment and never overlap, and every workload's block checks pass."""
    null = lib(build, "libjwb_null.so")
    env = {"LD_PRELOAD": null}
    p = run([os.path.join(build, "bin", "jwb-test-null-probe")], env)
    print(p.stdout.strip())
    if p.returncode != 0 or p.stdout.strip() != "ok":
        fail("null probe: exit %d: %s %s" % (p.returncode, p.stdout.strip(), p.stderr.strip()[-300:]))
    works = [("jwb-rptest", ["--threads", "3", "--ops", "30000"]),
             ("jwb-rptest", ["--threads", "3", "--max", "1M", "--blocks", "32", "--ops", "3000"]),
             ("jwb-xmalloc", ["--threads", "4", "--ops", "30000"]),
             ("jwb-mstress", ["--threads", "3", "--rounds", "2", "--steps", "3000"]),
             ("jwb-larson", ["--threads", "3", "--ops", "30000", "--thread-ops", "5000"]),
             ("jwb-mleak", ["--threads", "3", "--rounds", "3", "--steps", "3000"]),
             ("jwb-reformat", ["--threads", "2", "--ops", "60000", "--phase-ops", "5000"])]
    for prog, args in works:
        p = run([os.path.join(build, "bin", prog)] + args, env)
        r = kv(p.stdout, "jwbench")
        if p.returncode != 0 or r.get("check") != "ok":
            fail("%s under the null allocator: exit %d, check %s: %s" % (prog, p.returncode, r.get("check"),
                                                                         p.stderr.strip()[-300:]))
    return 0


def t_harness_cost_report(build):
    """run.py with the null allocator beside glibc, then harness_cost.py: the
    report has a row per cell with the null allocator's time and a share."""
    out = tempfile.mkdtemp()
    try:
        runs = os.path.join(out, "runs")
        suite = os.path.join(ROOT, "bench", "suite")
        p = subprocess.run([sys.executable, os.path.join(suite, "run.py"), "--build", build, "--allocator",
                            "null=" + lib(build, "libjwb_null.so"), "--allocators", "null,glibc",
                            "--footprint-extra", "", "--workloads", "rptest-16k,larson", "--threads", "2",
                            "--duration", "0.2", "--repeat", "1", "--callgrind", "none", "--no-report",
                            "--out", runs], capture_output=True, text=True, timeout=240)
        if p.returncode != 0:
            fail("run.py exited %d: %s" % (p.returncode, p.stderr.strip()[-400:]))
        p = subprocess.run([sys.executable, os.path.join(suite, "harness_cost.py"), "--runs", runs, "--out", out],
                           capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            fail("harness_cost.py exited %d: %s" % (p.returncode, p.stderr.strip()[-400:]))
        with open(os.path.join(out, "report.md")) as f:
            md = f.read()
        rows = [ln for ln in md.splitlines() if ln.startswith("| rptest-16k | 2 |") or ln.startswith("| larson | 2 |")]
        if len(rows) != 2 or any("glibc" not in ln or "%" not in ln for ln in rows):
            fail("harness_cost.py's report rows: %s" % rows)
    finally:
        shutil.rmtree(out)
    return 0


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    build = os.path.abspath(argv[1])
    tests = {"preempt_smoke": t_preempt_smoke, "preempt_points": t_preempt_points, "null_allocator": t_null_allocator,
             "harness_cost_report": t_harness_cost_report}
    if argv[2] not in tests:
        print("unknown test " + argv[2])
        return 2
    return tests[argv[2]](build)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
