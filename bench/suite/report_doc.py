"""The report's Markdown building blocks (report.py): tables of workloads x
allocators and of allocators x figures, each followed by its ratios to jwmalloc,
and their plots."""
import statistics

import plots
from report_data import JW, fmt


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

