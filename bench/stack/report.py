"""The report of the stack evaluation: report.md and PNG plots (gnuplot,
through bench/suite/plots.py) in DIR, copied to --publish."""
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "suite"))

import plots  # noqa: E402

BASE = "glibc+linux"


def _ratio(a, b):
    return "-" if not b else "%.2fx" % (a / b)


def main_table(w, s, configs, programs):
    w("| program | configuration | response median ms | p90 ms | vs glibc+linux (median) | MB written at the "
      "first swap-out | vs glibc+linux | MB written per later swap-out | vs glibc+linux | MB read per switch | answers |")
    w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for prog in programs:
        b = s.get((BASE, prog))
        for c in configs:
            v = s.get((c, prog))
            if not v:
                continue
            w("| %s | %s | %.0f | %.0f | %s | %.1f | %s | %.1f | %s | %.1f | %s |" % (
                prog, c, v["median_ms"], v["p90_ms"], _ratio(v["median_ms"], b["median_ms"]) if b else "-",
                v["first_written_mb"], _ratio(v["first_written_mb"], b["first_written_mb"]) if b else "-",
                v["written_mb"], _ratio(v["written_mb"], b["written_mb"]) if b else "-", v["read_mb"],
                "identical" if v["identical"] else "DIFFER"))


def plot_all(out, s, configs, programs):
    made = []
    for name, key, title, ylabel in (
            ("response_median", "median_ms", "Response time of the first query after a switch (median)", "ms"),
            ("response_p90", "p90_ms", "Response time of the first query after a switch (p90)", "ms"),
            ("written_first", "first_written_mb", "Bytes written at an app's first swap-out", "MB"),
            ("written", "written_mb", "Bytes written to the swap device per later swap-out (median)", "MB"),
            ("read", "read_mb", "Bytes read per switch (median)", "MB")):
        vals = {(p, c): s[(c, p)][key] for c in configs for p in programs if (c, p) in s}
        png = plots.bars(out, name, title, ylabel, programs, configs, vals)
        if png:
            made.append((title, png))
    return made


def generate(out, publish, s, meta, runs, build, extras=None):
    configs = list(dict.fromkeys(r["config"] for r in runs))
    programs = meta["programs"]
    lines = []
    w = lines.append
    w("# Stack evaluation: unmodified programs on jwmalloc, swapped by IOSR")
    w("")
    w("`make bench-stack` (`bench/stack/run.py`; design: `docs/design/stack.md`). Started %s; load average %s at the "
      "start, %s at the end. **Taken on a shared 2-core machine while other work ran: times are indicative only;** "
      "bytes written and read are counts." % (meta["started"], meta["load_start"].split()[0],
                                              meta["load_end"].split()[0]))
    w("")
    w("Three programs run side by side: python3 (a dict of 450,000 strings), sqlite3 (an in-memory database of "
      "500,000 rows behind a 400 MB page cache) and node (a Map of 300,000 strings and 48 MB of Buffers); "
      "`PYTHONMALLOC=malloc` everywhere. A switch swaps the foreground app out (Linux: its memory cgroup's limit "
      "lowered to 4 MiB, then, once the writes are done, raised to what is left plus 64 MiB so that the app's "
      "threads can run without the OOM killer; IOSR: `iosr reclaim`, after the app's trim), brings the next app back (limit lifted; "
      "`iosr fg`) and times its first query, which touches a random 5%% of its entries. %d measured rounds through "
      "the apps after %d warm-up round(s), in each of %d passes through all configurations one after another "
      "(interleaved); medians over all measured switches. Linux reads and writes are `pswpin` and "
      "`pswpout` of `/proc/vmstat` during the step (machine-wide; other swap areas active at the start: %s); IOSR's are "
      "the app's own counters." % (meta["rounds"], meta["warmup"], meta.get("repeat", 1),
                                 ", ".join(meta.get("other_swaps") or []) or "none"))
    w("")
    main_table(w, s, configs, programs)
    w("")
    w("Targets (issue 26): jwmalloc + IOSR at most 0.5x glibc + Linux swap's response time and bytes written; "
      "outputs identical. Here:")
    w("")
    for prog in programs:
        v, b = s.get(("jwmalloc+iosr", prog)), s.get((BASE, prog))
        if not v or not b:
            continue
        def met(x, y):
            return "met" if y and x <= 0.5 * y else "missed"
        w("- %s: response %s (%s), bytes written at the first swap-out %s (%s), per later swap-out %s (%s), "
          "answers %s" % (prog, met(v["median_ms"], b["median_ms"]), _ratio(v["median_ms"], b["median_ms"]),
                          met(v["first_written_mb"], b["first_written_mb"]),
                          _ratio(v["first_written_mb"], b["first_written_mb"]),
                          met(v["written_mb"], b["written_mb"]), _ratio(v["written_mb"], b["written_mb"]),
                          "identical" if v["identical"] else "DIFFER"))
    w("")
    w("## Memory")
    w("")
    w("| configuration | peak resident memory of the apps over one foreground app's (MB) |")
    w("| --- | --- |")
    for c in configs:
        w("| %s | %.0f |" % (c, max(r["peak_over_limit_kib"] for r in runs if r["config"] == c) / 1024))
    w("")
    w("The limit is the memory the largest app needs when it is in the foreground (its VmRSS after it started); "
      "over it is what the background apps kept. Linux's limit takes all it can of a background app; "
      "IOSR swaps only what jwmalloc maps, so a background app keeps the rest (interpreter, libraries, the roots "
      "mapped before libiosr connected, and node's V8 heap).")
    w("")
    w("Share of each program's resident memory that IOSR serves (after start-up, `jwmalloc+iosr`):")
    w("")
    w("| program | VmRSS MB | in IOSR regions MB | share |")
    w("| --- | --- | --- | --- |")
    for prog in programs:
        v = s.get(("jwmalloc+iosr", prog))
        if v and v["iosr_share"] is not None:
            w("| %s | %.0f | %.0f | %.0f%% |" % (prog, v["rss_kib"] / 1024, v["rss_kib"] * v["iosr_share"] / 1024,
                                                100 * v["iosr_share"]))
    if extras:
        for section in extras:
            w("")
            lines.extend(section)
    made = plot_all(out, s, configs, programs)
    w("")
    w("## Plots")
    w("")
    if not made:
        w("gnuplot is missing or failed: no plots.")
    for title, png in made:
        w("![%s](%s)" % (title, png))
        w("")
    path = os.path.join(out, "report.md")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    if publish:
        os.makedirs(publish, exist_ok=True)
        shutil.copy(path, os.path.join(publish, "report.md"))
        for _, png in made:
            shutil.copy(os.path.join(out, png), os.path.join(publish, png))
    return path
