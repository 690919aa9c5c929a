# Thin wrapper over the CMake presets. `make test` and `make bench` install
# missing Debian packages first (as root; otherwise they print the command).
PRESET ?= release
# openmpi: bench/compare; iproute2: the network-namespace TCP tests; pkg-config:
# the install test. hwloc and Google Benchmark are DESIGN.md's base set.
DEB_PACKAGES := cmake ninja-build g++ pkg-config libgtest-dev libgmock-dev libbenchmark-dev \
  libhwloc-dev openmpi-bin libopenmpi-dev iproute2

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

test: build
	ctest --preset $(PRESET)

bench: build
	bash bench/run_main.sh build/$(PRESET)

clean:
	rm -rf build
