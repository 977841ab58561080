"""The report's sections on memory (report.py): footprint (RSS), jwmalloc's
reclamation counters and the memory system calls."""
import os

import plots
import rss
from report_data import JW, SYSCALLS, fmt, jwget, rssget, sysget, systotal
from report_doc import alloc_table, plot_grid


def footprint_section(res, doc):
    """Peak and steady RSS, the peak-trough phases, RSS over time and mleak's growth."""
    tput_w, trace_w, fp_w = res.group("throughput"), res.group("trace"), res.group("footprint")
    top, fp_allocs, out = res.top_threads(), res.footprint_allocs(), res.out
    doc.p("## Footprint (RSS, MiB)")
    doc.p()
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
                    samples, _ = rss.load(path)
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


RECLAIM_COLS = [("cycles", "reclaim_cycles", "int"), ("MiB given back", "reclaim_released_bytes", "mib"),
                ("merges before release", "merges_before_release", "int"),
                ("merges after release", "merges_after_release", "int"),
                ("refaulted ranges", "refaulted_allocs", "int"), ("pool pages aged", "pool_pages_aged", "int"),
                ("midend slabs aged", "mid_slabs_aged", "int"), ("madvise calls", "madvise_calls", "int")]


def reclaim_section(res, doc):
    """jwmalloc's reclamation counters (its statistics line) on the footprint workloads: lifetime-based
    reclamation against the fixed-delay baseline (issue 7)."""
    fp_w = res.group("footprint")
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


def syscalls_section(res, doc):
    """The kernel's counts of memory system calls, when it offered the counters."""
    tput_w, fp_w = res.group("throughput"), res.group("footprint")
    top, fp_allocs = res.top_threads(), res.footprint_allocs()
    doc.p("## Memory system calls (mmap + munmap + madvise + mremap + brk + mprotect)")
    doc.p()
    if not any(r.get("measure", {}).get("sys_count") == "perf" for r in res.runs):
        doc.p("Not counted on this machine: the kernel offers no system-call tracepoint counters (%s)." % (
            ", ".join(res.sys_counts()) or "no runs"))
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
