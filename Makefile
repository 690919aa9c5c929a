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

# `make test` (what CI runs): four stages, each with a banner and ctest's
# summary; it stops at the first stage that fails. SANITIZE=0 runs only the
# first. Which tests each sanitizer stage runs, and with which options, is in
# the asan/tsan/fuzz test presets (CMakePresets.json); docs/testing.md.
SANITIZE ?= 1
banner = @printf '\n==== %s ====\n' $(1)

test: build
	$(call banner,"[1/4] $(PRESET) build: all tests")
	ctest --preset $(PRESET)
ifneq ($(SANITIZE),0)
	$(call banner,"[2/4] AddressSanitizer + UBSan: unit and multi tests")
	cmake --preset asan >/dev/null
	cmake --build --preset asan
	ctest --preset asan
	$(call banner,"[3/4] ThreadSanitizer: tests with thread ranks")
	cmake --preset tsan >/dev/null
	cmake --build --preset tsan
	ctest --preset tsan
	$(call banner,"[4/4] libFuzzer: each target for a few seconds")
	cmake --preset fuzz >/dev/null
	cmake --build --preset fuzz
	ctest --preset fuzz
endif

bench: build
	bash bench/run_main.sh build/$(PRESET)

clean:
	rm -rf build
