#!/usr/bin/env python3
"""IOSR evaluation: app switching against Linux's own swap and the baseline
policies (issue 6; methodology: docs/design/iosr-eval.md).

N app processes (bench/iosr/app) build heaps of mixed-size objects; memory is
short, so the background apps are swapped out; a switch sequence brings one
app at a time back to the foreground, and each switch is timed until the app
has touched its hot set. The same apps run on Linux's swap (a swap file on the
same disk, the apps in a memory cgroup) and on IOSR under every policy
combination, quiet and against a background writer; fio measures the disk.

  bench/iosr/run.py [--quick] [--out DIR] [--publish DIR] [options]   (--help)

Results: DIR/raw/results.json (every switch), DIR/report.md and PNG plots
(bench/iosr/report.py). Needs root, swapon, memory cgroup v1 at
/sys/fs/cgroup/memory, userfaultfd, fio and gnuplot."""
import argparse
import json
import os
import platform
import select
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import blktrace  # noqa: E402
import fiorun  # noqa: E402
import system  # noqa: E402

SLOTS = ("global", "process")
READAHEADS = ("cluster", "vma", "adaptive")
SCHEDS = ("fifo", "sios")
BASELINE = ("global", "cluster", "fifo")
IOSR = ("process", "adaptive", "sios")
KERNEL = "linux"
KERNEL_ROT = "linux-rot"


def iosr_name(slot, ra, sched):
    return "%s/%s/%s" % (slot, ra, sched)


def t_print(*a):
    print(*a, file=sys.stderr, flush=True)


class App:
    """One app process and its line protocol (bench/iosr/app/app.c)."""

    def __init__(self, cmd, name, errpath):
        self.name = name
        self.err = open(errpath, "w")
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
                                  preexec_fn=system.child_preexec())
        self.buf = b""

    def send(self, line):
        self.p.stdin.write((line + "\n").encode())
        self.p.stdin.flush()

    def recv(self, ev, timeout):
        end = time.monotonic() + timeout
        fd = self.p.stdout.fileno()
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if msg.get("ev") == "error":
                    raise RuntimeError("app %s: %s" % (self.name, msg.get("what")))
                if msg.get("ev") == ev:
                    return msg
            left = end - time.monotonic()
            if left <= 0:
                raise RuntimeError("app %s: no '%s' within %.0f s" % (self.name, ev, timeout))
            r, _, _ = select.select([fd], [], [], min(left, 1.0))
            if r:
                chunk = os.read(fd, 65536)
                if not chunk:
                    self.err.flush()
                    raise RuntimeError("app %s exited (status %s): %s" % (
                        self.name, self.p.poll(), system.read(self.err.name, "")[-400:].strip()))
                self.buf += chunk

    def close(self):
        try:
            if self.p.poll() is None:
                self.send("quit")
                self.p.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.p.kill()
            self.p.wait()
        self.err.close()


def plan(a):
    """The configurations, in run order: (name, kind, policies, interference)."""
    cfgs = [(KERNEL, "kernel", None, False)]
    if a.kernel_rot:
        cfgs.append((KERNEL_ROT, "kernel", None, False))
    if a.matrix:
        combos = [(s, r, q) for s in SLOTS for r in READAHEADS for q in SCHEDS]
    else:  # the baseline, each policy changed alone from it, IOSR, and each policy reverted alone from IOSR
        combos = [BASELINE, ("process", "cluster", "fifo"), ("global", "vma", "fifo"), ("global", "adaptive", "fifo"),
                  ("global", "cluster", "sios"), IOSR, ("global", "adaptive", "sios"), ("process", "cluster", "sios"),
                  ("process", "adaptive", "fifo")]
    for c in combos:
        cfgs.append((iosr_name(*c), "iosr", c, False))
    if a.interference:
        cfgs.append((KERNEL, "kernel", None, True))
        if a.matrix:
            cfgs.append((iosr_name(*BASELINE), "iosr", BASELINE, True))
        cfgs.append((iosr_name("process", "adaptive", "fifo"), "iosr", ("process", "adaptive", "fifo"), True))
        cfgs.append((iosr_name(*IOSR), "iosr", IOSR, True))
    if a.only:
        keep = set(a.only.split(","))
        cfgs = [c for c in cfgs if c[0] + ("+writer" if c[3] else "") in keep]
        if len(cfgs) != len(keep):
            known = set(c[0] + ("+writer" if c[3] else "") for c in cfgs)
            raise SystemExit("iosr-bench: --only: unknown or not planned: %s" % ", ".join(sorted(keep - known)))
    return cfgs


def run_config(a, ctx, idx, total, cfg):
    name, kind, pol, interf = cfg
    label = name + ("+writer" if interf else "")
    heap = a.heap
    swap_size = max(int(a.apps * heap * 1.25), 256 << 20)
    budget = int(a.apps * heap * a.budget)
    logdir = os.path.join(a.out, "raw", "logs")
    os.makedirs(logdir, exist_ok=True)

    def log(msg):
        t_print("[%d/%d] %s: %s" % (idx, total, label, msg))

    if kind == "kernel":
        sysobj = system.KernelSwap(a.dir, swap_size, nonrot=(name == KERNEL), log=log)
    else:
        settings = "slot=%s,readahead=%s,sched=%s" % pol
        if a.iosr_set:
            settings += "," + a.iosr_set
        sysobj = system.IosrSwap(a.build, a.dir, swap_size, settings, budget, log,
                                 os.path.join(logdir, "%s-iosrd.log" % label.replace("/", "-")))
        sysobj.log_level = a.iosrd_log
    res = {"config": label, "name": name, "kind": kind, "policies": pol, "interference": interf,
           "budget": budget, "swap_size": swap_size, "switches": [], "builds": []}
    apps, writer = [], None
    vm_start = system.vmstat()
    try:
        sysobj.start()
        if ctx["tracer"]:
            ctx["tracer"].set_area(sysobj.path)
        app_bin = os.path.join(a.build, "bin", "iosr-bench-app")
        for i in range(a.apps):
            nm = "app%d" % i
            cmd = [app_bin, "--name", nm, "--mem", "malloc" if kind == "kernel" else "iosr", "--heap", str(heap),
                   "--seed", str(a.seed * 1000 + i), "--write-every", str(a.write_every)]
            if kind == "kernel":
                # the app enters the cgroup before it runs: everything it touches is charged there
                cmd = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', sysobj.cg] + cmd
            else:
                cmd += ["--socket", sysobj.sock]
            apps.append(App(cmd, nm, os.path.join(logdir, "%s-%s.log" % (label.replace("/", "-"), nm))))
        for ap in apps:
            ap.recv("init", 60)
        if kind == "kernel":
            base = sysobj.usage()
            sysobj.set_limit(base + budget)
            res["cgroup_base"] = base
        # apps are launched one after another, as a user opens them; the
        # earlier ones go to the background and are swapped out as memory runs short
        vm0 = system.vmstat()
        t0 = time.monotonic()
        for ap in apps:
            ap.send("build")
            b = ap.recv("built", 600)
            res["builds"].append(b)
            log("launched %s: heap %d MiB, hot set %d pages, %.0f ms" % (ap.name, heap >> 20, b["hot_pages"], b["ms"]))
        sysobj.wait_idle()
        vm1 = system.vmstat()
        res["launch_s"] = time.monotonic() - t0
        res["launch_pswpout"] = vm1["pswpout"] - vm0["pswpout"]
        if interf:
            writer = fiorun.Writer(a.dir, a.writer_rate, a.writer_fsync)
            writer.start()
            time.sleep(1.0)  # let it reach its steady rate
        nsw = a.apps * (a.warmup + a.rounds)
        k = 0
        for rnd in range(a.warmup + a.rounds):
            for i in range(a.apps):
                k += 1
                rec = switch(a, ctx, sysobj, apps[i], k, rnd < a.warmup)
                rec["round"] = rnd
                res["switches"].append(rec)
                log("switch %d/%d %s%s: %.0f ms, %.1f MB read in %d requests%s" % (
                    k, nsw, apps[i].name, " (warm-up)" if rnd < a.warmup else "", rec["ms"],
                    rec.get("read_bytes", 0) / 1e6, rec.get("read_reqs", 0),
                    "" if rec["bad"] == 0 else " DATA MISMATCH"))
                time.sleep(a.dwell)
        if writer:
            res["writer"] = writer.stop()
            writer = None
        if a.verify:
            bad = 0
            for ap in apps:
                ap.send("verify")
                bad += ap.recv("verify", 600)["bad"]
            res["verify_bad"] = bad
            log("full check of every hot object: %s" % ("ok" if bad == 0 else "%d BAD" % bad))
        if kind == "kernel":
            res["cgroup_stat"] = sysobj.stat()
            res["swap_used_kib"] = sysobj.used_kib()
            res["cgroup_failcnt"] = int(system.read(os.path.join(sysobj.cg, "memory.failcnt")))
            res["oom_kills"] = sysobj.oom_kills()
        else:
            try:
                res["iosr_stat"] = sysobj.stat_json()
            except (RuntimeError, ValueError) as e:
                res["iosr_stat_error"] = str(e)
    except (RuntimeError, BrokenPipeError) as e:
        if kind == "kernel" and sysobj.oom_kills():
            raise RuntimeError("%s: the memory cgroup's OOM killer killed %d app(s): the limit is too tight for Linux "
                               "to reclaim in time (raise --budget)" % (label, sysobj.oom_kills())) from e
        raise
    finally:
        if writer:
            res["writer"] = writer.stop()
        for ap in apps:
            ap.close()
        sysobj.stop()
        res["system"] = sysobj.info
        res["kicks"] = sysobj.kicks
    vm_end = system.vmstat()
    res["vmstat"] = {k: vm_end[k] - vm_start.get(k, 0) for k in ("pswpin", "pswpout", "swap_ra", "swap_ra_hit",
                                                               "pgmajfault") if k in vm_end}
    return res


def switch(a, ctx, sysobj, ap, k, warm):
    idle = sysobj.wait_idle()
    ap.send("scan")
    scan = ap.recv("scan", 60)
    vm0 = system.vmstat()
    if sysobj.kind == "kernel":
        sysobj.reset_peak()
    load = system.loadavg()
    daemon = sysobj.proc.pid if sysobj.kind == "iosr" else None
    ss_app0 = system.schedstat(ap.p.pid)
    ss_d0 = system.schedstat(daemon) if daemon else None
    psi0 = system.cpu_pressure_us()
    t0 = time.monotonic_ns()
    ap.send("switch %d %d" % (t0, k))
    r = ap.recv("switch", 900)
    psi1 = system.cpu_pressure_us()
    ss_app1 = system.schedstat(ap.p.pid)
    ss_d1 = system.schedstat(daemon) if daemon else None
    vm1 = system.vmstat()
    rec = {"app": ap.name, "k": k, "warmup": warm, "ms": r["ms"], "load1": load, "idle_before": idle,
           "utime_ms": r["utime_us"] / 1e3, "stime_ms": r["stime_us"] / 1e3, "majflt": r["majflt"],
           "minflt": r["minflt"], "bad": r["bad"], "objects": r["objects"], "touched_bytes": r["bytes"],
           "written": r["written"], "scan": {x: scan[x] for x in ("hot_pages", "present", "swapcache", "absent",
                                                                   "swap_pte", "ok")}}
    rec["stall_ms"] = max(r["ms"] - r["utime_us"] / 1e3, 1e-3)
    # CPU time and run-queue wait of the app and of iosrd during the switch
    # (schedstat; spans the driver's two reads, a little more than the switch)
    rec["sched"] = {"app_run_ms": (ss_app1[0] - ss_app0[0]) / 1e6, "app_wait_ms": (ss_app1[1] - ss_app0[1]) / 1e6}
    if daemon:
        rec["sched"].update({"daemon_run_ms": (ss_d1[0] - ss_d0[0]) / 1e6,
                             "daemon_wait_ms": (ss_d1[1] - ss_d0[1]) / 1e6})
    if psi0 is not None and psi1 is not None:
        # share of the switch in which some task waited for a CPU (other builds, the daemon, the app)
        rec["cpu_wait_share"] = min(1.0, (psi1 - psi0) / 1e3 / max(r["ms"], 1e-3))
    rec["vm"] = {x: vm1[x] - vm0[x] for x in ("pswpin", "pswpout", "swap_ra", "swap_ra_hit", "pgmajfault")
                 if x in vm1}
    if "iosr" in r:
        rec["iosr"] = r["iosr"]
    # the most memory the swap system let the apps hold during the switch, above its
    # limit (both Linux's cgroup limit and IOSR's budget are hard: 0 unless one was passed)
    rec["peak_over_limit"] = sysobj.peak_over_limit()
    tr = ctx["tracer"]
    if tr:
        tr.settle()
        reqs = tr.window(t0 / 1e9, r["t1"] / 1e9)
        rec.update(blktrace.summarize(reqs))
        if a.keep_requests:
            rec["requests"] = [(round(x[0] - t0 / 1e9, 6), x[1], x[2], x[3],
                                None if x[4] is None else round(x[4] - t0 / 1e9, 6)) for x in reqs]
        rec["traced"] = True
    else:
        rec["traced"] = False
        if "iosr" in r:
            rec["read_bytes"] = r["iosr"]["read_bytes"]
            rec["read_reqs"] = r["iosr"]["read_reqs"]
            rec["read_hist"] = r["iosr"]["read_hist"]
        else:
            rec["read_bytes"] = rec["vm"]["pswpin"] * 4096
    return rec


def machine_info(a):
    disk, _, _ = system.block_device_of(a.dir)
    q = "/sys/block/%s/queue/" % disk
    info = {"kernel": platform.release(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "disk": disk, "scheduler": system.read(q + "scheduler", "?").strip(),
            "rotational": system.read(q + "rotational", "?").strip(),
            "mem_total_kib": int(system.read("/proc/meminfo").split("\n")[0].split()[1]),
            "other_swaps": [s[0] for s in system.active_swaps()],
            "thp": system.read("/sys/kernel/mm/transparent_hugepage/enabled", "?").strip()}
    try:
        info["cpu"] = [ln.split(":", 1)[1].strip() for ln in system.read("/proc/cpuinfo").splitlines()
                       if ln.startswith("model name")][0]
    except IndexError:
        info["cpu"] = platform.machine()
    try:
        fs = subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "-T", a.dir], capture_output=True, text=True)
        info["fs"] = fs.stdout.strip()
    except OSError:
        info["fs"] = "?"
    return info


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="build directory (default build)")
    p.add_argument("--quick", action="store_true", help="small apps, the ablation set only, 2 rounds (< 5 min)")
    p.add_argument("--out", help="results directory (default bench/out/iosr/quick or full)")
    p.add_argument("--publish", help="copy report.md and the plots here (make bench-iosr: bench/results/2026-12-07-iosr)")
    p.add_argument("--dir", default="/var/tmp", help="where swap areas and fio files go: the disk under test")
    p.add_argument("--apps", type=int, help="app processes (default 6; quick 5)")
    p.add_argument("--heap", help="heap per app (default 256M; quick 96M)")
    p.add_argument("--budget", type=float, default=0.25,
                   help="memory for all heaps together, as a share of their size (default 0.25: fewer hot sets "
                        "fit than there are background apps, more than one whole heap)")
    p.add_argument("--rounds", type=int, help="measured rounds through all apps (default 3; quick 2)")
    p.add_argument("--warmup", type=int, default=1, help="warm-up rounds, not counted (default 1)")
    p.add_argument("--dwell", type=float, default=0.3, help="seconds an app stays in the foreground (default 0.3)")
    p.add_argument("--write-every", type=int, default=4,
                   help="an app writes one in K of the objects it chases (default 4; 0: read only)")
    p.add_argument("--matrix", action=argparse.BooleanOptionalAction, default=None,
                   help="every policy combination (default: on, off with --quick)")
    p.add_argument("--kernel-rot", action=argparse.BooleanOptionalAction, default=None,
                   help="also Linux swapping to the disk as rotational (default: on, off with --quick)")
    p.add_argument("--interference", action=argparse.BooleanOptionalAction, default=True,
                   help="runs with a background writer (default on)")
    p.add_argument("--writer-rate", default="0",
                   help="background writer bytes/s (default 0: as fast as the disk takes them, an app install)")
    p.add_argument("--writer-fsync", type=int, default=4, help="writer: fsync every N 256 KiB writes (default 4)")
    p.add_argument("--fio-seconds", type=float, help="seconds per fio job (default 5; quick 2)")
    p.add_argument("--fio-size", default="1G", help="fio's test file (default 1G)")
    p.add_argument("--no-trace", action="store_true", help="no block trace (request sizes from IOSR only)")
    p.add_argument("--only", help="comma-separated configurations to run, by name: linux, linux-rot, SLOT/READAHEAD/SCHED "
                                  "(e.g. process/adaptive/sios); NAME+writer for the runs with the background writer")
    p.add_argument("--iosr-set", help="extra iosrd settings for every IOSR run (k=v,...)")
    p.add_argument("--keep-requests", action="store_true",
                   help="keep every traced request of every switch in results.json (large)")
    p.add_argument("--verify", action="store_true", help="check every word of every hot object at the end")
    p.add_argument("--iosrd-log", type=int, default=2, help="iosrd's log level (0-3, default 2)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-report", action="store_true")
    a = p.parse_args(argv)
    q = a.quick
    a.apps = a.apps or (5 if q else 6)
    a.heap = parse_size(a.heap or ("96M" if q else "256M"))
    a.rounds = a.rounds if a.rounds is not None else (2 if q else 3)
    a.matrix = (not q) if a.matrix is None else a.matrix
    a.kernel_rot = (not q) if a.kernel_rot is None else a.kernel_rot
    a.fio_seconds = a.fio_seconds or (2.0 if q else 5.0)
    a.writer_rate = parse_size(a.writer_rate)
    a.out = a.out or os.path.join(ROOT, "bench", "out", "iosr", "quick" if q else "full")
    return a


def parse_size(s):
    s = str(s).strip()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:].upper(), 1)
    return int(float(s[:-1] if mult > 1 else s) * mult)


def preflight(a):
    why = system.preflight_kernel()
    if why:
        return why
    for b in ("iosrd", "iosr", "iosr-bench-app"):
        if not os.access(os.path.join(a.build, "bin", b), os.X_OK):
            return "%s not built (make build)" % os.path.join(a.build, "bin", b)
    if subprocess.run(["sh", "-c", "command -v fio"], capture_output=True).returncode != 0:
        return "fio not installed (scripts/install-deps.sh)"
    st = os.statvfs(a.dir)
    need = int(a.apps * a.heap * 1.25) + (2 << 30) + (1 << 30)
    if st.f_bavail * st.f_frsize < need:
        return "not enough free space in %s (%d MiB needed)" % (a.dir, need >> 20)
    return None


def main(argv=None):
    a = parse_args(argv if argv is not None else sys.argv[1:])
    why = preflight(a)
    if why:
        t_print("iosr-bench: cannot run: %s" % why)
        return 77
    os.makedirs(os.path.join(a.out, "raw"), exist_ok=True)
    system.sweep_stale(t_print, a.dir)
    cfgs = plan(a)
    meta = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "argv": sys.argv[1:], "quick": a.quick,
            "apps": a.apps, "heap": a.heap, "budget_frac": a.budget, "rounds": a.rounds, "warmup": a.warmup,
            "dwell": a.dwell, "write_every": a.write_every, "writer_rate": a.writer_rate,
            "writer_fsync": a.writer_fsync, "machine": machine_info(a), "load_start": system.read("/proc/loadavg"),
            "dir": a.dir}
    t_print("iosr-bench: %d apps of %d MiB, memory for %.0f%% of them; %d configurations; results in %s" % (
        a.apps, a.heap >> 20, a.budget * 100, len(cfgs), a.out))
    t_start = time.monotonic()
    tracer = None
    if not a.no_trace and blktrace.available():
        tracer = blktrace.Tracer(a.dir)
        tracer.start()
    ctx = {"tracer": tracer}
    results = {"meta": meta, "runs": []}
    out_json = os.path.join(a.out, "raw", "results.json")
    try:
        meta["fio"] = fiorun.disk(a.dir, a.fio_seconds, size=a.fio_size, log=t_print)
        t_print("fio: " + ", ".join("%s %.0f MB/s" % (k, v["mb_s"]) for k, v in meta["fio"].items()))
        for i, cfg in enumerate(cfgs, 1):
            results["runs"].append(run_config(a, ctx, i, len(cfgs), cfg))
            with open(out_json, "w") as f:
                json.dump(results, f)
    finally:
        if tracer:
            meta["trace_lost"] = tracer.lost()
            tracer.stop()
        meta["seconds"] = time.monotonic() - t_start
        meta["load_end"] = system.read("/proc/loadavg")
        with open(out_json, "w") as f:
            json.dump(results, f)
        system.cleanup.run()
    t_print("iosr-bench: measured in %.0f s" % meta["seconds"])
    if not a.no_report:
        import report
        path = report.generate(a.out, a.publish)
        t_print("iosr-bench: report %s" % path)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        t_print("iosr-bench: interrupted; swap areas, cgroups and trace instances removed")
        sys.exit(130)
