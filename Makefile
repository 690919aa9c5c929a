# Thin wrapper over the CMake presets. `make test` and `make bench` install
# missing Debian packages first (as root; otherwise they print the command).
PRESET ?= release
# openmpi: bench/compare; iproute2: the network-namespace TCP tests; pkg-config:
# the install test; python3-matplotlib: lanes-plot; python3-jsonschema: the perf JSON schema test. hwloc and Google Benchmark are DESIGN.md's base set.
# clang, libclang-rt-14-dev: the libFuzzer targets (fuzz preset).
DEB_PACKAGES := cmake ninja-build g++ pkg-config libgtest-dev libgmock-dev libbenchmark-dev \
  libhwloc-dev openmpi-bin libopenmpi-dev iproute2 python3-matplotlib python3-jsonschema \
  clang libclang-rt-14-dev

.PHONY: deps configure build test bench clean

deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "Installing:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "Missing Debian packages. Run:"; echo "  sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi

configure: deps
	cmake --preset $(PRESET)

build: configure
	cmake --build --preset $(PRESET)

# `make test` (what CI runs): the release build's tests, then the unit and
# multi-rank tests under AddressSanitizer + UBSan; each stage prints a banner
# and ctest's summary, and a failing stage stops the run. SANITIZE=0 runs the
# first stage only. `make test-full` adds ThreadSanitizer (thread-rank tests)
# and a short libFuzzer run of every fuzz target: two more full builds, which
# do not fit CI's 30 minutes on 2 cores next to the first two (docs/testing.md).
# What each sanitizer stage runs, with which options: CMakePresets.json.
SANITIZE ?= 1
banner = @printf '\n==== %s ====\n' $(1)

.PHONY: test-asan test-tsan test-fuzz test-full

test: build
	$(call banner,"[1/2] $(PRESET) build: all tests")
	ctest --preset $(PRESET)
ifneq ($(SANITIZE),0)
	$(MAKE) --no-print-directory test-asan STAGE=2/2
endif

STAGE ?= -
test-asan: deps
	$(call banner,"[$(STAGE)] AddressSanitizer + UBSan: unit and multi tests")
	cmake --preset asan >/dev/null
	cmake --build --preset asan
	ctest --preset asan

test-tsan: deps
	$(call banner,"[$(STAGE)] ThreadSanitizer: tests with thread ranks")
	cmake --preset tsan >/dev/null
	cmake --build --preset tsan
	ctest --preset tsan

test-fuzz: deps
	$(call banner,"[$(STAGE)] libFuzzer: each target for a few seconds")
	cmake --preset fuzz >/dev/null
	cmake --build --preset fuzz
	ctest --preset fuzz

test-full: test
	$(MAKE) --no-print-directory test-tsan STAGE=3/4
	$(MAKE) --no-print-directory test-fuzz STAGE=4/4

bench: build
	bash bench/run_main.sh build/$(PRESET)

clean:
	rm -rf build
