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

# Bounded model checking of the concurrent code, every client at its full bound.
.PHONY: verify
verify: build
	@verify/run-all.sh $(BUILD)

install: build
	@DESTDIR=$(DESTDIR) cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) build-*
