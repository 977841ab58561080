# Thin driver over CMake/CTest. Every target installs what it lacks first.
BUILD   ?= build
# Tests: one more than the cores, since many wait (on I/O, a daemon, a
# sleeping lock holder) rather than compute.
JOBS    ?= $(shell echo $$(( $$(nproc) + 1 )))
# Compilations: two more than the cores, as Ninja's own default, so that a
# core whose job waits on the disk or the linker is kept busy.
BUILD_JOBS ?= $(shell echo $$(( $$(nproc) + 2 )))
PREFIX  ?= /usr/local
# A published report goes to bench/results/DATE-NAME, one folder per run
# (bench/results/README.md lists them; the README links the latest).
TODAY := $(shell date +%F)
DESTDIR ?=
BUILD_TYPE ?= RelWithDebInfo
# The build's sub-makes print no "Entering/Leaving directory" pairs.
MAKEFLAGS += --no-print-directory

.PHONY: all deps build test demo install clean

all: build

# What a target installs first (scripts/install-deps.sh): `make` and `make build`
# a compiler, CMake, Ninja and liburing only; the tests, the demo and the benchmarks
# add what they run or compare with. `make deps DEPS=test|all` installs a set alone.
DEPS ?= build
test verify fuzz bench-fastpath bench-backend: DEPS = test
demo bench bench-% stress-iosr: DEPS = all

deps:
	@scripts/install-deps.sh $(DEPS)

# A new build folder uses Ninja: on a fresh build it does the same compilations
# as CMake's Makefiles in about 15% less time (docs/design/architecture.md,
# "Build"); a folder configured before keeps its generator.
build: deps
	@gen=; [ -f $(BUILD)/CMakeCache.txt ] || gen="-G Ninja"; \
	 cmake $$gen -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null
	@cmake --build $(BUILD) -j$(BUILD_JOBS)

# CTest's own summary line is the last thing printed.
test: build
	@ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS) --timeout 900

demo: build
	@scripts/demo.sh $(BUILD)

# Bounded model checking of the concurrent code, every client at its full bound.
.PHONY: verify
verify: build
	@verify/run-all.sh $(BUILD)

install: build
	@DESTDIR=$(DESTDIR) cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) build-*

# jwmalloc: instructions per warm malloc+free pair, jwmalloc vs mimalloc (callgrind).
.PHONY: bench-fastpath
bench-fastpath: build
	@tests/jwmalloc/fastpath_bench.sh $(BUILD)

# jwmalloc backend (issue 3): long libFuzzer run with a kept corpus, and the
# backend microbenchmark (reformatting, peak-trough, callgrind counts) with the
# differential test at 3,000,000 operations (make test runs 1,000,000).
FUZZ_SECONDS ?= 600
.PHONY: fuzz bench-backend
fuzz: build
	@mkdir -p $(BUILD)/fuzz-corpus
	@$(BUILD)/bin/fuzz_backend -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -print_final_stats=1 $(BUILD)/fuzz-corpus

bench-backend: build
	@tests/backend/bench_backend.sh $(BUILD)

# Evaluation suite (docs/design/bench.md): make bench [QUICK=1] [BENCH_ARGS='--threads 1,4 ...'].
# The full run publishes its report and plots to bench/results/DATE-full; raw data stays in bench/out.
.PHONY: bench bench-traces
bench-traces: build
	@bench/trace/record.sh $(BUILD)

bench: bench-traces
	@bench/suite/run.py --build $(BUILD) $(if $(QUICK),--quick --out bench/out/quick,--out bench/out/full --publish bench/results/$(TODAY)-full) $(BENCH_ARGS)
	@bench/suite/preempt.py --build $(BUILD) $(if $(QUICK),--repeat 1 --duration 0.5 --out bench/out/quick/preempt,--out bench/out/full/preempt) $(PREEMPT_ARGS)

# What a paused thread costs the others (issue 23; docs/design/bench.md,
# "Preemption injection"): no pauses, random pauses, pauses inside the
# allocator's lock sections, every allocator, at 10 threads per core.
# make bench-preempt [PREEMPT_ARGS='--repeat 5 ...']; report in build/bench-preempt.
.PHONY: bench-preempt
bench-preempt: build
	@bench/suite/preempt.py --build $(BUILD) $(PREEMPT_ARGS)

# The harness's own cost per call against the allocators' (issue 23;
# docs/design/bench.md, "Harness cost"): the null allocator through run.py,
# callgrind counts, perf's split of the time. Report in build/bench-harness-cost.
HC = $(BUILD)/bench-harness-cost
HC_ALLOCS = --allocator null=$(BUILD)/lib/libjwb_null.so --allocators null,glibc,jemalloc,mimalloc,tcmalloc,scudo,jwmalloc --footprint-extra ''
.PHONY: bench-harness-cost
bench-harness-cost: build
	@bench/suite/run.py --build $(BUILD) $(HC_ALLOCS) --workloads throughput --threads N,10N --duration 1 --repeat 3 --callgrind none --no-report --out $(HC)/runs
	@bench/suite/run.py --build $(BUILD) $(HC_ALLOCS) --workloads throughput --threads N --callgrind rptest-16k,rptest-1m,xmalloc,mstress,mleak,larson,reformat,near4k --callgrind-only --no-report --out $(HC)/callgrind
	@bench/suite/harness_cost.py --build $(BUILD) --perf-measure --runs $(HC)/runs --callgrind $(HC)/callgrind --out $(HC) $(HARNESS_ARGS)

# The public mimalloc-bench programs (issue 23), built outside the repository
# by ../shared/bench-public/build.sh, every allocator interleaved run by run
# (compare.sh), then jwmalloc's ratios plotted. Needs a quiet machine.
# make bench-public [PUBLIC_REPEATS=3]; output and plot in build/bench-public.
PUBLIC_BIN ?= /tmp/bench-public
PUBLIC_REPEATS ?= 3
.PHONY: bench-public
bench-public: build
	@[ -x $(PUBLIC_BIN)/larson ] || ../shared/bench-public/build.sh $(PUBLIC_BIN)
	@mkdir -p $(BUILD)/bench-public
	BIN=$(PUBLIC_BIN) ../shared/bench-public/compare.sh $(BUILD)/lib/libjwmalloc.so $(PUBLIC_REPEATS) | tee $(BUILD)/bench-public/compare.txt
	@bench/public/plot.sh $(BUILD)/bench-public/compare.txt $(BUILD)/bench-public

# What the slowest allocator calls are made of (issue 8): slow calls per
# million at 10 threads per core, with a page fault, a context switch, and the
# empty-call floor, every allocator (docs/design/bench.md, "Slow calls").
# make bench-tail [TAIL_ARGS='--threads 20 --repeat 5 ...']; table in build/bench-tail/tail.md.
.PHONY: bench-tail
bench-tail: build
	@bench/suite/tail.py --build $(BUILD) $(TAIL_ARGS)

# IOSR evaluation (issue 6; docs/design/iosr-eval.md): app switching on Linux's
# swap and on IOSR under every policy combination, quiet and with a background
# writer, fio as the disk's limit. Needs root, swapon, memory cgroup v1.
# make bench-iosr [QUICK=1] [IOSR_BENCH_ARGS='--apps 4 ...']; the full run
# publishes its report and plots to bench/results/DATE-iosr, raw data stays in bench/out/iosr.
.PHONY: bench-iosr
bench-iosr: build
	@bench/iosr/run.py --build $(BUILD) $(if $(QUICK),--quick,--publish bench/results/$(TODAY)-iosr) $(IOSR_BENCH_ARGS)

# One memory stack (issue 26; docs/design/stack.md): python3, sqlite3 and node
# switching on glibc or jwmalloc, under Linux swap (a memory cgroup per app) or
# IOSR, with and without allocator awareness and with placement; the trim
# variants and python3's share in IOSR. Needs root, swapon, memory cgroup v1
# (Linux runs skipped otherwise), userfaultfd and gnuplot.
# make bench-stack [STACK_ARGS='--rounds 5 ...']; report and plots in
# bench/results/DATE-stack, raw data in bench/out/stack.
.PHONY: bench-stack
bench-stack: build
	@bench/stack/run.py --build $(BUILD) --repeat 3 --publish bench/results/$(TODAY)-stack $(STACK_ARGS)

# jwmalloc reclamation (issue 7): the generational workload in virtual time,
# lifetime against fixed-delay (figures in build/bench-reclaim/bench.txt).
.PHONY: bench-reclaim
bench-reclaim: build
	@tests/reclaim/bench_reclaim.sh $(BUILD)

# Android's trace replay (issue 27; docs/design/bench.md, "Android's traces"):
# every allocator, jwmalloc in its default and low-memory configurations, 3
# interleaved runs, published to bench/results/DATE-android-replay.
# make bench-android [ANDROID_TRACE=../shared/android-traces/systemui.zip] [ANDROID_ARGS='--repeat 5 ...']
ANDROID_TRACE ?= ../shared/android-traces/systemui.zip
.PHONY: bench-android
bench-android: build
	@bench/suite/android.py --build $(BUILD) --trace $(ANDROID_TRACE) --out bench/out/android \
	  --publish bench/results/$(TODAY)-android-replay $(ANDROID_ARGS)

# Heap address entropy across runs (issue 27; docs/design/api.md, "Randomized
# addresses"): jwmalloc beside glibc, Scudo, jemalloc, mimalloc, tcmalloc.
.PHONY: bench-aslr
bench-aslr: build
	@bench/aslr/entropy.py --build $(BUILD) --runs 100 --publish bench/results/$(TODAY)-aslr

# IOSR randomized stress over many seeds (issue 22): make stress-iosr [SEEDS=20] [OPS=1000].
SEEDS ?= 20
OPS ?= 1000
.PHONY: stress-iosr
stress-iosr: build
	@scripts/iosr-stress.sh $(BUILD) $(SEEDS) $(OPS)
