"""Issue 3's figures in the report: the range backend under reformatting and a
peak-trough swing (docs/design/bench.md, "Allocator figures"; issue 3).

The workloads print the allocator's own figures (bench/harness/allocstats.c):
`as_*` fields of the result line. jwmalloc's backend counters (splits, merges,
ranges handed out and taken back) over the measured region; at the end of each
peak-trough hold, mapped, metadata and backed bytes in each allocator's own
definition (jwmalloc and jemalloc; mimalloc only says what it has committed).
"""

JW = "jwmalloc"
# The target: after the trough within 10% of the steady level, plus
# what the allocator deliberately keeps cached (jwmalloc: entirely free roots
# kept for reuse, JWMALLOC_RETAIN_ROOTS, and their records).
TROUGH_SLACK = 1.10


def mib(v):
    return "-" if v is None else "%.1f" % (v / 1048576.0)


def kib(v):
    return "-" if v is None else "%.0f" % (v / 1024.0)


def per_op(r, key):
    """Counter `key` of a run's region divided by its allocator calls."""
    res = r.get("result", {})
    v, ops = res.get(key), res.get("ops")
    return v / ops if isinstance(v, (int, float)) and ops else None


def reformat_rows(res):
    """Rows (allocator, instr/op, splits/op, merges/op, range ops/op, source) for reformat."""
    cgt = res.meta.get("callgrind_threads")
    rows = []
    for a in res.main:
        instr = res.metric("reformat", a, cgt, lambda r: r.get("alloc_instr_per_op"), "callgrind")
        cg = res.ok_runs("reformat", a, cgt, "callgrind")
        src = cg[0]["result"].get("astats") if cg else None
        vals = [res.metric("reformat", a, cgt, (lambda k: lambda r: per_op(r, k))(k), "callgrind")
                for k in ("as_splits", "as_merges", "as_range_allocs", "as_range_frees")]
        rows.append((a, instr, vals, src))
    return rows


def trough_fields(r, what):
    """(steady, peak, trough, kept-at-trough) of `what` ("mapped", "meta", "backed", "live") from one run."""
    res = r.get("result", {})
    kept_key = {"mapped": "kept", "meta": "kept_meta"}.get(what)

    def g(k):
        v = res.get(k)
        return v if isinstance(v, (int, float)) else None

    return (g("as_steady_" + what), g("as_peak_" + what), g("as_trough_" + what),
            g("as_trough_" + kept_key) if kept_key else None)


def trough_verdict(steady, trough, kept):
    """True when trough <= 1.1 x steady + kept; None when not computable."""
    if steady is None or trough is None or steady <= 0:
        return None
    return trough <= TROUGH_SLACK * steady + (kept or 0)


def median_runs(res, workload, alloc, t, fn):
    vals = [fn(r) for r in res.ok_runs(workload, alloc, t)]
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    vals.sort()
    return vals[len(vals) // 2]


def section(res, doc, fmt):
    """The report's section on issue 3 (its verdicts also appear among the paper's comparisons, where the
    shortfalls are listed)."""
    if "reformat" not in res.wl and "peak-trough" not in res.wl:
        return
    doc.p("## Range backend (issue 3): reformatting and peak-trough")
    doc.p()
    doc.p("The allocators' own figures, read by the workload through each allocator's introspection interface "
          "(jwmalloc `jw_stats_get`, jemalloc `mallctl`, mimalloc `mi_process_info`, found with `dlsym`; "
          "docs/design/bench.md, \"Allocator figures\"). Each allocator's own definitions: jwmalloc *mapped* is "
          "every byte it has mapped, *metadata* the backend's per-granule records (12 bytes per 4 KiB of mapped "
          "roots) and root-map leaves, *backed* mapped minus free ranges whose pages were released, *kept* the "
          "entirely free 4 MiB roots it keeps on purpose (`JWMALLOC_RETAIN_ROOTS`); jemalloc *mapped* is "
          "`stats.mapped` (active extents: it leaves out free dirty pages), *metadata* `stats.metadata`, "
          "*backed* `stats.resident`. *In use*: jwmalloc's live ranges (slabs counted whole) and direct mappings, "
          "jemalloc's `stats.active`: when in use falls back after the trough and mapped does not, the memory is "
          "scattered (fragmentation), not leaked.")
    doc.p()
    if "reformat" in res.wl and res.meta.get("callgrind") and "reformat" in res.meta["callgrind"]:
        cgt = res.meta.get("callgrind_threads")
        rows = reformat_rows(res)
        doc.p("**Reformatting, %s threads, fixed work under callgrind** (the dominant size class changes every "
              "20,000 calls, live bytes constant): allocator instructions per call, and jwmalloc's backend "
              "operations per call over the same measured region." % cgt)
        doc.p()
        doc.table(["allocator", "allocator instr/call", "backend splits/call", "backend merges/call",
                   "ranges taken/call", "ranges given back/call"],
                  [[a, fmt(i, "instr")] + ["%.4f" % v if v is not None else "-" for v in vals]
                   for a, i, vals, _ in rows])
        jw = next((i for a, i, _, _ in rows if a == JW), None)
        for peer in ("jemalloc", "mimalloc"):
            pv = next((i for a, i, _, _ in rows if a == peer), None)
            if jw and pv:
                ok = jw < pv
                doc.p("- vs %s: jwmalloc %.0f, %s %.0f instructions per call: %s" % (
                    peer, jw, peer, pv, "**meets** the target (fewer)" if ok else
                    "**falls short** of the target (fewer than %s)" % peer))
        doc.p()
    if "peak-trough" in res.wl:
        fp = [a for a in res.main + [x for x in res.extra if x not in res.main]]
        for t in res.threads_of("peak-trough"):
            if t is None:
                continue
            doc.p("**Peak-trough, %s threads** (steady 32 MiB live, 5x bursts): the allocator's figures at the end "
                  "of the first steady hold, the largest at the end of a peak hold, and the mean over the ends of "
                  "the trough holds (MiB; metadata KiB). Target (jwmalloc): after the trough, mapped and metadata "
                  "within 10%% of the steady level plus what it keeps on purpose." % t)
            doc.p()
            rows, notes = [], []
            for a in fp:
                st = res.allocs.get(a, {}).get("state", "ok")
                if st != "ok":
                    rows.append([a, st] + [""] * 10)
                    continue
                m = [median_runs(res, "peak-trough", a, t, (lambda i: lambda r: trough_fields(r, "mapped")[i])(i))
                     for i in range(4)]
                md = [median_runs(res, "peak-trough", a, t, (lambda i: lambda r: trough_fields(r, "meta")[i])(i))
                      for i in range(4)]
                b = [median_runs(res, "peak-trough", a, t, (lambda i: lambda r: trough_fields(r, "backed")[i])(i))
                     for i in range(3)]
                lv = [median_runs(res, "peak-trough", a, t, (lambda i: lambda r: trough_fields(r, "live")[i])(i))
                      for i in range(3)]
                if all(v is None for v in m + md + b + lv):
                    rows.append([a, "no figures"] + [""] * 10)
                    continue
                ratio = "%.2f" % (m[2] / m[0]) if m[0] and m[2] is not None else "-"
                mratio = "%.2f" % (md[2] / md[0]) if md[0] and md[2] is not None else "-"
                rows.append([a, mib(m[0]), mib(m[1]), mib(m[2]), ratio, kib(md[0]), kib(md[1]), kib(md[2]), mratio,
                             "%s / %s / %s" % (mib(b[0]), mib(b[1]), mib(b[2])),
                             "%s / %s / %s" % (mib(lv[0]), mib(lv[1]), mib(lv[2])),
                             mib(m[3]) if m[3] is not None else "-"])
                if a == JW:
                    for what, vals, unit, name in (("mapped", m, mib, "MiB"), ("metadata", md, kib, "KiB")):
                        ok = trough_verdict(vals[0], vals[2], vals[3])
                        if ok is None:
                            continue
                        lim = TROUGH_SLACK * vals[0] + (vals[3] or 0)
                        notes.append("- jwmalloc %s after the trough: %s %s; limit 1.1 x %s + %s kept = %s: %s" % (
                            what, unit(vals[2]), name, unit(vals[0]), unit(vals[3] or 0), unit(lim),
                            "**meets** the target" if ok else "**falls short** (%.2fx the steady level)" %
                            (vals[2] / vals[0])))
            doc.table(["allocator", "steady mapped", "peak mapped", "after trough mapped", "trough / steady",
                       "steady meta KiB", "peak meta KiB", "after trough meta KiB", "trough / steady",
                       "backed steady / peak / trough", "in use steady / peak / trough", "kept after trough"], rows)
            for n in notes:
                doc.p(n)
            if notes:
                doc.p()
