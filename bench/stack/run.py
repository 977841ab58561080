#!/usr/bin/env python3
"""Stack evaluation (issue 26; docs/design/stack.md): unmodified programs on
glibc or jwmalloc, swapped by Linux or by IOSR, switching as apps do.

Three programs (bench/stack/apps.py) run side by side. A switch sends the
foreground app to the background and swaps it out, then brings the next app
back and times its first query. Linux swaps through a memory cgroup per app
(a swap file on the same disk; the background app's limit is lowered to swap
it out, the foreground app's lifted); IOSR through `iosr reclaim` (after the
app's trim) and `iosr fg`. Figures per program and configuration: response
time after a switch (median, p90), bytes written per swap-out, bytes read per
switch, the apps' peak resident memory over the memory one foreground app
needs, and whether every answer matches glibc's.

  bench/stack/run.py [--demo] [--out DIR] [--publish DIR] [--rounds N]   (--help)

--demo: python3 alone, one switch, printed as a table (make demo). Needs
root, swapon and memory cgroup v1 for the Linux runs (skipped otherwise),
userfaultfd for IOSR. Timings on a shared machine are indicative only."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "bench", "iosr"))

import apps  # noqa: E402
import extras  # noqa: E402
import system  # noqa: E402

# name -> (allocator, swap system, environment)
CONFIGS = {
    "glibc+linux": ("glibc", "kernel", {}),
    "jwmalloc+linux": ("jwmalloc", "kernel", {}),
    "jwmalloc+iosr": ("jwmalloc", "iosr", {}),
    "jwmalloc+iosr-unaware": ("jwmalloc", "iosr", {"JWMALLOC_SWAP_TRIM": "0"}),
    "jwmalloc+iosr-placement": ("jwmalloc", "iosr", {"JWMALLOC_PLACEMENT": "1"}),
}
ENV_ALL = {"PYTHONMALLOC": "malloc"}  # the same allocation pattern in every configuration


def t_print(*a):
    print(*a, file=sys.stderr, flush=True)


def vm():
    return system.vmstat()


class Linux:
    """A swap file and one memory cgroup per app under KernelSwap's."""

    def __init__(self, a, size, log):
        self.ks = system.KernelSwap(a.dir, size, nonrot=True, log=log)
        self.cgs = {}

    def start(self):
        self.ks.start()

    def cgroup(self, name):
        d = os.path.join(self.ks.cg, name)
        os.mkdir(d)
        system.cleanup.push("app cgroup", lambda: system._remove_cgroup(d))
        self.cgs[name] = d
        return d

    def swap_out(self, app):
        """Lowers app's limit until the kernel has swapped out what it can,
        then gives it room to run in the background (its threads wake: node's
        GC and timers; a limit at the floor would have the OOM killer take it)."""
        d, want = self.cgs[app.name], 4 << 20
        while True:
            try:
                system.write(os.path.join(d, "memory.limit_in_bytes"), want)
                break
            except OSError:  # EBUSY: it cannot get that low (unevictable, in flight): a little higher
                want *= 2
        for _ in range(1000):
            if "writeback 0" in system.read(os.path.join(d, "memory.stat")).split("\n"):
                break
            time.sleep(0.01)
        usage = int(system.read(os.path.join(d, "memory.usage_in_bytes")))
        system.write(os.path.join(d, "memory.limit_in_bytes"), usage + (64 << 20))

    def bring_back(self, app):
        system.write(os.path.join(self.cgs[app.name], "memory.limit_in_bytes"), -1)

    def stop(self):
        for _ in self.cgs:
            system.cleanup.pop("app cgroup")
        self.ks.stop()


class Iosr:
    def __init__(self, a, size, log, logpath):
        self.sw = system.IosrSwap(a.build, a.dir, size, "slot=process,readahead=adaptive,sched=sios", 0, log, logpath)

    def start(self):
        self.sw.start()

    def cgroup(self, name):
        return None

    def app_io(self, name):
        for x in self.sw.stat_json()["apps"]:
            if x["name"] == name:
                return x
        return None

    def swap_out(self, app):
        self.sw.ctl("fg", "--none")  # to the background (it trims), then out (it is asked to trim first)
        self.sw.ctl("reclaim", app.name)
        self.sw.wait_idle()

    def bring_back(self, app):
        self.sw.ctl("fg", app.name)

    def stop(self):
        self.sw.stop()


def start_apps(a, cfg, sysobj, logdir):
    alloc, kind, env = CONFIGS[cfg]
    tool = os.path.join(a.build, "bin", "jwmalloc")
    out = []
    for prog in a.programs:
        prefix = []
        if alloc == "jwmalloc":
            prefix = [tool, "run"] + (["--swap", prog] if kind == "iosr" else []) + ["--"]
        e = dict(ENV_ALL)
        e.update(env)
        if kind == "iosr":
            e["IOSR_SOCKET"] = sysobj.sw.sock
        ap = apps.App(prog, prog, prefix, e, sysobj.cgroup(prog), os.path.join(logdir, "%s-%s.log" % (cfg, prog)),
                      system.child_preexec())
        ap.ready()  # one after another, as a user opens them
        out.append(ap)
    return out


def swap_out_counted(sysobj, kind, ap):
    """(bytes written, milliseconds) of swapping ap out."""
    v0 = vm()
    w0 = sysobj.app_io(ap.name)["io"]["write_bytes"] if kind == "iosr" else 0
    t0 = time.monotonic()
    sysobj.swap_out(ap)
    ms = (time.monotonic() - t0) * 1e3
    if kind == "iosr":
        return sysobj.app_io(ap.name)["io"]["write_bytes"] - w0, ms
    return (vm()["pswpout"] - v0["pswpout"]) * 4096, ms


def one_switch(sysobj, kind, prev, ap, seed):
    """Swaps prev out, brings ap back, times its query."""
    rec = {"app": ap.name, "seed": seed, "swapout_of": prev.name}
    rec["written"], rec["swapout_ms"] = swap_out_counted(sysobj, kind, prev)
    r0 = sysobj.app_io(ap.name)["io"]["read_bytes"] if kind == "iosr" else 0
    v0 = vm()
    sysobj.bring_back(ap)
    rec["answer"], rec["ms"] = ap.query(seed)
    rec["read"] = (sysobj.app_io(ap.name)["io"]["read_bytes"] - r0 if kind == "iosr"
                   else (vm()["pswpin"] - v0["pswpin"]) * 4096)
    return rec


def run_config(a, cfg, logdir):
    alloc, kind, _ = CONFIGS[cfg]
    log = lambda m: t_print("%s: %s" % (cfg, m))  # noqa: E731
    size = 2 << 30
    sysobj = Linux(a, size, log) if kind == "kernel" else Iosr(a, size, log, os.path.join(logdir, cfg + "-iosrd.log"))
    res = {"config": cfg, "allocator": alloc, "swap": kind, "switches": [], "launch": {}}
    running = []
    try:
        sysobj.start()
        running = start_apps(a, cfg, sysobj, logdir)
        for ap in running:
            res["launch"][ap.name] = {"rss_kib": ap.rss_kib()}
            if kind == "iosr":
                res["launch"][ap.name]["iosr_resident_kib"] = sysobj.app_io(ap.name)["resident_pages"] * 4
        need = max(v["rss_kib"] for v in res["launch"].values())  # one foreground app's memory
        res["limit_kib"] = need
        for ap in running[:-1]:  # the apps opened before the last are in the background
            res["launch"][ap.name]["first_written"] = swap_out_counted(sysobj, kind, ap)[0]
        sysobj.bring_back(running[-1])
        prev, peak, k = running[-1], 0, 0
        for rnd in range(a.warmup + a.rounds):
            for ap in running:
                k += 1
                rec = one_switch(sysobj, kind, prev, ap, a.seed * 1000 + k)
                rec["warmup"] = rnd < a.warmup
                res["launch"][prev.name].setdefault("first_written", rec["written"])
                total = sum(x.rss_kib() for x in running)
                rec["rss_total_kib"] = total
                peak = max(peak, total)
                res["switches"].append(rec)
                log("switch %d %s: %.0f ms, %.1f MB read; %s written %.1f MB" % (
                    k, ap.name, rec["ms"], rec["read"] / 1e6, rec.get("swapout_of", "-"), rec.get("written", 0) / 1e6))
                prev = ap
        res["peak_over_limit_kib"] = peak - need
    finally:
        for ap in running:
            if kind == "kernel":
                sysobj.bring_back(ap)  # room to exit
            ap.close()
        sysobj.stop()
    return res


def summarize(runs):
    """Per program and configuration, over every repetition: median and p90
    response, bytes written at the first and per later swap-out, bytes read
    per switch, and whether every answer matches the first configuration's."""
    out, truth = {}, {}
    for r in runs:
        for s in r["switches"]:
            truth.setdefault((s["app"], s["seed"]), s["answer"])
    for cfg in dict.fromkeys(r["config"] for r in runs):
        rs = [r for r in runs if r["config"] == cfg]
        for prog in sorted(set(s["app"] for s in rs[0]["switches"])):
            allsw = [s for r in rs for s in r["switches"] if s["app"] == prog]
            sw = [s for s in allsw if not s["warmup"]]
            outs = [s for r in rs for s in r["switches"] if s["swapout_of"] == prog and not s["warmup"]]
            ms = sorted(s["ms"] for s in sw)
            first = [r["launch"][prog].get("first_written", 0) for r in rs]
            share = [r["launch"][prog].get("iosr_resident_kib", 0) / r["launch"][prog]["rss_kib"] for r in rs]
            out[(cfg, prog)] = {
                "median_ms": statistics.median(ms), "p90_ms": ms[min(len(ms) - 1, int(0.9 * len(ms)))],
                "written_mb": statistics.median([s["written"] for s in outs]) / 1e6 if outs else 0,
                "read_mb": statistics.median([s["read"] for s in sw]) / 1e6,
                "identical": all(s["answer"] == truth[(s["app"], s["seed"])] for s in allsw),
                "rss_kib": statistics.median([r["launch"][prog]["rss_kib"] for r in rs]),
                "first_written_mb": statistics.median(first) / 1e6,
                "iosr_share": statistics.median(share) if rs[0]["swap"] == "iosr" else None,
                "switches": len(sw)}
    return out


def print_demo(runs):
    s = summarize(runs)
    print("python3 building a dict of 450,000 strings, sent to the background, swapped out, brought back; its first")
    print("query after that touches 5% of the entries. Times on a shared machine: indicative only.")
    print("%-24s %12s %14s %14s %10s" % ("", "response ms", "MB read", "MB written", "answers"))
    for r in runs:
        v = s[(r["config"], "python")]
        print("%-24s %12.0f %14.1f %14.1f %10s" % (r["config"], v["median_ms"], v["read_mb"], v["written_mb"],
                                                   "same" if v["identical"] else "DIFFER"))
    return all(v["identical"] for v in s.values())


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--demo", action="store_true", help="python3 alone, one switch, a table (make demo)")
    p.add_argument("--out", help="results directory (default bench/out/stack)")
    p.add_argument("--publish", help="copy report.md and the plots here (make bench-stack: bench/results/...)")
    p.add_argument("--dir", default="/var/tmp", help="where the swap file and the IOSR area go")
    p.add_argument("--configs", help="comma-separated, of: " + ", ".join(CONFIGS))
    p.add_argument("--programs", default="python,sqlite,node")
    p.add_argument("--rounds", type=int, default=3, help="measured rounds through all apps (default 3)")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--repeat", type=int, default=1,
                   help="passes through every configuration, interleaved (default 1; make bench-stack: 3)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-extras", action="store_true", help="without the trim variants and the pymalloc share")
    a = p.parse_args(argv)
    a.programs = a.programs.split(",")
    if a.demo:
        a.programs, a.rounds, a.warmup = ["python"], 1, 0
        a.configs = a.configs or "jwmalloc+iosr,jwmalloc+iosr-unaware,glibc+linux"
    a.configs = (a.configs or ",".join(CONFIGS)).split(",")
    a.out = a.out or os.path.join(ROOT, "bench", "out", "stack" + ("-demo" if a.demo else ""))
    return a


def main(argv=None):
    a = parse_args(argv if argv is not None else sys.argv[1:])
    bad = [c for c in a.configs if c not in CONFIGS]
    if bad:
        t_print("stack-bench: unknown configuration(s): %s" % ", ".join(bad))
        return 2
    gone = apps.missing_programs(a.programs)
    if gone:
        t_print("stack-bench: skipping programs not installed: %s" % ", ".join(gone))
        a.programs = [x for x in a.programs if x not in gone]
    why = system.preflight_kernel()
    if why:
        t_print("stack-bench: Linux swap runs skipped: %s" % why)
        a.configs = [c for c in a.configs if CONFIGS[c][1] != "kernel"]
    logdir = os.path.join(a.out, "raw", "logs")
    os.makedirs(logdir, exist_ok=True)
    system.sweep_stale(t_print, a.dir)
    runs = []
    meta = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "argv": sys.argv[1:], "load_start": system.read("/proc/loadavg"),
            "programs": a.programs, "rounds": a.rounds, "warmup": a.warmup, "repeat": a.repeat,
            "other_swaps": [x[0] for x in system.active_swaps()]}
    sections = []
    try:
        for rep in range(a.repeat):  # interleaved: every configuration once per pass
            for cfg in a.configs:
                t_print("pass %d/%d: %s" % (rep + 1, a.repeat, cfg))
                runs.append(run_config(a, cfg, logdir))
        if not a.demo and not a.no_extras:
            sections = [extras.trim_variants(a, t_print), extras.pymalloc_share(a, t_print)]
    finally:
        system.cleanup.run()
    meta["load_end"] = system.read("/proc/loadavg")
    with open(os.path.join(a.out, "raw", "results.json"), "w") as f:
        json.dump({"meta": meta, "runs": runs}, f)
    if a.demo:
        return 0 if print_demo(runs) else 1
    import report
    path = report.generate(a.out, a.publish, summarize(runs), meta, runs, a.build, sections)
    t_print("stack-bench: report %s" % path)
    return 0 if all(v["identical"] for v in summarize(runs).values()) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        t_print("stack-bench: interrupted; swap files and cgroups removed")
        sys.exit(130)
