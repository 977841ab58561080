"""Block requests to the swap area, seen by the kernel (docs/design/iosr-eval.md,
"Request sizes"). One tracefs instance (iosr-bench-<pid>) records
block_rq_issue and block_rq_complete of the disk under test with the
CLOCK_MONOTONIC trace clock; a thread drains trace_pipe and keeps the requests
whose sectors fall in the swap area's extents (FIEMAP). The same method counts
Linux's swap requests and IOSR's, so their sizes compare directly, and other
processes' I/O on the disk (the interference writer, builds) is left out."""
import bisect
import fcntl
import os
import re
import select
import struct
import threading
import time

import system

TRACEFS = "/sys/kernel/tracing"
FS_IOC_FIEMAP = 0xC020660B
FIEMAP_FLAG_SYNC = 1
FIEMAP_EXTENT_LAST = 1

LINE = re.compile(r"\s(\d+\.\d+): block_rq_(issue|complete|requeue): \d+,\d+ (\S+) (?:\d+ )?\(.*?\) (\d+) \+ (\d+)")
EVENTS = ("block_rq_issue", "block_rq_complete", "block_rq_requeue")
MARK = re.compile(r"iosr-bench-mark (\d+)")


def extents(path):
    """Physical extents of a file: [(first sector, sectors)] relative to the disk."""
    _, part_start, _ = system.block_device_of(path)
    out = []
    start = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        while True:
            n = 256
            hdr = struct.pack("=QQIIII", start, 2**64 - 1 - start, FIEMAP_FLAG_SYNC, 0, n, 0)
            buf = bytearray(hdr + b"\0" * (56 * n))
            fcntl.ioctl(fd, FS_IOC_FIEMAP, buf)
            mapped = struct.unpack_from("=I", buf, 20)[0]
            if not mapped:
                break
            last = False
            for i in range(mapped):
                lo, ph, ln, _, _, fl = struct.unpack_from("=QQQQQI", buf, 32 + 56 * i)
                out.append((part_start + ph // 512, ln // 512))
                start = lo + ln
                last = bool(fl & FIEMAP_EXTENT_LAST)
            if last:
                break
    finally:
        os.close(fd)
    out.sort()
    return out


def available():
    return os.path.isdir(TRACEFS) and os.path.exists(os.path.join(TRACEFS, "events/block/block_rq_issue"))


class Tracer:
    def __init__(self, disk_path):
        _, _, self.dev = system.block_device_of(disk_path)
        self.dir = os.path.join(TRACEFS, "instances", system.TAG)
        self.lock = threading.Lock()
        self.ranges = []  # sorted [(start, end)]
        self.starts = []
        self.reqs = []    # (issue time s, read?, sector, sectors, complete time s or None)
        self.pending = {}
        self.stop_flag = False
        self.thread = None
        self.lines = 0
        self.marks = 0      # markers written (settle)
        self.seen_mark = 0  # the highest marker the reader has seen

    def start(self):
        os.mkdir(self.dir)
        system.cleanup.push("trace instance", self._remove)
        system.write(os.path.join(self.dir, "trace_clock"), "mono")
        system.write(os.path.join(self.dir, "buffer_size_kb"), "16384")
        for ev in EVENTS:
            d = os.path.join(self.dir, "events/block", ev)
            system.write(os.path.join(d, "filter"), "dev == %d" % self.dev)
            system.write(os.path.join(d, "enable"), "1")
        self.fd = os.open(os.path.join(self.dir, "trace_pipe"), os.O_RDONLY | os.O_NONBLOCK)
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def set_area(self, path):
        """Requests are kept from now on only if they fall in this file."""
        ex = extents(path)
        with self.lock:
            self.ranges = [(s, s + n) for s, n in ex]
            self.starts = [r[0] for r in self.ranges]
            self.reqs = []
            self.pending = {}
        return len(ex)

    def _in_area(self, sector):
        i = bisect.bisect_right(self.starts, sector) - 1
        return i >= 0 and sector < self.ranges[i][1]

    def _drain(self):
        rest = b""
        while not self.stop_flag:
            r, _, _ = select.select([self.fd], [], [], 0.2)
            if not r:
                continue
            try:
                chunk = os.read(self.fd, 1 << 20)
            except BlockingIOError:
                continue
            if not chunk:
                continue
            data = rest + chunk
            lines = data.split(b"\n")
            rest = lines.pop()
            with self.lock:
                for ln in lines:
                    self._line(ln.decode("ascii", "replace"))

    def _line(self, ln):
        m = LINE.search(ln)
        if not m:
            mk = MARK.search(ln)
            if mk:
                self.seen_mark = max(self.seen_mark, int(mk.group(1)))
            return
        self.lines += 1
        t, kind, rwbs, sector, n = float(m.group(1)), m.group(2), m.group(3), int(m.group(4)), int(m.group(5))
        if n == 0 or not self._in_area(sector):
            return
        rd = "R" in rwbs
        if kind == "issue":
            rec = [t, rd, sector, n, None, True]
            self.reqs.append(rec)
            self.pending[(sector, rd)] = rec
        else:
            rec = self.pending.pop((sector, rd), None)
            if rec and kind == "complete":
                rec[4] = t
            elif rec:  # requeued: it will be issued again, count it once
                rec[5] = False

    def window(self, t0, t1):
        """Requests to the area issued in [t0, t1] (seconds, CLOCK_MONOTONIC): (issue
        time, read?, sector, sectors, completion time or None). A request the
        driver sent back (requeue) is counted once, at its last issue; a
        request the block layer split (more segments than the device takes) is
        counted as the parts the device saw."""
        with self.lock:
            return [tuple(r[:5]) for r in self.reqs if r[5] and t0 <= r[0] <= t1]

    def lost(self):
        n = 0
        for cpu in os.listdir(os.path.join(self.dir, "per_cpu")):
            st = system.read(os.path.join(self.dir, "per_cpu", cpu, "stats"), "")
            m = re.search(r"overrun: (\d+)", st)
            if m:
                n += int(m.group(1))
        return n

    def settle(self, timeout=10.0):
        """Waits until the reader has drained everything the kernel recorded
        so far: writes a numbered marker into the instance's buffer and waits
        for the reader to see it (trace_pipe gives events in time order). On a
        loaded machine the reader thread can lag far behind; a fixed wait
        then loses the last requests of a switch."""
        self.marks += 1
        try:
            system.write(os.path.join(self.dir, "trace_marker"), "iosr-bench-mark %d" % self.marks)
        except OSError:
            time.sleep(0.25)
            return
        end = time.monotonic() + timeout
        while self.seen_mark < self.marks and time.monotonic() < end:
            time.sleep(0.005)

    def stop(self):
        system.cleanup.pop("trace instance")

    def _remove(self):
        self.stop_flag = True
        if self.thread:
            self.thread.join(timeout=5)
        for ev in EVENTS:
            try:
                system.write(os.path.join(self.dir, "events/block", ev, "enable"), "0")
            except OSError:
                pass
        try:
            os.close(self.fd)
        except (OSError, AttributeError):
            pass
        os.rmdir(self.dir)


def summarize(reqs):
    """Counts, bytes, size histogram (power-of-two buckets from 4 KiB) and the
    time the device had at least one swap read in flight."""
    hist_r = [0] * 11
    hist_rb = [0] * 11
    hist_w = [0] * 11
    s = {"read_reqs": 0, "read_bytes": 0, "write_reqs": 0, "write_bytes": 0}
    busy = []
    for t, rd, _, n, tc in reqs:
        b = n * 512
        k = 0
        while k < 10 and (4096 << k) < b:
            k += 1
        if rd:
            s["read_reqs"] += 1
            s["read_bytes"] += b
            hist_r[k] += 1
            hist_rb[k] += b
            if tc is not None:
                busy.append((t, tc))
        else:
            s["write_reqs"] += 1
            s["write_bytes"] += b
            hist_w[k] += 1
    busy.sort()
    total, end = 0.0, None
    for a, b in busy:
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    s["read_hist"] = hist_r
    s["read_hist_bytes"] = hist_rb
    s["write_hist"] = hist_w
    s["read_busy_s"] = total
    return s

