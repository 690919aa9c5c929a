#!/usr/bin/env bash
# Checks Lanes' NCCL drop-in library against the nccl.h it was built for:
#  - every function nccl.h declares (nccl* and pnccl*, parsed from the header,
#    not from a list here) is exported (nm -D --defined-only);
#  - the 38 functions PyTorch 2.11 imports, with nccl and pnccl prefixes;
#  - ncclDevCommCreate/ncclDevCommDestroy (nccl_device.h) are exported;
#  - the file is libnccl.so.MAJOR.MINOR.PATCH of the header's version, its
#    SONAME is libnccl.so.MAJOR, and libnccl.so.MAJOR and libnccl.so are
#    symlinks to it;
#  - nothing but nccl*/pnccl* is exported (no lanes* symbol, no C++ runtime).
#
# Usage: check_symbols.sh NCCL_H LIBRARY
#        check_symbols.sh --self-test NCCL_H FAKE_LIBRARY
# --self-test runs the check on a library built to fail it and passes only if
# the check fails for each planted reason.
set -u

if [[ ${1:-} == --self-test ]]; then
  header=${2:?header}
  fake=${3:?fake library}
  out=$("$0" "$header" "$fake" 2>&1)
  rc=$?
  printf '%s\n' "$out" | sed 's/^/  | /'
  ok=1
  if [[ $rc -eq 0 ]]; then
    echo "FAIL: the check passed a library missing almost every function"
    ok=0
  fi
  for want in "not exported: ncclAllReduce" "not exported: pncclCommShrink" \
    "PyTorch import not exported: ncclCommWindowRegister" \
    "exports a non-NCCL symbol: lanesLeakedFunction" \
    "exports a non-NCCL symbol: helperNotNccl" "SONAME" "file name"; do
    if ! grep -qF -- "$want" <<<"$out"; then
      echo "FAIL: the check did not report: $want"
      ok=0
    fi
  done
  if [[ $ok -eq 1 ]]; then
    echo "self-test passed: the check fails a library that is missing functions, leaks symbols and has the wrong names"
    exit 0
  fi
  exit 1
fi

header=${1:?usage: check_symbols.sh NCCL_H LIBRARY}
lib=${2:?usage: check_symbols.sh NCCL_H LIBRARY}
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

for tool in nm readelf; do
  command -v "$tool" >/dev/null || {
    echo "FAIL: $tool not found"
    exit 1
  }
done
[[ -r $header ]] || {
  echo "FAIL: cannot read $header"
  exit 1
}
[[ -f $lib ]] || {
  echo "FAIL: no library at $lib"
  exit 1
}

# --- what the header declares ---
# A declaration starts a line: optional qualifiers, the return type
# (ncclResult_t, const char*, void), the name, "(".
mapfile -t declared < <(sed -E -n \
  's/^[[:space:]]*(extern[[:space:]]+)?(ncclResult_t|const[[:space:]]+char[[:space:]]*\*|void)[[:space:]]*\**[[:space:]]*(p?nccl[A-Za-z0-9_]+)[[:space:]]*\(.*/\3/p' \
  "$header" | sort -u)
n_declared=${#declared[@]}
n_p=0
for f in "${declared[@]}"; do [[ $f == pnccl* ]] && n_p=$((n_p + 1)); done
echo "nccl.h ($header) declares $n_declared functions ($n_p pnccl*)"

# PyTorch 2.11's imports (each as nccl* and pnccl*).
pytorch=(AllGather AllReduce AlltoAll Bcast Broadcast CommAbort CommCount CommDeregister
  CommDestroy CommFinalize CommGetAsyncError CommInitAll CommInitRank CommInitRankConfig
  CommInitRankScalable CommRegister CommShrink CommSplit CommUserRank CommWindowDeregister
  CommWindowRegister DevCommCreate DevCommDestroy GetErrorString GetLastError GetUniqueId
  GetVersion GroupEnd GroupSimulateEnd GroupStart MemAlloc MemFree Recv RedOpCreatePreMulSum
  RedOpDestroy Reduce ReduceScatter Send)
[[ ${#pytorch[@]} -eq 38 ]] || fail "internal: the PyTorch list has ${#pytorch[@]} names, not 38"

# The parse must have found what nccl.h is known to hold: every PyTorch import
# except the two of nccl_device.h, with both prefixes; and as many pnccl* as nccl*.
is_declared() {
  local f
  for f in "${declared[@]}"; do [[ $f == "$1" ]] && return 0; done
  return 1
}
for base in "${pytorch[@]}"; do
  [[ $base == DevComm* ]] && continue
  for name in "nccl$base" "pnccl$base"; do
    is_declared "$name" || fail "parsing nccl.h missed $name (the parser or the header is off)"
  done
done
[[ $((n_declared - n_p)) -eq $n_p ]] ||
  fail "nccl.h parse: $((n_declared - n_p)) nccl* but $n_p pnccl* functions"

# --- what the library exports ---
# "ADDR TYPE NAME[@VERSION]"; U (undefined) is excluded by --defined-only.
nm_out=$(nm -D --defined-only "$lib") || {
  echo "FAIL: nm -D --defined-only $lib failed"
  exit 1
}
declare -A exported=()
declare -A exported_type=()
while read -r addr type name; do
  [[ -z ${name:-} ]] && { name=$type; type=$addr; }
  name=${name%%@*}
  exported[$name]=1
  exported_type[$name]=$type
done <<<"$nm_out"
echo "$lib exports ${#exported[@]} defined dynamic symbols"

missing=0
for f in "${declared[@]}"; do
  if [[ -z ${exported[$f]:-} ]]; then
    fail "not exported: $f (declared in nccl.h)"
    missing=$((missing + 1))
  elif [[ ${exported_type[$f]} != [TtWi] ]]; then
    fail "$f is exported as nm type '${exported_type[$f]}', not a function"
  fi
done
echo "checked $n_declared nccl.h functions: $missing missing"

missing=0
for base in "${pytorch[@]}"; do
  for name in "nccl$base" "pnccl$base"; do
    if [[ -z ${exported[$name]:-} ]]; then
      fail "PyTorch import not exported: $name"
      missing=$((missing + 1))
    fi
  done
done
echo "checked ${#pytorch[@]} PyTorch imports x 2 prefixes: $missing missing"

for name in ncclDevCommCreate ncclDevCommDestroy; do
  [[ -n ${exported[$name]:-} ]] || fail "not exported: $name (nccl_device.h)"
done

# Nothing else leaves the library. Linker-defined markers are tolerated.
leaks=0
for name in "${!exported[@]}"; do
  case $name in
    nccl* | pnccl*) ;;
    _init | _fini | _edata | _end | __bss_start) ;;
    *)
      fail "exports a non-NCCL symbol: $name"
      leaks=$((leaks + 1))
      ;;
  esac
done
echo "checked that only nccl*/pnccl* symbols are exported: $leaks other(s)"

# --- file names, SONAME, symlinks ---
major=$(sed -n -E 's/^#define NCCL_MAJOR ([0-9]+).*/\1/p' "$header")
minor=$(sed -n -E 's/^#define NCCL_MINOR ([0-9]+).*/\1/p' "$header")
patch=$(sed -n -E 's/^#define NCCL_PATCH ([0-9]+).*/\1/p' "$header")
if [[ -z $major || -z $minor || -z $patch ]]; then
  fail "no NCCL_MAJOR/MINOR/PATCH in $header"
else
  want_file="libnccl.so.$major.$minor.$patch"
  want_soname="libnccl.so.$major"
  [[ $(basename "$lib") == "$want_file" ]] ||
    fail "file name is $(basename "$lib"), expected $want_file (nccl.h is $major.$minor.$patch)"
  soname=$(readelf -d "$lib" | sed -n -E 's/.*\(SONAME\).*\[(.*)\].*/\1/p')
  [[ $soname == "$want_soname" ]] || fail "SONAME is '${soname}', expected $want_soname"
  echo "SONAME: ${soname:-none} (expected $want_soname)"
  dir=$(dirname "$lib")
  real=$(readlink -f "$lib")
  for link in "$want_soname" libnccl.so; do
    if [[ ! -L $dir/$link ]]; then
      fail "$dir/$link is not a symlink"
    elif [[ $(readlink -f "$dir/$link") != "$real" ]]; then
      fail "$dir/$link points at $(readlink -f "$dir/$link"), not $real"
    else
      echo "symlink: $link -> $(readlink "$dir/$link")"
    fi
  done
fi

if [[ $failures -gt 0 ]]; then
  echo "check_symbols: $failures failure(s)"
  exit 1
fi
echo "check_symbols: all passed"
