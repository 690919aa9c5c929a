# shellcheck shell=sh
# Runs in the soft-RoCE guest (tests/rdma/guest.sh, --env LANES_TOPO=<path>):
# lanes-topo's "RDMA ports" section on a real soft-RoCE port, by default and
# with LANES_IB_HCA and LANES_IB_GID_INDEX set.
fail=0
expect() { # TEXT PATTERN WHAT
  if printf '%s\n' "$1" | grep -qF -- "$2"; then
    echo "ok: $3"
  else
    echo "FAIL: $3: no line with '$2'"
    fail=1
  fi
}
plain=$("$LANES_TOPO" --no-nvml 2>&1)
if printf '%s\n' "$plain" | grep -q '^RDMA ports'; then
  printf '%s\n' "$plain" | sed -n '/^RDMA ports/,$p'
else # lanes-topo did not get that far: what it said instead
  printf '%s\n' "$plain" | tail -n 10
fi
expect "$plain" "libibverbs: loaded (libibverbs.so.1)" "libibverbs loads at run time"
expect "$plain" "rxe0:1  ACTIVE, RoCE (Ethernet)" "rxe0's port is listed as active RoCE"
expect "$plain" "::ffff:10.77.0.1, RoCE v2, veth0  <- used" "the IPv4 RoCE v2 GID is the one used"
expect "$plain" "usable, GID index" "the port is usable"
expect "$plain" "a rank without a GPU: rxe0:1 (GID 1)" "the verbs transport would use rxe0:1"
excluded=$(LANES_IB_HCA='^rxe' "$LANES_TOPO" --no-nvml 2>&1)
expect "$excluded" "not used: LANES_IB_HCA leaves it out" "LANES_IB_HCA=^rxe excludes it"
expect "$excluded" "a rank without a GPU: TCP (no active RDMA port that LANES_IB_HCA=^rxe selects" \
  "without a port the verbs transport is not used"
forced=$(LANES_IB_HCA='=rxe0:1' LANES_IB_GID_INDEX=0 "$LANES_TOPO" --no-nvml 2>&1)
expect "$forced" "usable, GID index 0 (LANES_IB_GID_INDEX)" "LANES_IB_GID_INDEX picks the GID"
exit $fail
