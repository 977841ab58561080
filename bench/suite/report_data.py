"""The report's data (report.py): a results directory made by run.py read back,
the medians of its cells, and how figures are formatted."""
import json
import math
import os
import statistics

JW = "jwmalloc"
PCTS = [("P50", "lat_p50_ns"), ("P90", "lat_p90_ns"), ("P99", "lat_p99_ns"), ("P99.9", "lat_p999_ns"),
        ("P99.99", "lat_p9999_ns")]
SYSCALLS = ["mmap", "munmap", "madvise", "mremap", "brk", "mprotect"]


def gmean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(v, kind="num"):
    if v is None:
        return "-"
    if kind == "mops":
        return "%.2f" % (v / 1e6)
    if kind == "ratio":
        return "%.2fx" % v
    if kind == "mb":
        return "%.1f" % (v / 1024.0)
    if kind == "ns":
        return "%.0f" % v if v < 10000 else "%.1f us" % (v / 1000.0) if v < 1000000 else "%.2f ms" % (v / 1e6)
    if kind == "int":
        return "%d" % v
    if kind == "instr":
        return "%.0f" % v if v >= 10 else "%.1f" % v
    return "%.3g" % v


class Results:
    def __init__(self, out):
        self.out = out
        with open(os.path.join(out, "meta.json")) as f:
            self.meta = json.load(f)
        self.runs = []
        with open(os.path.join(out, "raw", "runs.jsonl")) as f:
            for line in f:
                if line.strip():
                    self.runs.append(json.loads(line))
        self.allocs = self.meta["allocators"]
        self.main = self.meta["main_allocators"]
        self.extra = self.meta.get("footprint_extra", [])
        self.jw_ok = JW in self.allocs and self.allocs[JW]["state"] == "ok"
        self.n = self.meta["machine"]["ncores"]
        self.wl = {w["name"]: w for w in self.meta["workloads"]}

    def ok_runs(self, workload, alloc, threads, kind="run"):
        return [r for r in self.runs if r["kind"] == kind and r["workload"] == workload and
                r["allocator"] == alloc and r["threads"] == threads and r.get("status") == "ok"]

    def status(self, workload, alloc, threads, kind="run"):
        rs = [r for r in self.runs if r["kind"] == kind and r["workload"] == workload and r["allocator"] == alloc
              and r["threads"] == threads]
        if not rs:
            return None
        bad = [r for r in rs if r.get("status") != "ok"]
        return bad[0] if len(bad) == len(rs) else None

    def status_any(self, workload, alloc, threads, kind="run"):
        for r in self.runs:
            if r["kind"] == kind and r["workload"] == workload and r["allocator"] == alloc and r["threads"] == threads:
                return r
        return None

    def metric(self, workload, alloc, threads, getter, kind="run"):
        return med([getter(r) for r in self.ok_runs(workload, alloc, threads, kind)])

    def threads_of(self, workload, kind="run"):
        return sorted({r["threads"] for r in self.runs if r["kind"] == kind and r["workload"] == workload},
                      key=lambda t: (t is None, t or 0))

    def allocs_of(self, workload):
        names = []
        for r in self.runs:
            if r["workload"] == workload and r["allocator"] not in names:
                names.append(r["allocator"])
        return names

    def group(self, name):
        """The workloads of a group (throughput, trace, footprint), in the plan's order."""
        return [w for w, d in self.wl.items() if d["group"] == name]

    def top_threads(self):
        return max(self.meta["threads"])

    def footprint_allocs(self):
        """The main allocators, then the extra ones measured on footprint workloads only."""
        return self.main + [a for a in self.extra if a not in self.main]

    def sys_counts(self):
        """How the runs counted system calls: "perf", or why not."""
        return sorted({r["measure"].get("sys_count", "?") for r in self.runs if r.get("measure")})


def thr(r):
    return r["result"].get("ops_per_s")


def rssget(key):
    return lambda r: r.get("rss", {}).get(key)


def latget(key):
    return lambda r: r["result"].get(key) if r["result"].get("lat_samples") else None


def sysget(name):
    return lambda r: r["measure"].get("sys_" + name) if r["measure"].get("sys_count") == "perf" else None


def jwstats(r):
    """The statistics line a jwmalloc run wrote at exit (JWMALLOC_STATS=1 with
    JWMALLOC_STATS_FILE=/dev/stderr, allocators.py), as a dict; None when absent."""
    line = None
    for ln in (r.get("stderr_tail") or "").splitlines():
        if ln.startswith("jwmalloc-stats v1 "):
            line = ln
    if line is None:
        return None
    d = {}
    for tok in line.split()[2:]:
        k, _, v = tok.partition("=")
        d[k] = int(v) if v.isdigit() else v
    return d


def jwget(key):
    return lambda r: (jwstats(r) or {}).get(key)


def systotal(r):
    m = r["measure"]
    if m.get("sys_count") != "perf":
        return None
    return sum(m.get("sys_" + s, 0) for s in SYSCALLS)

