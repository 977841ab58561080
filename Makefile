# Thin driver over CMake/CTest. Every target installs what it lacks first.
BUILD   ?= build
JOBS    ?= $(shell nproc)
PREFIX  ?= /usr/local
DESTDIR ?=
BUILD_TYPE ?= RelWithDebInfo

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

install: build
	@DESTDIR=$(DESTDIR) cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) build-*

# Evaluation suite (docs/design/bench.md): make bench [QUICK=1] [BENCH_ARGS='--threads 1,4 ...'].
# The full run publishes its report and plots to bench/results/full; raw data stays in bench/out.
.PHONY: bench bench-traces
bench-traces: build
	@bench/trace/record.sh $(BUILD)

bench: bench-traces
	@bench/suite/run.py --build $(BUILD) $(if $(QUICK),--quick --out bench/out/quick,--out bench/out/full --publish bench/results/full) $(BENCH_ARGS)
