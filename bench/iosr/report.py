#!/usr/bin/env python3
"""Report of the IOSR evaluation (docs/design/iosr-eval.md, "Report"): reads
DIR/raw/results.json (made by bench/iosr/run.py) and writes DIR/report.md with
PNG plots (gnuplot, through bench/suite/plots.py). Every figure is also given
as a ratio to Linux's swap measured in the same run; the targets of issue 6
are checked and, where IOSR falls short, the measured reasons are stated.

  bench/iosr/report.py DIR [--publish DEST]"""
import json
import os
import shutil
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "suite"))
sys.path.insert(0, HERE)

import plots  # noqa: E402  (bench/suite/plots.py: gnuplot helpers)
import report_cli  # noqa: E402  (bench/suite/report_cli.py: the command line)

KERNEL = "linux"
KERNEL_ROT = "linux-rot"
BASELINE = "global/cluster/fifo"
IOSR = "process/adaptive/sios"
IOSR_FIFO = "process/adaptive/fifo"
SEQ_REF = "seq-1M-qd32"
BUCKETS = ["4K", "8K", "16K", "32K", "64K", "128K", "256K", "512K", "1M", "2M", "4M+"]
WRITER = "+writer"


def pct(xs, p):
    if not xs:
        return None
    s = sorted(xs)
    k = (len(s) - 1) * p
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def med(xs):
    return statistics.median(xs) if xs else None


def summarize(run):
    """Figures of one configuration over its measured (not warm-up) switches."""
    sw = [s for s in run["switches"] if not s["warmup"]]
    out = {"n": len(sw), "config": run["config"], "kind": run["kind"]}
    if not sw:
        return out
    ms = [s["ms"] for s in sw]
    out["ms"] = ms
    out["ms_med"], out["ms_p90"], out["ms_mean"] = med(ms), pct(ms, 0.9), statistics.mean(ms)
    bw = [s["read_bytes"] / 1e6 / (s["stall_ms"] / 1e3) for s in sw if s["stall_ms"] > 0]
    out["bw_med"] = med(bw)
    tot_b = sum(s["read_bytes"] for s in sw)
    out["bw_agg"] = tot_b / 1e6 / (sum(s["stall_ms"] for s in sw) / 1e3)
    busy = sum(s.get("read_busy_s", 0) for s in sw)
    out["bw_busy"] = tot_b / 1e6 / busy if busy > 0 else None
    out["busy_share"] = busy / (sum(ms) / 1e3) if busy else None
    out["read_mb"] = tot_b / 1e6 / len(sw)
    need = [(s["scan"]["absent"] + s["scan"]["swapcache"]) * 4096 for s in sw]
    out["need_mb"] = sum(need) / 1e6 / len(sw)
    out["read_amp"] = tot_b / sum(need) if sum(need) else None
    # the same bandwidth counting only the pages the switch needed (read-ahead the app did not use left out)
    out["bw_need_med"] = med([nb / 1e6 / (s["stall_ms"] / 1e3) for nb, s in zip(need, sw) if s["stall_ms"] > 0])
    reqs = sum(s.get("read_reqs", 0) for s in sw)
    out["reqs"] = reqs / len(sw)
    out["req_kib"] = tot_b / 1024 / reqs if reqs else None
    out["write_mb"] = sum(s.get("write_bytes", 0) for s in sw) / 1e6 / len(sw)
    for key in ("read_hist", "read_hist_bytes"):
        hist = [0] * len(BUCKETS)
        for s in sw:
            for i, v in enumerate(s.get(key) or []):
                hist[min(i, len(hist) - 1)] += v
        out[key] = hist
    out["present_share"] = sum(s["scan"]["present"] for s in sw) / max(1, sum(s["scan"]["hot_pages"] for s in sw))
    out["hot_mb"] = sum(s["scan"]["hot_pages"] for s in sw) * 4096 / 1e6 / len(sw)
    out["bad"] = sum(s["bad"] for s in sw) + run.get("verify_bad", 0)
    out["load"] = statistics.mean(s["load1"] for s in sw)
    out["majflt"] = sum(s["majflt"] for s in sw) / len(sw)
    if any("iosr" in s for s in sw):
        io = [s["iosr"] for s in sw]
        out["iosr_major"] = sum(x["major_faults"] for x in io) / len(sw)
        out["iosr_probe"] = sum(x["probe_faults"] for x in io) / len(sw)
        out["ra_hits"] = sum(x["ra_hits"] for x in io)
        out["ra_misses"] = sum(x["ra_misses"] for x in io)
    out["utime_ms"] = sum(s["utime_ms"] for s in sw) / len(sw)
    out["stime_ms"] = sum(s["stime_ms"] for s in sw) / len(sw)
    over = [s["peak_over_limit"] for s in sw if s.get("peak_over_limit") is not None]
    out["over_max_mb"] = max(over) / 1e6 if over else None
    out["budget_mb"] = run.get("budget", 0) / 1e6
    for k in ("app_run_ms", "app_wait_ms", "daemon_run_ms", "daemon_wait_ms"):
        xs = [s["sched"][k] for s in sw if k in s.get("sched", {})]
        out[k] = statistics.mean(xs) if xs else None
    cw = [s["cpu_wait_share"] for s in sw if "cpu_wait_share" in s]
    out["cpu_wait"] = med(cw) if cw else None
    if run["kind"] == "kernel":
        out["validity"] = kernel_validity(sw)
    if "writer" in run:
        out["writer"] = run["writer"]
    out["spills"] = run.get("iosr_stat", {}).get("engine", {}).get("swap", {}).get("spills")
    return out


def kernel_validity(sw):
    """The Linux run counts only if the device served the switches: the hot
    pages the app needed were not in the swap cache, and /proc/vmstat's pswpin
    grew by at least as many pages as had to come from the device."""
    absent = sum(s["scan"]["absent"] for s in sw)
    cached = sum(s["scan"]["swapcache"] for s in sw)
    pswpin = sum(s["vm"].get("pswpin", 0) for s in sw)
    traced = sum(s.get("read_bytes", 0) for s in sw) // 4096
    need = absent + cached
    share = cached / need if need else 0.0
    ok = need > 0 and share <= 0.20 and pswpin >= 0.95 * absent
    return {"absent": absent, "swapcache": cached, "pswpin": pswpin, "traced_pages": traced,
            "cache_share": share, "valid": ok,
            "swap_ra": sum(s["vm"].get("swap_ra", 0) for s in sw),
            "swap_ra_hit": sum(s["vm"].get("swap_ra_hit", 0) for s in sw)}


def f(v, fmt="%.0f", none="-"):
    return none if v is None else fmt % v


def ratio(a, b, fmt="%.2fx"):
    if a is None or b is None or b == 0:
        return "-"
    return fmt % (a / b)


def cdf_plot(out_dir, name, title, series):
    rows, blocks = [], []
    for i, (s, xs) in enumerate(series):
        if not xs:
            continue
        xs = sorted(xs)
        for k, x in enumerate(xs):
            rows.append(["%.6g" % x, "%.6g" % ((k + 1) / len(xs))])
        rows.append([])
        rows.append([])
        blocks.append("'@DAT@' index %d using 1:2 with steps title %s lc rgb '%s' lw 2" % (
            len(blocks), plots._q(s), plots.color(s, i)))
    if not blocks:
        return None
    script = """set terminal pngcairo size 900,500 noenhanced font 'sans,9'
set output '@PNG@'
set title %s
set xlabel 'switch time (ms, log scale)'
set ylabel 'share of switches'
set logscale x
set yrange [0:1.02]
set key outside right top
set grid
plot %s
""" % (plots._q(title), ", ".join(blocks))
    return plots._run(out_dir, name, script, rows)


def load_stats(runs):
    xs = [s["load1"] for r in runs for s in r["switches"]]
    return (min(xs), med(xs), max(xs)) if xs else (None, None, None)


def cpu_wait(runs):
    """Median share of the switches in which some task waited for a CPU (PSI), or None."""
    xs = [s["cpu_wait_share"] for r in runs for s in r["switches"] if "cpu_wait_share" in s]
    return med(xs) if xs else None


def bullets(w, title, items):
    """A section of bullet points, left out when there are none."""
    if items:
        w("")
        w(title)
        w("")
        for x in items:
            w("- " + x)


def table(w, header, names, S, row):
    """A Markdown table: one row per configuration that has switches, cells from row(name, summary)."""
    w("| " + " | ".join(header) + " |")
    w("|" + " --- |" * len(header))
    for n in names:
        if S[n].get("n"):
            w("| " + " | ".join(row(n, S[n])) + " |")


def generate(out_dir, publish=None):
    res = json.load(open(os.path.join(out_dir, "raw", "results.json")))
    meta, runs = res["meta"], res["runs"]
    S = {r["config"]: summarize(r) for r in runs}
    m = meta["machine"]
    fio = meta.get("fio", {})
    seq = fio.get(SEQ_REF, {}).get("mb_s")
    K = S.get(KERNEL, {})
    KW = S.get(KERNEL + WRITER, {})
    L = []
    w = L.append
    w("# IOSR evaluation: app switching against Linux's own swap")
    w("")
    w("Made by `make bench-iosr%s` (`bench/iosr/run.py`); methodology and every difference between the two sides: "
      "[`docs/design/iosr-eval.md`](../../../docs/design/iosr-eval.md). Started %s, %.0f s." % (
          " QUICK=1" if meta.get("quick") else "", meta["started"], meta.get("seconds", 0)))
    lo, mid, hi = load_stats(runs)
    w("")
    w("**Machine**: %s, %d CPUs, %d GiB, Linux %s; disk `%s` (%s, I/O scheduler `%s`, reports rotational=%s), "
      "THP `%s`. **Load average** (1 min) at the switches: min %s, median %s, max %s; at start `%s`, at end `%s`%s." % (
          m.get("cpu"), m["cpus"], round(m["mem_total_kib"] / 1048576), m["kernel"], m["disk"], m.get("fs"),
          m["scheduler"], m["rotational"], m.get("thp"), f(lo, "%.1f"), f(mid, "%.1f"), f(hi, "%.1f"),
          meta["load_start"].split()[0], meta.get("load_end", "? ").split()[0],
          " — the machine was shared, so times are noisy; counts and bytes are not" if (mid or 0) > 1.0 else ""))
    cw = cpu_wait(runs)
    if cw is not None:
        w("")
        w("**CPU contention** (`/proc/pressure/cpu`): during the median switch some task waited for a CPU %.0f%% of "
          "the time." % (100 * cw))
    b0 = next((b for r in runs for b in r.get("builds", [])), None)
    hot = statistics.mean([b["hot_pages"] for r in runs[:1] for b in r.get("builds", [])] or [0]) * 4096 / 2**20
    w("")
    w("**Workload**: %d apps of %d MiB heap each (objects of 48 B-1 MiB, %s live objects per app), a hot set of %.0f MiB "
      "per app on average (pointer-chased objects plus buffers read in address order; one in %d chased objects "
      "written). Memory for %.0f%% of the heaps (%d MiB): the IOSR budget, and the memory cgroup limit above "
      "what the apps use before their heaps exist. %d warm-up round%s and %d measured round%s through all apps, "
      "least recently used app first, so every switch brings back a swapped-out app; %.1f s in the foreground "
      "each." % (meta["apps"], meta["heap"] >> 20, f(b0 and b0["live_objects"]), hot, meta["write_every"] or 0,
                 meta["budget_frac"] * 100, meta["apps"] * meta["heap"] * meta["budget_frac"] / 2**20,
                 meta["warmup"], "" if meta["warmup"] == 1 else "s", meta["rounds"],
                 "" if meta["rounds"] == 1 else "s", meta["dwell"]))
    if meta.get("quick"):
        w("")
        w("*QUICK run: small apps, few switches, the ablation set only: indicative, not results.*")

    # ---- physical limit
    w("")
    w("## The disk (fio, same run)")
    w("")
    w("| job | MB/s | IOPS | mean latency |")
    w("| --- | --- | --- | --- |")
    for k, v in fio.items():
        w("| %s | %.0f | %.0f | %.0f us |" % (k, v["mb_s"], v["iops"], v["lat_us_mean"]))
    w("")
    w("O_DIRECT reads of a 1 GiB file in the same directory as the swap areas; `%s` is the physical limit the "
      "targets refer to." % SEQ_REF)

    # ---- validity
    w("")
    w("## Linux swap: did the device serve the switches?")
    w("")
    w("Before each switch the app counts its hot pages that are mapped, in the swap cache (not mapped, but "
      "`mincore` reports them) or on the device only; `/proc/vmstat` gives the pages Linux read from swap "
      "(`pswpin`) during the switch. A run is **void** when more than 20% of the needed pages came from the swap "
      "cache, or pswpin is below the pages that had to come from the device.")
    w("")
    w("| run | hot pages needed | of them in swap cache | pswpin | traced swap reads (pages) | read-ahead pages (hits) | verdict |")
    w("| --- | --- | --- | --- | --- | --- | --- |")
    for name, s in S.items():
        v = s.get("validity")
        if not v:
            continue
        w("| %s | %d | %d (%.1f%%) | %d | %d | %d (%d) | %s |" % (
            name, v["absent"] + v["swapcache"], v["swapcache"], 100 * v["cache_share"], v["pswpin"],
            v["traced_pages"], v["swap_ra"], v["swap_ra_hit"], "valid" if v["valid"] else "**VOID**"))
    kswap = runs and next((r for r in runs if r["config"] == KERNEL), None)
    if kswap:
        si = kswap.get("system", {})
        w("")
        w("Linux swapped to `%s` as %s (page-cluster %s, VMA read-ahead %s, swappiness %s); other swap areas "
          "active: %s." % (os.path.basename(kswap.get("system", {}).get("disk", "?")), si.get("swapped_as", "?"),
                            si.get("page_cluster"), si.get("vma_ra_enabled"), si.get("swappiness"),
                            ", ".join(si.get("other_swaps") or []) or "none"))

    # ---- main table
    quiet = [n for n in S if not n.endswith(WRITER)]
    w("")
    w("## Switch time and swap-in bandwidth (quiet)")
    w("")
    w("Switch time: from the moment the app is told to come to the foreground until it has touched its whole hot "
      "set. Swap-in bandwidth: bytes read from the swap area during the switch (block trace) / the time the app "
      "spent waiting in faults (switch time minus its own CPU time). Ratios are to Linux swap (`%s`) in this run." % KERNEL)
    w("")
    table(w, ["configuration", "switches", "switch median", "p90", "vs Linux", "swap-in MB/s", "vs Linux",
              "read per switch", "needed", "read requests", "avg request", "written during switch", "data"], quiet, S,
          lambda n, s: [label(n), "%d" % s["n"], f(s["ms_med"]) + " ms", f(s["ms_p90"]) + " ms",
                        ratio(s["ms_med"], K.get("ms_med")), f(s["bw_med"]), ratio(s["bw_med"], K.get("bw_med"), "%.1fx"),
                        f(s["read_mb"], "%.1f") + " MB", f(s["need_mb"], "%.1f") + " MB", f(s["reqs"]),
                        f(s["req_kib"], "%.1f") + " KiB", f(s["write_mb"], "%.1f") + " MB",
                        "ok" if s["bad"] == 0 else "**%d BAD**" % s["bad"]])
    w("")
    w("Device view of the same switches: bandwidth over the time the disk had a swap read in flight, that time's "
      "share of the switch, bytes read per byte needed (read-ahead of pages the switch did not need), the swap-in "
      "bandwidth counting only the bytes the switch needed (and its ratio to Linux's), faults, hot "
      "pages still mapped when the switch began, and the most memory the apps held above the limit during a switch "
      "(Linux: the cgroup's peak usage over its limit; IOSR: resident region pages over the budget; both limits "
      "are hard, so both are 0 unless a limit was passed):")
    w("")
    table(w, ["configuration", "MB/s while reading", "disk busy share", "read / needed", "needed MB/s",
              "faults per switch",
              "hot pages already mapped", "most above the limit"], quiet, S,
          lambda n, s: [label(n), f(s.get("bw_busy")), f(s.get("busy_share") and 100 * s["busy_share"], "%.0f%%"),
                        f(s.get("read_amp"), "%.2f"),
                        "%s (%s)" % (f(s.get("bw_need_med")), ratio(s.get("bw_need_med"), K.get("bw_need_med"), "%.1fx")),
                        "%.0f major" % s["majflt"] if s["kind"] == "kernel" else "%.0f major + %.0f probe" % (
                            s.get("iosr_major", 0), s.get("iosr_probe", 0)),
                        "%.1f%%" % (100 * s["present_share"]),
                        "-" if s.get("over_max_mb") is None else "%.1f MB" % max(0.0, s["over_max_mb"])])
    w("")
    w("CPU view (means per switch): the app's CPU time (user + system; Linux's fault path and direct reclaim run in "
      "the app, IOSR's in iosrd), the time the app and iosrd were runnable but waited for a CPU (`schedstat`), iosrd's "
      "CPU time, and the share of the switch in which some task on the machine waited for a CPU (PSI):")
    w("")
    table(w, ["configuration", "app CPU (user + system)", "app waiting for a CPU", "iosrd CPU",
              "iosrd waiting for a CPU", "CPU contention"], quiet, S,
          lambda n, s: [label(n), "%.0f + %.0f ms" % (s["utime_ms"], s["stime_ms"]), f(s.get("app_wait_ms"), "%.0f ms"),
                        f(s.get("daemon_run_ms"), "%.0f ms"), f(s.get("daemon_wait_ms"), "%.0f ms"),
                        f(None if s.get("cpu_wait") is None else 100 * s["cpu_wait"], "%.0f%%")])

    # ---- targets
    I = S.get(IOSR, {})
    IW = S.get(IOSR + WRITER, {})
    F = S.get(IOSR_FIFO, {})
    FW = S.get(IOSR_FIFO + WRITER, {})
    B = S.get(BASELINE, {})
    w("")
    w("## Targets (issue 6)")
    w("")
    w("| target | measured | met |")
    w("| --- | --- | --- |")
    checks = []

    def target(text, val, ok):
        checks.append((text, ok))
        w("| %s | %s | %s |" % (text, val, "-" if ok is None else ("yes" if ok else "**no**")))

    r_ms = I.get("ms_med") / K["ms_med"] if I.get("ms_med") and K.get("ms_med") else None
    target("IOSR (%s) switch time <= 0.5x Linux swap" % IOSR, f(r_ms, "%.2fx"), None if r_ms is None else r_ms <= 0.5)
    r_bw = I.get("bw_med") / K["bw_med"] if I.get("bw_med") and K.get("bw_med") else None
    target("IOSR swap-in bandwidth >= 3x Linux swap", f(r_bw, "%.1fx"), None if r_bw is None else r_bw >= 3)
    r_seq = I.get("bw_med") / seq if I.get("bw_med") and seq else None
    target("IOSR swap-in bandwidth >= 0.5x fio sequential read (%s, %s MB/s)" % (SEQ_REF, f(seq)),
           f(r_seq, "%.2fx"), None if r_seq is None else r_seq >= 0.5)
    g_i = growth(I, IW)
    g_k = growth(K, KW)
    g_f = growth(F, FW)
    target("under interference IOSR's switch time grows <= 1.3x", f(g_i, "%.2fx"), None if g_i is None else g_i <= 1.3)
    target("... while Linux swap's grows more", "Linux %s" % f(g_k, "%.2fx"),
           None if g_k is None or g_i is None else g_k > g_i)
    target("... and %s's grows more" % IOSR_FIFO, f(g_f, "%.2fx"), None if g_f is None or g_i is None else g_f > g_i)
    if B.get("ms_med") and I.get("ms_med"):
        w("")
        w("Against the baseline policies (`%s`, Linux's decisions inside IOSR): IOSR's switch time is %.1f%% %s and "
          "its swap-in bandwidth %.1f%% %s (the paper, against its state of the art on a Pixel 4: 31.7%% shorter "
          "switching, 35.5%% more bandwidth)." % (
              BASELINE, abs(100 * (1 - I["ms_med"] / B["ms_med"])), "shorter" if I["ms_med"] < B["ms_med"] else "longer",
              abs(100 * (I["bw_med"] / B["bw_med"] - 1)), "more" if I["bw_med"] > B["bw_med"] else "less"))
    caveats = []
    if I.get("read_amp") and K.get("read_amp") and I.get("bw_need_med") and K.get("bw_need_med"):
        caveats.append("Swap-in bandwidth, as the issue defines it, counts every byte read, also read-ahead the "
                       "switch did not use: IOSR read %.2f bytes per byte needed, Linux %.2f. Counting only the needed "
                       "bytes, IOSR's swap-in bandwidth is %.1fx Linux's." % (
                           I["read_amp"], K["read_amp"], I["bw_need_med"] / K["bw_need_med"]))
    if I.get("over_max_mb") is not None and I["over_max_mb"] > 0:
        caveats.append("IOSR's budget, hard like Linux's memory cgroup limit, was passed by up to %.0f MB during a "
                       "switch (budget %.0f MB; it is passed only when nothing can be reclaimed, "
                       "docs/design/iosr.md, \"Memory budget\"): IOSR had that much more memory for a moment."
                       % (I["over_max_mb"], I.get("budget_mb") or 0))
    bullets(w, "### Read the figures with these differences", caveats)
    bullets(w, "### Where IOSR falls short, and why (from this run's figures)",
            shortfalls(S, K, I, seq, r_ms, r_bw, r_seq, g_i, g_k, g_f))

    # ---- ablation
    w("")
    w("## Ablation: each policy's contribution")
    w("")
    w("One policy changed at a time from the baseline (Linux's decisions inside IOSR), and one policy reverted "
      "at a time from IOSR:")
    w("")
    w("| configuration | changed | switch median | vs baseline | vs IOSR | vs Linux | swap-in MB/s | vs baseline | "
      "read requests | avg request | written during switch |")
    w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    base = BASELINE.split("/")
    full = IOSR.split("/")
    for ref, refname in ((base, "baseline"), (full, "IOSR")):
        for n in quiet:
            s = S[n]
            if s["kind"] != "iosr" or not s.get("n"):
                continue
            parts = n.split("/")
            diff = [p for p, q in zip(parts, ref) if p != q]
            if len(diff) != 1 and not (not diff and refname == "baseline"):
                continue
            what = "(baseline)" if not diff else ("%s from the baseline" % diff[0] if refname == "baseline" else
                                                  "%s instead of IOSR's %s" % (diff[0], [q for p, q in zip(parts, ref)
                                                                                        if p != q][0]))
            w("| %s | %s | %s ms | %s | %s | %s | %s | %s | %s | %s KiB | %s MB |" % (
                label(n), what, f(s["ms_med"]), ratio(s["ms_med"], B.get("ms_med")), ratio(s["ms_med"], I.get("ms_med")),
                ratio(s["ms_med"], K.get("ms_med")), f(s["bw_med"]), ratio(s["bw_med"], B.get("bw_med"), "%.1fx"),
                f(s["reqs"]), f(s["req_kib"], "%.1f"), f(s["write_mb"], "%.1f")))
    if sum(1 for n in quiet if S[n]["kind"] == "iosr") >= 12:
        w("")
        w("Every combination (2 slot x 3 read-ahead x 2 scheduling policies) is in the first table.")

    # ---- interference
    wr = [n for n in S if n.endswith(WRITER)]
    if wr:
        w("")
        w("## Interference: a background download (buffered writes with fsync)")
        w("")
        wm = meta.get("writer_rate") or 0
        w("An fio process writes a 1 GiB file in 256 KiB buffered writes with an fsync every %d writes, %s, outside "
          "the apps' cgroup, during the switches." % (meta.get("writer_fsync", 4),
                                                       "at up to %.0f MB/s" % (wm / 1e6) if wm else "as fast as it can"))
        w("")
        w("| configuration | quiet median | with writer | growth | p90 with writer | vs Linux with writer | "
          "writer achieved | writer fsync mean |")
        w("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for n in wr:
            q, s = S.get(n[:-len(WRITER)], {}), S[n]
            if not s.get("n"):
                continue
            wt = s.get("writer", {})
            w("| %s | %s ms | %s ms | %s | %s ms | %s | %s MB/s | %s ms |" % (
                label(n[:-len(WRITER)]), f(q.get("ms_med")), f(s["ms_med"]), f(growth(q, s), "%.2fx"),
                f(s["ms_p90"]), ratio(s["ms_med"], KW.get("ms_med")), f(wt.get("mb_s")),
                f(wt.get("fsync_ms_mean"), "%.1f")))

    # ---- notes
    notes = []
    kicks = {r["config"]: r.get("kicks", 0) for r in runs if r.get("kicks")}
    if kicks:
        notes.append("Waiting for swap I/O to finish before a switch took over a second; from then on the driver "
                     "nudged the disk with a 4 KiB read every half second, in case it had stalled (docs/design/iosr-eval.md, "
                     "\"Device stalls\"): %s." % ", ".join(
                         "%s %d" % (k, v) for k, v in kicks.items()))
    ooms = {r["config"]: r["oom_kills"] for r in runs if r.get("oom_kills")}
    if ooms:
        notes.append("Linux's memory cgroup OOM-killed apps: %s." % ", ".join("%s %d" % kv for kv in ooms.items()))
    if meta.get("trace_lost"):
        notes.append("The block trace lost %d events (buffer overrun): request counts may be low." % meta["trace_lost"])
    notidle = [r["config"] for r in runs for s in r["switches"] if not s.get("idle_before", True)]
    if notidle:
        notes.append("Swap I/O was still pending before %d switch(es) (%s)." % (len(notidle), ", ".join(sorted(set(notidle)))))
    bullets(w, "## Notes on this run", notes)

    # ---- plots
    pngs = []
    cdf = cdf_plot(out_dir, "switch_cdf", "Switch time CDF (quiet)",
                   [(label(n), S[n].get("ms")) for n in quiet if S[n].get("n")])
    if cdf:
        pngs.append((cdf, "Switch time, cumulative distribution per configuration"))
    if wr:
        cdfw = cdf_plot(out_dir, "switch_cdf_writer", "Switch time CDF with the background writer",
                        [(label(n[:-len(WRITER)]) + " quiet", S.get(n[:-len(WRITER)], {}).get("ms")) for n in wr] +
                        [(label(n[:-len(WRITER)]) + " writer", S[n].get("ms")) for n in wr])
        if cdfw:
            pngs.append((cdfw, "Switch time with and without the background writer"))
    cats = [label(n) for n in quiet if S[n].get("n")]
    bw = plots.bars(out_dir, "swapin_bw", "Swap-in bandwidth per configuration (median of switches; dashed: fio %s)"
                    % SEQ_REF, "MB/s", cats, ["swap-in", "while the disk was reading"],
                    {**{(label(n), "swap-in"): S[n].get("bw_med") for n in quiet},
                     **{(label(n), "while the disk was reading"): S[n].get("bw_busy") for n in quiet}}, ref_line=seq)
    if bw:
        pngs.append((bw, "Swap-in bandwidth"))
    rt = plots.bars(out_dir, "ratio_to_linux", "Ratio to Linux swap in this run (dashed: 1)", "x Linux swap", cats,
                    ["switch time", "swap-in bandwidth"],
                    {**{(label(n), "switch time"): S[n]["ms_med"] / K["ms_med"] for n in quiet
                        if S[n].get("n") and K.get("ms_med")},
                     **{(label(n), "swap-in bandwidth"): S[n]["bw_med"] / K["bw_med"] for n in quiet
                        if S[n].get("bw_med") and K.get("bw_med")}}, log=True, ref_line=1)
    if rt:
        pngs.append((rt, "Every configuration as a ratio to Linux swap"))
    shown = [n for n in (KERNEL, KERNEL_ROT, BASELINE, IOSR) if n in S and S[n].get("n")]
    for what, key in (("requests", "read_hist"), ("bytes", "read_hist_bytes")):
        vals = {}
        for n in shown:
            h = S[n][key]
            tot = sum(h)
            for i, c in enumerate(h):
                vals[(BUCKETS[i], label(n))] = 100.0 * c / tot if tot else None
        hp = plots.bars(out_dir, "request_sizes_" + what, "Swap read requests by size: share of %s" % what,
                        "% of " + what, BUCKETS, [label(n) for n in shown], vals)
        if hp:
            pngs.append((hp, "Read request sizes at the disk (block trace), share of %s" % what))
    if wr:
        wv = {}
        for n in wr:
            wv[(label(n[:-len(WRITER)]), "quiet")] = S.get(n[:-len(WRITER)], {}).get("ms_med")
            wv[(label(n[:-len(WRITER)]), "with writer")] = S[n].get("ms_med")
        ip = plots.bars(out_dir, "interference", "Median switch time, quiet and with the background writer", "ms",
                        [label(n[:-len(WRITER)]) for n in wr], ["quiet", "with writer"], wv)
        if ip:
            pngs.append((ip, "Interference"))
    w("")
    w("## Plots")
    if not pngs:
        w("")
        w("gnuplot is missing or failed: no plots.")
    for p, cap in pngs:
        w("")
        w("![%s](%s)" % (cap, p))
    w("")
    w("Raw figures of every switch: `raw/results.json` in the results directory (not committed).")
    path = os.path.join(out_dir, "report.md")
    with open(path, "w") as fh:
        fh.write("\n".join(L) + "\n")
    if publish:
        os.makedirs(publish, exist_ok=True)
        for old in os.listdir(publish):
            if old.endswith(".png") or old == "report.md":
                os.unlink(os.path.join(publish, old))
        shutil.copy(path, publish)
        for p, _ in pngs:
            shutil.copy(os.path.join(out_dir, p), publish)
    return path


def label(n):
    return {KERNEL: "Linux swap", KERNEL_ROT: "Linux swap (disk as rotational)",
            BASELINE: "baseline " + BASELINE, IOSR: "IOSR " + IOSR}.get(n, n)


def growth(q, s):
    if q and s and q.get("ms_med") and s.get("ms_med"):
        return s["ms_med"] / q["ms_med"]
    return None


def shortfalls(S, K, I, seq, r_ms, r_bw, r_seq, g_i, g_k, g_f):
    """Plain statements, computed from the figures, for each missed target."""
    out = []
    if not I.get("n") or not K.get("n"):
        return out
    if r_ms is not None and r_ms > 0.5:
        disk = ("The disk is not what IOSR waits for: it had a swap read in flight for %.0f%% of IOSR's switch "
                "(Linux's: %.0f%%) and read at %s MB/s meanwhile." % (
                    100 * I["busy_share"], 100 * (K.get("busy_share") or 0), f(I.get("bw_busy")))
                if I.get("busy_share") is not None else
                "How long the disk had a swap read in flight is not known: this run had no block trace.")
        out.append("Switch time %.2fx Linux's (target 0.5x). %s IOSR read %.1f MB "
                   "per switch for %.1f MB of hot pages it needed (%.2f bytes per byte needed; Linux %.2f: adaptive "
                   "read-ahead cannot tell hot from cold pages in a heap whose hot third is spread over all of it, "
                   "so it reads it all), and to make room wrote %.1f MB of other apps' pages (Linux %.1f MB). Each "
                   "of those bytes is CPU work in iosrd (copy into the app, copy out of the other apps): iosrd ran "
                   "%s per switch and waited %s for a CPU, and the app waited %s for one (Linux's app: %s), with "
                   "some task waiting for a CPU %s of the time on this shared machine. IOSR's switch is a chain of "
                   "wake-ups (app -> iosrd -> disk -> iosrd -> app) for each of its %.0f major and %.0f probe faults; "
                   "on a busy CPU each hop waits. Linux's fault path runs in the app and completes its I/O in "
                   "interrupt context." % (
                       r_ms, disk, I["read_mb"], I["need_mb"], I.get("read_amp") or 0, K.get("read_amp") or 0, I["write_mb"],
                       K["write_mb"], f(I.get("daemon_run_ms"), "%.0f ms"), f(I.get("daemon_wait_ms"), "%.0f ms"),
                       f(I.get("app_wait_ms"), "%.0f ms"), f(K.get("app_wait_ms"), "%.0f ms"),
                       f(None if I.get("cpu_wait") is None else 100 * I["cpu_wait"], "%.0f%%"),
                       I.get("iosr_major", 0), I.get("iosr_probe", 0)))
    if r_bw is not None and r_bw < 3:
        reqs = ("with %.1f KiB requests (its swap-cache read-ahead turns faults into merged requests)" % K["req_kib"]
                if K.get("req_kib") else "(its requests not traced)")
        out.append("Swap-in bandwidth %.1fx Linux's (target 3x): Linux reached %.0f MB/s %s, IOSR %.0f MB/s." % (
            r_bw, K["bw_med"], reqs, I["bw_med"]))
    if r_seq is not None and r_seq < 0.5:
        busy = ("while the disk was reading, IOSR got %s MB/s out of it, but the disk was busy only %.0f%% of the "
                "fault-waiting time" % (f(I.get("bw_busy")), 100 * I["busy_share"])
                if I.get("busy_share") is not None else "the disk's busy time was not traced (no block trace)")
        out.append("Swap-in bandwidth %.2fx fio's sequential read (target 0.5x): %s; the app waits for faults one at "
                   "a time (pointer chasing), so each major fault costs a round trip through the daemon (%.0f major "
                   "+ %.0f probe faults per switch)." % (r_seq, busy, I.get("iosr_major", 0), I.get("iosr_probe", 0)))
    if g_i is not None and g_i > 1.3:
        out.append("Under interference IOSR's switch time grew %.2fx (target 1.3x): the writer's fsync flushes are "
                   "device-wide cache flushes that the swap reads wait behind, whatever their priority." % g_i)
    if g_i is not None and g_k is not None and g_k <= g_i:
        out.append("Linux swap's switch time grew %.2fx under interference, no more than IOSR's %.2fx." % (g_k, g_i))
    if g_i is not None and g_f is not None and g_f <= g_i:
        out.append("%s grew %.2fx under interference, no more than IOSR with SIOS (%.2fx): SIOS's ordering helps "
                   "only against IOSR's own writes; the writer's requests reach the disk through the kernel's "
                   "scheduler." % (IOSR_FIFO, g_f, g_i))
    return out


def main(argv):
    out, pub = report_cli.parse(argv, __doc__, [os.path.join("raw", "results.json")], "bench/iosr/run.py")
    print(generate(out, pub))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
