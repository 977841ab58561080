"""The two swap systems under test (docs/design/iosr-eval.md, "Swap systems").

KernelSwap: Linux's own swap. A swap file on the disk under test (swapon, our
own name, highest priority), the apps in a memory cgroup v1 whose limit makes
the kernel reclaim them. IosrSwap: an IOSR swap area on the same disk and an
iosrd with a budget.

Swap areas, cgroups and trace instances are machine-global state: every one is
named iosr-bench-<pid>, registered with `cleanup` the moment it exists, and
removed on every exit path (normal end, exception, SIGINT/SIGTERM/SIGHUP); a
later run also removes those of runs that died (`sweep_stale`). Nothing else's
swap areas or cgroups are touched."""
import atexit
import errno
import os
import re
import signal
import subprocess
import time

CGROOT = "/sys/fs/cgroup/memory"
PREFIX = "iosr-bench-"
TAG = PREFIX + str(os.getpid())


class Cleanup:
    """Undo actions, run newest first, exactly once, on every way out."""

    def __init__(self):
        self.actions = []
        self.busy = 0          # > 0 while an undo action runs: a signal then waits for it
        self.pending = None
        atexit.register(self.run)
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, self._signal)

    def _signal(self, signum, frame):
        if self.busy:  # never abandon an undo half done (a swapoff, a cgroup with apps in it)
            self.pending = signum
            return
        # unwind through the callers' finally blocks (each runs its undo), then exit
        raise KeyboardInterrupt("signal %d" % signum)

    def _undo(self, what, fn):
        self.busy += 1
        try:
            _quiet(what, fn)
        finally:
            self.busy -= 1
        if not self.busy and self.pending is not None:
            signum, self.pending = self.pending, None
            raise KeyboardInterrupt("signal %d" % signum)

    def push(self, what, fn):
        self.actions.append((what, fn))
        return len(self.actions) - 1

    def pop(self, what):
        """Runs and forgets the newest action named `what`."""
        for i in range(len(self.actions) - 1, -1, -1):
            if self.actions[i][0] == what:
                _, fn = self.actions.pop(i)
                self._undo(what, fn)
                return

    def run(self):
        """Runs every action left, newest first; signals wait until all ran."""
        self.busy += 1
        try:
            while self.actions:
                what, fn = self.actions.pop()
                _quiet(what, fn)
        finally:
            self.busy -= 1
            self.pending = None  # the run ends anyway: everything is undone


def child_preexec(extra=None):
    """preexec_fn for every process the harness starts (apps, iosrd, fio):
    the child gets SIGTERM when the harness dies, even by SIGKILL, so no
    daemon or app of a killed run lives on holding memory or a swap area."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    ppid = os.getpid()  # the harness: the child's parent

    def fn():
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != ppid:  # the harness died before the prctl
            os._exit(1)
        if extra:
            extra()
    return fn


def _quiet(what, fn):
    try:
        fn()
    except Exception as e:  # cleanup must go on
        print("iosr-bench: cleanup of %s failed: %s" % (what, e), flush=True)


cleanup = Cleanup()


def sh(cmd, check=True, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(cmd), (p.stderr or p.stdout).strip()))
    return p


def read(path, default=None):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        if default is None:
            raise
        return default


def write(path, value):
    with open(path, "w") as f:
        f.write(str(value))


def vmstat():
    d = {}
    for line in read("/proc/vmstat").splitlines():
        k, v = line.split()
        d[k] = int(v)
    return d


def loadavg():
    return float(read("/proc/loadavg").split()[0])


def schedstat(pid):
    """(ns on a CPU, ns runnable but waiting for one) summed over the
    process's threads (/proc/PID/task/*/schedstat); (0, 0) if it is gone."""
    run = wait = 0
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return 0, 0
    for t in tids:
        f = read("/proc/%d/task/%s/schedstat" % (pid, t), "").split()
        if len(f) >= 2:
            run += int(f[0])
            wait += int(f[1])
    return run, wait


def cpu_pressure_us():
    """Microseconds in which some runnable task waited for a CPU (PSI,
    /proc/pressure/cpu "some total"); None without PSI."""
    for line in read("/proc/pressure/cpu", "").splitlines():
        if line.startswith("some "):
            return int(line.rsplit("total=", 1)[1])
    return None


def active_swaps():
    """[(path, size KiB, used KiB, priority)] from /proc/swaps."""
    out = []
    for line in read("/proc/swaps").splitlines()[1:]:
        f = line.split()
        if len(f) >= 5:
            out.append((f[0].replace("\\040", " "), int(f[2]), int(f[3]), int(f[4])))
    return out


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def sweep_stale(log, directory=None):
    """Removes swap areas, cgroups, trace instances, daemons and files (in
    `directory` and /tmp) left by dead runs."""
    rx = re.compile(re.escape(PREFIX) + r"(\d+)")
    for path, _, _, _ in active_swaps():
        m = rx.search(os.path.basename(path))
        if m and not _pid_alive(int(m.group(1))):
            log("removing the swap file of a dead run: %s" % path)
            sh(["swapoff", path], check=False)
            _unlink(path)
    if os.path.isdir(CGROOT):
        for d in os.listdir(CGROOT):
            m = rx.fullmatch(d)
            if m and not _pid_alive(int(m.group(1))):
                log("removing the cgroup of a dead run: %s" % d)
                _remove_cgroup(os.path.join(CGROOT, d))
    inst = "/sys/kernel/tracing/instances"
    if os.path.isdir(inst):
        for d in os.listdir(inst):
            m = rx.fullmatch(d)
            if m and not _pid_alive(int(m.group(1))):
                _rmdir(os.path.join(inst, d))
    # daemons and apps of a dead run (they die with the harness, child_preexec;
    # this catches those of older runs), then its files: swap area, fio files, socket
    dead_tags = set()
    for d in (directory, "/tmp"):
        if d and os.path.isdir(d):
            for f in os.listdir(d):
                m = re.fullmatch(re.escape(PREFIX) + r"(\d+)\.(swap|iosr|fio|download|download\.json|sock)", f)
                if m and not _pid_alive(int(m.group(1))):
                    dead_tags.add(PREFIX + m.group(1))
    for pid in [int(x) for x in os.listdir("/proc") if x.isdigit()]:
        cmd = read("/proc/%d/cmdline" % pid, "").split("\0")
        if any(t in arg for t in dead_tags for arg in cmd) and os.path.basename(cmd[0]) in ("iosrd", "fio"):
            log("stopping %s of a dead run (pid %d)" % (os.path.basename(cmd[0]), pid))
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for d in (directory, "/tmp"):
        if d and os.path.isdir(d):
            for f in os.listdir(d):
                m = re.fullmatch(re.escape(PREFIX) + r"(\d+)\..*", f)
                if m and PREFIX + m.group(1) in dead_tags:
                    log("removing a file of a dead run: %s" % os.path.join(d, f))
                    _unlink(os.path.join(d, f))


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _rmdir(path):
    """Removes a directory that another sweeper may be removing too: gone
    (ENOENT, or ENODEV for a trace instance being torn down) is done."""
    try:
        os.rmdir(path)
    except OSError as e:
        if e.errno not in (errno.ENOENT, errno.ENODEV):
            raise


def _remove_cgroup(path):
    """Kills what is left in the cgroup (only our apps are ever put there) and removes it."""
    for _ in range(100):
        pids = [int(p) for p in read(os.path.join(path, "cgroup.procs"), "").split()]
        if not pids:
            break
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    for _ in range(100):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.05)
    os.rmdir(path)


def kick(path):
    """One 4 KiB O_DIRECT read of the file's first block. On this project's
    virtual machine the disk now and then leaves queued requests unserved
    until another request arrives (docs/design/iosr-eval.md, "Device
    stalls"); waiting for idle, the harness nudges it this way."""
    import mmap
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
    try:
        buf = mmap.mmap(-1, 4096)
        os.preadv(fd, [buf], 0)
    finally:
        os.close(fd)


def preflight_kernel():
    """None if kernel swap can be measured here, else the reason."""
    if os.geteuid() != 0:
        return "needs root (swapon, memory cgroups)"
    if not os.path.exists(os.path.join(CGROOT, "memory.limit_in_bytes")):
        return "no memory cgroup v1 at %s" % CGROOT
    if not os.path.exists("/proc/swaps"):
        return "kernel without swap support (/proc/swaps missing)"
    for tool in ("swapon", "swapoff", "mkswap", "fallocate"):
        if subprocess.run(["sh", "-c", "command -v " + tool], capture_output=True).returncode != 0:
            return "%s not installed" % tool
    return None


def block_device_of(path):
    """(disk name, partition start in 512-byte sectors, dev_t as the block
    tracepoints print it) of the file system holding path."""
    st = os.stat(path)
    maj, mino = os.major(st.st_dev), os.minor(st.st_dev)
    sysdir = os.path.realpath("/sys/dev/block/%d:%d" % (maj, mino))
    start = 0
    if os.path.exists(os.path.join(sysdir, "partition")):
        start = int(read(os.path.join(sysdir, "start")))
        disk = os.path.basename(os.path.dirname(sysdir))
        maj, mino = [int(x) for x in read("/sys/block/%s/dev" % disk).split(":")]
    else:
        disk = os.path.basename(sysdir)
    return disk, start, (maj << 20) | mino


class KernelSwap:
    """A swap file on the disk under test and a memory cgroup for the apps."""

    kind = "kernel"

    def __init__(self, directory, size, nonrot, log):
        self.path = os.path.join(directory, TAG + ".swap")
        self.size = size
        self.nonrot = nonrot
        self.log = log
        self.cg = os.path.join(CGROOT, TAG)
        self.info = {}
        self.kicks = 0

    def start(self):
        disk, _, _ = block_device_of(os.path.dirname(self.path))
        self.info["other_swaps"] = [s[0] for s in active_swaps()]
        _unlink(self.path)
        cleanup.push("swap file", lambda: _unlink(self.path))
        sh(["fallocate", "-l", str(self.size), self.path])
        os.chmod(self.path, 0o600)
        sh(["mkswap", "-L", TAG, self.path])
        rot_path = "/sys/block/%s/queue/rotational" % disk
        rot = read(rot_path, "?").strip()
        self.info["disk"] = disk
        self.info["disk_rotational"] = rot
        flip = self.nonrot and rot == "1"
        # Linux reads the flag once, at swapon: a flash device is swapped to as
        # an SSD (per-CPU clusters, VMA read-ahead). The disk reports
        # rotational=1, so the flag is cleared for the swapon only.
        if flip:
            write(rot_path, "0")
        cleanup.push("swapon", self._swapoff)  # swapoff of a file not swapped on is harmless
        try:
            sh(["swapon", "-p", "32767", self.path])
        finally:
            if flip:
                write(rot_path, rot)
        self.info["swapped_as"] = "ssd (non-rotational)" if (flip or rot == "0") else "rotational"
        if not any(s[0] == self.path for s in active_swaps()):
            raise RuntimeError("swapon did not list %s in /proc/swaps" % self.path)
        os.mkdir(self.cg)
        cleanup.push("cgroup", lambda: _remove_cgroup(self.cg))
        self.info["swappiness"] = int(read(os.path.join(self.cg, "memory.swappiness")).strip())
        self.info["page_cluster"] = int(read("/proc/sys/vm/page-cluster").strip())
        self.info["vma_ra_enabled"] = read("/sys/kernel/mm/swap/vma_ra_enabled", "?").strip()

    def _swapoff(self):
        sh(["swapoff", self.path], check=False)
        _unlink(self.path)

    def stop(self):
        cleanup.pop("cgroup")
        cleanup.pop("swapon")
        cleanup.pop("swap file")

    def preexec(self):
        """For subprocess: puts the child in the cgroup before it runs."""
        procs = os.path.join(self.cg, "cgroup.procs")

        def enter():
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
        return enter

    def usage(self):
        return int(read(os.path.join(self.cg, "memory.usage_in_bytes")))

    def set_limit(self, nbytes):
        write(os.path.join(self.cg, "memory.limit_in_bytes"), nbytes)
        self.info["limit"] = nbytes

    def stat(self):
        d = {}
        for line in read(os.path.join(self.cg, "memory.stat")).splitlines():
            k, v = line.split()
            d[k] = int(v)
        return d

    def wait_idle(self, timeout=20.0):
        """Waits until no swap write of the cgroup is in flight; after a
        second, nudges the disk (kick) every half second."""
        t0 = time.monotonic()
        nudge = t0 + 1.0
        while time.monotonic() < t0 + timeout:
            if self.stat().get("writeback", 0) == 0:
                return True
            if time.monotonic() > nudge:
                kick(self.path)
                self.kicks += 1
                nudge = time.monotonic() + 0.5
            time.sleep(0.02)
        return False

    def reset_peak(self):
        write(os.path.join(self.cg, "memory.max_usage_in_bytes"), 0)

    def peak_over_limit(self):
        """Bytes the cgroup's peak usage since reset_peak passed its limit (never > 0: the limit is hard)."""
        return int(read(os.path.join(self.cg, "memory.max_usage_in_bytes"))) - self.info.get("limit", 0)

    def oom_kills(self):
        """Apps the memory cgroup's OOM killer killed (Linux gives up
        reclaiming when the limit is too tight for the working set)."""
        for line in read(os.path.join(self.cg, "memory.oom_control"), "").splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
        return 0

    def used_kib(self):
        for p, _, used, _ in active_swaps():
            if p == self.path:
                return used
        return 0


class IosrSwap:
    """An IOSR swap area on the disk under test and iosrd with a budget."""

    kind = "iosr"

    def __init__(self, build, directory, size, settings, budget, log, log_path):
        self.bin = os.path.join(build, "bin")
        self.log_path = log_path
        self.log_level = 2
        self.path = os.path.join(directory, TAG + ".iosr")
        self.sock = "/tmp/%s.sock" % TAG
        self.size = size
        self.settings = settings
        self.budget = budget
        self.log = log
        self.proc = None
        self.info = {}
        self.kicks = 0

    def start(self):
        cleanup.push("iosr area", lambda: _unlink(self.path))
        sh([os.path.join(self.bin, "iosr"), "mkswap", self.path, "--size", str(self.size), "--force",
            "--label", TAG])
        settings = "%s,budget=%d" % (self.settings, self.budget)
        self.errlog = open(self.log_path, "w")
        self.proc = subprocess.Popen([os.path.join(self.bin, "iosrd"), "--swap", self.path, "--socket", self.sock,
                                      "--set", settings, "--log", str(self.log_level)], stdout=self.errlog, stderr=subprocess.STDOUT,
                                     preexec_fn=child_preexec())
        cleanup.push("iosrd", self._kill)
        for _ in range(200):
            if self.ctl("stat", check=False).returncode == 0:
                break
            if self.proc.poll() is not None:
                raise RuntimeError("iosrd exited: %s" % read(self.log_path, "").strip()[-500:])
            time.sleep(0.05)
        else:
            raise RuntimeError("iosrd did not come up")
        self.info["settings"] = settings

    def ctl(self, *args, check=True, timeout=None):
        return sh([os.path.join(self.bin, "iosr"), "--socket", self.sock] + list(args), check=check, timeout=timeout)

    def _kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        _unlink(self.sock)

    def stop(self):
        cleanup.pop("iosrd")
        if getattr(self, "errlog", None):
            self.errlog.close()
        cleanup.pop("iosr area")

    def preexec(self):
        return None

    def wait_idle(self, timeout=20.0):
        """Waits until iosrd has no swap I/O or reclaim pending; False (and the
        engine's figures in the daemon's log) if that did not happen in time."""
        t0 = time.monotonic()
        step = 1.0  # then a nudge every half second, as for Linux
        try:
            while True:
                left = t0 + timeout - time.monotonic()
                try:
                    return self.ctl("idle", check=False, timeout=max(0.1, min(step, left))).returncode == 0
                except subprocess.TimeoutExpired:
                    if time.monotonic() >= t0 + timeout:
                        raise
                    kick(self.path)
                    self.kicks += 1
                    step = 0.5
        except subprocess.TimeoutExpired:
            p = self.ctl("stat", "--json", check=False, timeout=10)
            self.errlog.write("iosr-bench: not idle after %.0f s; stat: %s\n" % (timeout, p.stdout))
            pids = [self.proc.pid] + [int(x) for x in os.listdir("/proc") if x.isdigit() and
                                      read("/proc/%s/comm" % x, "").strip() == "iosr-bench-app"]
            for pid in pids:
                for t in os.listdir("/proc/%d/task" % pid):
                    d = "/proc/%d/task/%s/" % (pid, t)
                    self.errlog.write("iosr-bench: pid %d thread %s %s in %s\n%s" % (
                        pid, t, read(d + "comm", "?").strip(), read(d + "wchan", "?").strip(), read(d + "stack", "")))
            fdd = "/proc/%d/fdinfo/" % self.proc.pid
            for fd in sorted(os.listdir(fdd), key=int):
                target = ""
                try:
                    target = os.readlink("/proc/%d/fd/%s" % (self.proc.pid, fd))
                except OSError:
                    pass
                if "userfaultfd" in target or "eventpoll" in target or "io_uring" in target or "eventfd" in target:
                    self.errlog.write("iosr-bench: iosrd fd %s %s\n%s" % (fd, target, read(fdd + fd, "")))
            try:
                ss = subprocess.run(["ss", "-xp"], capture_output=True, text=True).stdout
            except OSError:
                ss = ""
            self.errlog.write("iosr-bench: sockets\n" + "\n".join(
                ln for ln in ss.splitlines() if "iosrd" in ln or "iosr-bench-app" in ln) + "\n")
            for pid in pids[1:]:
                for t in os.listdir("/proc/%d/task" % pid):
                    self.errlog.write("iosr-bench: pid %d thread %s syscall %s" % (
                        pid, t, read("/proc/%d/task/%s/syscall" % (pid, t), "?\n")))
            disk, _, _ = block_device_of(os.path.dirname(self.path))
            self.errlog.write("iosr-bench: %s inflight %s\n" % (disk, read("/sys/block/%s/inflight" % disk, "?")))
            self.errlog.flush()
            self.log("iosrd not idle after %.0f s (its figures are in its log)" % timeout)
            return False

    def stat_json(self):
        import json
        return json.loads(self.ctl("stat", "--json").stdout)

    def peak_over_limit(self):
        """Bytes the region pages resident at once since the app came to the
        foreground passed the budget (the budget is hard: 0 unless nothing
        could be reclaimed)."""
        try:
            eng = self.stat_json()["engine"]
        except (RuntimeError, ValueError, KeyError):
            return None
        return eng.get("resident_peak_pages", 0) * 4096 - self.budget
