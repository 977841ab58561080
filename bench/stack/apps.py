"""The programs of the stack evaluation (docs/design/stack.md, "Evaluation"):
three unmodified programs, each driven by a line protocol on its standard
input and output. A program builds its state, says "ready", then answers each
query with one line; the answers are deterministic, so every configuration
must give the same ones.

- python: python3 bench/stack/progs/dict_app.py (a dict of strings)
- sqlite: the sqlite3 shell on an in-memory database with a 400 MB page
  cache: every page of the database is a malloc'd cache page
- node: node bench/stack/progs/map_app.js (a Map of strings and Buffers)
"""
import os
import select
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

SQLITE_ROWS = 500000
SQLITE_INIT = [
    "PRAGMA cache_size=-400000;",
    "CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);",
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<%d) "
    "INSERT INTO t SELECT x, printf('%%.150c%%d', 'v', x*7919 %% 1000003) FROM c;" % SQLITE_ROWS,
    ".print ready",
]


def sqlite_query(seed):
    """25,000 rows picked from seed, looked up by key: a random part of the cache."""
    return ("WITH RECURSIVE r(i, x) AS (SELECT 0, %d UNION ALL SELECT i+1, (x*1103515245+12345) %% 2147483648 "
            "FROM r WHERE i < 25000) SELECT 'q', sum(length(v)), sum(k) FROM r CROSS JOIN t ON t.k = 1 + r.x %% %d;"
            % (seed, SQLITE_ROWS))


# name -> (argv, extra environment, lines sent first, query(seed) -> line)
PROGRAMS = {
    "python": ([sys.executable, os.path.join(HERE, "progs", "dict_app.py")], {"APP_N": "450000"}, [],
               lambda s: "q %d" % s),
    "sqlite": (["sqlite3"], {}, SQLITE_INIT, sqlite_query),
    "node": (["node", os.path.join(HERE, "progs", "map_app.js")], {"APP_N": "300000"}, [],
             lambda s: "q %d" % s),
}


def missing_programs(names):
    return [n for n in names if shutil.which(PROGRAMS[n][0][0]) is None]


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for ln in f:
                if ln.startswith("VmRSS:"):
                    return int(ln.split()[1])
    except OSError:
        pass
    return 0


class App:
    """One program under one configuration.

    prefix: what runs it (["jwmalloc", "run", "--swap", NAME, "--"], [] for
    glibc); cgroup: a memory cgroup directory it enters before it runs, or
    None."""

    def __init__(self, name, program, prefix, env, cgroup, errpath, preexec):
        argv, extra, self.init, self.query_of = PROGRAMS[program]
        self.name, self.program = name, program
        cmd = prefix + argv
        if cgroup:
            cmd = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', cgroup] + cmd
        e = dict(os.environ)
        e.update(extra)
        e.update(env)
        self.err = open(errpath, "w")
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, env=e,
                                  preexec_fn=preexec)
        self.buf = b""
        for ln in self.init:
            self.send(ln)

    def send(self, line):
        self.p.stdin.write((line + "\n").encode())
        self.p.stdin.flush()

    def line(self, timeout):
        end = time.monotonic() + timeout
        fd = self.p.stdout.fileno()
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0:
                raise RuntimeError("%s: no answer within %.0f s" % (self.name, timeout))
            r, _, _ = select.select([fd], [], [], min(left, 1.0))
            if r:
                chunk = os.read(fd, 65536)
                if not chunk:
                    self.err.flush()
                    with open(self.err.name) as f:
                        raise RuntimeError("%s exited (%s): %s" % (self.name, self.p.poll(), f.read()[-400:]))
                self.buf += chunk
        ln, self.buf = self.buf.split(b"\n", 1)
        return ln.decode().strip()

    def ready(self, timeout=300):
        while self.line(timeout) != "ready":
            pass

    def query(self, seed, timeout=300):
        """(answer, milliseconds from the query to its answer)."""
        t0 = time.monotonic()
        self.send(self.query_of(seed))
        ans = self.line(timeout)
        return ans, (time.monotonic() - t0) * 1e3

    def pid(self):
        """The program's own pid (below jwmalloc run and the cgroup's sh)."""
        p = self.p.pid
        for _ in range(3):
            with open("/proc/%d/comm" % p) as f:
                comm = f.read().strip()
            kids = children(p)
            if comm not in ("jwmalloc", "sh") or not kids:
                return p
            p = kids[0]
        return p

    def rss_kib(self):
        return rss_kib(self.pid())

    def close(self):
        try:
            if self.p.poll() is None:
                self.send(".quit" if self.program == "sqlite" else "quit")
                self.p.stdin.close()
                self.p.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            self.p.kill()
            self.p.wait()
        self.err.close()
