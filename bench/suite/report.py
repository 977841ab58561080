#!/usr/bin/env python3
"""Writes DIR/report.md and DIR/*.png from a results directory made by run.py
(docs/design/bench.md, "Runner and report").

  bench/suite/report.py DIR

Every table is followed by the same figures as a ratio to jwmalloc measured in
the same run (value / jwmalloc's value), and every plot by its ratio plot. The
paper's comparisons are recomputed and each gets a plain verdict. When jwmalloc
is not built there are no ratios, and the report says so.
"""
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import backend_report  # noqa: E402
import plots  # noqa: E402

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


class Doc:
    def __init__(self, res):
        self.res = res
        self.lines = []

    def p(self, text=""):
        self.lines.append(text)

    def table(self, header, rows):
        self.p("| " + " | ".join(header) + " |")
        self.p("|" + "|".join([" --- "] * len(header)) + "|")
        for r in rows:
            self.p("| " + " | ".join(r) + " |")
        self.p()

    def cell(self, workload, alloc, threads, getter, kind_fmt, kind="run"):
        v = self.res.metric(workload, alloc, threads, getter, kind)
        if v is not None:
            return fmt(v, kind_fmt), v
        a = self.res.allocs.get(alloc, {})
        if a.get("state") and a["state"] != "ok":
            return a["state"], None
        bad = self.res.status(workload, alloc, threads, kind)
        if bad:
            return bad.get("status", "failed"), None
        if self.res.status_any(workload, alloc, threads, kind) is None:
            return "not run", None
        return "-", None

    def spread_note(self, rows_spec, allocs, getter, kind):
        """How far repetitions of the same cell lie apart: (max - min) / median."""
        spreads = []
        for label, w, t in rows_spec:
            for a in allocs:
                vs = [getter(r) for r in self.res.ok_runs(w, a, t, kind)]
                vs = [v for v in vs if v]
                if len(vs) >= 2:
                    spreads.append(((max(vs) - min(vs)) / statistics.median(vs), "%s/%s" % (label, a)))
        if spreads:
            spreads.sort()
            self.p("_Repetitions of one cell differ by (max - min) / median: median %.0f%%, worst %.0f%% (%s). "
                   "Differences smaller than that are noise._" % (100 * spreads[len(spreads) // 2][0],
                                                                 100 * spreads[-1][0], spreads[-1][1]))
            self.p()

    def grid(self, title, rows_spec, allocs, getter, kind_fmt, kind="run", lower_better=False, note=""):
        """rows_spec: list of (label, workload, threads). Prints the values table
        and the ratio-to-jwmalloc table; returns {(label, alloc): value}."""
        vals = {}
        rows = []
        for label, w, t in rows_spec:
            row = [label]
            for a in allocs:
                text, v = self.cell(w, a, t, getter, kind_fmt, kind)
                vals[(label, a)] = v
                row.append(text)
            rows.append(row)
        self.p("**%s**%s" % (title, (" " + note) if note else ""))
        self.p()
        self.table(["workload"] + allocs, rows)
        self.spread_note(rows_spec, allocs, getter, kind)
        self.ratio_table(rows_spec, allocs, vals, lower_better)
        return vals

    def ratio_table(self, rows_spec, allocs, vals, lower_better):
        if not self.res.jw_ok:
            self.p("_No ratios: jwmalloc is %s in this run._" % self.res.allocs.get(JW, {}).get(
                "state", "not in the allocator list"))
            self.p()
            return
        others = [a for a in allocs if a != JW]
        rows = []
        for label, w, t in rows_spec:
            jw = vals.get((label, JW))
            row = [label]
            for a in others:
                v = vals.get((label, a))
                row.append(fmt(v / jw, "ratio") if v is not None and jw else "-")
            rows.append(row)
        self.p("Ratio to jwmalloc (value / jwmalloc's; %s):" % (
            "above 1 means the peer uses more than jwmalloc" if lower_better else
            "above 1 means the peer is ahead of jwmalloc"))
        self.p()
        self.table(["workload"] + others, rows)


def alloc_table(res, doc, title, columns, allocs, lower_better=True, extra_col=None):
    """A table with one row per allocator; columns: list of (header, getter(alloc) -> value, fmt kind).
    Followed by the same figures as ratios to jwmalloc's row. Returns {alloc: [values]}."""
    vals, rows = {}, []
    for a in allocs:
        state = res.allocs.get(a, {}).get("state", "ok")
        vs = [g(a) for _, g, _ in columns]
        vals[a] = vs
        row = [a] + [fmt(v, k) if state == "ok" else state for v, (_, _, k) in zip(vs, columns)]
        if extra_col:
            row.append(extra_col[1](a))
        rows.append(row)
    doc.p("**%s**" % title)
    doc.p()
    doc.table(["allocator"] + [h for h, _, _ in columns] + ([extra_col[0]] if extra_col else []), rows)
    if not res.jw_ok:
        doc.p("_No ratios: jwmalloc is %s in this run._" % res.allocs.get(JW, {}).get("state", "not listed"))
        doc.p()
        return vals
    jw = vals.get(JW, [])
    rrows = []
    for a in allocs:
        if a == JW:
            continue
        rrows.append([a] + [fmt(v / j, "ratio") if v is not None and j else "-" for v, j in zip(vals[a], jw)])
    doc.p("Ratio to jwmalloc (%s):" % ("above 1: the peer uses more" if lower_better else
                                       "above 1: the peer is ahead"))
    doc.p()
    doc.table(["allocator"] + [h for h, _, _ in columns], rrows)
    return vals


def plot_grid(res, doc, name, title, ylabel, rows_spec, allocs, vals, log=False):
    cats = [label for label, _, _ in rows_spec]
    png = plots.bars(res.out, name, title, ylabel, cats, allocs, vals, log=log)
    if png:
        doc.p("![%s](%s)" % (title, png))
        doc.p()
    if res.jw_ok:
        ratios = {}
        for c in cats:
            jw = vals.get((c, JW))
            for a in allocs:
                v = vals.get((c, a))
                ratios[(c, a)] = v / jw if v is not None and jw else None
        others = [a for a in allocs if a != JW]
        png = plots.bars(res.out, name + "-ratio", title + " (ratio to jwmalloc)", "value / jwmalloc", cats,
                         others, ratios, log=True, ref_line=1.0)
        if png:
            doc.p("![%s, ratio to jwmalloc](%s)" % (title, png))
            doc.p()


def verdict(ok, text_ok, text_short):
    return ("**meets**: " + text_ok) if ok else ("**falls short**: " + text_short)


def paper_section(res, doc):
    n, N10 = res.n, 10 * res.n
    doc.p("## The paper's comparisons, recomputed")
    doc.p()
    if not res.jw_ok:
        doc.p("**jwmalloc is not built in this run** (%s): none of the comparisons below can be computed; the "
              "peers' own figures are listed so the run is still useful as a baseline." %
              res.allocs.get(JW, {}).get("reason", ""))
        doc.p()
    rows = []
    shortfalls = []

    # 1. throughput vs jemalloc on the paper's microbenchmarks
    paper_w = [w for w, d in res.wl.items() if d.get("paper")]
    for t in sorted({t for w in paper_w for t in res.threads_of(w) if t}):
        ratios = []
        for w in paper_w:
            jw = res.metric(w, JW, t, thr)
            je = res.metric(w, "jemalloc", t, thr)
            if jw and je:
                ratios.append(jw / je)
        g = gmean(ratios)
        what = "Throughput vs jemalloc, geometric mean over %s, %d threads" % (", ".join(paper_w), t)
        if g is None:
            rows.append([what, "+74% (4 cores, oversubscribed)", "-", "not computable (jwmalloc or jemalloc "
                         "missing)"])
        else:
            ok = g >= 1.74
            v = verdict(ok, "jwmalloc %+.0f%%" % ((g - 1) * 100),
                        "jwmalloc %+.0f%% vs the paper's +74%%" % ((g - 1) * 100))
            if not ok:
                shortfalls.append("throughput vs jemalloc at %d threads: %+.0f%% (paper +74%%)" % (t, (g - 1) * 100))
            rows.append([what, "+74%", "%+.0f%%" % ((g - 1) * 100), v])

    # 2. allocator instructions on rptest 8 B-1 MB at N threads
    cgt = res.meta.get("callgrind_threads", n)
    jw_i = res.metric("rptest-1m", JW, cgt, lambda r: r.get("alloc_instr_per_op"), "callgrind")
    for peer, paper in (("jemalloc", 32.8), ("mimalloc", 2.55), ("tcmalloc", 1.81)):
        pv = res.metric("rptest-1m", peer, cgt, lambda r: r.get("alloc_instr_per_op"), "callgrind")
        what = "Allocator instructions/op, %s / jwmalloc, rptest 8 B-1 MiB, %d threads" % (peer, cgt)
        if jw_i and pv:
            ratio = pv / jw_i
            ok = ratio >= paper
            if not ok:
                shortfalls.append("allocator instructions vs %s on rptest-1m: %.2fx (paper %.2fx)" % (peer, ratio,
                                                                                                   paper))
            rows.append([what, "%.2fx" % paper, "%.2fx (%s %.0f vs jwmalloc %.0f)" % (ratio, peer, pv, jw_i),
                         verdict(ok, "at least the paper's ratio", "below the paper's ratio")])
        else:
            rows.append([what, "%.2fx" % paper, "%s: %s" % (peer, fmt(pv, "instr")), "not computable"])

    # 3. sleep-augmented mstress footprint at 10 threads per core
    t = N10 if N10 in res.threads_of("mstress-sleep") else (res.threads_of("mstress-sleep") or [None])[-1]
    for key, label, paper, target in (("steady_kb", "steady", "29 / 376 MB = 0.08x", 0.15),
                                      ("peak_kb", "peak", "906 / 968 MB = 0.94x", 1.1)):
        if not t:
            break
        jw = res.metric("mstress-sleep", JW, t, rssget(key))
        je = res.metric("mstress-sleep", "jemalloc", t, rssget(key))
        what = "Sleep-augmented mstress, %d threads: %s RSS jwmalloc / jemalloc" % (t, label)
        if jw and je:
            ratio = jw / je
            ok = ratio <= target
            if not ok:
                shortfalls.append("%s RSS on sleep-augmented mstress: %.2fx jemalloc's (target %gx)" % (
                    label, ratio, target))
            rows.append([what, "%s (target <= %gx)" % (paper, target),
                         "%.1f / %.1f MB = %.2fx" % (jw / 1024, je / 1024, ratio),
                         verdict(ok, "within %gx" % target, "above %gx" % target)])
        else:
            rows.append([what, paper, "jemalloc %s %s MB" % (label, fmt(je, "mb")), "not computable"])
    if t:
        # The same without file-backed pages (shared libraries, the program): at the suite's scale they are
        # a large, allocator-independent part of the steady RSS (about 1.5 MB of a few MB).
        jw = res.metric("mstress-sleep", JW, t, rssget("steady_anon_kb"))
        je = res.metric("mstress-sleep", "jemalloc", t, rssget("steady_anon_kb"))
        what = "Sleep-augmented mstress, %d threads: steady anonymous RSS (heap; no file-backed pages) " \
               "jwmalloc / jemalloc" % t
        if jw and je:
            ratio = jw / je
            rows.append([what, "target <= 0.15x", "%.1f / %.1f MB = %.2fx" % (jw / 1024, je / 1024, ratio),
                         verdict(ratio <= 0.15, "within 0.15x", "above 0.15x")])
            if ratio > 0.15:
                shortfalls.append("steady anonymous RSS on sleep-augmented mstress: %.2fx jemalloc's" % ratio)

    # 4. P99.99 at 10 threads per core (mstress)
    t = N10 if N10 in res.threads_of("mstress") else None
    if t:
        jw = res.metric("mstress", JW, t, latget("lat_p9999_ns"))
        peers = [(a, res.metric("mstress", a, t, latget("lat_p9999_ns"))) for a in res.main if a != JW]
        peers = [(a, v) for a, v in peers if v]
        best = min(peers, key=lambda x: x[1]) if peers else None
        what = "P99.99 latency, mstress, %d threads: jwmalloc / best peer" % t
        if jw and best:
            ratio = jw / best[1]
            ok = ratio <= 0.3
            if not ok:
                shortfalls.append("P99.99 on mstress at %d threads: %.2fx the best peer (%s; target 0.3x)" % (
                    t, ratio, best[0]))
            fl = [res.metric("mstress", a, t, latget("floor_p9999_ns")) for a in (JW, best[0])]
            floor = " (floor %s / %s)" % tuple(fmt(v, "ns") for v in fl) if all(fl) else ""
            rows.append([what, "1.5 / 5.9 us = 0.25x (target <= 0.3x)",
                         "%s / %s (%s) = %.2fx%s" % (fmt(jw, "ns"), fmt(best[1], "ns"), best[0], ratio, floor),
                         verdict(ok, "within 0.3x", "above 0.3x")])
        else:
            rows.append([what, "0.25x", "best peer %s" % ("%s %s" % (best[0], fmt(best[1], "ns")) if best else "-"),
                         "not computable"])

    # 5. issue 8: throughput vs mimalloc on xmalloc and rptest at 1, N, 10N
    for w in ("xmalloc", "rptest-16k", "rptest-1m"):
        for t in res.threads_of(w):
            jw = res.metric(w, JW, t, thr)
            mi = res.metric(w, "mimalloc", t, thr)
            what = "Throughput vs mimalloc, %s, %s threads" % (w, t)
            if jw and mi:
                ok = jw > mi
                if not ok:
                    shortfalls.append("throughput on %s at %s threads: %.2fx mimalloc's" % (w, t, jw / mi))
                rows.append([what, "ahead (issue 8)", "%.2fx" % (jw / mi), verdict(ok, "ahead", "behind")])
            else:
                rows.append([what, "ahead", "mimalloc %s Mops/s" % fmt(mi, "mops"), "not computable"])

    # 6. issue 3: reformatting instructions vs jemalloc and mimalloc
    jw_r = res.metric("reformat", JW, cgt, lambda r: r.get("alloc_instr_per_op"), "callgrind")
    for peer in ("jemalloc", "mimalloc"):
        pv = res.metric("reformat", peer, cgt, lambda r: r.get("alloc_instr_per_op"), "callgrind")
        what = "Reformatting, allocator instructions/op, jwmalloc vs %s" % peer
        if jw_r and pv:
            ok = jw_r < pv
            if not ok:
                shortfalls.append("reformatting instructions: jwmalloc %.0f vs %s %.0f per op" % (jw_r, peer, pv))
            rows.append([what, "fewer (issue 3)", "%.0f vs %.0f" % (jw_r, pv), verdict(ok, "fewer", "not fewer")])
        else:
            rows.append([what, "fewer", "%s %s" % (peer, fmt(pv, "instr")), "not computable"])

    # 7. issue 3: after the trough, mapped and metadata within 10% of steady (plus the roots kept on purpose),
    # from the allocator's own figures; the process RSS beside them for every allocator
    for t in res.threads_of("peak-trough"):
        for what, unit in (("mapped", "MiB"), ("meta", "KiB")):
            vals = [backend_report.median_runs(res, "peak-trough", JW, t,
                                               (lambda i: lambda r: backend_report.trough_fields(r, what)[i])(i))
                    for i in range(4)]
            ok = backend_report.trough_verdict(vals[0], vals[2], vals[3])
            label = "mapped bytes" if what == "mapped" else "metadata bytes"
            what_s = "Peak-trough, %s threads: jwmalloc %s after the trough / steady" % (t, label)
            je = [backend_report.median_runs(res, "peak-trough", "jemalloc", t,
                                             (lambda i: lambda r: backend_report.trough_fields(r, what)[i])(i))
                  for i in (0, 2)]
            je_s = "; jemalloc %.2f" % (je[1] / je[0]) if je[0] and je[1] is not None else ""
            if ok is None:
                rows.append([what_s, "<= 1.1 + kept (issue 3)", "jwmalloc figures missing" + je_s, "not computable"])
                continue
            conv = backend_report.mib if unit == "MiB" else backend_report.kib
            if not ok:
                shortfalls.append("peak-trough at %s threads: jwmalloc %s after the trough %.2fx the steady level "
                                  "(%s vs %s %s; target 1.1x plus %s %s kept)" % (
                                      t, label, vals[2] / vals[0], conv(vals[2]), conv(vals[0]), unit,
                                      conv(vals[3] or 0), unit))
            rows.append([what_s, "<= 1.1 + kept (issue 3)", "%.2f (%s / %s %s, %s kept)%s" % (
                vals[2] / vals[0], conv(vals[2]), conv(vals[0]), unit, conv(vals[3] or 0), je_s),
                verdict(ok, "within 10% plus kept", "more than 10% above")])
        v = res.metric("peak-trough", JW, t, rssget("trough_over_steady"))
        je = res.metric("peak-trough", "jemalloc", t, rssget("trough_over_steady"))
        rows.append(["Peak-trough, %s threads: process RSS after the trough / steady" % t, "(context)",
                     "jwmalloc %s, jemalloc %s" % (fmt(v), fmt(je)), "measured (no target)"])

    # 8. issue 7: memory system calls vs jemalloc (default and 1 s decay) at equal or lower steady RSS
    for w in ("mstress-sleep", "generational"):
        for t in res.threads_of(w):
            jw_c = res.metric(w, JW, t, systotal)
            jw_s = res.metric(w, JW, t, rssget("steady_kb"))
            for peer in ("jemalloc", "jemalloc-1s"):
                pc = res.metric(w, peer, t, systotal)
                ps = res.metric(w, peer, t, rssget("steady_kb"))
                what = "%s, %s threads: memory system calls and steady RSS vs %s" % (w, t, peer)
                if jw_c is not None and pc is not None and jw_s and ps:
                    ok = jw_c < pc and jw_s <= ps
                    if not ok:
                        shortfalls.append("%s at %s threads vs %s: %d vs %d system calls, steady %.1f vs %.1f MB" % (
                            w, t, peer, jw_c, pc, jw_s / 1024, ps / 1024))
                    rows.append([what, "fewer calls, RSS <= (issue 7)",
                                 "%d vs %d calls; %.1f vs %.1f MB" % (jw_c, pc, jw_s / 1024, ps / 1024),
                                 verdict(ok, "fewer calls at equal or lower RSS", "not both")])
                else:
                    rows.append([what, "fewer calls, RSS <=", "%s: %s calls, %s MB" % (
                        peer, fmt(pc, "int"), fmt(ps, "mb")), "not computable"])

    # 8b. issue 7: the generational workload, lifetime against the fixed-delay baseline. Of the merges, how
    # many completed while all their pieces were still backed (before release) rather than after a piece had
    # been given back (the kernel's work and the page faults then done twice). Absolute counts are not the
    # measure: memory that fixed-delay releases early comes back (refaults) and is freed again, so it is
    # merged again, before release, on every round trip.
    for w in ("generational",):
        for t in res.threads_of(w):
            keys = ("merges_before_release", "merges_after_release", "reclaim_released_bytes", "refaulted_allocs")
            lt = {k: res.metric(w, JW, t, jwget(k)) for k in keys}
            fx = {k: res.metric(w, "jwmalloc-fixed", t, jwget(k)) for k in keys}
            lr = res.metric(w, JW, t, rssget("steady_kb"))
            fr = res.metric(w, "jwmalloc-fixed", t, rssget("steady_kb"))
            what = "%s, %s threads: merges completed before release, lifetime vs fixed-delay" % (w, t)
            if None in lt.values() or None in fx.values() or not lr or not fr:
                rows.append([what, "a larger share before release, fewer after (issue 7)", "-",
                             "not computable (jwmalloc-fixed or the statistics line missing)"])
                continue
            def share(d):
                tot = d["merges_before_release"] + d["merges_after_release"]
                return d["merges_before_release"] / tot if tot else None
            ls, fs = share(lt), share(fx)
            ok = (ls is not None and fs is not None and ls > fs and
                  lt["merges_after_release"] < fx["merges_after_release"] and lr <= 1.05 * fr)
            text = ("before release %.1f%% (%d of %d) vs %.1f%% (%d of %d); after release %d vs %d; given back %.0f "
                    "vs %.0f MiB; refaulted %d vs %d; steady RSS %.1f vs %.1f MB" % (
                        100 * (ls or 0), lt["merges_before_release"],
                        lt["merges_before_release"] + lt["merges_after_release"], 100 * (fs or 0),
                        fx["merges_before_release"], fx["merges_before_release"] + fx["merges_after_release"],
                        lt["merges_after_release"], fx["merges_after_release"],
                        lt["reclaim_released_bytes"] / 1048576.0, fx["reclaim_released_bytes"] / 1048576.0,
                        lt["refaulted_allocs"], fx["refaulted_allocs"], lr / 1024, fr / 1024))
            if not ok:
                shortfalls.append("%s at %s threads, lifetime vs fixed-delay: %s" % (w, t, text))
            rows.append([what, "a larger share before release, fewer after, RSS within 5% (issue 7)", text,
                         verdict(ok, "lifetime completes a larger share of merges before release, at RSS within 5%",
                                 "not all three")])

    # 9. the paper's regression case
    for t in res.threads_of("near4k"):
        jw = res.metric("near4k", JW, t, thr)
        peers = [(a, res.metric("near4k", a, t, thr)) for a in res.main if a != JW]
        peers = [(a, v) for a, v in peers if v]
        what = "near4k (sizes near 4 KiB), %s threads: jwmalloc / best peer throughput" % t
        if jw and peers:
            best = max(peers, key=lambda x: x[1])
            rows.append([what, "the paper's one regression", "%.2fx (%s best)" % (jw / best[1], best[0]),
                         "measured (no target)"])
        else:
            rows.append([what, "regression expected", "-", "not computable"])

    doc.table(["comparison", "paper / target", "this run", "verdict"], rows)
    doc.p("### Where jwmalloc falls short")
    doc.p()
    if not res.jw_ok:
        doc.p("Not known: jwmalloc was not built when this run was made.")
    elif shortfalls:
        for s in shortfalls:
            doc.p("- " + s)
    else:
        doc.p("Nowhere among the comparisons above.")
    doc.p()


def write_report(out):
    res = Results(out)
    doc = Doc(res)
    m = res.meta
    mach = m["machine"]
    n = res.n
    doc.p("# jwmalloc evaluation suite: %s run" % m["label"])
    doc.p()
    if m["mode"] == "quick":
        doc.p("> **This is a QUICK run** (%g s per timed run, one repetition, footprint workloads only at %s "
              "threads, callgrind on %s). Its figures are indicative; a full run replaces it." % (
                  m["duration"], ",".join(map(str, m["footprint_threads"])), ", ".join(m["callgrind"]) or "nothing"))
        doc.p()
    if not res.jw_ok:
        doc.p("> **jwmalloc was not built for this run: it shows the peers only** (%s)." %
              res.allocs.get(JW, {}).get("reason", "not in the allocator list"))
        doc.p()
    la0, la1 = mach.get("loadavg_start"), mach.get("loadavg_end")
    doc.p("- When: %s to %s (%s s)" % (m["started"], m.get("finished", "?"), m.get("wall_s", "?")))
    doc.p("- Machine: %s, %d cores usable (%s logical), %s GiB, %s, kernel %s; 1-minute load average at start %s, "
          "at end %s (it counts this suite's own recent runs too)%s" % (
              mach.get("cpu", "?"), n, mach.get("cpu_count"), mach.get("mem_gib", "?"), mach.get("os", "?"),
              mach.get("kernel"), "%.2f" % la0[0] if la0 else "?", "%.2f" % la1[0] if la1 else "?",
              "; **the machine was busy when the run started: treat small differences with care**"
              if la0 and la0[0] > 0.5 * n else ""))
    doc.p("- Build: commit %s, %s, %s, Python %s" % (mach.get("commit"), mach.get("gcc"), mach.get("valgrind"),
                                                    mach.get("python")))
    doc.p("- Command: `%s`" % m["command"])
    example = next((r["cmd"] for r in res.runs if r.get("status") == "ok" and r["kind"] == "run"), None)
    if example:
        doc.p("- One run, as it was made: `%s`" % example)
    has_fp = any(d["group"] == "footprint" for d in res.wl.values())
    doc.p("- Thread counts: %s (N = %d cores; 10 per core = %d)%s; %s" % (
        ", ".join(map(str, m["threads"])), n, 10 * n,
        "; footprint workloads at %s" % ", ".join(map(str, m["footprint_threads"])) if has_fp else "",
        "callgrind at %d threads on %s" % (m["callgrind_threads"], ", ".join(m["callgrind"])) if m.get("callgrind")
        else "no callgrind runs"))
    if m.get("reused_callgrind"):
        doc.p("- The peers' callgrind records were measured in an earlier run of the same plan (`%s`, "
              "instruction counts do not depend on load); jwmalloc's were measured in this run." %
              m["reused_callgrind"])
    doc.p("- Timed runs: %g s each, %d repetition(s), median shown; every run's command line is in "
          "`raw/runs.jsonl`." % (m["duration"], m["repeat"]))
    timers = [r["result"].get("timer_ns_median") for r in res.runs if r.get("status") == "ok" and r["kind"] == "run"]
    timers = [t for t in timers if t]
    sysm = sorted({r["measure"].get("sys_count", "?") for r in res.runs if r.get("measure")})
    hz = [r["rss"]["hz"] for r in res.runs if r.get("rss", {}).get("hz")]
    doc.p("- Latency: one allocator call in about %d timed with clock_gettime(CLOCK_MONOTONIC); the timer's own "
          "cost (median of back-to-back pairs) was %s ns and is included in every latency figure." % (
              m["lat_every"], "%g" % statistics.median(timers) if timers else "?"))
    slow = [h for h in hz if h < 20]
    samplers = sorted({r["measure"].get("sampler", "?") for r in res.runs if r.get("measure")})
    doc.p("- RSS sampled from /proc at %g Hz by the launcher (scheduling: %s; achieved: %s)%s; peak includes the "
          "kernel's high-water mark." % (m["rss_hz"], ", ".join(samplers),
                                         "%.0f-%.0f Hz" % (min(hz), max(hz)) if hz else "?",
                                         " -- **%d run(s) sampled below 20 Hz**" % len(slow) if slow else ""))
    doc.p("- System calls: %s." % ("; ".join(
        "counted by kernel tracepoint counters (perf_event_open)" if s == "perf" else
        "**not counted** (kernel counters unavailable: %s)" % s.split(":", 1)[-1] for s in sysm) or "?"))
    doc.p()
    doc.p("## Allocators")
    doc.p()
    rows = []
    for name, a in res.allocs.items():
        rows.append([name, a["state"], "`%s`" % a["lib"] if a["lib"] else "(none: system allocator)",
                     a.get("version") or "-", a["description"] + (" (%s)" % a["reason"] if a["reason"] else "") +
                     ("; env " + " ".join("%s=%s" % kv for kv in a["env"].items()) if a["env"] else "")])
    doc.table(["allocator", "state", "library", "version", "notes"], rows)

    paper_section(res, doc)
    backend_report.section(res, doc, fmt)

    failed = [r for r in res.runs if r.get("status") not in ("ok", None) and
              res.allocs.get(r["allocator"], {}).get("state") == "ok"]
    if failed:
        doc.p("## Runs that failed")
        doc.p()
        doc.table(["kind", "workload", "allocator", "threads", "status", "reason"],
                  [[r["kind"], r["workload"], r["allocator"], str(r["threads"] or "trace"), r["status"],
                    r.get("reason", "").replace("|", "/")[:200]] for r in failed])

    # ---- throughput
    doc.p("## Throughput (million allocator calls per second)")
    doc.p()
    tput_w = [w for w, d in res.wl.items() if d["group"] == "throughput"]
    for t in m["threads"]:
        spec = [(w, w, t) for w in tput_w if t in res.threads_of(w)]
        if not spec:
            continue
        vals = doc.grid("%d thread%s%s" % (t, "s" if t > 1 else "", " (10 per core)" if t == 10 * n else
                                             " (one per core)" if t == n else ""), spec, res.main, thr, "mops")
        plot_grid(res, doc, "throughput-t%d" % t, "Throughput, %d threads" % t, "Mops/s", spec, res.main,
                  {k: (v / 1e6 if v else v) for k, v in vals.items()}, log=True)
    trace_w = [w for w, d in res.wl.items() if d["group"] == "trace"]
    if trace_w:
        spec = [(w, w, None) for w in trace_w]
        vals = doc.grid("Replays of recorded programs (recorded threads)", spec, res.main, thr, "mops")
        plot_grid(res, doc, "throughput-traces", "Replay throughput", "Mops/s", spec, res.main,
                  {k: (v / 1e6 if v else v) for k, v in vals.items()}, log=True)
        replay_determinism(res, doc, trace_w)

    # ---- instructions
    cg = m.get("callgrind", [])
    if cg:
        cgt = m["callgrind_threads"]
        doc.p("## Allocator instructions per call (callgrind, %d threads)" % cgt)
        doc.p()
        doc.p("Instructions executed inside the allocator for the workload's calls (call arcs out of the harness's "
              "`jwb_call_*`, plus any allocator thread), divided by the calls; the workload's own instructions per "
              "call are shown after. Fixed work (`--ops`), measured region only.")
        doc.p()
        spec = [(w, w, cgt) for w in cg]
        vals = doc.grid("Allocator instructions per call", spec, res.main,
                        lambda r: r.get("alloc_instr_per_op"), "instr", "callgrind", lower_better=True)
        cg_failed = {}
        for r in res.runs:
            if r["kind"] == "callgrind" and r.get("status") == "failed":
                cg_failed.setdefault(r["allocator"], r.get("reason", ""))
        for a, why in cg_failed.items():
            doc.p("_%s: not measurable under callgrind (%s)._" % (a, why[:160]))
            doc.p()
        plot_grid(res, doc, "instructions", "Allocator instructions per call (callgrind)", "instructions/call",
                  spec, res.main, vals, log=True)
        if any(r.get("alloc_cache_per_op") for r in res.runs if r["kind"] == "callgrind"):
            def d1(r):
                c = r.get("alloc_cache_per_op")
                return c["D1mr"] + c["D1mw"] if c and "D1mr" in c else None
            doc.grid("Allocator first-level data-cache misses per call (callgrind's cache simulation, "
                     "`--cache-sim`: reads and writes; one thread's view, no coherence misses)", spec, res.main,
                     d1, "num", "callgrind", lower_better=True)
        doc.grid("Workload's own instructions per call (should not depend on the allocator)", spec, res.main,
                 lambda r: r.get("workload_instr_per_op"), "instr", "callgrind", lower_better=True)

    # ---- latency
    doc.p("## Latency per allocator call")
    doc.p()
    top = max(m["threads"])
    spec = [(w, w, top) for w in tput_w if top in res.threads_of(w)]
    for label, key in (("P99", "lat_p99_ns"), ("P99.99", "lat_p9999_ns")):
        vals = doc.grid("%s in ns at %d threads" % (label, top), spec, res.main, latget(key), "ns",
                        lower_better=True)
        plot_grid(res, doc, "latency-%s-t%d" % (label.replace(".", ""), top), "%s latency, %d threads" % (label, top),
                  "ns", spec, res.main, vals, log=True)
    doc.p("Percentiles of every workload at %d threads (the plots: mstress and xmalloc). The floor is an empty "
          "call timed the same way right after each timed call, in the same run (`docs/design/bench.md`, "
          "\"Latency\"): what the machine alone adds (interrupts, preemption, timer reads); a percentile well "
          "above its floor is the allocator's own work:" % top)
    doc.p()
    for w in tput_w + trace_w:
        t = None if w in trace_w else top
        if t is not None and t not in res.threads_of(w):
            continue
        cols = [(lbl, (lambda key: lambda a: res.metric(w, a, t, latget(key)))(key), "ns") for lbl, key in PCTS]
        vals = alloc_table(res, doc, "%s, %s threads: latency percentiles (ns)" % (w, t or "recorded"), cols,
                           res.main, extra_col=("samples; floor P99 / P99.99", lambda a: "%s; %s / %s" % (
                               fmt(res.metric(w, a, t, lambda r: r["result"].get("lat_samples")), "int"),
                               fmt(res.metric(w, a, t, latget("floor_p99_ns")), "ns"),
                               fmt(res.metric(w, a, t, latget("floor_p9999_ns")), "ns"))))
        counts = [res.metric(w, a, t, lambda r: r["result"].get("lat_samples")) for a in res.main]
        if any(c and c < 100000 for c in counts):
            doc.p("_P99.99 from fewer than 100,000 samples is indicative only._")
            doc.p()
        if w not in ("mstress", "xmalloc"):
            continue
        series = [(a, [(i, v) for i, v in enumerate(vals[a]) if v]) for a in res.main]
        xt = [(lbl, i) for i, (lbl, _) in enumerate(PCTS)]
        png = plots.lines(res.out, "latency-%s-t%d" % (w, top), "%s latency percentiles, %d threads" % (w, top),
                          "percentile", "ns", series, log_y=True, xtics=xt)
        if png:
            doc.p("![%s latency](%s)" % (w, png))
            doc.p()
        if res.jw_ok:
            jwp = dict(next((pts for a, pts in series if a == JW), []))
            ratio_series = [(a, [(x, y / jwp[x]) for x, y in pts if jwp.get(x)]) for a, pts in series if a != JW]
            png = plots.lines(res.out, "latency-%s-t%d-ratio" % (w, top), "%s latency, ratio to jwmalloc" % w,
                              "percentile", "value / jwmalloc", ratio_series, log_y=True, xtics=xt)
            if png:
                doc.p("![%s latency ratio](%s)" % (w, png))
                doc.p()

    # ---- footprint
    doc.p("## Footprint (RSS, MiB)")
    doc.p()
    fp_allocs = res.main + [a for a in res.extra if a not in res.main]
    fp_w = [w for w, d in res.wl.items() if d["group"] == "footprint"]
    spec = [("%s t=%d" % (w, t), w, t) for w in fp_w for t in res.threads_of(w) if t]
    spec_all = spec + [("%s t=%d" % (w, top), w, top) for w in tput_w if top in res.threads_of(w)] + \
        [(w, w, None) for w in trace_w]
    for title, key, rows_spec in (("Peak RSS", "peak_kb", spec_all), ("Steady-state RSS", "steady_kb", spec)):
        if not rows_spec:
            continue
        vals = doc.grid(title, rows_spec, fp_allocs, rssget(key), "mb", lower_better=True,
                        note="(steady: end of idle periods for mstress-sleep, end of the first steady phase for "
                             "peak-trough, median of the second half otherwise)" if key == "steady_kb" else "")
        plot_grid(res, doc, "rss-%s" % key.replace("_kb", ""), title, "MiB", rows_spec, fp_allocs,
                  {k: (v / 1024 if v else v) for k, v in vals.items()})
    if "peak-trough" in res.wl:
        for t in res.threads_of("peak-trough"):
            cols = [(h, (lambda k: lambda a: res.metric("peak-trough", a, t, rssget(k)))(k), kind) for h, k, kind in (
                ("steady MiB", "steady_kb", "mb"), ("peak MiB", "phase_peak_kb", "mb"),
                ("after trough MiB", "after_trough_kb", "mb"), ("after trough / steady", "trough_over_steady", "num"))]
            alloc_table(res, doc, "Peak-trough phases, %s threads" % t, cols, fp_allocs)
    for w in [x for x in fp_w if x == "mstress-sleep"]:
        for t in res.threads_of(w):
            series = []
            for a in fp_allocs:
                rs = res.ok_runs(w, a, t)
                if not rs:
                    continue
                path = os.path.join(out, "raw", "rss", "%s_%s_t%s_r%d.tsv" % (w, a, t, rs[0]["repeat"]))
                if os.path.exists(path):
                    import rss as rssmod
                    samples, _ = rssmod.load(path)
                    step = max(1, len(samples) // 400)
                    series.append((a, [(s[0] / 1000, s[1] / 1024) for s in samples[::step]]))
            png = plots.lines(out, "rss-time-%s-t%s" % (w, t), "RSS over time, %s, %s threads" % (w, t), "seconds",
                              "MiB", series)
            if png:
                doc.p("![RSS over time](%s)" % png)
                doc.p()
    if "mleak" in res.wl:
        spec = [("mleak t=%s" % t, "mleak", t) for t in res.threads_of("mleak") if t]
        doc.grid("mleak: RSS growth from the second round to the last (KiB)", spec, res.main, rssget("growth_kb"),
                 "int", lower_better=True)

    # ---- reclamation (issue 7)
    reclaim_section(res, doc, fp_w)

    # ---- system calls
    doc.p("## Memory system calls (mmap + munmap + madvise + mremap + brk + mprotect)")
    doc.p()
    if not any(r.get("measure", {}).get("sys_count") == "perf" for r in res.runs):
        doc.p("Not counted on this machine: the kernel offers no system-call tracepoint counters (%s)." % (
            ", ".join(sysm) or "no runs"))
        doc.p()
    else:
        spec = [("%s t=%d" % (w, t), w, t) for w in fp_w for t in res.threads_of(w) if t]
        spec += [("%s t=%d" % (w, top), w, top) for w in tput_w if top in res.threads_of(w)]
        vals = doc.grid("Calls per run", spec, fp_allocs, systotal, "int", lower_better=True)
        plot_grid(res, doc, "syscalls", "Memory system calls per run", "calls", spec, fp_allocs, vals, log=True)
        for w in fp_w:
            for t in res.threads_of(w):
                cols = [(c, (lambda c: lambda a: res.metric(w, a, t, sysget(c)))(c), "int") for c in SYSCALLS]
                alloc_table(res, doc, "%s, %s threads, by call" % (w, t), cols, fp_allocs)

    doc.p("## Workloads")
    doc.p()
    doc.table(["workload", "group", "what it does"], [[w, d["group"], d["description"]] for w, d in res.wl.items()])
    if not plots.have_gnuplot():
        doc.p("_No plots: gnuplot is not installed on the machine that wrote this report; run "
              "`bench/suite/report.py %s` where it is._" % out)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(doc.lines) + "\n")


RECLAIM_COLS = [("cycles", "reclaim_cycles", "int"), ("MiB given back", "reclaim_released_bytes", "mib"),
                ("merges before release", "merges_before_release", "int"),
                ("merges after release", "merges_after_release", "int"),
                ("refaulted ranges", "refaulted_allocs", "int"), ("pool pages aged", "pool_pages_aged", "int"),
                ("midend slabs aged", "mid_slabs_aged", "int"), ("madvise calls", "madvise_calls", "int")]


def reclaim_section(res, doc, fp_w):
    """jwmalloc's reclamation counters (its statistics line) on the footprint workloads: lifetime-based
    reclamation against the fixed-delay baseline (issue 7)."""
    variants = [a for a in (JW, "jwmalloc-fixed") if a in res.allocs and res.allocs[a]["state"] == "ok"]
    if not variants or not fp_w:
        return
    doc.p("## Reclamation: lifetime-based against fixed-delay (jwmalloc's own counters)")
    doc.p()
    doc.p("From the statistics line each jwmalloc run writes at exit. *Merges before release*: backend merges of "
          "free ranges none of whose pages had been given back; *after release*: merges that joined memory already "
          "given back with madvise (the kernel's work and the page faults are then paid twice); *refaulted*: ranges "
          "handed out again after their pages were given back. `jwmalloc-fixed` is the same library with "
          "`JWMALLOC_RECLAIM_POLICY=fixed-delay` (a merged range keeps its oldest piece's countdown; "
          "docs/design/reclamation.md, section 1).")
    doc.p()
    for w in fp_w:
        for t in res.threads_of(w):
            rows = []
            for a in variants:
                cells = [a]
                for _, key, kind in RECLAIM_COLS:
                    v = res.metric(w, a, t, jwget(key))
                    cells.append("-" if v is None else ("%.1f" % (v / 1048576.0) if kind == "mib" else "%d" % v))
                cells.append(fmt(res.metric(w, a, t, rssget("steady_kb")), "mb"))
                cells.append(fmt(res.metric(w, a, t, rssget("peak_kb")), "mb"))
                rows.append(cells)
            doc.p("**%s, %s threads**" % (w, t))
            doc.p()
            doc.table(["allocator"] + [c for c, _, _ in RECLAIM_COLS] + ["steady RSS MiB", "peak RSS MiB"], rows)


def replay_determinism(res, doc, trace_w):
    keys = ["records", "n_malloc", "n_calloc", "n_realloc", "n_free", "bytes_requested", "seq_hash"]
    rows = []
    for w in trace_w:
        seen = {}
        for r in res.runs:
            if r["workload"] == w and r.get("status") == "ok" and r["kind"] == "run":
                sig = tuple(r["result"].get(k) for k in keys)
                seen.setdefault(sig, []).append(r["allocator"])
        if not seen:
            continue
        same = len(seen) == 1
        sig = next(iter(seen))
        rows.append([w, str(sig[0]), str(sig[-1]), "%d runs, %d allocators" % (
            sum(len(v) for v in seen.values()), len({a for v in seen.values() for a in v})),
            "identical" if same else "**DIFFERENT**: " + "; ".join("%s: %s" % (s[-1], ",".join(v))
                                                                   for s, v in seen.items())])
    if rows:
        doc.p("**Replays executed the same sequence under every allocator** (counts and hash of the executed "
              "operations):")
        doc.p()
        doc.table(["trace", "records", "sequence hash", "runs", "result"], rows)


def publish(out, dest):
    """Copies the report and its plots (not the raw data) to dest, e.g. bench/results/2026-11-30-full."""
    import shutil
    os.makedirs(dest, exist_ok=True)
    for f in os.listdir(dest):
        if f.endswith(".png") or f == "report.md":
            os.unlink(os.path.join(dest, f))
    for f in os.listdir(out):
        if f.endswith(".png") or f == "report.md":
            shutil.copy(os.path.join(out, f), os.path.join(dest, f))


if __name__ == "__main__":
    args = sys.argv[1:]
    dest = None
    if len(args) == 3 and args[1] == "--publish":
        dest = args[2]
        args = args[:1]
    if len(args) != 1 or not os.path.exists(os.path.join(args[0], "meta.json")):
        print("usage: report.py DIR [--publish DEST]   (DIR written by run.py; DEST gets report.md and the PNGs)",
              file=sys.stderr)
        sys.exit(2)
    write_report(os.path.abspath(args[0]))
    print(os.path.join(os.path.abspath(args[0]), "report.md"))
    if dest:
        publish(os.path.abspath(args[0]), dest)
        print("published to %s" % dest)
