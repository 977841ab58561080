"""The allocators the suite compares (docs/design/bench.md, "Allocators").

Each is a name, the library loaded with LD_PRELOAD (None: glibc, the system
allocator), extra environment, and where it comes from. Libraries are looked up
at run time: first in --peers-dir (a folder holding copies, for machines without
the Debian packages), then at the Debian paths. A library that is missing keeps
its place in the results with the state "not built" (jwmalloc) or "not
installed" (a peer).
"""
import glob
import os
import subprocess

# name -> (candidate paths, Debian package, environment, description)
PEERS = {
    "glibc": (None, "libc6", {}, "glibc malloc (ptmalloc2), the system allocator"),
    "jemalloc": (["/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"], "libjemalloc2", {},
                 "jemalloc, default settings (10 s dirty decay)"),
    "jemalloc-1s": (["/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"], "libjemalloc2",
                    {"MALLOC_CONF": "dirty_decay_ms:1000,muzzy_decay_ms:1000"},
                    "jemalloc with 1 s decay (the mobile reclaim delay)"),
    "mimalloc": (["/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"], "libmimalloc2.0", {}, "mimalloc"),
    "tcmalloc": (["/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"], "libtcmalloc-minimal4", {},
                 "tcmalloc (gperftools, minimal)"),
    "scudo": (sorted(glob.glob("/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.scudo_standalone-x86_64.so"),
                     reverse=True) or
              ["/usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.scudo_standalone-x86_64.so"],
              "libclang-rt-14-dev", {}, "Scudo standalone (LLVM), the hardened allocator of Android"),
}

DEFAULT = ["jwmalloc", "glibc", "jemalloc", "mimalloc", "tcmalloc", "scudo"]
# Extra allocators for the footprint workloads (issue 7: syscalls vs jemalloc
# with the mobile decay time; jwmalloc's fixed-delay reclamation baseline).
FOOTPRINT_EXTRA = ["jemalloc-1s", "jwmalloc-fixed"]

# jwmalloc variants: environment on top of the library (issue 7). Every
# jwmalloc run writes its statistics line (JWMALLOC_STATS, machine-readable,
# one line per process) to the run's stderr, where report.py reads the
# reclamation counters (merges before and after release).
JWMALLOC_STATS_ENV = {"JWMALLOC_STATS": "1", "JWMALLOC_STATS_FILE": "/dev/stderr"}
JWMALLOC_VARIANTS = {
    "jwmalloc": ({}, "jwmalloc (this project)"),
    "jwmalloc-fixed": ({"JWMALLOC_RECLAIM_POLICY": "fixed-delay"},
                       "jwmalloc with the fixed-delay reclamation baseline (a merge keeps the oldest countdown)"),
    "jwmalloc-noahead": ({"JWMALLOC_AHEAD_ROOTS": "0"},
                         "jwmalloc without roots mapped ahead (step 5 maps on the caller's path; backend.md 7a)"),
}


class Allocator:
    def __init__(self, name, lib, env, state, reason, package, description):
        self.name = name
        self.lib = lib          # path or None (glibc)
        self.env = env
        self.state = state      # "ok", "not built", "not installed"
        self.reason = reason
        self.package = package
        self.description = description
        self.version = ""

    @property
    def ok(self):
        return self.state == "ok"

    def as_dict(self):
        return {k: getattr(self, k) for k in ("name", "lib", "env", "state", "reason", "package", "description",
                                               "version")}


def peers_dir_version(peers_dir, package):
    """Version recorded by bench/device-prep.sh beside copied libraries."""
    try:
        with open(os.path.join(peers_dir, "versions.tsv")) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) == 2 and parts[0] == package:
                    return parts[1]
    except OSError:
        pass
    return ""


def deb_version(package):
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True,
                             timeout=10)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def run_env(alloc):
    """The environment one run of a program under `alloc` gets: this process's,
    without a preload or JWMALLOC_* settings of its own, plus the allocator's
    settings (its statistics switches left out) and its library preloaded."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    for k in list(env):
        if k.startswith("JWMALLOC_"):
            del env[k]
    env.update({k: v for k, v in alloc.env.items() if not k.startswith("JWMALLOC_STATS")})
    if alloc.lib:
        env["LD_PRELOAD"] = alloc.lib
    return env


def resolve(name, jwmalloc_path, peers_dir=None, custom=None):
    """Returns an Allocator for `name`. custom: {name: (lib or None, env)}."""
    if custom and name in custom:
        lib, env = custom[name]
        if lib and not os.access(lib, os.R_OK):
            return Allocator(name, lib, env, "not installed", "%s not found" % lib, "", "user-defined")
        return Allocator(name, lib, env, "ok", "", "", "user-defined: %s" % (lib or "glibc"))
    if name == "jwmalloc" or name.startswith("jwmalloc-"):
        venv, desc = JWMALLOC_VARIANTS.get(name, ({}, "jwmalloc (this project)"))
        env = dict(JWMALLOC_STATS_ENV, **venv)
        if jwmalloc_path and os.access(jwmalloc_path, os.R_OK):
            return Allocator(name, os.path.abspath(jwmalloc_path), env, "ok", "", "", desc)
        return Allocator(name, jwmalloc_path, env, "not built",
                         "%s does not exist (jwmalloc is not built yet)" % jwmalloc_path, "", desc)
    if name not in PEERS:
        raise KeyError(name)
    paths, package, env, desc = PEERS[name]
    if paths is None:
        a = Allocator(name, None, env, "ok", "", package, desc)
        a.version = deb_version(package)
        return a
    candidates = []
    if peers_dir:
        candidates += [os.path.join(peers_dir, os.path.basename(p)) for p in paths]
    candidates += paths
    for p in candidates:
        if os.access(p, os.R_OK):
            a = Allocator(name, p, dict(env), "ok", "", package, desc)
            copied = peers_dir and p.startswith(os.path.join(peers_dir, ""))
            a.version = ((peers_dir_version(peers_dir, package) + " (copied)") if copied else deb_version(package))
            return a
    return Allocator(name, paths[0], env, "not installed",
                     "none of %s exists (Debian package %s)" % (", ".join(candidates), package), package, desc)
