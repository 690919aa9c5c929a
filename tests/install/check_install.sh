#!/bin/bash
# Installs the build tree into a scratch prefix and, with no LD_LIBRARY_PATH,
# builds and runs programs against it as README.md, "Install and link", says:
#   1. consumer.c through find_package(lanes): lanes::lanes and lanes::lanes_static;
#   2. consumer.c through `pkg-config --cflags --libs lanes` (liblanes.so, found
#      through the run path pkg-config adds);
#   3. consumer.c through `pkg-config --static` with lanes_lib=-l:liblanes.a: a
#      program that needs no liblanes.so;
#   4. README.md's C example, taken from README.md now, built through pkg-config
#      and run by the installed lanes-run with 3 ranks on host memory: every
#      rank must print its line with the right sum;
#   5. where the build found MPI (liblanes-mpi.so installed) and mpirun runs:
#      the same example under a bare `mpirun -np 3` (the id goes over MPI), and
#      mpi_consumer.c, a program that calls MPI_Init itself.
# Usage: check_install.sh BUILD_DIR SOURCE_DIR (this folder)
set -euo pipefail
build=$1 src=$2
readme=$src/../../README.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset LD_LIBRARY_PATH LANES_ROOT_ADDR LANES_BOOTSTRAP_SECRET
fail() { echo "install check: $*" >&2; exit 1; }
needs_liblanes_so() { readelf -d "$1" | grep -q 'NEEDED.*liblanes\.so'; }

prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" > "$tmp/install.log"
pc=$(find "$prefix" -name lanes.pc -path '*/pkgconfig/*' | head -n 1)
[ -n "$pc" ] || fail "no lanes.pc under $prefix"
export PKG_CONFIG_PATH=${pc%/lanes.pc}

# 1. find_package
cmake -S "$src" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/configure.log"
cmake --build "$tmp/cmake" > "$tmp/build.log"
"$tmp/cmake/consumer"
"$tmp/cmake/consumer_static"
needs_liblanes_so "$tmp/cmake/consumer_static" && fail "lanes::lanes_static needs liblanes.so"

# 2. pkg-config, shared
cc "$src/consumer.c" $(pkg-config --cflags --libs lanes) -o "$tmp/pc_consumer"
"$tmp/pc_consumer"

# 3. pkg-config, static
static_flags=$(pkg-config --static --define-variable=lanes_lib=-l:liblanes.a --cflags --libs lanes)
for lib in -lstdc++ -lpthread -lrt -ldl; do
  [[ " $static_flags " == *" $lib "* ]] || fail "pkg-config --static --libs lanes lacks $lib: $static_flags"
done
cc "$src/consumer.c" $static_flags -o "$tmp/pc_static"
needs_liblanes_so "$tmp/pc_static" && fail "the static consumer needs liblanes.so ($static_flags)"
"$tmp/pc_static"

# 4. README.md's example: the first ```c block
awk '/^```c$/ { inside = 1; next } inside && /^```$/ { exit } inside' "$readme" > "$tmp/app.c"
grep -q lanesAllReduce "$tmp/app.c" || fail "no C example with lanesAllReduce in $readme"
cc -Wall -Wextra -Werror "$tmp/app.c" $(pkg-config --cflags --libs lanes) -o "$tmp/app"
nranks=3 sum=3  # 0 + 1 + 2
# Every rank printed its line with the right sum (lanes-run may prefix "[r] ").
check_ranks() {
  local out=$1 what=$2
  for ((r = 0; r < nranks; ++r)); do
    line="rank $r of $nranks: all-reduce gave $sum (expected $sum)"
    if ! grep -Fxq -e "$line" -e "[$r] $line" "$out"; then
      cat "$out" >&2
      fail "README example under $what: rank $r did not print \"$line\""
    fi
  done
  cat "$out"
}
if ! (cd "$tmp" && "$prefix/bin/lanes-run" -n $nranks --timeout 120 ./app) > "$tmp/app.out" 2>&1; then
  cat "$tmp/app.out" >&2
  fail "README example failed under lanes-run -n $nranks"
fi
check_ranks "$tmp/app.out" "lanes-run -n $nranks"
ran="the README example under lanes-run -n $nranks"

# 5. Under mpirun, with no root address
plugin=$(find "$prefix" -name liblanes-mpi.so | head -n 1)
if [ -n "$plugin" ] && command -v mpirun > /dev/null && command -v mpicc > /dev/null; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LANES_TIMEOUT=60
  mpi=(timeout 120 mpirun --oversubscribe -np $nranks)
  if ! (cd "$tmp" && "${mpi[@]}" ./app) > "$tmp/mpi_app.out" 2>&1; then
    cat "$tmp/mpi_app.out" >&2
    fail "README example failed under mpirun -np $nranks"
  fi
  check_ranks "$tmp/mpi_app.out" "mpirun -np $nranks"
  mpicc -Wall -Werror "$src/mpi_consumer.c" $(pkg-config --cflags --libs lanes) -o "$tmp/mpi_app"
  if ! "${mpi[@]}" "$tmp/mpi_app" > "$tmp/mpi_consumer.out" 2>&1 ||
    [ "$(grep -c "sum 6 over Lanes, 6 over MPI$" "$tmp/mpi_consumer.out")" != $nranks ]; then
    cat "$tmp/mpi_consumer.out" >&2
    fail "mpi_consumer.c (MPI_Init, then lanesCommInitFromEnv) failed under mpirun -np $nranks"
  fi
  cat "$tmp/mpi_consumer.out"
  ran+=" and under mpirun -np $nranks, and an MPI program"
elif [ -n "$plugin" ]; then
  fail "liblanes-mpi.so is installed but mpirun or mpicc is not on PATH"
else
  echo "install check: no liblanes-mpi.so (a build without MPI), so no mpirun run"
fi
echo "install check: find_package (shared, static), pkg-config (shared, static) and $ran" \
     "built and ran"
