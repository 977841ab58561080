#!/usr/bin/env python3
"""Writes DIR/report.md and DIR/*.png from a results directory made by run.py
(docs/design/bench.md, "Runner and report").

  bench/suite/report.py DIR [--publish DEST]

DEST (e.g. bench/results/2026-11-30-full) gets a copy of report.md and the PNGs.
Every table is followed by the same figures as a ratio to jwmalloc measured in
the same run (value / jwmalloc's value), and every plot by its ratio plot. The
paper's comparisons are recomputed and each gets a plain verdict. When jwmalloc
is not built there are no ratios, and the report says so.

The sections live in report_*.py beside this file: report_data (the results
read back, medians, formats), report_doc (tables and plots), report_paper (the
paper's comparisons), report_speed (throughput, instructions, latency) and
report_memory (footprint, reclamation, system calls).
"""
import os
import shutil
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import backend_report  # noqa: E402
import plots  # noqa: E402
import report_cli  # noqa: E402
from report_data import JW, Results, fmt  # noqa: E402
from report_doc import Doc  # noqa: E402
from report_memory import footprint_section, reclaim_section, syscalls_section  # noqa: E402
from report_paper import paper_section  # noqa: E402
from report_speed import instructions_section, latency_section, throughput_section  # noqa: E402


def header(res, doc):
    """The title, how and where the run was made, and the allocators."""
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
    sysm = res.sys_counts()
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


def failed_runs(res, doc):
    failed = [r for r in res.runs if r.get("status") not in ("ok", None) and
              res.allocs.get(r["allocator"], {}).get("state") == "ok"]
    if failed:
        doc.p("## Runs that failed")
        doc.p()
        doc.table(["kind", "workload", "allocator", "threads", "status", "reason"],
                  [[r["kind"], r["workload"], r["allocator"], str(r["threads"] or "trace"), r["status"],
                    r.get("reason", "").replace("|", "/")[:200]] for r in failed])


def write_report(out):
    res = Results(out)
    doc = Doc(res)
    header(res, doc)
    paper_section(res, doc)
    backend_report.section(res, doc, fmt)
    failed_runs(res, doc)
    throughput_section(res, doc)
    instructions_section(res, doc)
    latency_section(res, doc)
    footprint_section(res, doc)
    reclaim_section(res, doc)
    syscalls_section(res, doc)
    doc.p("## Workloads")
    doc.p()
    doc.table(["workload", "group", "what it does"], [[w, d["group"], d["description"]] for w, d in res.wl.items()])
    if not plots.have_gnuplot():
        doc.p("_No plots: gnuplot is not installed on the machine that wrote this report; run "
              "`bench/suite/report.py %s` where it is._" % out)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(doc.lines) + "\n")


def publish(out, dest):
    """Copies the report and its plots (not the raw data) to dest, e.g. bench/results/2026-11-30-full."""
    os.makedirs(dest, exist_ok=True)
    for f in os.listdir(dest):
        if f.endswith(".png") or f == "report.md":
            os.unlink(os.path.join(dest, f))
    for f in os.listdir(out):
        if f.endswith(".png") or f == "report.md":
            shutil.copy(os.path.join(out, f), os.path.join(dest, f))


def main(argv):
    out, dest = report_cli.parse(argv, __doc__, ["meta.json", os.path.join("raw", "runs.jsonl")], "run.py")
    out = os.path.abspath(out)
    write_report(out)
    print(os.path.join(out, "report.md"))
    if dest:
        publish(out, dest)
        print("published to %s" % dest)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
