# Thin driver over CMake/CTest. Every target installs what it lacks first.
BUILD   ?= build
JOBS    ?= $(shell nproc)
PREFIX  ?= /usr/local
DESTDIR ?=
BUILD_TYPE ?= RelWithDebInfo
# The build's sub-makes print no "Entering/Leaving directory" pairs.
MAKEFLAGS += --no-print-directory

.PHONY: all deps build test demo install clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

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
# backend microbenchmark (reformatting, peak-trough, callgrind counts).
FUZZ_SECONDS ?= 600
.PHONY: fuzz bench-backend
fuzz: build
	@mkdir -p $(BUILD)/fuzz-corpus
	@$(BUILD)/bin/fuzz_backend -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -print_final_stats=1 $(BUILD)/fuzz-corpus

bench-backend: build
	@tests/backend/bench_backend.sh $(BUILD)

# Evaluation suite (docs/design/bench.md): make bench [QUICK=1] [BENCH_ARGS='--threads 1,4 ...'].
# The full run publishes its report and plots to bench/results/full; raw data stays in bench/out.
.PHONY: bench bench-traces
bench-traces: build
	@bench/trace/record.sh $(BUILD)

bench: bench-traces
	@bench/suite/run.py --build $(BUILD) $(if $(QUICK),--quick --out bench/out/quick,--out bench/out/full --publish bench/results/full) $(BENCH_ARGS)

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
# publishes its report and plots to bench/results/iosr, raw data stays in bench/out/iosr.
.PHONY: bench-iosr
bench-iosr: build
	@bench/iosr/run.py --build $(BUILD) $(if $(QUICK),--quick,--publish bench/results/iosr) $(IOSR_BENCH_ARGS)

# jwmalloc reclamation (issue 7): the generational workload in virtual time,
# lifetime against fixed-delay (figures in build/bench-reclaim/bench.txt).
.PHONY: bench-reclaim
bench-reclaim: build
	@tests/reclaim/bench_reclaim.sh $(BUILD)

# IOSR randomized stress over many seeds (issue 22): make stress-iosr [SEEDS=20] [OPS=1000].
SEEDS ?= 20
OPS ?= 1000
.PHONY: stress-iosr
stress-iosr: build
	@scripts/iosr-stress.sh $(BUILD) $(SEEDS) $(OPS)
