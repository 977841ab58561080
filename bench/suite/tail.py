#!/usr/bin/env python3
"""What the slowest allocator calls are made of (docs/design/bench.md, "Latency", "Slow calls").

Runs mstress and xmalloc at --threads (default 20: 10 per core on 2 cores)
under every allocator, interleaved, --repeat times, with the harness's
--lat-attrib: per million timed calls, how many took longer than --slow-ns,
how many of those took a page fault or a context switch of the calling
thread, and how many empty calls timed right after (the floor) took that long.
Writes a Markdown table to --out (default build/bench-tail/tail.md) and prints
it. make bench-tail.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import allocators  # noqa: E402
import interleave  # noqa: E402

WORKLOADS = {
    "mstress": ["jwb-mstress", "--steps", "20000", "--rounds", "1"],
    "xmalloc": ["jwb-xmalloc"],
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--allocators", default=",".join(allocators.DEFAULT))
    ap.add_argument("--workloads", default="mstress,xmalloc")
    ap.add_argument("--threads", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--duration", type=float, default=1.0)
    ap.add_argument("--slow-ns", type=int, default=2000)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    if a.repeat < 1 or a.threads < 1 or a.slow_ns < 1 or a.duration <= 0:
        sys.exit("tail.py: --repeat, --threads, --slow-ns and --duration must be positive")
    bindir = os.path.join(a.build, "bin")
    lib = os.path.join(a.build, "lib", "libjwmalloc.so")
    try:
        allocs = [allocators.resolve(n, lib) for n in a.allocators.split(",") if n]
    except KeyError as e:
        sys.exit("tail.py: unknown allocator %s (known: jwmalloc, %s)" % (e, ", ".join(allocators.PEERS)))
    works = [w for w in a.workloads.split(",") if w]
    for w in works:
        if w not in WORKLOADS:
            sys.exit("tail.py: unknown workload %s (known: %s)" % (w, ", ".join(WORKLOADS)))
        if not os.access(os.path.join(bindir, WORKLOADS[w][0]), os.X_OK):
            sys.exit("tail.py: %s not built (make build)" % os.path.join(bindir, WORKLOADS[w][0]))
    by_name = {A.name: A for A in allocs}

    def run_cell(cell, r):
        w, name = cell
        cmd = [os.path.join(bindir, WORKLOADS[w][0])] + WORKLOADS[w][1:] + [
            "--threads", str(a.threads), "--duration", str(a.duration), "--seed", str(r + 1),
            "--lat-every", "32", "--lat-attrib", str(a.slow_ns)]
        return interleave.run(cmd, interleave.env_for(by_name[name]), "tail.py: %s under %s" % (w, name))

    runs = {}  # (workload, allocator) -> list of result dicts
    for w in works:  # interleaved: each repetition runs every allocator once
        runs.update(interleave.interleaved([(w, A.name) for A in allocs if A.ok], a.repeat, run_cell, "tail"))
    lines = ["Slow calls at %d threads: timed calls longer than %d ns per million timed calls; each row is the "
             "run with the median count of slow calls among %d interleaved %g-second runs (`bench/suite/tail.py`, "
             "docs/design/bench.md \"Slow calls\"). *fault*: the calling thread took a page fault during the "
             "call; *switch*: it was switched out, without a fault; *other*: neither (the allocator's slow paths, "
             "and what the machine adds to them); fault + switch + other = slow. *floor*: empty calls timed right "
             "after each timed call that took as long (what the machine alone adds). P99.99: the median over the "
             "runs." % (a.threads, a.slow_ns, a.repeat, a.duration), ""]
    for w in works:
        lines += ["**%s, %d threads**" % (w, a.threads), "",
                  "| allocator | P99.99 ns | slow / M | with fault / M | with switch / M | other / M | floor / M |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for A in allocs:
            rs = runs.get((w, A.name))
            if not rs:
                lines.append("| %s | %s | | | | | |" % (A.name, A.state))
                continue

            def per_m(key, r):
                return interleave.per_million(r[key], r["lat_samples"])

            # One run's breakdown (the median one by slow calls), so that the columns add up.
            r = sorted(rs, key=lambda x: per_m("lat_slow", x))[(len(rs) - 1) // 2]
            other = int(r["lat_slow"]) - int(r["lat_slow_fault"]) - int(r["lat_slow_cs"])
            n = int(r["lat_samples"]) or 1
            lines.append("| %s | %d | %.0f | %.0f | %.0f | %.0f | %.0f |" % (
                A.name, statistics.median(int(x["lat_p9999_ns"]) for x in rs), per_m("lat_slow", r),
                per_m("lat_slow_fault", r), per_m("lat_slow_cs", r), 1e6 * other / n, per_m("floor_slow", r)))
        lines.append("")
    text = "\n".join(lines)
    print(text)
    out = a.out or os.path.join(a.build, "bench-tail", "tail.md")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        f.write(text + "\n")
    print("written: %s" % out, file=sys.stderr)


if __name__ == "__main__":
    main()
