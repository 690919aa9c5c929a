#!/bin/bash
# `make bench`: an all-reduce sweep over every local GPU, or over 4 host-memory
# ranks when no GPU is visible.
set -euo pipefail
build=${1:-build/release}
bin=$build/bin
ngpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fi
if [ "$ngpus" -gt 0 ] && "$bin/lanes_all_reduce_perf" --help 2>&1 | grep -q -- '--memory'; then
  echo "# make bench: all-reduce over $ngpus local GPU(s)"
  exec "$bin/lanes-run" -n "$ngpus" "$bin/lanes_all_reduce_perf" --memory device -b 8 -e 256M -f 4 -c 1
fi
echo "# make bench: no GPU visible; all-reduce over 4 host-memory ranks"
exec "$bin/lanes-run" -n 4 "$bin/lanes_all_reduce_perf" --memory host -b 8 -e 64M -f 4 -c 1
