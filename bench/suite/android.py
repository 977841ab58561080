#!/usr/bin/env python3
"""Android's trace replay for every allocator (docs/design/bench.md, "Android's
traces"; make bench-android).

  bench/suite/android.py --build BUILD [--trace ZIP_OR_TXT] [--repeat 3]
                         [--allocators a,b,...] [--out DIR] [--publish DIR]
                         [--notes FILE] [--report-only]

Runs jwb-android-replay on the trace under every allocator, the allocators
interleaved within each repetition (run k of every allocator, then run k+1),
and reports per allocator the medians of the repetitions: ns per call (the
calls alone; and with each new block made resident, as memory_replay times
it), peak and final RSS and peak virtual address space above the process at
the first call. jwmalloc runs in its default and its low-memory configuration
(JWMALLOC_LOW_MEMORY=1). Raw results (one line per run, the RSS series) go to
--out; --publish writes report.md and the PNGs of RSS and virtual size over the
calls there, with the issue's targets checked against the medians and the text
of --notes appended; --report-only rewrites it from the runs in --out. Run it on
a quiet machine: the times are only comparable within one session.
"""
import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import allocators  # noqa: E402
import plots  # noqa: E402

DEFAULT = ["jwmalloc", "jwmalloc-low", "glibc", "jemalloc", "mimalloc", "tcmalloc", "scudo"]
LOW = {"JWMALLOC_LOW_MEMORY": "1"}
MB = 1e6


def resolve(name, build):
    lib = os.path.join(build, "lib", "libjwmalloc.so")
    if name == "jwmalloc-low":
        a = allocators.resolve("jwmalloc", lib)
        a.name, a.env = name, dict(a.env, **LOW)
        a.description = "jwmalloc, JWMALLOC_LOW_MEMORY=1"
        return a
    return allocators.resolve(name, lib)


def kv(line):
    return dict(t.split("=", 1) for t in line.split()[1:] if "=" in t)


def run_one(build, alloc, trace, series):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    for k in list(env):
        if k.startswith("JWMALLOC_"):
            del env[k]
    env.update({k: v for k, v in alloc.env.items() if not k.startswith("JWMALLOC_STATS")})
    if alloc.lib:
        env["LD_PRELOAD"] = alloc.lib
    cmd = [os.path.join(build, "bin", "jwb-android-replay"), "--trace", trace, "--series", series]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    line = next((l for l in p.stdout.splitlines() if l.startswith("jwbench ")), None)
    if p.returncode != 0 or line is None:
        raise RuntimeError("%s: exit %d: %s" % (alloc.name, p.returncode, p.stderr.strip()[-400:]))
    return kv(line)


def load_series(path):
    pts = []
    with open(path) as f:
        for l in f:
            if l[:1].isdigit():
                c, r, v = l.split()
                pts.append((int(c), int(r), int(v)))
    return pts


FIELDS = [("ns_per_call", "ns/call"), ("ns_per_call_touch", "ns/call with the touch"),
          ("rss_peak", "peak RSS"), ("rss_final", "final RSS"), ("vsz_peak", "peak virtual")]


def med(runs, key):
    return statistics.median(float(r[key]) for r in runs)


def fmt(key, v):
    return "%.1f" % v if key.startswith("ns") else "%.1f MB" % (v / MB)


JW = ("jwmalloc", "jwmalloc-low")


def targets(allocs, res):
    """Issue 27's targets, from the medians above: the default configuration
    at least as fast as the best peer and its peak RSS at most the lowest
    peer's; the low-memory one's RSS (peak and final) below every peer's."""
    peers = [a.name for a in allocs if a.name not in JW and res.get(a.name)]
    if not peers:
        return []
    m = {n: {k: med(res[n], k) for k, _ in FIELDS} for n in res if res[n]}
    fast = min(peers, key=lambda n: m[n]["ns_per_call"])
    rows = []

    def row(what, mine, key, peer, better):
        if mine not in m:
            return
        v, p = m[mine][key], m[peer][key]
        ok = v < p if better == "below" else v <= p
        rows.append("| %s | %s | %s (%s) | %.2fx | %s |" % (
            what, fmt(key, v), fmt(key, p), peer, v / p, "met" if ok else "**missed**"))
    row("jwmalloc ns/call, at most the fastest peer's", "jwmalloc", "ns_per_call", fast, "at most")
    for key, label in (("rss_peak", "peak RSS"), ("rss_final", "final RSS")):
        low = min(peers, key=lambda n: m[n][key])
        if key == "rss_peak":
            row("jwmalloc %s, at most the lowest peer's" % label, "jwmalloc", key, low, "at most")
        row("jwmalloc-low %s, below every peer's" % label, "jwmalloc-low", key, low, "below")
    if not rows:
        return []
    return ["", "Targets (issue 27), from the medians above:", "",
            "| target | jwmalloc | the peer it is held to | ratio | |", "| --- | --- | --- | --- | --- |"] + rows


def report(pub, trace, allocs, res, series, repeat, notes=None):
    os.makedirs(pub, exist_ok=True)
    ok = [a for a in allocs if res.get(a.name)]
    r0 = res[ok[0].name][0]
    doc = ["# Android's trace replay: %s" % os.path.basename(trace), "",
           "Generated by `make bench-android` (`bench/suite/android.py`; replayer `bench/trace/android_replay.c`,",
           "design in `docs/design/bench.md`, \"Android's traces\"). %s lines, %s calls by %s threads (%s unmatched "
           "frees or reallocs skipped). Each allocator %d times, the allocators interleaved in each repetition; "
           "medians. Every call runs on its trace thread, in trace order (a thread runs its line once the previous "
           "line is done); every new block has one byte written in each 64-byte line. ns/call: the allocator calls "
           "alone, the timer's floor (%s ns) subtracted; with the touch: as memory_replay times them. RSS and "
           "virtual size: bytes above the process at the first call (trace decoded, tables resident); peak RSS "
           "is the kernel's VmHWM; peak virtual size sampled every 1,000 calls." % (
               r0["lines"], r0["calls"], r0["trace_threads"], r0["unmatched"], repeat, r0["timer_floor_ns"]), "",
           "| allocator | ns/call | ns/call with the touch | peak RSS | final RSS | peak virtual | runs (ns/call; peak RSS MB) |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for a in allocs:
        runs = res.get(a.name)
        if not runs:
            doc.append("| %s | %s | | | | | |" % (a.name, a.state if not a.ok else "failed"))
            continue
        cells = [fmt(k, med(runs, k)) for k, _ in FIELDS]
        spread = "; ".join("%.1f, %.1f" % (float(r["ns_per_call"]), float(r["rss_peak"]) / MB) for r in runs)
        doc.append("| %s | %s | %s |" % (a.name, " | ".join(cells), spread))
    doc += targets(allocs, res)
    doc += ["", "Allocators: " + "; ".join("%s: %s%s" % (a.name, a.description, (" (" + a.version + ")")
                                                      if a.version else "") for a in allocs), ""]
    pts = [(a.name, [(c / 1e3, r / MB) for c, r, v in series[a.name]]) for a in ok if series.get(a.name)]
    png = plots.lines(pub, "rss-over-calls", "RSS above the start over the replay, %s (the median run by peak RSS)"
                      % os.path.basename(trace), "calls (thousands)", "RSS (MB)", pts)
    if png:
        doc += ["![RSS over calls](%s)" % png, ""]
    pts = [(a.name, [(c / 1e3, v / MB) for c, r, v in series[a.name]]) for a in ok if series.get(a.name)]
    png = plots.lines(pub, "vsz-over-calls", "Virtual size above the start over the replay (log scale)",
                      "calls (thousands)", "virtual size (MB)", pts, log_y=True)
    if png:
        doc += ["![virtual size over calls](%s)" % png, ""]
    if notes:
        with open(notes) as f:
            doc += [f.read().rstrip("\n"), ""]
    with open(os.path.join(pub, "report.md"), "w") as f:
        f.write("\n".join(doc))
    print("\n".join(doc))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--trace", default=os.path.join(HERE, "..", "..", "..", "shared", "android-traces", "systemui.zip"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--allocators", default=",".join(DEFAULT))
    ap.add_argument("--out", default="bench/out/android")
    ap.add_argument("--publish", default=None)
    ap.add_argument("--notes", default=None, help="a Markdown file appended to the report (what the figures mean)")
    ap.add_argument("--report-only", action="store_true", help="rewrite the report from the runs in --out")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    if not os.access(a.trace, os.R_OK):
        print("android.py: %s: no such trace (../shared/android-traces/systemui.zip)" % a.trace, file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)
    allocs = [resolve(n, build) for n in a.allocators.split(",")]
    res = {x.name: [] for x in allocs if x.ok}
    files = {x.name: [] for x in allocs if x.ok}
    if a.report_only:
        with open(os.path.join(a.out, "runs.txt")) as log:
            for l in log:
                r = kv(l)
                name = l.split()[0]
                if name in res:
                    res[name].append(r)
                    files[name].append((float(r["rss_peak"]), os.path.join(a.out, "%s.%s.series" % (name, r["run"]))))
        a.repeat = max(len(v) for v in res.values())
    else:
        run_all(a, build, allocs, res, files)
    series = {}
    for name, fl in files.items():
        if fl:
            fl.sort()
            series[name] = load_series(fl[len(fl) // 2][1])
    if a.publish:
        report(a.publish, a.trace, allocs, res, series, a.repeat, a.notes)
    return 0


def run_all(a, build, allocs, res, files):
    with open(os.path.join(a.out, "runs.txt"), "w") as log:
        for k in range(a.repeat):
            for x in allocs:
                if not x.ok:
                    continue
                s = os.path.join(a.out, "%s.%d.series" % (x.name, k))
                r = run_one(build, x, a.trace, s)
                res[x.name].append(r)
                files[x.name].append((float(r["rss_peak"]), s))
                log.write("%s run=%d %s\n" % (x.name, k, " ".join("%s=%s" % kv_ for kv_ in sorted(r.items()))))
                print("%-13s run %d: %6s ns/call, peak RSS %.1f MB" % (x.name, k, r["ns_per_call"],
                                                                     float(r["rss_peak"]) / MB), flush=True)


if __name__ == "__main__":
    sys.exit(main())
