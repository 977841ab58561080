"""Runs a workload program under an allocator and reads its result line; the
loop that interleaves allocators run by run (docs/design/bench.md, "Slow
calls", "Preemption injection", "Harness cost"). Shared by tail.py,
preempt.py and harness_cost.py.
"""
import os
import subprocess
import sys


def kv(line):
    """The key=value tokens of one line, as strings."""
    out = {}
    for tok in line.split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            out[k] = v
    return out


def result_line(stdout):
    """The last "jwbench ..." line of a workload's output, or None."""
    found = None
    for line in stdout.splitlines():
        if line.startswith("jwbench "):
            found = line
    return found


def env_for(alloc, preload_before=None, extra=None):
    """The environment of one run under `alloc` (allocators.Allocator): its
    own variables without JWMALLOC_STATS (the statistics line is not read
    here), its library in LD_PRELOAD after `preload_before` (a list of
    libraries loaded first, e.g. the pause shim)."""
    env = dict(os.environ, **alloc.env)
    env.pop("JWMALLOC_STATS", None)
    env.pop("LD_PRELOAD", None)
    libs = list(preload_before or []) + ([alloc.lib] if alloc.lib else [])
    if libs:
        env["LD_PRELOAD"] = " ".join(libs)
    if extra:
        env.update(extra)
    return env


def run(cmd, env, what, timeout=300):
    """Runs cmd; returns its result line as a dict. Exits the script with one
    line naming `what` when the run fails or prints no result."""
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        sys.exit("%s: timed out after %g s" % (what, timeout))
    line = result_line(p.stdout)
    if p.returncode != 0 or line is None:
        sys.exit("%s failed (exit %d): %s" % (what, p.returncode, (p.stderr.strip().splitlines() or [""])[-1]))
    return kv(line)


def interleaved(cells, repeat, run_cell, tag):
    """Runs run_cell(cell, r) for r in 0..repeat-1, every cell once per
    repetition (the allocators interleaved run by run); returns
    {cell: [results in repetition order]}. A progress line per run on stderr."""
    out = {}
    total = len(cells) * repeat
    done = 0
    for r in range(repeat):
        for cell in cells:
            done += 1
            print("[%d/%d] %s %s repetition %d" % (done, total, tag, " ".join(str(c) for c in cell), r + 1),
                  file=sys.stderr, flush=True)
            out.setdefault(cell, []).append(run_cell(cell, r))
    return out


def per_million(count, calls):
    calls = int(calls)
    return 1e6 * int(count) / calls if calls else 0.0
