#!/usr/bin/env python3
"""Tests of the evaluation suite (tests/bench/CMakeLists.txt runs them).

  bench_test.py BUILD workload ALLOC PROG ARGS...   one workload, briefly, checked
  bench_test.py BUILD determinism                   same seed, same requests under every allocator
  bench_test.py BUILD launcher                      RSS sampling, marks, exact syscall counts
  bench_test.py BUILD callgrind                     instruction attribution
  bench_test.py BUILD replay                        record a program, replay deterministically
  bench_test.py BUILD report                        runner + report on a tiny matrix
  bench_test.py BUILD lat_attrib                    slow-call counts, faults and switches (--lat-attrib)
  bench_test.py BUILD android_replay                Android memory_replay text and zip traces, replayed and checked
  bench_test.py BUILD cli                           --help and bad usage of the launcher, a workload, the reports

ALLOC is glibc or jwmalloc (skipped with 77 when build/lib/libjwmalloc.so is
not built yet). Exit 0 pass, 1 fail, 77 skip.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKIP = 77
JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
MIMALLOC = "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"
TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def kv(text, prefix):
    d = {}
    for line in text.splitlines():
        if line.startswith(prefix + " "):
            d = dict(tok.split("=", 1) for tok in line.split()[1:] if "=" in tok)
    return d


def run(cmd, env=None, timeout=120):
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    if env:
        e.update(env)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e)


def jwmalloc_lib(build):
    return os.path.join(build, "lib", "libjwmalloc.so")


def t_workload(build, alloc, prog, args):
    env = {}
    if alloc == "jwmalloc":
        lib = jwmalloc_lib(build)
        if not os.path.exists(lib):
            print("SKIP: %s not built yet (jwmalloc lands with issue 2)" % lib)
            return SKIP
        env["LD_PRELOAD"] = lib
    elif alloc != "glibc":
        fail("unknown allocator " + alloc)
    p = run([os.path.join(build, "bin", prog)] + args, env)
    res = kv(p.stdout, "jwbench")
    print(p.stdout.strip())
    if p.returncode != 0:
        fail("%s exited %d: %s" % (prog, p.returncode, p.stderr.strip()[-400:]))
    if res.get("check") != "ok":
        fail("block check: %s" % res.get("check"))
    if int(res.get("ops", 0)) <= 0 or int(res.get("allocs", 0)) <= 0:
        fail("no allocator calls counted")
    if int(res.get("allocs", 0)) < int(res.get("frees", 0)):
        fail("more frees than allocations")
    if int(res.get("lat_samples", 0)) <= 0:
        fail("no latency samples")
    return 0


def t_determinism(build):
    """Given a seed, a workload makes the same requests under any allocator: in
    ops mode on one thread (no scheduling involved) the counts and the bytes
    requested agree exactly; another seed gives other requests."""
    cases = [("jwb-rptest", ["--ops", "20000"]), ("jwb-rptest", ["--max", "1M", "--blocks", "16", "--ops", "2000"]),
             ("jwb-xmalloc", ["--ops", "20000"]), ("jwb-mstress", ["--rounds", "2", "--steps", "3000"]),
             ("jwb-mleak", ["--rounds", "2", "--steps", "3000"]), ("jwb-larson", ["--ops", "20000"]),
             ("jwb-reformat", ["--ops", "30000"]), ("jwb-generational", ["--ops", "20000"]),
             ("jwb-peaktrough", ["--steady", "2M", "--cycles", "1", "--hold-ops", "2000"])]
    libs = [None] + [lib for lib in (JEMALLOC, MIMALLOC, jwmalloc_lib(build)) if os.path.exists(lib)]
    for prog, args in cases:
        seen = {}
        for seed in ("1", "2"):
            for lib in libs:
                p = run([os.path.join(build, "bin", prog), "--threads", "1", "--seed", seed] + args,
                        {"LD_PRELOAD": lib} if lib else {})
                r = kv(p.stdout, "jwbench")
                if p.returncode != 0 or r.get("check") != "ok":
                    fail("%s under %s exited %d: %s" % (prog, lib or "glibc", p.returncode, p.stderr))
                sig = (r["allocs"], r["frees"], r["reallocs"], r["bytes"])
                seen.setdefault(seed, set()).add(sig)
        print(prog, args, seen)
        if any(len(v) != 1 for v in seen.values()):
            fail("%s %s: the requests depend on the allocator: %s" % (prog, args, seen))
        if seen["1"] == seen["2"]:
            fail("%s %s: two seeds gave the same requests" % (prog, args))
    return 0


def t_launcher(build):
    launcher = os.path.join(build, "bin", "jwbench-run")
    probe = os.path.join(build, "bin", "jwb-test-probe")
    tmp = tempfile.mkdtemp()
    try:
        out = {}
        for calls in (100, 300):
            samples = os.path.join(tmp, "s%d.tsv" % calls)
            p = run([launcher, "--rss-hz", "40", "--samples", samples, "--", probe, str(calls), "64", "400"])
            if p.returncode != 0:
                fail("launcher/probe exited %d: %s" % (p.returncode, p.stderr))
            out[calls] = (kv(p.stdout, "jwbench-run"), samples)
        m, samples = out[300]
        print("launcher:", m)
        # RSS: sampling rate, marks, the 64 MiB peak and its release
        if float(m["rss_hz"]) < 20:
            fail("RSS sampled at %s Hz, below 20" % m["rss_hz"])
        rows, marks = [], {}
        with open(samples) as f:
            for line in f:
                if line.startswith("# mark"):
                    _, _, t, name = line.split()
                    marks[name] = float(t)
                elif line[:1].isdigit():
                    t, r, a = line.split()
                    rows.append((float(t), int(r), int(a)))
        for name in ("calls", "peak", "low", "end"):
            if name not in marks:
                fail("mark %s missing from the samples" % name)
        at_peak = [r for t, r, a in rows if marks["peak"] < t < marks["low"]]
        at_low = [r for t, r, a in rows if marks["low"] + 100 < t < marks["end"]]
        if not at_peak or not at_low:
            fail("no samples inside the phases")
        if max(at_peak) < 64 * 1024 or int(m["maxrss_kb"]) < 64 * 1024:
            fail("peak RSS %d KiB, expected at least 64 MiB" % max(at_peak))
        if max(at_low) > max(at_peak) - 56 * 1024:
            fail("RSS did not fall after the munmap (%d KiB)" % max(at_low))
        # system calls: the difference between the two runs is exactly 200 of each
        a, b = out[100][0], out[300][0]
        if a.get("sys_count") != "perf":
            print("note: system call counters unavailable here (%s): count checks skipped" % a.get("sys_count"))
        else:
            for call in ("mmap", "munmap"):
                d = int(b["sys_" + call]) - int(a["sys_" + call])
                if d != 200:
                    fail("sys_%s difference %d, expected exactly 200" % (call, d))
        # bad input: a missing library is a clear error; a timeout is reported
        p = run([launcher, "--preload", "/nonexistent/lib.so", "--", "true"])
        if p.returncode != 2 or "cannot read" not in p.stderr:
            fail("missing preload library not reported: %d %s" % (p.returncode, p.stderr))
        p = run([launcher, "--timeout", "0.3", "--", "sleep", "5"])
        if p.returncode != 124 or kv(p.stdout, "jwbench-run").get("timed_out") != "1":
            fail("timeout not reported: %d %s" % (p.returncode, p.stdout))
        return 0
    finally:
        shutil.rmtree(tmp)


def t_callgrind(build):
    if not shutil.which("valgrind"):
        print("SKIP: valgrind is not installed")
        return SKIP
    sys.path.insert(0, os.path.join(ROOT, "bench", "suite"))
    import callgrind
    spin = os.path.join(build, "lib", "libjwb_test_spin.so")
    tmp = tempfile.mkdtemp()
    try:
        got = {}
        for name, env in (("base", {"SPIN_ALLOC_ITERS": "0"}), ("spin", {"SPIN_ALLOC_ITERS": "200"}),
                          ("thread", {"SPIN_ALLOC_ITERS": "0", "SPIN_ALLOC_THREAD": "3000000"})):
            env["LD_PRELOAD"] = spin
            prefix = os.path.join(tmp, name)
            p = run(["valgrind", "--tool=callgrind", "--callgrind-out-file=%s.%%p" % prefix, "--separate-threads=yes",
                     "--compress-strings=no", "--compress-pos=no", os.path.join(build, "bin", "jwb-rptest"),
                     "--threads", "2", "--ops", "20000", "--lat-every", "0", "--cross", "0"], env, timeout=300)
            if p.returncode != 0:
                fail("callgrind run %s exited %d: %s" % (name, p.returncode, p.stderr[-500:]))
            ops = int(kv(p.stdout, "jwbench")["ops"])
            att = callgrind.attribute(prefix + ".")
            if not att.get("ok"):
                fail("attribution failed: %s" % att)
            got[name] = (att["allocator"] / ops, att["workload"] / ops, att)
            print(name, "ops=%d" % ops, "alloc/op=%.1f workload/op=%.1f" % got[name][:2], att)
        base, spin_, thr = got["base"], got["spin"], got["thread"]
        # the workload's own instructions do not depend on the allocator's work
        for other in (spin_, thr):
            if abs(other[1] - base[1]) > 0.02 * base[1]:
                fail("workload instructions per call moved: %.1f vs %.1f" % (other[1], base[1]))
        # 200 more loop iterations per call: at least 2 instructions each
        if spin_[0] - base[0] < 400:
            fail("allocator instructions per call grew by %.1f, expected at least 400" % (spin_[0] - base[0]))
        # the allocator's own thread counts as allocator work
        if thr[2]["allocator_threads"] < 1 or thr[2]["allocator"] - base[2]["allocator"] < 2000000:
            fail("the allocator's background thread was not attributed to it: %s" % thr[2])
        return 0
    finally:
        shutil.rmtree(tmp)


def t_replay(build):
    rec = os.path.join(build, "lib", "libjwtrace.so")
    replay = os.path.join(build, "bin", "jwb-replay")
    subject = os.path.join(build, "bin", "jwb-test-trace-subject")
    tmp = tempfile.mkdtemp()
    try:
        trace = os.path.join(tmp, "subject.jwt")
        p = run([subject], {"LD_PRELOAD": rec, "JWTRACE_OUT": trace})
        if p.returncode != 0:
            fail("subject exited %d: %s" % (p.returncode, p.stderr))
        made = kv(p.stdout, "subject")
        allocs = [("glibc", None), ("glibc-again", None)]
        for name, lib in (("jemalloc", JEMALLOC), ("mimalloc", MIMALLOC), ("tcmalloc", TCMALLOC),
                          ("jwmalloc", jwmalloc_lib(build))):
            if os.path.exists(lib):
                allocs.append((name, lib))
            else:
                print("note: %s not available (%s): not replayed" % (name, lib))
        keys = ["complete", "footer_agrees", "records", "trace_threads", "objects", "n_malloc", "n_calloc",
                "n_realloc", "n_free", "n_posix_memalign", "n_aligned_alloc", "n_memalign", "n_valloc",
                "n_pvalloc", "bytes_requested", "live_at_end", "seq_hash", "allocs", "frees", "reallocs"]
        first = None
        for name, lib in allocs:
            p = run([replay, "--trace", trace], {"LD_PRELOAD": lib} if lib else {})
            r = kv(p.stdout, "jwbench")
            # A peer's own bug (a block check failure, exit 3) is reported, not
            # blamed on the replayer; glibc and jwmalloc must pass their checks.
            if p.returncode == 3 and r.get("check") == "fail" and name not in ("glibc", "glibc-again", "jwmalloc"):
                print("note: %s failed a block check in this replay: %s" % (name, p.stderr.strip()))
            elif p.returncode != 0 or r.get("check") != "ok":
                fail("replay under %s exited %d: %s" % (name, p.returncode, p.stderr))
            sig = {k: r.get(k) for k in keys}
            print(name, sig)
            if sig["complete"] != "1" or sig["footer_agrees"] != "1":
                fail("replay under %s: incomplete, or the footer disagrees" % name)
            if int(sig["trace_threads"]) < 5:
                fail("expected the subject's 5 threads in the trace, got %s" % sig["trace_threads"])
            for k, kk in (("posix_memalign", "n_posix_memalign"), ("aligned_alloc", "n_aligned_alloc"),
                          ("memalign", "n_memalign"), ("valloc", "n_valloc")):
                if made.get(k) != sig[kk]:
                    fail("the program made %s %s calls, the replay %s" % (made.get(k), k, sig[kk]))
            if first is None:
                first = sig
            elif sig != first:
                fail("replay under %s differs: %s" % (name, {k: (first[k], sig[k]) for k in keys
                                                           if first[k] != sig[k]}))
        p = run([replay, "--trace", trace, "--serial", "1"])
        r = kv(p.stdout, "jwbench")
        if p.returncode != 0 or any(r.get(k) != first[k] for k in keys if k.startswith("n_") or k == "records"):
            fail("serial replay counts differ: %s" % p.stdout)
        # bad input: not a trace, truncated trace
        bad = os.path.join(tmp, "bad.jwt")
        with open(bad, "wb") as f:
            f.write(b"not a trace at all, just some bytes here")
        p = run([replay, "--trace", bad])
        if p.returncode != 2 or "not a trace" not in p.stderr:
            fail("a non-trace file was not rejected clearly: %d %s" % (p.returncode, p.stderr))
        with open(trace, "rb") as f:
            data = f.read()
        with open(bad, "wb") as f:
            f.write(data[: len(data) // 2])
        p = run([replay, "--trace", bad])
        r = kv(p.stdout, "jwbench")
        if p.returncode not in (0, 2) or (p.returncode == 0 and (r.get("complete") != "0" or
                                                                 "no footer" not in p.stderr)):
            fail("a truncated trace was not reported: %d %s %s" % (p.returncode, p.stdout, p.stderr))
        return 0
    finally:
        shutil.rmtree(tmp)


def t_report(build):
    tmp = tempfile.mkdtemp()
    try:
        return report_checks(build, tmp)
    except SystemExit:
        # say why, for a failure seen only on a loaded machine
        for name in ("raw/runs.jsonl", "report.md"):
            path = os.path.join(tmp, name)
            if os.path.exists(path):
                print("---- %s" % name)
                with open(path) as f:
                    for line in f.read().splitlines()[:80]:
                        print(line[:400])
        raise
    finally:
        shutil.rmtree(tmp)


def report_checks(build, tmp):
    if True:
        spin = os.path.join(build, "lib", "libjwb_test_spin.so")
        cmd = [sys.executable, os.path.join(ROOT, "bench", "suite", "run.py"), "--out", tmp, "--build", build,
               "--workloads", "rptest-16k,peak-trough", "--threads", "1,2", "--footprint-threads", "2",
               "--allocators", "jwmalloc,glibc,jemalloc", "--footprint-extra", "", "--duration", "0.1",
               "--repeat", "1", "--callgrind", "none", "--quick",
               "--allocator", "crashy=%s,SPIN_ALLOC_ABORT_AFTER=3000" % spin,
               "--allocator", "absent=/nonexistent/libabsent.so"]
        p = run(cmd, timeout=300)
        print(p.stderr[-2000:])
        if p.returncode != 0:
            fail("run.py exited %d" % p.returncode)
        md = open(os.path.join(tmp, "report.md")).read()
        runs = [json.loads(x) for x in open(os.path.join(tmp, "raw", "runs.jsonl"))]
        ok = [r for r in runs if r["allocator"] == "glibc" and r["status"] == "ok"]
        if len(ok) < 3:
            fail("glibc runs missing: %s" % [r["status"] for r in runs if r["allocator"] == "glibc"])
        row = re.search(r"^\| rptest-16k \| ([^|]+) \| ([0-9.]+) \| ([0-9.]+) \|", md, re.M)
        if not row:
            fail("no throughput row for rptest-16k in the report")
        jw_built = os.path.exists(jwmalloc_lib(build))
        if not jw_built and ("not built" not in row.group(1) or "No ratios" not in md):
            fail("jwmalloc missing but the report does not say 'not built'")
        if jw_built and "Ratio to jwmalloc" not in md:
            fail("jwmalloc built but no ratio tables")
        crashy = [r for r in runs if r["allocator"] == "crashy"]
        if not crashy or any(r["status"] != "failed" for r in crashy) or "Runs that failed" not in md:
            fail("a crashing allocator's runs are not reported as failed")
        absent = [r for r in runs if r["allocator"] == "absent"]
        if not absent or any(r["status"] != "not installed" for r in absent):
            fail("a missing allocator library is not reported as not installed")
        if "The paper's comparisons" not in md or "Peak-trough phases" not in md:
            fail("report sections missing")
        pt = [r for r in runs if r["workload"] == "peak-trough" and r["allocator"] == "glibc"][0]
        for k in ("steady_kb", "phase_peak_kb", "after_trough_kb"):
            if not pt.get("rss", {}).get(k):
                fail("peak-trough %s not derived: %s" % (k, pt.get("rss")))
        if pt["rss"]["phase_peak_kb"] < 3 * pt["rss"]["steady_kb"]:
            fail("peak-trough peak %d KiB not well above steady %d KiB" % (pt["rss"]["phase_peak_kb"],
                                                                          pt["rss"]["steady_kb"]))
        # issue 3: the allocators' own figures at the phase ends, and the section that judges them
        for alloc, there in (("jwmalloc", jw_built), ("jemalloc", os.path.exists(JEMALLOC))):
            if not there:
                continue
            rs = [r for r in runs if r["workload"] == "peak-trough" and r["allocator"] == alloc and
                  r["status"] == "ok"]
            if not rs:
                fail("no peak-trough run of %s" % alloc)
            res = rs[0]["result"]
            if res.get("astats") != alloc:
                fail("%s's own figures not read (astats=%s)" % (alloc, res.get("astats")))
            for what in ("mapped", "meta"):
                st, pk, tr = (res.get("as_%s_%s" % (ph, what)) for ph in ("steady", "peak", "trough"))
                if not st or pk is None or tr is None or pk < st:
                    fail("%s %s: steady %s, peak %s, trough %s" % (alloc, what, st, pk, tr))
            if res["as_peak_mapped"] < 2 * res["as_steady_mapped"]:
                fail("%s: a 5x burst does not show in mapped bytes: %s" % (alloc, res))
            if alloc == "jwmalloc" and not res.get("as_range_allocs"):
                fail("jwmalloc backend counters missing: %s" % res)
        if jw_built and ("Range backend (issue 3)" not in md or "jwmalloc mapped bytes after the trough" not in md):
            fail("issue 3's peak-trough verdicts missing from the report")
        if shutil.which("gnuplot"):
            pngs = [f for f in os.listdir(tmp) if f.endswith(".png")]
            if not pngs or any(os.path.getsize(os.path.join(tmp, f)) < 1000 for f in pngs):
                fail("plots missing or empty: %s" % pngs)
            for f in pngs:
                if f not in md:
                    fail("plot %s not referenced by the report" % f)
        return 0


def t_lat_attrib(build):
    """--lat-attrib counts every timed call above its threshold, and among them
    those that took a page fault: with a 1 ns threshold every timed call and
    every floor call counts; glibc with a fixed mmap threshold maps every 1 MiB
    block and writes its header, so each timed malloc faults in the call."""
    prog = os.path.join(build, "bin", "jwb-rptest")
    base = [prog, "--threads", "2", "--lat-every", "4", "--cross", "0"]
    p = run(base + ["--ops", "4000"])
    r = kv(p.stdout, "jwbench")
    if p.returncode != 0 or "lat_slow" in r:
        fail("without --lat-attrib: exit %d, fields %s" % (p.returncode, sorted(r)))
    p = run(base + ["--ops", "20000", "--lat-attrib", "1"])
    r = kv(p.stdout, "jwbench")
    print(p.stdout.strip())
    if p.returncode != 0:
        fail("jwb-rptest --lat-attrib 1 exited %d: %s" % (p.returncode, p.stderr.strip()[-300:]))
    n, slow = int(r["lat_samples"]), int(r["lat_slow"])
    if n <= 0 or slow != n or int(r["floor_slow"]) != n:
        fail("threshold 1 ns: %d samples, %s slow, %s floor slow" % (n, r["lat_slow"], r["floor_slow"]))
    if int(r["lat_slow_fault"]) + int(r["lat_slow_cs"]) > slow:
        fail("slow calls with a fault plus those switched out without one exceed the slow calls: %s" % r)
    p = run(base + ["--min", "1M", "--max", "1M", "--blocks", "4", "--ops", "2000", "--lat-attrib", "1"],
            {"MALLOC_MMAP_THRESHOLD_": "65536"})
    r = kv(p.stdout, "jwbench")
    print(p.stdout.strip())
    if p.returncode != 0:
        fail("jwb-rptest 1 MiB blocks exited %d: %s" % (p.returncode, p.stderr.strip()[-300:]))
    n, faults = int(r["lat_samples"]), int(r["lat_slow_fault"])
    # About half the timed calls are mallocs, each a fresh mapping whose header page faults.
    if n < 100 or faults < n // 4:
        fail("1 MiB mappings: %d of %d timed calls counted with a fault (expected about half)" % (faults, n))
    return 0


def synthetic_android_trace(path):
    """A memory_replay text trace of every kind of line: 4 threads (one
    ending and its tid coming back), blocks of every tier freed by other
    threads, realloc chains through the tiers, calloc, memalign, free of NULL,
    and a free and a realloc of pointers the trace never allocated. Returns
    what the replay must report."""
    import random
    rnd = random.Random(7)
    lines, live, nxt = [], {}, [0x10000]
    exp = {"calls": 0, "unmatched": 0, "threads": 0}

    def ptr():
        nxt[0] += 0x1000
        return "0x%x" % nxt[0]

    def size():
        return rnd.choice([1, 24, 100, 1000, 2016, 3000, 9000, 16384, 40000, 300000, 1 << 20, 5 << 20])

    tids = [101, 102, 103, 104]
    seen = set()
    for i in range(3000):
        tid = rnd.choice(tids)
        seen.add(tid)
        r = rnd.random()
        if r < 0.35 or not live:
            p, n = ptr(), size()
            lines.append("%d: malloc %s %d" % (tid, p, n))
            live[p] = n
        elif r < 0.40:
            p = ptr()
            lines.append("%d: calloc %s %d %d" % (tid, p, rnd.choice([1, 3, 7]), rnd.choice([8, 100, 5000])))
            live[p] = 1
        elif r < 0.45:
            p = ptr()
            lines.append("%d: memalign %s %d %d" % (tid, p, rnd.choice([16, 64, 4096, 65536]), size() % 100000))
            live[p] = 1
        elif r < 0.60:
            old = rnd.choice(sorted(live))
            del live[old]
            p = ptr()
            lines.append("%d: realloc %s %s %d" % (tid, p, old, size()))
            live[p] = 1
        else:
            p = rnd.choice(sorted(live))
            del live[p]
            lines.append("%d: free %s" % (tid, p))
        exp["calls"] += 1
        if i == 1500:  # thread 104 ends; the tid comes back as a new thread
            lines.append("104: thread_done 0x0")
    lines.append("101: free 0x0")
    lines.append("102: free 0xdead0000")  # never allocated: skipped
    lines.append("103: realloc 0xbeef0000 0xfeed0000 64")  # unknown old block: realloc(NULL)
    live["0xbeef0000"] = 64
    exp["calls"] += 2
    exp["unmatched"] = 2
    exp["live"] = len(live)
    exp["threads"] = len(seen) + 1
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return exp


def t_android_replay(build):
    prog = os.path.join(build, "bin", "jwb-android-replay")
    tmp = tempfile.mkdtemp()
    try:
        txt = os.path.join(tmp, "synthetic.txt")
        exp = synthetic_android_trace(txt)
        traces = [txt]
        if shutil.which("unzip"):
            import zipfile
            z = os.path.join(tmp, "synthetic.zip")
            with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
                zf.write(txt, "synthetic.txt")
            traces.append(z)
        else:
            print("note: unzip is not installed; the zip form is not tested")
        allocs = [("glibc", None)]
        if os.path.exists(jwmalloc_lib(build)):
            allocs.append(("jwmalloc", jwmalloc_lib(build)))
        for name, lib in allocs:
            for trace in traces:
                series = os.path.join(tmp, "series")
                out = run([prog, "--trace", trace, "--series", series], env={"LD_PRELOAD": lib} if lib else None)
                if out.returncode != 0:
                    fail("%s %s: exit %d: %s" % (name, trace, out.returncode, out.stderr.strip()[-300:]))
                d = kv(out.stdout, "jwbench")
                want = {"check": "ok", "calls": str(exp["calls"]), "unmatched": str(exp["unmatched"]),
                        "live_at_end": str(exp["live"]), "trace_threads": str(exp["threads"])}
                for k, v in want.items():
                    if d.get(k) != v:
                        fail("%s %s: %s=%s, expected %s" % (name, os.path.basename(trace), k, d.get(k), v))
                rows = [l.split() for l in open(series) if not l.startswith("#")]
                if not rows or rows[-1][0] != str(exp["calls"]) or int(d["rss_peak"]) <= 0:
                    fail("%s: the RSS series does not end at the last call, or no peak RSS" % name)
                print("%s %s: %s calls, check ok, %s unmatched, %s live at the end" %
                      (name, os.path.basename(trace), d["calls"], d["unmatched"], d["live_at_end"]))
        # A malformed trace is refused with one line and a non-zero exit.
        bad = os.path.join(tmp, "bad.txt")
        with open(bad, "w") as f:
            f.write("not a trace\n")
        out = run([prog, "--trace", bad])
        if out.returncode == 0 or "no calls" not in out.stderr:
            fail("a trace without calls was not refused: %r" % out.stderr)
    finally:
        shutil.rmtree(tmp)
    return 0


def t_cli(build):
    """--help prints the usage on stdout and exits 0; bad usage is one line on
    stderr naming the problem, exit 2 (the launcher, a workload, both reports)."""
    launcher, rptest = os.path.join(build, "bin", "jwbench-run"), os.path.join(build, "bin", "jwb-rptest")
    suite_report = [sys.executable, os.path.join(ROOT, "bench", "suite", "report.py")]
    iosr_report = [sys.executable, os.path.join(ROOT, "bench", "iosr", "report.py")]
    for cmd, words in (([launcher], ["--preload", "--env", "--rss-hz", "--samples", "--timeout"]),
                       ([rptest], ["--threads", "--blocks"]), (suite_report, ["--publish"]),
                       (iosr_report, ["--publish"])):
        p = run(cmd + ["--help"])
        if p.returncode != 0 or p.stderr or any(w not in p.stdout for w in words):
            fail("%s --help: exit %d, stdout %r, stderr %r" % (cmd[-1], p.returncode, p.stdout[:300], p.stderr))
    nodir = os.path.join(build, "no-such-results")
    for cmd, want in (([launcher, "--bogus"], "unknown option --bogus"),
                      ([launcher, "--bogus", "x", "--", "true"], "unknown option --bogus"),
                      ([launcher, "--preload"], "missing value for --preload"),
                      ([launcher, "--rss-hz", "5", "--", "true"], "--rss-hz must be 20..1000"),
                      ([rptest, "--bogus"], "unknown option '--bogus'"),
                      ([rptest, "--threads"], "missing value for '--threads'"),
                      ([rptest, "--blocks"], "missing value for '--blocks'"),
                      (suite_report, "no results directory given"),
                      (suite_report + ["--bogus"], "unknown option '--bogus'"),
                      (suite_report + [nodir], "has no meta.json"),
                      (suite_report + [nodir, "--publish"], "missing value for --publish"),
                      (iosr_report, "no results directory given"),
                      (iosr_report + ["--bogus"], "unknown option '--bogus'"),
                      (iosr_report + [nodir], "has no raw/results.json")):
        p = run(cmd)
        if p.returncode != 2 or p.stdout or want not in p.stderr or p.stderr.count("\n") != 1:
            fail("%s: exit %d, stdout %r, stderr %r (want exit 2 and one line with %r)" % (
                " ".join(cmd[-3:]), p.returncode, p.stdout[:300], p.stderr, want))
    return 0


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    build, what = os.path.abspath(argv[1]), argv[2]
    if what == "workload":
        return t_workload(build, argv[3], argv[4], argv[5:])
    tests = {"launcher": t_launcher, "callgrind": t_callgrind, "replay": t_replay, "report": t_report,
             "determinism": t_determinism, "lat_attrib": t_lat_attrib, "android_replay": t_android_replay,
             "cli": t_cli}
    if what not in tests:
        print("unknown test " + what)
        return 2
    return tests[what](build)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
