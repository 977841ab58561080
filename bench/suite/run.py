#!/usr/bin/env python3
"""Runs the evaluation suite: a matrix of workloads x thread counts x allocators
into a results directory, then writes the report (docs/design/bench.md).

  bench/suite/run.py [--quick] [--out DIR] [--build DIR] [--jwmalloc LIB]
                     [--allocators a,b,..] [--allocator NAME=LIB[,K=V..]]
                     [--workloads w,..] [--threads 1,N,10N] [--duration S]
                     [--repeat R] [--callgrind w,..|none] [--label TEXT] ...

Every run goes through the launcher (build/bin/jwbench-run), which samples RSS
and counts memory system calls; its line and the workload's result line are
kept in DIR/raw/runs.jsonl with the RSS samples in DIR/raw/rss/. A progress line
shows the cell, its figure, the time spent and the time left.
"""
import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import allocators as alloc_mod  # noqa: E402
import callgrind  # noqa: E402
import rss  # noqa: E402
import workloads as wl_mod  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def ncores():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def parse_threads(text, n):
    out = []
    for tok in text.split(","):
        tok = tok.strip()
        if not tok:
            continue
        per_core = tok.endswith("N")
        try:
            v = int((tok[:-1] or "1") if per_core else tok) * (n if per_core else 1)
        except ValueError:
            raise SystemExit("run.py: bad thread count '%s' (use integers, N or kN)" % tok)
        if v < 1 or v > 8192:
            raise SystemExit("run.py: thread count %d out of range 1..8192" % v)
        if v not in out:
            out.append(v)
    if not out:
        raise SystemExit("run.py: no thread counts given")
    return out


def kv_line(text, prefix):
    """The key=value pairs of the last line of text starting with prefix."""
    found = None
    for line in text.splitlines():
        if line.startswith(prefix + " "):
            found = line
    if found is None:
        return None
    d = {}
    for tok in found.split()[1:]:
        if "=" in tok:
            k, v = tok.split("=", 1)
            try:
                d[k] = int(v)
            except ValueError:
                try:
                    d[k] = float(v)
                except ValueError:
                    d[k] = v
    return d


def fmt_secs(s):
    s = int(max(0, s))
    return "%dm%02ds" % (s // 60, s % 60) if s >= 60 else "%ds" % s


class Progress:
    def __init__(self, total_cells, total_expected):
        self.total = total_cells
        self.expected = max(total_expected, 1e-9)
        self.done = 0
        self.done_expected = 0.0
        self.start = time.time()
        self.tty = sys.stderr.isatty()

    def show(self, what, figure, expected):
        self.done += 1
        self.done_expected += expected
        spent = time.time() - self.start
        rate = spent / self.done_expected if self.done_expected > 0 else 1.0
        left = (self.expected - self.done_expected) * rate
        line = "[%4d/%d %3d%%] %-44s %-22s %s spent, ~%s left" % (
            self.done, self.total, 100 * self.done // self.total, what[:44], figure[:22], fmt_secs(spent),
            fmt_secs(left))
        if self.tty:
            sys.stderr.write("\r" + line[:150].ljust(150))
            if self.done == self.total:
                sys.stderr.write("\n")
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


def machine_info():
    info = {"ncores": ncores(), "cpu_count": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version()}
    def first_line(path, prefix, sep):
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith(prefix):
                        return line.split(sep, 1)[1].strip()
        except OSError:
            pass
        return None

    info["cpu"] = first_line("/proc/cpuinfo", "model name", ":") or "?"
    mem = first_line("/proc/meminfo", "MemTotal", ":")
    info["mem_gib"] = round(int(mem.split()[0]) / 1048576, 1) if mem else "?"
    info["os"] = (first_line("/etc/os-release", "PRETTY_NAME=", "=") or "?").strip('"')
    info["loadavg_start"] = os.getloadavg()
    for tool, args in (("gcc", ["gcc", "--version"]), ("valgrind", ["valgrind", "--version"])):
        try:
            out = subprocess.run(args, capture_output=True, text=True, timeout=10)
            info[tool] = out.stdout.splitlines()[0] if out.returncode == 0 and out.stdout else ""
        except (OSError, subprocess.SubprocessError):
            info[tool] = "not installed"
    try:
        rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             timeout=10)
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
        info["commit"] = (rev.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")) or "unknown (no git)"
    except (OSError, subprocess.SubprocessError):
        info["commit"] = "unknown"
    return info


def main(argv=None):
    ap = argparse.ArgumentParser(description="jwmalloc evaluation suite runner (docs/design/bench.md)")
    ap.add_argument("--quick", action="store_true", help="short runs (make bench QUICK=1): under 5 min on 2 cores")
    ap.add_argument("--out", help="results directory (default bench/out/quick or bench/out/full)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="build directory (default build)")
    ap.add_argument("--bin", help="directory of the suite's programs (default BUILD/bin)")
    ap.add_argument("--jwmalloc", help="path of libjwmalloc.so (default BUILD/lib/libjwmalloc.so)")
    ap.add_argument("--allocators", default=",".join(alloc_mod.DEFAULT),
                    help="allocators to compare (default %s)" % ",".join(alloc_mod.DEFAULT))
    ap.add_argument("--allocator", action="append", default=[], metavar="NAME=LIB[,K=V...]",
                    help="define an extra allocator (LIB 'none' for glibc) with optional environment; repeatable")
    ap.add_argument("--footprint-extra", default=",".join(alloc_mod.FOOTPRINT_EXTRA),
                    help="allocators added on footprint workloads (default jemalloc-1s; '' for none)")
    ap.add_argument("--peers-dir", help="folder with copies of the peer libraries (machines without the packages)")
    ap.add_argument("--workloads", default="all", help="comma list of workloads, or all (default), or a group: "
                    "throughput, footprint, trace")
    ap.add_argument("--threads", default="1,N,10N", help="thread counts; N = cores (default 1,N,10N)")
    ap.add_argument("--footprint-threads", help="thread counts of footprint workloads (default: 10N in QUICK, "
                    "else as --threads)")
    ap.add_argument("--duration", type=float, help="seconds per timed run (default %g, QUICK %g)" %
                    (wl_mod.FULL_DURATION, wl_mod.QUICK_DURATION))
    ap.add_argument("--repeat", type=int, help="repetitions of throughput and trace runs (default 3, QUICK 1)")
    ap.add_argument("--callgrind", help="workloads measured under callgrind, or none (default: QUICK %s; full: "
                    "every throughput workload and trace)" % ",".join(wl_mod.CALLGRIND_QUICK))
    ap.add_argument("--cache-sim", action="store_true",
                    help="callgrind runs simulate the caches too (--cache-sim=yes): the report adds the allocator's "
                         "first-level data-cache misses per call (deterministic; about 2x slower)")
    ap.add_argument("--callgrind-threads", help="thread count of callgrind runs (default N)")
    ap.add_argument("--traces", help="directory of the recorded traces (default BUILD/bench/traces)")
    ap.add_argument("--rss-hz", type=float, default=50, help="RSS samples per second (>= 20; default 50)")
    ap.add_argument("--lat-every", type=int, default=32, help="time one allocator call in about K (default 32)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds before a run is killed (default 300)")
    ap.add_argument("--label", help="run label shown in the report (default QUICK or full)")
    ap.add_argument("--max-seconds", type=float, help="start no run after this many seconds; the rest are "
                    "recorded as skipped (for a machine lent for a fixed time)")
    ap.add_argument("--callgrind-only", action="store_true",
                    help="make only the callgrind runs (for --reuse-callgrind by a later run)")
    ap.add_argument("--reuse-callgrind", metavar="DIR",
                    help="take the peers' callgrind records from an earlier run in DIR instead of measuring them "
                    "again (instruction counts are deterministic and do not depend on load); jwmalloc's are "
                    "always measured")
    ap.add_argument("--no-report", action="store_true", help="do not write the report")
    ap.add_argument("--publish", help="copy the report and its plots (no raw data) to this folder, e.g. "
                    "bench/results/2026-11-30-full")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and the expected time, run nothing")
    args = ap.parse_args(argv)

    mode = "quick" if args.quick else "full"
    n = ncores()
    threads = parse_threads(args.threads, n)
    fp_threads = parse_threads(args.footprint_threads, n) if args.footprint_threads else (
        [10 * n] if args.quick else threads)
    duration = args.duration if args.duration else (wl_mod.QUICK_DURATION if args.quick else wl_mod.FULL_DURATION)
    repeat = args.repeat if args.repeat else (1 if args.quick else 3)
    if repeat < 1 or duration <= 0 or args.rss_hz < 20:
        raise SystemExit("run.py: need --repeat >= 1, --duration > 0, --rss-hz >= 20")
    out = os.path.abspath(args.out or os.path.join(ROOT, "bench", "out", mode))
    bindir = os.path.abspath(args.bin or os.path.join(args.build, "bin"))
    jwlib = args.jwmalloc or os.path.join(args.build, "lib", "libjwmalloc.so")
    traces = os.path.abspath(args.traces or os.path.join(args.build, "bench", "traces"))
    launcher = os.path.join(bindir, "jwbench-run")
    if not os.access(launcher, os.X_OK):
        raise SystemExit("run.py: %s not found: build first (make build)" % launcher)

    custom = {}
    for spec in args.allocator:
        if "=" not in spec:
            raise SystemExit("run.py: --allocator needs NAME=LIB[,K=V...], got '%s'" % spec)
        name, rest = spec.split("=", 1)
        parts = rest.split(",")
        lib = None if parts[0] in ("", "none") else os.path.abspath(parts[0])
        env = {}
        for p in parts[1:]:
            if "=" not in p:
                raise SystemExit("run.py: bad environment '%s' in --allocator %s" % (p, spec))
            k, v = p.split("=", 1)
            env[k] = v
        custom[name] = (lib, env)
    names = [a for a in args.allocators.split(",") if a]
    extra = [a for a in args.footprint_extra.split(",") if a]
    allocs = {}
    for name in names + extra + [c for c in custom if c not in names + extra]:
        try:
            allocs[name] = alloc_mod.resolve(name, jwlib, args.peers_dir, custom)
        except KeyError:
            raise SystemExit("run.py: unknown allocator '%s' (known: %s, or define it with --allocator)" %
                             (name, ", ".join(["jwmalloc"] + list(alloc_mod.PEERS))))
    main_allocs = [a for a in names + [c for c in custom if c not in names + extra]]

    if args.workloads == "all":
        wls = list(wl_mod.WORKLOADS)
    else:
        wls = []
        for tok in args.workloads.split(","):
            if tok in ("throughput", "footprint", "trace"):
                wls += [w for w in wl_mod.WORKLOADS if w.group == tok and w not in wls]
            elif tok in wl_mod.BY_NAME:
                if wl_mod.BY_NAME[tok] not in wls:
                    wls.append(wl_mod.BY_NAME[tok])
            elif tok:
                raise SystemExit("run.py: unknown workload '%s' (known: %s)" %
                                 (tok, ", ".join(w.name for w in wl_mod.WORKLOADS)))
    if args.callgrind is None:
        cg_names = wl_mod.CALLGRIND_QUICK if args.quick else wl_mod.CALLGRIND_FULL
        cg_names = [c for c in cg_names if wl_mod.BY_NAME[c] in wls]
    elif args.callgrind == "none":
        cg_names = []
    else:
        cg_names = [c for c in args.callgrind.split(",") if c]
        for c in cg_names:
            if c not in wl_mod.BY_NAME or wl_mod.BY_NAME[c].callgrind_args(1) is None:
                raise SystemExit("run.py: no callgrind run defined for '%s'" % c)
    cg_threads = parse_threads(args.callgrind_threads, n)[0] if args.callgrind_threads else n
    have_valgrind = subprocess.run(["sh", "-c", "command -v valgrind"], capture_output=True).returncode == 0

    # ---- the plan: repetitions outermost so every allocator sees the same machine state
    plan = []
    for r in range(0 if args.callgrind_only else repeat):
        for w in wls:
            if r > 0 and w.group == "footprint":
                continue
            tlist = [None] if w.trace else (fp_threads if w.group == "footprint" else threads)
            alist = main_allocs + (extra if w.group == "footprint" else [])
            for t in tlist:
                for a in alist:
                    plan.append(("run", w, a, t, r))
    for c in cg_names:
        for a in main_allocs:
            plan.append(("callgrind", wl_mod.BY_NAME[c], a, cg_threads, 0))

    def expected(kind, w, a):
        if not allocs[a].ok:
            return 0.0
        if kind == "callgrind":
            return 15.0 if not args.quick else 8.0
        return w.expected_seconds(mode, duration) + 0.3

    reuse = load_reusable(args.reuse_callgrind) if args.reuse_callgrind else {}
    total_expected = sum(0 if (k == "callgrind" and (w.name, a, t) in reuse) else expected(k, w, a)
                         for k, w, a, t, _ in plan)
    print("suite: %d runs (%d workloads, threads %s, allocators %s), about %s on this machine" % (
        len(plan), len(wls), ",".join(map(str, threads)), ",".join(main_allocs), fmt_secs(total_expected)),
        file=sys.stderr)
    for a in allocs.values():
        if not a.ok:
            print("suite: %s is %s: %s" % (a.name, a.state, a.reason), file=sys.stderr)
    if args.dry_run:
        for k, w, a, t, r in plan:
            print("%-9s %-15s %-12s threads=%s repeat=%d" % (k, w.name, a, t if t else "trace", r))
        return 0

    os.makedirs(os.path.join(out, "raw", "rss"), exist_ok=True)
    os.makedirs(os.path.join(out, "raw", "callgrind"), exist_ok=True)
    runs_path = os.path.join(out, "raw", "runs.jsonl")
    meta = {
        "label": args.label or ("QUICK" if args.quick else "full"),
        "mode": mode,
        "command": " ".join(shlex.quote(x) for x in [sys.argv[0]] + (argv if argv is not None else sys.argv[1:])),
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": machine_info(),
        "threads": threads, "footprint_threads": fp_threads, "callgrind_threads": cg_threads,
        "duration": duration, "repeat": repeat, "rss_hz": args.rss_hz, "lat_every": args.lat_every,
        "allocators": {k: v.as_dict() for k, v in allocs.items()},
        "main_allocators": main_allocs, "footprint_extra": extra,
        "workloads": [{"name": w.name, "group": w.group, "description": w.description, "paper": w.paper,
                       "steady": w.steady} for w in wls],
        "callgrind": cg_names, "have_valgrind": have_valgrind,
        "reused_callgrind": os.path.abspath(args.reuse_callgrind) if args.reuse_callgrind else None,
    }
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)

    prog = Progress(len(plan), total_expected)
    t_start = time.time()
    with open(runs_path, "w") as runs:
        for kind, w, a, t, r in plan:
            A = allocs[a]
            rec = {"kind": kind, "workload": w.name, "group": w.group, "allocator": a, "threads": t, "repeat": r}
            figure = ""
            if args.max_seconds and time.time() - t_start > args.max_seconds:
                rec.update(status="skipped", reason="time budget of %gs spent" % args.max_seconds)
            elif not A.ok:
                rec.update(status=A.state, reason=A.reason)
            elif w.trace and not os.path.exists(os.path.join(traces, w.trace)):
                rec.update(status="no trace", reason="%s missing: run make bench-traces" %
                           os.path.join(traces, w.trace))
            elif kind == "callgrind" and (w.name, a, t) in reuse:
                rec = dict(reuse[(w.name, a, t)], reused_from=os.path.abspath(args.reuse_callgrind))
                figure = "%.0f alloc instr/op (reused)" % rec["alloc_instr_per_op"]
            elif kind == "callgrind":
                rec.update(run_callgrind(w, A, t, bindir, traces, out, have_valgrind, args.timeout, args.cache_sim))
                if rec.get("status") == "ok":
                    figure = "%.0f alloc instr/op" % rec["alloc_instr_per_op"]
            else:
                rec.update(run_one(w, A, t, r, mode, duration, bindir, launcher, traces, out, args))
                if rec.get("status") == "ok":
                    figure = "%.2f Mops/s" % (rec["result"].get("ops_per_s", 0) / 1e6)
            if rec.get("status") != "ok":
                figure = rec.get("status", "?")
            runs.write(json.dumps(rec) + "\n")
            runs.flush()
            prog.show("%s %s t=%s %s" % (kind if kind != "run" else "", w.name, t if t else "trace", a),
                      figure, expected(kind, w, a))
    meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    meta["wall_s"] = round(time.time() - t_start, 1)
    meta["machine"]["loadavg_end"] = os.getloadavg()
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print("suite: raw results in %s (%s)" % (runs_path, fmt_secs(meta["wall_s"])), file=sys.stderr)
    if not args.no_report:
        import report
        report.write_report(out)
        print("suite: report %s" % os.path.join(out, "report.md"), file=sys.stderr)
        if args.publish:
            report.publish(out, args.publish)
            print("suite: published to %s" % args.publish, file=sys.stderr)
    return 0


def program_args(w, mode, t, duration, traces):
    a = w.args(mode, t, duration)
    if w.trace:
        a = ["--trace" if x == "--trace" else (os.path.join(traces, x) if x == w.trace else x) for x in a]
    return a


def run_one(w, A, t, r, mode, duration, bindir, launcher, traces, out, args):
    tag = "%s_%s_t%s_r%d" % (w.name, A.name, t if t else "trace", r)
    samples = os.path.join(out, "raw", "rss", tag + ".tsv")
    cmd = [launcher, "--rss-hz", "%g" % args.rss_hz, "--samples", samples, "--timeout", "%g" % args.timeout]
    if A.lib:
        cmd += ["--preload", A.lib]
    for k, v in A.env.items():
        cmd += ["--env", "%s=%s" % (k, v)]
    cmd += ["--", os.path.join(bindir, w.prog)] + program_args(w, mode, t, duration, traces) + [
        "--seed", str(1 + r), "--lat-every", str(args.lat_every)]
    rec = {"cmd": " ".join(shlex.quote(x) for x in cmd)}
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout + 60)
    except subprocess.TimeoutExpired:
        rec.update(status="timeout", reason="no answer after %gs" % (args.timeout + 60))
        return rec
    res = kv_line(p.stdout, "jwbench")
    mea = kv_line(p.stdout, "jwbench-run")
    rec["result"] = res or {}
    rec["measure"] = mea or {}
    # kept for allocator statistics printed at exit (e.g. JWMALLOC_STATS=1 set with --allocator)
    rec["stderr_tail"] = p.stderr[-4000:]
    err = p.stderr.strip().splitlines()
    if mea and mea.get("timed_out"):
        rec.update(status="timeout", reason="killed after %gs" % args.timeout)
    elif p.returncode != 0 or res is None:
        why = "exit %d" % p.returncode if p.returncode < 128 or not mea else "signal %d" % mea.get("signal", 0)
        if res and res.get("check") == "fail":
            why = "block check failed"
        rec.update(status="failed", reason="%s: %s" % (why, " | ".join(err[-3:])[:300]))
    else:
        rec["status"] = "ok"
    if os.path.exists(samples):
        rec["rss"] = rss.derive(samples, w.steady, mea or {})
    return rec


def load_reusable(d):
    """Callgrind records of a finished run in D, by (workload, allocator, threads); only successful
    ones, and never jwmalloc's (the library under test changes between runs)."""
    path = os.path.join(d, "raw", "runs.jsonl")
    if not os.path.exists(path):
        sys.exit("suite: --reuse-callgrind %s: no raw/runs.jsonl there" % d)
    out = {}
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if (rec.get("kind") == "callgrind" and rec.get("status") == "ok"
                    and not rec["allocator"].startswith("jwmalloc")):
                out[(rec["workload"], rec["allocator"], rec["threads"])] = rec
    return out


def run_callgrind(w, A, t, bindir, traces, out, have_valgrind, timeout, cache_sim=False):
    if not have_valgrind:
        return {"status": "no valgrind", "reason": "valgrind is not installed on this machine"}
    prefix = os.path.join(out, "raw", "callgrind", "%s_%s_t%d" % (w.name, A.name, t))
    for old in [p for p in os.listdir(os.path.dirname(prefix)) if p.startswith(os.path.basename(prefix) + ".")]:
        os.unlink(os.path.join(os.path.dirname(prefix), old))
    a = w.callgrind_args(t)
    if w.trace:
        a = [os.path.join(traces, x) if x == w.trace else x for x in a]
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=%s.%%p" % prefix, "--separate-threads=yes",
           "--compress-strings=no", "--compress-pos=no"] + (["--cache-sim=yes"] if cache_sim else []) + \
        [os.path.join(bindir, w.prog)] + a + ["--lat-every", "0"]
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if A.lib:
        env["LD_PRELOAD"] = A.lib
    env.update(A.env)
    rec = {"cmd": ("LD_PRELOAD=%s " % A.lib if A.lib else "") + " ".join(shlex.quote(x) for x in cmd)}
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout * 4, env=env)
    except subprocess.TimeoutExpired:
        rec.update(status="timeout", reason="callgrind run over %gs" % (timeout * 4))
        return rec
    res = kv_line(p.stdout, "jwbench")
    if p.returncode != 0 or res is None:
        tail = [ln for ln in p.stderr.splitlines() if not ln.startswith("==")][-2:]
        rec.update(status="failed", reason="under valgrind: exit %d: %s" % (p.returncode, " | ".join(tail)[:300]))
        return rec
    att = callgrind.attribute(prefix + ".")
    for f in os.listdir(os.path.dirname(prefix)):
        if f.startswith(os.path.basename(prefix) + "."):
            os.unlink(os.path.join(os.path.dirname(prefix), f))
    if not att.get("ok"):
        rec.update(status="failed", reason=att.get("reason", "attribution failed"))
        return rec
    ops = res.get("ops", 0) or 1
    rec.update(status="ok", result=res, instr=att, alloc_instr_per_op=att["allocator"] / ops,
               workload_instr_per_op=att["workload"] / ops)
    if att.get("allocator_cache"):
        rec["alloc_cache_per_op"] = {k: v / ops for k, v in att["allocator_cache"].items()}
    return rec


if __name__ == "__main__":
    sys.exit(main())
