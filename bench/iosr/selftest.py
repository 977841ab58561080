#!/usr/bin/env python3
"""CTest `bench.iosr.pieces`: the IOSR evaluation's pieces, run briefly for
correctness (not for figures): Linux swap (swap file + memory cgroup), IOSR
under the baseline and the IOSR policies, and Linux swap with the background
writer, four small apps each, every hot object checked word by word at the
end. Checks that

  - every switch brought back intact data and the apps' full checks pass;
  - memory really was short: Linux read from its swap device during the
    switches (/proc/vmstat pswpin) and IOSR read from its swap area;
  - the block trace agrees with the systems' own counters (pswpin for
    Linux, IOSR's per-app read bytes);
  - the report and its plots are written, with the validity table and the
    targets;
  - nothing is left behind: no swap area, cgroup, trace instance, file or
    process, also when the driver is stopped by SIGTERM or SIGINT during a
    switch, and after SIGKILL once the next run swept (children die with it).

Skips (77) with a message where root, swapon, memory cgroup v1, userfaultfd
or fio is missing.

  selftest.py BUILD_DIR"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import system  # noqa: E402

SKIP = 77


def skip(why):
    print("SKIP: %s" % why)
    sys.exit(SKIP)


def fail(why):
    print("FAIL: %s" % why)
    sys.exit(1)


def check_uffd(build, tmp):
    """Starts iosrd on a small area and one app: skips when the kernel refuses
    what IOSR needs (userfaultfd with write-protect and events)."""
    sysobj = system.IosrSwap(build, tmp, 64 << 20, "slot=process", 32 << 20, print,
                             os.path.join(tmp, "probe-iosrd.log"))
    try:
        sysobj.start()
        p = subprocess.run([os.path.join(build, "bin", "iosr-bench-app"), "--name", "probe", "--mem", "iosr",
                            "--heap", "16M", "--socket", sysobj.sock], input="quit\n", capture_output=True,
                           text=True, timeout=60)
        if p.returncode != 0:
            err = p.stderr.strip()
            if "not supported" in err or "not permitted" in err or "Function not implemented" in err:
                skip("userfaultfd is not usable here: %s" % err)
            fail("the probe app failed: %s" % err)
    finally:
        sysobj.stop()


def check_swapon(tmp):
    """Skips when this file system cannot hold a swap file (tmpfs, some btrfs)."""
    k = system.KernelSwap(tmp, 64 << 20, nonrot=False, log=print)
    try:
        k.start()
    except RuntimeError as e:
        if "swapon" in str(e) or "mkswap" in str(e) or "fallocate" in str(e):
            skip("no swap file possible in %s: %s" % (tmp, e))
        raise
    finally:
        k.stop()


def leftovers(directory, tag=system.TAG):
    """What a run tagged `tag` left: swap areas, cgroup, trace instance, files, processes."""
    out = [s[0] for s in system.active_swaps() if tag in s[0]]
    if os.path.isdir(os.path.join(system.CGROOT, tag)):
        out.append("cgroup " + tag)
    if os.path.isdir(os.path.join("/sys/kernel/tracing/instances", tag)):
        out.append("trace instance " + tag)
    out += [f for d in (directory, "/tmp") for f in os.listdir(d) if f.startswith(tag + ".")]
    for pid in [x for x in os.listdir("/proc") if x.isdigit()]:
        cmd = system.read("/proc/%s/cmdline" % pid, "")
        stat = system.read("/proc/%s/stat" % pid, "")
        if tag in cmd and ") Z " not in stat and ") X " not in stat:
            out.append("process %s (%s)" % (pid, cmd.split("\0")[0]))
    return out


def check_interrupt(build, tmp, config, sig):
    """Starts the driver on `config`, sends `sig` during the second switch and
    checks what is left: nothing after SIGTERM (the driver cleans up); after
    SIGKILL no process (they die with it) and nothing once the next run's
    sweep ran."""
    import signal
    import time
    log = os.path.join(tmp, "intr.log")
    with open(log, "w") as lf:
        p = subprocess.Popen([sys.executable, os.path.join(HERE, "run.py"), "--build", build, "--out",
                              os.path.join(tmp, "intr"), "--dir", tmp, "--apps", "3", "--heap", "24M", "--budget",
                              "0.4", "--rounds", "3", "--dwell", "0.05", "--fio-seconds", "0.2", "--fio-size", "16M",
                              "--no-matrix", "--no-kernel-rot", "--no-report", "--only", config],
                             stdout=lf, stderr=subprocess.STDOUT)
    tag = system.PREFIX + str(p.pid)
    end = time.monotonic() + 120
    while "switch 2/" not in system.read(log, "") and p.poll() is None and time.monotonic() < end:
        time.sleep(0.05)
    if p.poll() is not None:
        fail("interrupt check (%s): the run ended before the signal: %s" % (config, system.read(log, "")[-400:]))
    p.send_signal(sig)
    rc = p.wait(timeout=120)
    time.sleep(0.5)  # children killed by the parent-death signal exit
    left = leftovers(tmp, tag)
    if sig == signal.SIGKILL:
        procs = [x for x in left if x.startswith("process")]
        if procs:
            fail("after SIGKILL of the driver these live on: %s" % ", ".join(procs))
        system.sweep_stale(print, tmp)
        left = leftovers(tmp, tag)
    elif rc != 130:
        fail("interrupt check (%s): the driver exited %d after signal %d, expected 130" % (config, rc, sig))
    if left:
        fail("interrupt check (%s, signal %d): left behind: %s" % (config, sig, ", ".join(left)))


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    build = os.path.abspath(sys.argv[1])
    why = system.preflight_kernel()
    if why:
        skip(why)
    if not shutil.which("fio"):
        skip("fio not installed (scripts/install-deps.sh)")
    for b in ("iosrd", "iosr", "iosr-bench-app"):
        if not os.access(os.path.join(build, "bin", b), os.X_OK):
            fail("%s not built" % b)
    tmp = tempfile.mkdtemp(prefix="iosr-bench-test.", dir="/var/tmp")
    try:
        check_swapon(tmp)
        check_uffd(build, tmp)
        out = os.path.join(tmp, "out")
        args = ["--build", build, "--out", out, "--dir", tmp, "--apps", "4", "--heap", "32M", "--budget", "0.4",
                "--warmup", "1", "--rounds", "1", "--dwell", "0.05", "--fio-seconds", "0.3", "--fio-size", "64M",
                "--no-matrix", "--no-kernel-rot", "--verify", "--writer-rate", "32M",
                "--only", "linux,global/cluster/fifo,process/adaptive/sios,linux+writer"]
        import run
        rc = run.main(args)
        if rc == SKIP:
            skip("the experiment cannot run here (see above)")
        if rc != 0:
            fail("run.py exited %d" % rc)
        left = leftovers(tmp)
        if left:
            fail("left behind: %s" % ", ".join(left))
        res = json.load(open(os.path.join(out, "raw", "results.json")))
        runs = {r["config"]: r for r in res["runs"]}
        want = ["linux", "global/cluster/fifo", "process/adaptive/sios", "linux+writer"]
        for c in want:
            if c not in runs:
                fail("configuration %s did not run" % c)
            r = runs[c]
            if len(r["switches"]) != 4 * 2:
                fail("%s: %d switches, expected 8" % (c, len(r["switches"])))
            bad = sum(s["bad"] for s in r["switches"])
            if bad or r.get("verify_bad", -1) != 0:
                fail("%s: data mismatch (%d objects at switches, %s in the full check)" % (c, bad, r.get("verify_bad")))
            if r["kind"] == "kernel":
                pswpin = sum(s["vm"]["pswpin"] for s in r["switches"])
                traced = sum(s.get("read_bytes", 0) for s in r["switches"]) // 4096
                if pswpin <= 0:
                    fail("%s: Linux read nothing from swap during the switches: memory was not short" % c)
                if any(s.get("traced") for s in r["switches"]) and abs(traced - pswpin) > 0.02 * pswpin + 64:
                    fail("%s: the block trace saw %d pages read from the swap file, pswpin %d" % (c, traced, pswpin))
            else:
                own = sum(s["iosr"]["read_bytes"] for s in r["switches"])
                traced = sum(s.get("read_bytes", 0) for s in r["switches"])
                if own <= 0:
                    fail("%s: IOSR read nothing during the switches: memory was not short" % c)
                if any(s.get("traced") for s in r["switches"]) and abs(traced - own) > 0.05 * own + (1 << 20):
                    fail("%s: the block trace saw %d bytes read from the swap area, IOSR counted %d" % (c, traced, own))
        if "error" in runs["linux+writer"].get("writer", {"error": "missing"}):
            fail("the background writer reported nothing: %s" % runs["linux+writer"].get("writer"))
        rep = open(os.path.join(out, "report.md")).read()
        for part in ("## Linux swap: did the device serve the switches?", "## Targets (issue 6)",
                     "## Interference", "## The disk (fio, same run)"):
            if part not in rep:
                fail("report lacks '%s'" % part)
        if shutil.which("gnuplot"):
            for png in ("switch_cdf.png", "swapin_bw.png", "request_sizes_requests.png"):
                if not os.path.exists(os.path.join(out, png)):
                    fail("plot %s missing" % png)
        import signal
        check_interrupt(build, tmp, "linux", signal.SIGTERM)
        check_interrupt(build, tmp, "process/adaptive/sios", signal.SIGINT)
        check_interrupt(build, tmp, "linux", signal.SIGKILL)
        check_interrupt(build, tmp, "process/adaptive/sios", signal.SIGKILL)
        print("bench.iosr.pieces: ok (%d configurations, %d switches checked; interrupted runs left nothing)" % (
            len(want), sum(len(runs[c]["switches"]) for c in want)))
        return 0
    finally:
        system.cleanup.run()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
