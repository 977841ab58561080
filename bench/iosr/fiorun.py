"""fio on the disk under test (docs/design/iosr-eval.md, "Physical limit" and
"Interference"): the disk's read bandwidth, measured in the same run as the
swap systems, and the background writer (an app download: sustained buffered
writes with fsync) that the interference runs switch against."""
import json
import os
import signal
import subprocess

import system

# name, rw, block size, queue depth
READ_JOBS = [
    ("seq-1M-qd32", "read", "1M", 32),
    ("seq-512K-qd1", "read", "512K", 1),
    ("rand-4K-qd1", "randread", "4K", 1),
    ("rand-4K-qd32", "randread", "4K", 32),
]
SEQ_REF = "seq-1M-qd32"  # the physical limit the targets refer to


def _parse(text):
    i = text.find("{")
    if i < 0:
        raise RuntimeError("fio printed no JSON: %s" % text[:300])
    return json.loads(text[i:])


def disk(directory, seconds, size="1G", log=print):
    """Read bandwidth of the disk: MB/s per job of READ_JOBS (O_DIRECT, libaio)."""
    path = os.path.join(directory, system.TAG + ".fio")
    system.cleanup.push("fio file", lambda: os.path.exists(path) and os.unlink(path))
    try:
        args = ["fio", "--output-format=json", "--filename=" + path, "--size=" + size, "--direct=1",
                "--ioengine=libaio", "--time_based", "--runtime=%g" % seconds, "--group_reporting=0"]
        jobs = []
        for name, rw, bs, qd in READ_JOBS:
            jobs += ["--name=" + name, "--rw=" + rw, "--bs=" + bs, "--iodepth=%d" % qd, "--stonewall"]
        log("fio: laying out a %s file and reading it (%d jobs of %g s)" % (size, len(READ_JOBS), seconds))
        p = subprocess.run(args + jobs, capture_output=True, text=True, preexec_fn=system.child_preexec())
        if p.returncode != 0:
            raise RuntimeError("fio failed: %s" % p.stderr.strip()[:300])
        out = {}
        for j in _parse(p.stdout)["jobs"]:
            r = j["read"]
            out[j["jobname"]] = {"mb_s": r["bw_bytes"] / 1e6, "iops": r["iops"],
                                 "lat_us_mean": r["clat_ns"]["mean"] / 1e3}
        return out
    finally:
        system.cleanup.pop("fio file")


class Writer:
    """A download: buffered 256 KiB writes with an fsync every `fsync_every`
    writes, at `rate` (bytes/s, 0: as fast as the disk takes them), over a 1
    GiB file that it rewrites from the start when it reaches the end."""

    def __init__(self, directory, rate, fsync_every=4, size="1G"):
        self.path = os.path.join(directory, system.TAG + ".download")
        self.out = self.path + ".json"
        self.rate = rate
        self.fsync_every = fsync_every
        self.size = size
        self.proc = None

    def start(self):
        system.cleanup.push("writer", self._kill)
        args = ["fio", "--name=download", "--filename=" + self.path, "--rw=write", "--bs=256k", "--size=" + self.size,
                "--ioengine=psync", "--direct=0", "--fsync=%d" % self.fsync_every, "--time_based",
                "--runtime=86400", "--output-format=json", "--output=" + self.out]
        if self.rate:
            args.append("--rate=%d" % self.rate)
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     preexec_fn=system.child_preexec())

    def _kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for p in (self.path, self.out):
            if os.path.exists(p):
                os.unlink(p)

    def stop(self):
        """Stops the writer; returns what it did (MB/s written, fsync latency)."""
        res = {}
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        try:
            j = _parse(system.read(self.out))["jobs"][0]
            w = j["write"]
            res = {"mb_s": w["bw_bytes"] / 1e6, "bytes": w["io_bytes"], "seconds": j["job_runtime"] / 1e3}
            sync = j.get("sync", {}).get("lat_ns", {})
            if sync.get("mean"):
                res["fsync_ms_mean"] = sync["mean"] / 1e6
        except (OSError, ValueError, KeyError, RuntimeError) as e:
            res = {"error": str(e)}
        system.cleanup.pop("writer")
        return res
