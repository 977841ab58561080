#!/usr/bin/env python3
"""The harness's own cost per call against the allocators' (docs/design/bench.md, "Harness cost").

Reads runs of the suite's throughput workloads made by run.py with the null
allocator among the allocators (--allocator null=BUILD/lib/libjwb_null.so),
from one or more run.py folders (--runs, e.g. one per quiet session, so that
repetitions can be split), and optionally run.py's callgrind records
(--callgrind DIR) and outputs of the public programs' compare.sh (--public
FILE...). Writes OUT/report.md and a PNG:

- per workload and thread count, the time per call under the null allocator
  (the harness plus about 25 instructions of allocator) as a share of the
  fastest peer's time per call (target: under 10%);
- the instructions per call of the harness, of the null allocator and of the
  fastest peer (callgrind, deterministic);
- whether the suite ranks the allocators as the public programs do;
- with --perf-measure, where the time goes: perf's cpu-clock samples of one
  run per workload, thread count and allocator (and, with --public-bin, of
  the public programs), split by the object they fall in: the workload
  program (the harness and the workload's own request generation), the vDSO
  (the harness's timer reads), the allocator's library, the kernel, libc.
Time per call = the cores the threads can use x wall time / calls.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import allocators  # noqa: E402
import interleave  # noqa: E402
import plots  # noqa: E402
import workloads as wl_mod  # noqa: E402

PEERS = ["glibc", "jemalloc", "mimalloc", "tcmalloc", "scudo"]
# The suite's workload at a thread count, and the public program it follows
# (compare.sh's names).
PUBLIC = [("larson", 2, "larson-2T"), ("rptest-16k", 2, "rptest-2T"), ("rptest-16k", 20, "rptest-20T"),
          ("xmalloc", 2, "xmalloc-test-2T"), ("xmalloc", 20, "xmalloc-test-20T"), ("mstress", 2, "mstress-2T"),
          ("mstress", 20, "mstress-20T"), ("mleak", 2, "mleak")]
SHORT = {"jw": "jwmalloc", "mi": "mimalloc", "tc": "tcmalloc", "je": "jemalloc", "sys": "glibc"}


# compare.sh's programs and arguments, for --public-bin.
PUBLIC_ARGS = {"larson-2T": ("larson", "5 8 1000 5000 100 4141 2"),
               "rptest-2T": ("rptest", "2 0 1 2 500 1000 100 8 16000"),
               "xmalloc-test-2T": ("xmalloc-test", "-w 2 -t 5 -s 64"), "mstress-2T": ("mstress", "2 200 200")}


def perf_split(cmd, env, prog, alloc_lib, cwd=None, timeout=300):
    """Runs cmd under perf record (cpu-clock samples) and returns the share
    of samples per part: workload, timer, allocator, kernel, libc, other."""
    data = os.path.join(os.environ.get("TMPDIR", "/tmp"), "jwb-perf-%d.data" % os.getpid())
    p = subprocess.run(["perf", "record", "-q", "-F", "1999", "-e", "cpu-clock", "-o", data, "--"] + cmd,
                       env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        sys.exit("harness_cost.py: perf record %s failed (exit %d): %s" % (
            " ".join(cmd), p.returncode, (p.stderr.strip().splitlines() or [""])[-1]))
    rep = subprocess.run(["perf", "report", "-i", data, "--sort", "dso", "--stdio", "-q"], capture_output=True,
                         text=True, timeout=120).stdout
    os.unlink(data)
    parts = {}
    stem = os.path.basename(alloc_lib).split(".so")[0] if alloc_lib else "libc"
    for line in rep.splitlines():
        m = re.match(r"\s*([0-9.]+)%\s+(\S+)", line)
        if not m:
            continue
        share, dso = float(m.group(1)), m.group(2)
        if dso == os.path.basename(prog):
            k = "workload"
        elif dso == "[vdso]":
            k = "timer"
        elif dso.startswith(stem):
            k = "allocator"
        elif dso.startswith("[kernel"):
            k = "kernel"
        elif dso.startswith("libc.so"):
            k = "libc"
        else:
            k = "other"
        parts[k] = parts.get(k, 0.0) + share
    return parts, p.stdout


def perf_measure(a):
    """One perf run per (workload, threads, allocator), interleaved; and the
    public programs under each allocator when --public-bin is given."""
    lib = os.path.join(a.build, "lib", "libjwmalloc.so")
    custom = {"null": (os.path.abspath(os.path.join(a.build, "lib", "libjwb_null.so")), {})}
    allocs = [allocators.resolve(n, lib, custom=custom) for n in a.allocators.split(",") if n]
    os.makedirs(os.path.join(a.out, "raw"), exist_ok=True)
    out = open(os.path.join(a.out, "raw", "perf.jsonl"), "w")
    threads = [int(t) for t in a.threads.split(",") if t]
    cells = [(w, t, A.name) for w in a.workloads.split(",") if w for t in threads for A in allocs if A.ok]
    by = {A.name: A for A in allocs}

    def run_cell(cell, r):
        w, t, name = cell
        W = wl_mod.BY_NAME[w]
        prog = os.path.join(a.build, "bin", W.prog)
        cmd = [prog] + W.args("full", t, a.duration) + ["--seed", str(r + 1)]
        parts, stdout = perf_split(cmd, interleave.env_for(by[name]), prog, by[name].lib)
        res = interleave.kv(interleave.result_line(stdout) or "")
        rec = {"kind": "suite", "workload": w, "threads": t, "allocator": name, "parts": parts,
               "ops_per_s": float(res.get("ops_per_s", 0))}
        out.write(json.dumps(rec) + "\n")
        return rec

    interleave.interleaved(cells, 1, run_cell, "perf")
    if a.public_bin:
        pcells = [(prog, A.name) for prog in PUBLIC_ARGS for A in allocs if A.ok]

        def run_public(cell, r):
            prog, name = cell
            exe, args = PUBLIC_ARGS[prog]
            path = os.path.join(a.public_bin, exe)
            parts, _ = perf_split([path] + args.split(), interleave.env_for(by[name]), path, by[name].lib,
                                  cwd=a.public_bin)
            rec = {"kind": "public", "workload": prog, "threads": 2, "allocator": name, "parts": parts}
            out.write(json.dumps(rec) + "\n")
            return rec

        interleave.interleaved(pcells, 1, run_public, "perf public")
    out.close()


def perf_lines(path):
    recs = [json.loads(x) for x in open(path) if x.strip()]
    lines = ["## Where the time goes (perf)", "",
             "Shares of perf's cpu-clock samples (`perf record -e cpu-clock`, about 2,000 a second; this machine "
             "has no hardware counters) in one run per cell: *program*: the workload program (the harness and "
             "the workload's own request generation: for a public program, the whole program); *timer*: the "
             "vDSO, i.e. the harness's clock reads (one timed call in 32, and the floor's two reads); "
             "*allocator*: the allocator's library (glibc's malloc lies in libc: its share is in the libc "
             "column); *kernel*: system calls, page faults, thread creation, scheduling.", "",
             "| program | threads | allocator | program % | timer % | allocator % | libc % | kernel % | other % |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in recs:
        p = r["parts"]
        lines.append("| %s%s | %d | %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |" % (
            r["workload"], " (public)" if r["kind"] == "public" else "", r["threads"], r["allocator"],
            p.get("workload", 0), p.get("timer", 0), p.get("allocator", 0), p.get("libc", 0), p.get("kernel", 0),
            p.get("other", 0)))
    return lines + [""]


def load_runs(dirs):
    """The runs of every folder, each tagged with its folder's number
    (`session`: the allocators are interleaved within one)."""
    runs, meta = [], None
    for i, d in enumerate(dirs):
        with open(os.path.join(d, "raw", "runs.jsonl")) as f:
            runs += [dict(json.loads(x), session=i) for x in f if x.strip()]
        with open(os.path.join(d, "meta.json")) as f:
            meta = meta or json.load(f)
    return runs, meta


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def public_figures(files):
    """{program: {allocator: [medians, one per file]}} from compare.sh outputs."""
    out = {}
    for path in files:
        with open(path) as f:
            for line in f:
                parts = line.split("|")[0].split()
                if len(parts) < 2 or "=" not in parts[1]:
                    continue
                for tok in parts[1:]:
                    k, v = tok.split("=", 1)
                    try:
                        out.setdefault(parts[0], {}).setdefault(SHORT.get(k, k), []).append(float(v))
                    except ValueError:
                        pass
    return out


def order(vals):
    return [a for a, _ in sorted(vals.items(), key=lambda kv: -kv[1])]


def kendall(o1, o2):
    common = [a for a in o1 if a in o2]
    agree = total = 0
    for i in range(len(common)):
        for j in range(i + 1, len(common)):
            total += 1
            a, b = common[i], common[j]
            agree += 1 if (o2.index(a) < o2.index(b)) else -1
    return agree / total if total else None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", nargs="*", default=[], help="run.py result folders (with the null allocator)")
    ap.add_argument("--perf-measure", action="store_true", help="measure the perf split into OUT/raw/perf.jsonl")
    ap.add_argument("--build", default="build")
    ap.add_argument("--allocators", default="null,glibc,jemalloc,mimalloc,tcmalloc,scudo,jwmalloc")
    ap.add_argument("--workloads", default="rptest-16k,xmalloc,mstress,larson,reformat")
    ap.add_argument("--threads", default="2,20")
    ap.add_argument("--duration", type=float, default=1.0)
    ap.add_argument("--public-bin", help="the public programs built by build.sh (perf of them too)")
    ap.add_argument("--callgrind", help="a run.py folder with callgrind records (null and peers)")
    ap.add_argument("--public", nargs="*", default=[], help="compare.sh outputs (one per repetition or session)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--command", action="append", default=[], help="a command line to quote in the report")
    ap.add_argument("--notes", help="a Markdown file appended to the report (the analysis)")
    a = ap.parse_args(argv)
    if a.perf_measure:
        if subprocess.run(["sh", "-c", "command -v perf"], capture_output=True).returncode == 0:
            perf_measure(a)
        else:
            print("harness_cost.py: perf is not installed: no split of the time", file=sys.stderr)
    if not a.runs:
        if not a.perf_measure:
            sys.exit("harness_cost.py: --runs or --perf-measure")
        return
    runs, meta = load_runs(a.runs)
    ncores = meta["machine"]["ncores"]
    ok = [r for r in runs if r.get("kind") == "run" and r.get("status") == "ok"]
    works, threads = [], []
    for r in ok:
        if r["workload"] not in works:
            works.append(r["workload"])
        if r["threads"] not in threads:
            threads.append(r["threads"])
    threads.sort()

    def ops(w, t, alloc, session=None):
        return med([r["result"].get("ops_per_s") for r in ok if r["workload"] == w and r["threads"] == t and
                    r["allocator"] == alloc and session in (None, r["session"])])

    sessions = sorted({r["session"] for r in ok})

    def share_range(w, t, best):
        """The null allocator's time per call / best's, per session (interleaved runs): median, min, max."""
        xs = []
        for sn in sessions:
            n, b = ops(w, t, "null", sn), ops(w, t, best, sn)
            if n and b:
                xs.append(b / n)
        return (med(xs), min(xs), max(xs)) if xs else (None, None, None)

    def reps(w, t, alloc):
        return len([r for r in ok if r["workload"] == w and r["threads"] == t and r["allocator"] == alloc])

    lines = ["# Harness cost", "",
             "The suite's own work per allocator call (random requests, block tags written and checked, counters, "
             "one timed call in 32) against the allocators' (docs/design/bench.md, \"Harness cost\"), measured "
             "with the null allocator (`build/lib/libjwb_null.so`: per-thread LIFO lists per power-of-two class, "
             "about 25 instructions per call) through the same launcher, LD_PRELOAD and harness as every "
             "allocator. Time per call: cores the threads can use (%d here) x wall time / calls (medians of %s "
             "runs, one per session); *fastest peer*: by the medians (peers: %s); *share* = the null allocator's "
             "time per call / the fastest peer's, computed within each session (its allocators interleaved run by "
             "run) and given as the median [min-max] over the sessions. Target: under 10%%."
             % (ncores, ", ".join(sorted({str(reps(w, t, "null")) for w in works for t in threads})),
                ", ".join(PEERS)),
             "", "Commands:", ""] + ["    " + c for c in a.command] + [""]
    perf_path = os.path.join(a.out, "raw", "perf.jsonl")
    perf = {}
    if os.path.exists(perf_path):
        for x in open(perf_path):
            if x.strip():
                r = json.loads(x)
                if r["kind"] == "suite":
                    perf[(r["workload"], r["threads"], r["allocator"])] = r["parts"]
    lines += ["*perf*: the share of the run's time in the workload program and the timer under that fastest "
              "peer (see \"Where the time goes\"): the harness's and the workload's own work, measured directly.",
              "", "| workload | threads | null ns/call | fastest peer | its ns/call | share | perf: program + timer | "
              "jwmalloc ns/call | within 10% |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    shares = {}
    for w in works:
        for t in threads:
            n = ops(w, t, "null")
            peers = {p: ops(w, t, p) for p in PEERS if ops(w, t, p)}
            if not n or not peers:
                continue
            best = max(peers, key=peers.get)
            ns = lambda x: min(t, ncores) * 1e9 / x  # noqa: E731
            share, lo, hi = share_range(w, t, best)
            if share is None:
                continue
            shares[(w, "%d threads" % t)] = 100 * share
            jw = ops(w, t, "jwmalloc")
            pp = perf.get((w, t, best))
            lines.append("| %s | %d | %.1f | %s | %.1f | %.0f%% [%.0f-%.0f] | %s | %s | %s |" % (
                w, t, ns(n), best, ns(peers[best]), 100 * share, 100 * lo, 100 * hi,
                "%.0f%%" % (pp.get("workload", 0) + pp.get("timer", 0)) if pp else "-",
                "%.1f" % ns(jw) if jw else "-", "yes" if share < 0.10 else "**no**"))
    lines.append("")
    png = plots.bars(a.out, "harness-share", "Harness cost: null allocator's time per call / fastest peer's",
                     "percent", works, ["%d threads" % t for t in threads], shares, ref_line=10)
    lines += (["![harness share](%s)" % png, ""] if png else ["(no plot: gnuplot missing or failed)", ""])

    if a.callgrind:
        cg, _ = load_runs([a.callgrind])
        cg = [r for r in cg if r.get("kind") == "callgrind" and r.get("status") == "ok"]
        lines += ["## Instructions per call (callgrind)", "",
                  "Deterministic counts at %s threads (run.py's callgrind runs, a fixed amount of work): the "
                  "harness's (everything but the allocator), the null allocator's, the fewest of a peer's." %
                  ", ".join(sorted({str(r["threads"]) for r in cg})), "",
                  "| workload | harness | null allocator | fewest peer | its instructions | harness / fewest peer |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for w in works:
            rs = {r["allocator"]: r for r in cg if r["workload"] == w}
            if "null" not in rs:
                continue
            peers = {p: rs[p]["alloc_instr_per_op"] for p in PEERS if p in rs}
            if not peers:
                continue
            best = min(peers, key=peers.get)
            h = rs["null"]["workload_instr_per_op"]
            lines.append("| %s | %.0f | %.0f | %s | %.0f | %.0f%% |" % (
                w, h, rs["null"]["alloc_instr_per_op"], best, peers[best], 100 * h / peers[best]))
        lines.append("")

    if a.public:
        pub = public_figures(a.public)
        lines += ["## Ranking against the public programs", "",
                  "The allocators ordered by the suite's throughput and by the public program's own figure "
                  "(compare.sh, medians over %d outputs), best first; tau: Kendall's rank agreement (1: the same "
                  "order)." % len(a.public), "",
                  "| public program | suite workload | public order | suite order | same best | tau |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for w, t, prog in PUBLIC:
            if prog not in pub:
                continue
            pv = {k: med(v) for k, v in pub[prog].items() if med(v)}
            sv = {k: ops(w, t, k) for k in pv if ops(w, t, k)}
            if not sv:
                continue
            po, so = order(pv), order(sv)
            tau = kendall(po, so)
            lines.append("| %s | %s, %d threads | %s | %s | %s | %s |" % (
                prog, w, t, " > ".join(po), " > ".join(so), "yes" if po[0] == so[0] else "**no**",
                "%.2f" % tau if tau is not None else "-"))
        lines.append("")
    if os.path.exists(perf_path):
        lines += perf_lines(perf_path)
    if a.notes:
        with open(a.notes) as f:
            lines += [f.read().rstrip("\n"), ""]
    text = "\n".join(lines) + "\n"
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "report.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
