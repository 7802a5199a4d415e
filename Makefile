# Thin wrapper over CMake. `make demo` and `make test` install missing Debian
# packages first (needs root or sudo), so a fresh Debian 12 machine works.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
FUZZ_RUNS ?= 20000
BUILD ?= build

.PHONY: all deps build test asan fuzz demo models clean

all: build

deps:
	@scripts/install_deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@scripts/fetch_models.sh --ci
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

asan: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTS_SANITIZE=ON >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@scripts/fetch_models.sh --ci
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir build-asan --output-on-failure -j $(JOBS)

fuzz: deps
	@CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DTS_FUZZ=ON >/dev/null
	@cmake --build build-fuzz -j $(JOBS)
	@scripts/run_fuzz.sh build-fuzz $(FUZZ_RUNS)

demo: build
	@scripts/demo.sh $(BUILD)/turbospark

models: deps
	@scripts/fetch_models.sh

clean:
	rm -rf build build-asan build-fuzz
