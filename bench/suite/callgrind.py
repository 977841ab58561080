"""Attribution of callgrind instruction counts to the allocator and the workload.

docs/design/bench.md, "Allocator instructions". A workload run under
`valgrind --tool=callgrind --separate-threads=yes --compress-strings=no
--compress-pos=no` writes one file per thread and per dump. The harness zeroes
the statistics when the measured region opens and dumps them (part 1) when it
closes. Threads that exited inside the region are dumped only at program
termination (part 2, the last part); threads alive at the region's end appear in
part 1. So the region is: every part-1 file, plus the last-part file of every
thread that has no part-1 file.

In each file, the allocator's instructions are the inclusive costs of the call
arcs leaving the harness's `jwb_call_*` functions and of the thread-exit work
start_thread does for the allocator (THREAD_TEARDOWN); a thread on whose stack no
`jwb_thread_entry` appears and which is not the main thread (thread 1) was not
created by the workload (an allocator's background thread): all of it counts as
the allocator's.
"""
import glob
import os
import re

CALL_PREFIX = "jwb_call_"
THREAD_ENTRY = "jwb_thread_entry"
# What glibc's start_thread runs after the thread function returns, on behalf of
# the allocator: its thread-specific-data destructors (how mimalloc, jemalloc,
# tcmalloc and jwmalloc hand back a thread's cache), C++ thread_local
# destructors, and libc's own per-thread release (glibc malloc's tcache).
THREAD_TEARDOWN = {"__nptl_deallocate_tsd", "__call_tls_dtors", "__libc_thread_freeres"}
START_THREAD = re.compile(r"^start_thread('\d+)?$")


# With --cache-sim=yes callgrind records more events per cost line; these are
# summed beside the instructions (Ir), by the same attribution: data-cache read
# and write misses of the simulated first level (D1mr, D1mw) and last level
# (DLmr, DLmw).
CACHE_EVENTS = ("D1mr", "D1mw", "DLmr", "DLmw")


class ThreadCost:
    def __init__(self, path):
        self.path = path
        self.part = 0
        self.thread = 0
        self.total = 0
        self.allocator = 0
        self.events = ["Ir"]
        self.total_ev = {}
        self.alloc_ev = {}
        self.workload_thread = False
        self.trigger = ""


def parse_file(path):
    """Reads one callgrind output file (uncompressed names and positions)."""
    tc = ThreadCost(path)
    fn = cfn = ""
    in_call = False
    with open(path, errors="replace") as f:
        for line in f:
            if in_call:
                in_call = False
                if fn.startswith(CALL_PREFIX) or (cfn in THREAD_TEARDOWN and START_THREAD.match(fn)):
                    parts = line.split()
                    if len(parts) >= 2:
                        tc.allocator += int(parts[1])
                        for name, v in zip(tc.events[1:], parts[2:]):
                            tc.alloc_ev[name] = tc.alloc_ev.get(name, 0) + int(v)
                continue
            c = line[:1]
            if c.isdigit() or c in "+-*":
                continue  # a self-cost line
            if line.startswith("fn="):
                fn = line[3:].strip()
                if fn == THREAD_ENTRY:
                    tc.workload_thread = True
            elif line.startswith("cfn="):
                cfn = line[4:].strip()
                if cfn == THREAD_ENTRY:
                    tc.workload_thread = True
            elif line.startswith("calls="):
                in_call = True
            elif line.startswith("events:"):
                tc.events = line.split()[1:]
            elif line.startswith("summary:") or line.startswith("totals:"):
                vals = [int(x) for x in line.split()[1:]]
                if vals and vals[0] >= tc.total:
                    tc.total = vals[0]
                    tc.total_ev = dict(zip(tc.events[1:], vals[1:]))
            elif line.startswith("part:"):
                tc.part = int(line.split()[1])
            elif line.startswith("thread:"):
                tc.thread = int(line.split()[1])
            elif line.startswith("desc: Trigger:"):
                tc.trigger = line[len("desc: Trigger:"):].strip()
    if tc.thread == 1:
        tc.workload_thread = True
    return tc


def attribute(prefix):
    """Attribution for the run whose callgrind files start with `prefix`
    (the --callgrind-out-file value with %p expanded). Returns a dict with
    total, allocator and workload instructions of the measured region, the
    threads seen and whether the region dump was found."""
    files = [p for p in glob.glob(glob.escape(prefix) + "*") if os.path.getsize(p) > 0]
    costs = [parse_file(p) for p in files]
    region = [c for c in costs if "jwb-region" in c.trigger]
    if not region:
        return {"ok": False, "reason": "no jwb-region dump (did the workload reach jwb_region_end?)"}
    in_part1 = {c.thread for c in region}
    last_part = max(c.part for c in costs)
    late = [c for c in costs if c.part == last_part and c.part != region[0].part and c.thread not in in_part1]
    chosen = region + late
    total = sum(c.total for c in chosen)
    alloc = 0
    bg_threads = 0
    cache = {}
    for c in chosen:
        own = c.alloc_ev if c.workload_thread else c.total_ev
        for name in CACHE_EVENTS:
            if name in c.events:
                cache[name] = cache.get(name, 0) + own.get(name, 0)
        if c.workload_thread:
            alloc += c.allocator
        else:
            alloc += c.total
            bg_threads += 1
    r = {
        "ok": True,
        "total": total,
        "allocator": alloc,
        "workload": total - alloc,
        "threads": len(chosen),
        "allocator_threads": bg_threads,
    }
    if cache:
        r["allocator_cache"] = cache  # simulated misses of the allocator's calls (--cache-sim=yes)
    return r


def main(argv):
    if len(argv) != 2:
        print("usage: callgrind.py PREFIX   (attribution of one callgrind run)")
        return 2
    r = attribute(argv[1])
    print(" ".join("%s=%s" % kv for kv in r.items()))
    return 0 if r.get("ok") else 1


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv))
