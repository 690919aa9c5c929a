#!/bin/bash
# Installs the build tree into a scratch prefix, then builds and runs a C
# consumer against it twice: through find_package(lanes) and through
# pkg-config. Usage: check_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
export LD_LIBRARY_PATH="$tmp/prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cmake -S "$src" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$tmp/prefix" > "$tmp/configure.log"
cmake --build "$tmp/cmake" > "$tmp/build.log"
"$tmp/cmake/consumer"
flags=$(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs lanes)
cc "$src/consumer.c" $flags -o "$tmp/pc_consumer"
"$tmp/pc_consumer"
echo "install check: find_package and pkg-config consumers built and ran"
