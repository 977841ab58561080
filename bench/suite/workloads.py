"""The workloads of the suite and how each is run (docs/design/bench.md, "Workloads").

A workload is a program of build/bin plus arguments. `args(mode, threads,
duration)` gives the timed run; `callgrind_args(threads)` a fixed amount of work
for the instruction counts. `steady` names how steady-state RSS is read from the
RSS samples and phase marks (report.py / run.py, "Footprint").
"""

QUICK_DURATION = 0.4
FULL_DURATION = 2.0


class Workload:
    def __init__(self, name, prog, group, description, args, callgrind=None, steady="second-half", paper=False,
                 trace=None, fixed_seconds=None):
        self.name = name
        self.prog = prog
        self.group = group              # throughput | footprint | trace
        self.description = description
        self._args = args               # function(mode, threads, duration) -> list
        self._callgrind = callgrind     # function(threads) -> list, or None
        self.steady = steady            # second-half | idle | peaktrough | rounds
        self.paper = paper              # one of the paper's four microbenchmarks
        self.trace = trace              # trace file name for replays
        self.fixed_seconds = fixed_seconds  # function(mode) -> expected seconds, when not duration-bound

    def args(self, mode, threads, duration):
        return self._args(mode, threads, duration)

    def callgrind_args(self, threads):
        return self._callgrind(threads) if self._callgrind else None

    def expected_seconds(self, mode, duration):
        if self.fixed_seconds:
            return self.fixed_seconds(mode)
        return duration


def _t(threads):
    return ["--threads", str(threads)]


def _dur(d):
    return ["--duration", "%g" % d]


def _steps(threads, total):
    """Steps per thread so that one round is about `total` steps whatever the
    thread count: rounds stay short at 10 threads per core and on big machines."""
    return ["--steps", str(max(1000, total // threads))]


LARSON = ["--blocks", "5000", "--dist", "uniform", "--thread-ops", "1000000"]

WORKLOADS = [
    Workload("rptest-16k", "jwb-rptest", "throughput",
             "rptest-like, sizes 8 B-16 KiB, 10% of frees by the next thread",
             lambda m, t, d: _t(t) + ["--min", "8", "--max", "16K"] + _dur(d),
             lambda t: _t(t) + ["--min", "8", "--max", "16K", "--ops", "100000"], paper=True),
    Workload("rptest-1m", "jwb-rptest", "throughput",
             "rptest-like, sizes 8 B-1 MiB (64 live blocks per thread)",
             lambda m, t, d: _t(t) + ["--min", "8", "--max", "1M", "--blocks", "64"] + _dur(d),
             lambda t: _t(t) + ["--min", "8", "--max", "1M", "--blocks", "64", "--ops", "30000"], paper=True),
    Workload("xmalloc", "jwb-xmalloc", "throughput",
             "xmalloc-like producer/consumer: every free cross-thread",
             lambda m, t, d: _t(t) + _dur(d),
             lambda t: _t(t) + ["--ops", "100000"], paper=True),
    Workload("mstress", "jwb-mstress", "throughput",
             "mstress-like: rounds of threads, migrating objects, powers of two with rare large ones",
             lambda m, t, d: _t(t) + _steps(t, 400000) + ["--rounds", "1"] + _dur(d),
             lambda t: _t(t) + ["--steps", "5000", "--rounds", "3"], paper=True),
    Workload("mstress-long", "jwb-mstress", "throughput",
             "mstress with long rounds (400,000 steps per thread): threads are created 20x less often at 20 "
             "threads, so latency shows the allocator more than thread creation",
             lambda m, t, d: _t(t) + ["--steps", "400000", "--rounds", "1"] + _dur(d)),
    Workload("mleak", "jwb-mleak", "throughput",
             "mleak-like: rounds of short-lived threads; RSS growth per round is the leak",
             lambda m, t, d: _t(t) + ["--rounds", "5"] + _steps(t, 200000) + _dur(d),
             lambda t: _t(t) + ["--rounds", "3", "--steps", "10000"], steady="rounds", paper=True),
    # The public larson's parameters (mimalloc-bench: 5,000 slots per thread, sizes uniform in 8-1000 B, a
    # thread replaced after 500,000 frees and as many mallocs): with the program's defaults (1,000 slots,
    # a thread replaced every 20,000 calls) thread creation took up to 60% of the time and hid the allocators'
    # order (docs/design/bench.md, "Harness cost").
    Workload("larson", "jwb-larson", "throughput",
             "larson-like server: threads replaced by successors that inherit their blocks",
             lambda m, t, d: _t(t) + LARSON + _dur(d),
             lambda t: _t(t) + LARSON[:4] + ["--thread-ops", "50000", "--ops", "100000"]),
    Workload("reformat", "jwb-reformat", "throughput",
             "reformatting: dominant size class changes every 20,000 calls, live bytes constant",
             lambda m, t, d: _t(t) + _dur(d),
             # 20 phases per thread: every size range is dominant in some phase
             lambda t: _t(t) + ["--ops", "400000"]),
    Workload("near4k", "jwb-rptest", "throughput",
             "rptest-like with 80% of sizes in 3-4 KiB (the paper's regression case)",
             lambda m, t, d: _t(t) + ["--min", "8", "--max", "4K", "--dist", "near4k"] + _dur(d),
             lambda t: _t(t) + ["--min", "8", "--max", "4K", "--dist", "near4k", "--ops", "100000"]),
    Workload("mstress-sleep", "jwb-mstress", "footprint",
             "sleep-augmented mstress: bursts separated by idle periods; steady = RSS at the end of idle periods",
             lambda m, t, d: _t(t) + ["--steps", "20000"] +
             (["--rounds", "3", "--idle-ms", "1000"] if m == "quick" else ["--rounds", "5", "--idle-ms", "2000"]),
             # a burst keeps the paper's per-thread work (20,000 x (1 + i mod 4) steps): its peak grows with threads
             None, steady="idle", fixed_seconds=lambda m: 4.0 if m == "quick" else 12.0),
    Workload("peak-trough", "jwb-peaktrough", "footprint",
             "steady 32 MiB live, bursts to 5x, back to steady, churning in every phase",
             lambda m, t, d: _t(t) + ["--steady", "32M"] +
             (["--cycles", "2", "--hold-ms", "250"] if m == "quick" else ["--cycles", "3", "--hold-ms", "500"]),
             lambda t: _t(t) + ["--steady", "8M", "--cycles", "2", "--hold-ops", "10000"], steady="peaktrough",
             fixed_seconds=lambda m: 2.0 if m == "quick" else 4.5),
    Workload("generational", "jwb-generational", "footprint",
             "100,000 blocks/s; 90% die within 35 ms, 9% by 3 s, 1% live 3-6 s",
             lambda m, t, d: _t(t) + ["--rate", "100000"] + _dur(4.0 if m == "quick" else 10.0),
             lambda t: _t(t) + ["--ops", "100000"], fixed_seconds=lambda m: 4.0 if m == "quick" else 10.0),
]

TRACES = [("replay-python3", "python3.jwt", "python3 (PYTHONMALLOC=malloc): dict/str/json churn, objects, "
           "producer/consumer threads"),
          ("replay-sqlite3", "sqlite3.jwt", "sqlite3: build, index, query, update and vacuum a 150,000-row database"),
          ("replay-clang", "clang.jwt", "clang++ -O1 -c of a C++17 source using the standard library")]
for _name, _file, _desc in TRACES:
    WORKLOADS.append(Workload(_name, "jwb-replay", "trace", "replay of " + _desc,
                              (lambda f: lambda m, t, d: ["--trace", f])(_file),
                              (lambda f: lambda t: ["--trace", f])(_file), trace=_file,
                              fixed_seconds=lambda m: 1.5))

BY_NAME = {w.name: w for w in WORKLOADS}

# What QUICK measures with callgrind, and the full run.
CALLGRIND_QUICK = ["rptest-1m", "reformat"]
CALLGRIND_FULL = ["rptest-16k", "rptest-1m", "xmalloc", "mstress", "mleak", "larson", "reformat", "near4k",
                  "peak-trough", "generational", "replay-python3", "replay-sqlite3", "replay-clang"]
