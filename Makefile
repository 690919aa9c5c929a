# Thin wrapper over the CMake presets. `make test` and `make bench` install
# missing Debian packages first (as root; otherwise they print the command).
PRESET ?= release
# openmpi: bench/compare and liblanes-mpi.so (ranks meet over mpirun); slurm-wlm,
# munge: the test that runs the docs' srun example on a one-node Slurm;
# iproute2: the network-namespace TCP tests; pkg-config: the install test;
# python3-matplotlib: lanes-plot; python3-jsonschema: the perf JSON schema test.
# hwloc and Google Benchmark are the base set (docs/design.md).
# clang, libclang-rt-14-dev: the sanitizer stages and the libFuzzer targets (clang builds).
# qemu-system-x86, linux-image-amd64, busybox-static, cpio, ibverbs-utils, ibverbs-providers:
# the soft-RoCE guest of the rdma tests (tests/rdma/guest.sh); libibverbs-dev: the verbs
# headers (libibverbs itself is opened at run time). libgloo-dev: Gloo, a baseline of the TCP
# comparison (bench/compare/netns_tcp_compare.sh).
DEB_PACKAGES := cmake ninja-build g++ pkg-config libgtest-dev libgmock-dev libbenchmark-dev \
  libhwloc-dev openmpi-bin libopenmpi-dev iproute2 python3-matplotlib python3-jsonschema \
  slurm-wlm munge clang libclang-rt-14-dev \
  qemu-system-x86 linux-image-amd64 busybox-static cpio ibverbs-utils ibverbs-providers \
  libibverbs-dev libgloo-dev libmicrohttpd-dev nlohmann-json3-dev python3-prometheus-client

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

# `make test` (what CI runs), in three stages, each with a banner and ctest's
# summary; a failing stage stops the run:
#   [1/3] the release build (GCC, CUDA kernels where the toolkit is): every test;
#   [2/3] clang ASan + UBSan: the unit and multi-rank tests, and a short
#         libFuzzer run of every fuzz target (the same build: fuzzers link the
#         sanitized library, instrumented for coverage);
#   [3/3] clang TSan: the tests whose ranks are threads.
# SANITIZE=0 runs the first stage only. Which tests each sanitizer stage runs,
# with which options: CMakePresets.json and docs/testing.md.
SANITIZE ?= 1
banner = @printf '\n==== %s ====\n' $(1)

.PHONY: test-asan test-tsan test-fuzz

test: build
	$(call banner,"[1/3] $(PRESET) build: all tests")
	ctest --preset $(PRESET)
ifneq ($(SANITIZE),0)
	$(MAKE) --no-print-directory test-asan STAGE=2/3
	$(MAKE) --no-print-directory test-tsan STAGE=3/3
endif

STAGE ?= -
test-asan: deps
	$(call banner,"[$(STAGE)] AddressSanitizer + UBSan: unit and multi tests + libFuzzer short runs")
	cmake --preset asan >/dev/null
	cmake --build --preset asan
	ctest --preset asan

test-tsan: deps
	$(call banner,"[$(STAGE)] ThreadSanitizer: tests with thread ranks")
	cmake --preset tsan >/dev/null
	cmake --build --preset tsan
	ctest --preset tsan

# A longer fuzzing session for local use (not in make test):
# make test-fuzz FUZZ_SECONDS=600
FUZZ_SECONDS ?= 60
test-fuzz: deps
	$(call banner,"[-] libFuzzer: each target for $(FUZZ_SECONDS) s")
	cmake --preset fuzz -DLANES_FUZZ_SECONDS=$(FUZZ_SECONDS) >/dev/null
	cmake --build --preset fuzz
	ctest --preset fuzz

bench: build
	bash bench/run_main.sh build/$(PRESET)

clean:
	rm -rf build
