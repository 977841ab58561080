"""Side measurements of the stack evaluation, each a report section:

- trim_variants: bytes written by one swap-out of a heap of 16 MiB live and
  128 MiB freed blocks (tests/stack/heapprog.c, 4 threads) when jwmalloc does
  not trim, trims only when sent to the background (the reclaim not waiting:
  IOSR_TRIM_WAIT_MS=0), trims when the reclaim asks and waits (the default),
  or frees eagerly instead (JWMALLOC_LOW_MEMORY=1, no trim); and the madvise
  calls the program made (jwmalloc run --stats).
- pymalloc_share: the share of python3's resident memory IOSR serves with
  CPython's own arenas (PYTHONMALLOC=pymalloc) against PYTHONMALLOC=malloc.
"""
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import apps  # noqa: E402
import system  # noqa: E402

VARIANTS = [  # name, iosrd settings, environment
    ("no trim", "", {"JWMALLOC_SWAP_TRIM": "0", "JWMALLOC_RECLAIM": "0"}),
    ("trim on background only", "trim_wait_ms=0", {"JWMALLOC_RECLAIM": "0"}),
    ("trim the reclaim waits for", "", {"JWMALLOC_RECLAIM": "0"}),
    ("eager release, no trim", "", {"JWMALLOC_SWAP_TRIM": "0", "JWMALLOC_LOW_MEMORY": "1"}),
]


def _iosrd(a, settings, log, tag):
    extra = ("," + settings) if settings else ""
    sw = system.IosrSwap(a.build, a.dir, 1 << 30, "slot=process" + extra, 0, log,
                         os.path.join(a.out, "raw", "logs", "extras-%s-iosrd.log" % tag))
    sw.start()
    return sw


def _app_stat(sw, name):
    return [x for x in sw.stat_json()["apps"] if x["name"] == name][0]


def trim_variants(a, log, runs=3):
    heap = os.path.join(a.build, "bin", "heapprog")
    tool = os.path.join(a.build, "bin", "jwmalloc")
    rows = []
    for vi, (name, settings, env) in enumerate(VARIANTS):
        written, madv = [], []
        for k in range(runs):
            sw = _iosrd(a, settings, log, "trim%d" % vi)
            try:
                e = dict(os.environ, IOSR_SOCKET=sw.sock, **env)
                p = subprocess.Popen([tool, "run", "--stats", "--swap", "fr", "--", heap, "freed", "4", "16", "128"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e,
                                     preexec_fn=system.child_preexec())
                first = p.stdout.readline().decode()
                if not first.startswith("ready"):
                    raise RuntimeError("heapprog: %r" % first)
                sw.ctl("fg", "fr")
                sw.ctl("fg", "--none")  # to the background: the app trims (unless off)
                sw.ctl("reclaim", "fr")
                written.append(_app_stat(sw, "fr")["io"]["write_bytes"])
                out, err = p.communicate(timeout=300)
                if p.returncode != 0 or b"corrupt 0" not in out:
                    raise RuntimeError("heapprog failed: %s %s" % (out[-200:], err[-400:]))
                m = re.search(rb"(\d+) madvise", err)
                madv.append(int(m.group(1)) if m else 0)
            finally:
                sw.stop()
        rows.append((name, written, madv))
        log("trim variant %s: %s bytes written" % (name, written))
    sec = ["## Free memory: what a swap-out writes", "",
           "A heap of 16 MiB of live blocks and 128 MiB of freed ones (`heapprog freed 4 16 128`), sent to the "
           "background and swapped out once (`iosr reclaim`); %d runs each. `JWMALLOC_RECLAIM=0` except for the eager "
           "variant, so that jwmalloc's own decay gives nothing back in between." % runs, "",
           "| variant | MB written (runs) | median | madvise calls (median) |", "| --- | --- | --- | --- |"]
    for name, wr, md in rows:
        sec.append("| %s | %s | %.1f | %d |" % (name, ", ".join("%.1f" % (x / 1e6) for x in wr),
                                                 statistics.median(wr) / 1e6, statistics.median(md)))
    return sec


def pymalloc_share(a, log):
    sec = ["## python3's memory in IOSR regions, by `PYTHONMALLOC`", "",
           "| PYTHONMALLOC | VmRSS MB | in IOSR regions MB | share |", "| --- | --- | --- | --- |"]
    tool = os.path.join(a.build, "bin", "jwmalloc")
    for mode in ("pymalloc", "malloc"):
        sw = _iosrd(a, "", log, "share-" + mode)
        try:
            ap = apps.App("python", "python", [tool, "run", "--swap", "python", "--"],
                          {"IOSR_SOCKET": sw.sock, "PYTHONMALLOC": mode},
                          None, os.path.join(a.out, "raw", "logs", "extras-share-%s.log" % mode), system.child_preexec())
            try:
                ap.ready()
                rss = ap.rss_kib()
                res = _app_stat(sw, "python")["resident_pages"] * 4
            finally:
                ap.close()
        finally:
            sw.stop()
        sec.append("| %s | %.0f | %.0f | %.0f%% |" % (mode, rss / 1024, res / 1024, 100.0 * res / max(rss, 1)))
        log("python3 %s: VmRSS %d KiB, IOSR %d KiB" % (mode, rss, res))
    return sec
