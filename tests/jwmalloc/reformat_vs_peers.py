#!/usr/bin/env python3
"""Issue 3's reformatting target, as a deterministic count: on the
reformatting workload (bench/workloads/reformat.c: the dominant size class
changes every 20,000 calls, live bytes constant), jwmalloc must spend fewer
allocator instructions per call than jemalloc and at most 1.1x mimalloc's
(issue 23), measured in the
same run the way the evaluation suite measures them (callgrind, allocator
instructions attributed to the allocator's call arcs: docs/design/bench.md,
"Allocator instructions"). The comparison is with the peers in the same run,
never with a fixed number.

Usage: reformat_vs_peers.py SOURCE_DIR BUILD_DIR
Exit status: 0 target met, 1 not met or a run failed, 77 skipped (valgrind or
libmimalloc missing; jemalloc is compared when installed).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile


def main():
    if len(sys.argv) != 3:
        print("usage: reformat_vs_peers.py SOURCE_DIR BUILD_DIR", file=sys.stderr)
        return 2
    src, build = sys.argv[1], sys.argv[2]
    if shutil.which("valgrind") is None:
        print("reformat_vs_peers: valgrind not installed; skipped")
        return 77
    sys.path.insert(0, os.path.join(src, "bench", "suite"))
    import allocators  # the suite's own table of peer libraries

    def installed(name):
        return any(os.path.exists(p) for p in allocators.PEERS[name][0])

    peers = [p for p in ("mimalloc", "jemalloc") if installed(p)]
    if "mimalloc" not in peers:
        print("reformat_vs_peers: libmimalloc not installed; skipped")
        return 77
    out = tempfile.mkdtemp(prefix="jw-reformat-")
    try:
        cmd = [sys.executable, os.path.join(src, "bench", "suite", "run.py"), "--build", build,
               "--workloads", "reformat", "--allocators", ",".join(["jwmalloc"] + peers),
               "--callgrind", "reformat", "--callgrind-only", "--no-report", "--out", out]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        recs = {}
        path = os.path.join(out, "raw", "runs.jsonl")
        if os.path.exists(path):
            for line in open(path):
                r = json.loads(line)
                if r.get("kind") == "callgrind" and r.get("workload") == "reformat":
                    recs[r["allocator"]] = r
        got = {a: r.get("alloc_instr_per_op") for a, r in recs.items()}
        if p.returncode != 0 or any(got.get(a) is None for a in ["jwmalloc"] + peers):
            for a in ["jwmalloc"] + peers:
                r = recs.get(a, {})
                print("reformat_vs_peers: %s: %s %s" % (a, r.get("status", "no record"), r.get("reason", "")),
                      file=sys.stderr)
            print(p.stdout[-2000:], p.stderr[-2000:], file=sys.stderr)
            return 1
        jw = got["jwmalloc"]
        print("allocator instructions per call, reformatting, 2 threads x 400,000 calls (callgrind):")
        for a in ["jwmalloc"] + peers:
            print("  %-9s %7.1f  (%.2fx jwmalloc)" % (a, got[a], got[a] / jw))
        print("command: " + recs["jwmalloc"].get("cmd", ""))
        # Issue 23's decision: wall-clock throughput comes first, and this count may be up to 1.1x mimalloc's
        # (a change of the workload's random streams alone moved the two by 4-6% each way); jemalloc's stays
        # a strict bound.
        allowed = {"mimalloc": 1.1}
        worse = [a for a in peers if not jw < got[a] * allowed.get(a, 1.0)]
        if worse:
            print("reformat_vs_peers: jwmalloc needs more instructions per call than %s" % ", ".join(
                "%s (x%.1f)" % (a, allowed.get(a, 1.0)) for a in worse), file=sys.stderr)
            return 1
        return 0
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
