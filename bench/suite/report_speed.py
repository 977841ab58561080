"""The report's sections on speed (report.py): throughput, the replays, the
allocator's instructions per call (callgrind) and the latency percentiles."""
import plots
from report_data import JW, PCTS, fmt, latget, thr
from report_doc import alloc_table, plot_grid


def throughput_section(res, doc):
    """Calls per second at each thread count, then the replays of recorded programs."""
    m, n = res.meta, res.n
    doc.p("## Throughput (million allocator calls per second)")
    doc.p()
    tput_w = res.group("throughput")
    for t in m["threads"]:
        spec = [(w, w, t) for w in tput_w if t in res.threads_of(w)]
        if not spec:
            continue
        vals = doc.grid("%d thread%s%s" % (t, "s" if t > 1 else "", " (10 per core)" if t == 10 * n else
                                             " (one per core)" if t == n else ""), spec, res.main, thr, "mops")
        plot_grid(res, doc, "throughput-t%d" % t, "Throughput, %d threads" % t, "Mops/s", spec, res.main,
                  {k: (v / 1e6 if v else v) for k, v in vals.items()}, log=True)
    trace_w = res.group("trace")
    if trace_w:
        spec = [(w, w, None) for w in trace_w]
        vals = doc.grid("Replays of recorded programs (recorded threads)", spec, res.main, thr, "mops")
        plot_grid(res, doc, "throughput-traces", "Replay throughput", "Mops/s", spec, res.main,
                  {k: (v / 1e6 if v else v) for k, v in vals.items()}, log=True)
        replay_determinism(res, doc, trace_w)


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


def instructions_section(res, doc):
    """Callgrind's counts per call, when the run had callgrind runs."""
    m = res.meta
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


def latency_section(res, doc):
    """P99 and P99.99 at the top thread count, then every percentile per workload."""
    tput_w, trace_w = res.group("throughput"), res.group("trace")
    doc.p("## Latency per allocator call")
    doc.p()
    top = res.top_threads()
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
