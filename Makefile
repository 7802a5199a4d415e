# Thin wrapper over CMake. `make demo` and `make test` install missing Debian
# packages first (needs root or sudo), so a fresh Debian 12 machine works.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
FUZZ_RUNS ?= 20000
BUILD ?= build

.PHONY: all deps build test cuda-emu asan tsan fuzz demo models clean

all: build

deps:
	@scripts/install_deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# scripts/ctest_summary.sh: ctest, then a line that counts skipped tests
# apart from passed ones (ctest's own line does not)
test: build
	@scripts/fetch_models.sh --ci
	scripts/ctest_summary.sh $(BUILD) $(JOBS)

# The CUDA kernel tests without a GPU (where `make test` can only skip them):
# tests/cuda/emu runs each kernel's source on host threads, under
# AddressSanitizer, in the tests' small mode, against the same CPU references.
# Needs nvcc's include directory (the CUDA headers); no GPU, no driver.
cuda-emu:
	EMU_JOBS=$(JOBS) tests/cuda/emu/run.sh

# Sanitizer trees build the library, the CLI and the tests only (TS_FUZZ off:
# no harnesses; there are no bench programs in CMake), at -O1 with line
# tables, and are kept between runs so only what changed is rebuilt.
ASAN_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# ThreadSanitizer runs the whole suite, CLI tests included (the instrumented
# CLI is exec'ed by the shell tests and runs under TSan itself; fork+exec is
# fine for TSan, unlike fork without exec in a threaded process). Nothing is
# excluded today; a test that cannot run under TSan is added to TSAN_EXCLUDE
# (a ctest -E regex) with the reason written here.
TSAN_ENV = TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
TSAN_EXCLUDE ?=

asan: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTS_SANITIZE=ON -DTS_TSAN=OFF -DTS_FUZZ=OFF >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@scripts/fetch_models.sh --ci
	$(ASAN_ENV) scripts/ctest_summary.sh build-asan $(JOBS)

tsan: deps
	@cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DTS_TSAN=ON -DTS_SANITIZE=OFF -DTS_FUZZ=OFF >/dev/null
	@cmake --build build-tsan -j $(JOBS)
	@scripts/fetch_models.sh --ci
	$(TSAN_ENV) scripts/ctest_summary.sh build-tsan $(JOBS) $(if $(TSAN_EXCLUDE),-E '$(TSAN_EXCLUDE)')

fuzz: deps
	@CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DTS_FUZZ=ON >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target fuzzers
	@scripts/run_fuzz.sh build-fuzz $(FUZZ_RUNS)

demo: build
	@scripts/demo.sh $(BUILD)/turbospark

models: deps
	@scripts/fetch_models.sh

clean:
	rm -rf build build-asan build-tsan build-fuzz
