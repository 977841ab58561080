#!/usr/bin/env python3
"""Preemption injection: what a paused thread costs the others (docs/design/bench.md, "Preemption injection").

Runs suite workloads (default rptest-16k and xmalloc) at --threads (default
20: 10 per core on 2 cores) under every allocator, interleaved run by run, in
three modes: no pauses; a pause every --pause-every us of a random worker (a
signal whose handler sleeps --pause-ms); the same pauses taken inside the
allocator's lock-holding sections (jwmalloc: its test-hooks library
libjwmalloc_hooks.so; the peers: the pause shim libjwb_pause.so preloaded
before them, which reaches pthread_mutex_lock/trylock). Every call is timed;
calls slower than half a pause on threads other than the paused one are
counted, per million calls. What the pauses cost the others is the count
beyond the run without pauses. Raw runs go to OUT/raw/preempt.jsonl (--append
adds repetitions to them), the report to OUT/report.md with a PNG.
make bench-preempt [PREEMPT_ARGS=...].
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import allocators  # noqa: E402
import interleave  # noqa: E402
import plots  # noqa: E402
import workloads as wl_mod  # noqa: E402

MODES = ("none", "random", "section")


def alloc_list(a):
    """The allocators, jwmalloc as its test-hooks library, every peer behind the shim."""
    lib = os.path.join(a.build, "lib", "libjwmalloc_hooks.so")
    try:
        out = [allocators.resolve(n, lib) for n in a.allocators.split(",") if n]
    except KeyError as e:
        sys.exit("preempt.py: unknown allocator %s (known: jwmalloc, %s)" % (e, ", ".join(allocators.PEERS)))
    return out


def command(a, w, mode, r):
    W = wl_mod.BY_NAME[w]
    return [os.path.join(a.build, "bin", W.prog)] + W.args("full", a.threads, a.duration) + [
        "--seed", str(r + 1), "--lat-every", "1", "--lat-slow", str(int(a.pause_ms * 1e6 / 2)),
        "--pause", mode, "--pause-every", str(a.pause_every), "--pause-ms", "%g" % a.pause_ms]


def measure(a, allocs):
    shim = os.path.join(a.build, "lib", "libjwb_pause.so")
    if not os.access(shim, os.R_OK):
        sys.exit("preempt.py: %s not built (make build)" % shim)
    works = [w for w in a.workloads.split(",") if w]
    for w in works:
        if w not in wl_mod.BY_NAME or wl_mod.BY_NAME[w].group != "throughput":
            sys.exit("preempt.py: %s is not a throughput workload of the suite" % w)
    modes = [m for m in a.modes.split(",") if m]
    for m in modes:
        if m not in MODES:
            sys.exit("preempt.py: unknown mode %s (none, random, section)" % m)
    by_name = {A.name: A for A in allocs}
    raw = os.path.join(a.out, "raw", "preempt.jsonl")
    os.makedirs(os.path.dirname(raw), exist_ok=True)
    old = load(raw) if a.append else []
    first = 1 + max([x["repeat"] for x in old] or [0])
    f = open(raw, "a" if a.append else "w")

    def run_cell(cell, r):
        w, name, mode = cell
        A = by_name[name]
        pre = [] if name.startswith("jwmalloc") else [shim]  # jwmalloc's hooks are its own
        env = interleave.env_for(A, pre)
        res = interleave.run(command(a, w, mode, first - 1 + r), env, "preempt.py: %s %s under %s" % (w, mode, name))
        rec = {"workload": w, "allocator": name, "mode": mode, "repeat": first + r, "threads": a.threads,
               "preload": env.get("LD_PRELOAD", ""), "result": res}
        f.write(json.dumps(rec) + "\n")
        f.flush()
        return rec

    # Section mode only where a hook reaches a section: elsewhere it would be
    # the run without pauses again. A short probe without pauses decides.
    reach = {}
    for w in works:
        for A in allocs:
            if A.ok:
                pre = [] if A.name.startswith("jwmalloc") else [shim]
                probe = command(a, w, "none", 0)
                probe[probe.index("--duration") + 1] = "0.2"
                r = interleave.run(probe, interleave.env_for(A, pre), "preempt.py: probe %s under %s" % (w, A.name))
                reach[(w, A.name)] = int(r.get("hook_calls", 0)) > 0
    cells = [(w, A.name, m) for w in works for A in allocs if A.ok for m in modes
             if m != "section" or reach[(w, A.name)]]
    interleave.interleaved(cells, a.repeat, run_cell, "preempt")
    f.close()


def load(path):
    with open(path) as f:
        return [json.loads(x) for x in f if x.strip()]


def num(r, k):
    return int(r["result"].get(k, 0))


def slow_pm(r):
    return interleave.per_million(num(r, "lat_slow"), num(r, "lat_samples"))


def med(xs):
    return statistics.median(xs) if xs else None


def fmt_range(xs, f="%.1f"):
    if not xs:
        return "-"
    return (f + " [" + f + "-" + f + "]") % (med(xs), min(xs), max(xs)) if len(xs) > 1 else f % xs[0]


def hook_kinds(r, key):
    v = r["result"].get(key, "none")
    return "-" if v == "none" else v.replace(",", ", ")


def write_report(a, allocs, runs):
    out = a.out
    works = []
    for r in runs:
        if r["workload"] not in works:
            works.append(r["workload"])
    names = [A.name for A in allocs]
    d = runs[0]["result"] if runs else {}
    nrep = sorted({len([x for x in runs if (x["workload"], x["allocator"], x["mode"]) == c])
                   for c in {(x["workload"], x["allocator"], x["mode"]) for x in runs}})
    lines = ["# Preemption injection", "",
             "What a paused thread costs the others (docs/design/bench.md, \"Preemption injection\"). %s worker "
             "threads; a pause of %s ms every %s us on average; every allocator call timed; a call is *slow* when "
             "it takes longer than half a pause (%s ns) and is not the paused thread's own. Modes: *none* (no "
             "pauses), *random* (a signal to a random worker, whose handler sleeps), *section* (the next thread "
             "to enter one of the allocator's lock-holding sections sleeps there, holding the lock; run only "
             "where a hook reaches a section). Each cell: median [min-max] over %s interleaved runs." % (
                 d.get("threads", a.threads), d.get("pause_ms", a.pause_ms), d.get("pause_every_us", a.pause_every),
                 d.get("lat_slow_ns", "?"), "/".join(map(str, nrep)) or "0"),
             "",
             "jwmalloc runs as its test-hooks library (`build/lib/libjwmalloc_hooks.so`: the release sources with "
             "the lock hooks compiled in) in every mode; every peer runs behind the pause shim "
             "(`build/lib/libjwb_pause.so`) in every mode, so each allocator is compared with itself under the "
             "same instrumentation. *sections/s*: entries into the sections a hook reaches, per second (mode "
             "none); *beyond none*: the median's difference to mode none's median.", ""]
    if a.command:
        lines += ["Commands:", ""] + ["    " + c for c in a.command] + [""]
    for A in allocs:
        if not A.ok:
            lines.append("- %s: %s (%s)" % (A.name, A.state, A.reason))
    lines.append("")
    diffs = {}
    for w in works:
        lines += ["## %s, %s threads" % (w, d.get("threads", a.threads)), "",
                  "| allocator | sections/s | sections entered, first run (none) | mode | pauses/s | pauses by section, first run | "
                  "slow / M calls | slow per run | beyond none / M | own pause / M | floor slow / M | M calls/s |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for name in names:
            rs = [r for r in runs if r["workload"] == w and r["allocator"] == name]
            if not rs:
                continue
            base = [slow_pm(r) for r in rs if r["mode"] == "none"]
            first = True
            for m in MODES:
                ms = [r for r in rs if r["mode"] == m]
                if not ms:
                    if m == "section":
                        lines.append("| | | | section | not run: no section reached | | | | | | | |")
                    continue
                el = [float(r["result"]["elapsed_s"]) or 1 for r in ms]
                slows = [slow_pm(r) for r in ms]
                beyond = (med(slows) - med(base)) if base and m != "none" else None
                if beyond is not None:
                    diffs[(w, name, m)] = beyond
                lines.append("| %s | %s | %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %.1f |" % (
                    name if first else "",
                    "%.0f" % med([num(r, "hook_calls") / e for r, e in zip(ms, el)]) if m == "none" else "",
                    hook_kinds(ms[0], "hooks") if m == "none" else "",
                    m, med([num(r, "pauses") / e for r, e in zip(ms, el)]),
                    hook_kinds(ms[0], "hook_pauses") if m == "section" else "",
                    fmt_range(slows), fmt_range([num(r, "lat_slow") for r in ms], "%.0f"),
                    "%+.1f" % beyond if beyond is not None else "",
                    fmt_range([interleave.per_million(num(r, "lat_slow_own"), num(r, "lat_samples")) for r in ms]),
                    fmt_range([interleave.per_million(num(r, "floor_slow"), num(r, "lat_samples")) for r in ms]),
                    med([float(r["result"]["ops_per_s"]) for r in ms]) / 1e6))
                first = False
        lines.append("")
        png = plots.bars(out, "preempt-" + w, "%s, %s threads: slow calls beyond the run without pauses" % (
            w, d.get("threads", a.threads)), "slow calls per million, beyond none (median)", names,
            ["random", "section"], {(n, m): diffs.get((w, n, m)) for n in names for m in ("random", "section")},
            ymin="*")
        lines += (["![slow calls beyond none, %s](%s)" % (w, png), ""] if png else
                  ["(no plot: gnuplot missing or failed)", ""])
    lines += target_lines(runs, works)
    if a.notes:
        with open(a.notes) as f:
            lines += [f.read().rstrip("\n"), ""]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(text)
    return text


def target_lines(runs, works):
    """The issue's target: with pauses inside jwmalloc's sections, no call on
    another thread slower than half a pause beyond the run without pauses."""
    out = ["## Target", ""]
    for w in works:
        rs = [r for r in runs if r["workload"] == w and r["allocator"] == "jwmalloc"]
        base = [num(r, "lat_slow") for r in rs if r["mode"] == "none"]
        sec = [num(r, "lat_slow") for r in rs if r["mode"] == "section"]
        paused = [num(r, "pauses") for r in rs if r["mode"] == "section"]
        if not base or not sec:
            out.append("- %s: jwmalloc not measured in both modes." % w)
            continue
        ok = med(sec) <= max(base)
        out.append("- %s: jwmalloc, slow calls per run with pauses in its sections %s (median %g, %g pauses per "
                   "run) against %s without pauses: %s." % (
                       w, sec, med(sec), med(paused), base,
                       "met (the median is within the runs without pauses)" if ok else
                       "**not met** (the median is above every run without pauses)"))
    return out + [""]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--allocators", default=",".join(allocators.DEFAULT))
    ap.add_argument("--workloads", default="rptest-16k,xmalloc", help="throughput workloads of the suite")
    ap.add_argument("--threads", type=int, default=20)
    ap.add_argument("--duration", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--pause-every", type=int, default=500, help="microseconds between pauses (default 500)")
    ap.add_argument("--pause-ms", type=float, default=2.0, help="length of a pause (default 2)")
    ap.add_argument("--out", default=None, help="results folder (default BUILD/bench-preempt)")
    ap.add_argument("--append", action="store_true", help="add repetitions to the raw runs already in OUT")
    ap.add_argument("--report-only", action="store_true", help="write the report from OUT's raw runs")
    ap.add_argument("--publish", help="copy the report and its plots to this folder")
    ap.add_argument("--notes", help="a Markdown file appended to the report (the analysis)")
    ap.add_argument("--command", action="append", default=[], help="a command line quoted in the report")
    a = ap.parse_args(argv)
    if a.repeat < 1 or a.threads < 2 or a.duration <= 0 or a.pause_every < 10 or a.pause_ms <= 0:
        sys.exit("preempt.py: --repeat >= 1, --threads >= 2, --duration > 0, --pause-every >= 10, --pause-ms > 0")
    a.out = a.out or os.path.join(a.build, "bench-preempt")
    allocs = alloc_list(a)
    if not a.report_only:
        measure(a, allocs)
    runs = load(os.path.join(a.out, "raw", "preempt.jsonl"))
    text = write_report(a, allocs, runs)
    print(text)
    if a.publish:
        os.makedirs(a.publish, exist_ok=True)
        for n in os.listdir(a.out):
            if n == "report.md" or n.endswith(".png"):
                with open(os.path.join(a.out, n), "rb") as src, open(os.path.join(a.publish, n), "wb") as dst:
                    dst.write(src.read())
        print("published: %s" % a.publish, file=sys.stderr)


if __name__ == "__main__":
    main()
