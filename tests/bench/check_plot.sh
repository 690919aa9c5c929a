#!/bin/sh
# lanes-plot checks (ctest, label unit).
#   check_plot.sh PLOT png FIXTURE...   the plot of the fixtures is a real PNG
#   check_plot.sh PLOT malformed        every broken input exits non-zero with a message
#   check_plot.sh PLOT reexec FIXTURE   run by a python3 without matplotlib, it re-runs
#                                       under /usr/bin/python3 and plots
#   check_plot.sh PLOT nompl FIXTURE    with no Python that has matplotlib, the message
#                                       names every interpreter tried
# Exit 77 (ctest SKIP_RETURN_CODE) only when there is nothing to show here: no python3
# with matplotlib (png, malformed, reexec), no python3 without it (reexec), no
# /usr/bin/python3 (reexec, nompl).
set -u
plot=$1
mode=$2
shift 2

# The interpreter lanes-plot will run under: its first line.
py=$(sed -n '1s/^#! *//p' "$plot")
case $py in
  *env\ python3*) py=python3 ;;
esac
if [ "$mode" != nompl ] && ! "$py" -c 'import matplotlib' 2>/dev/null &&
  ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  echo "SKIP: no python3 with matplotlib (Debian: apt-get install python3-matplotlib)"
  exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/lanes-plot-test.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

case $mode in
png)
  for args in "" "--in-place" "--no-latency --title T"; do
    out=$work/plot.png
    rm -f "$out"
    # shellcheck disable=SC2086  # args holds several flags on purpose
    "$plot" "$@" $args -o "$out" >"$work/log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || { cat "$work/log"; fail "lanes-plot $* $args exited $rc"; }
    [ -f "$out" ] || fail "lanes-plot $* $args wrote no $out"
    sig=$(od -An -tx1 -N8 "$out" | tr -d ' \n')
    [ "$sig" = "89504e470d0a1a0a" ] || fail "$out does not start with the PNG signature (got $sig)"
    size=$(wc -c <"$out")
    # A blank 10x5.5 in. canvas compresses to a few KiB; lines, labels and legend take far more.
    [ "$size" -gt 20000 ] || fail "$out is only $size bytes: nothing drawn?"
    echo "ok: $* $args -> PNG, $size bytes"
  done
  ;;
malformed)
  printf '{"version": 2, "results": [' >"$work/truncated.json"
  printf '[1, 2]' >"$work/array.json"
  printf '{"results": []}' >"$work/noversion.json"
  printf '{"version": 3, "results": []}' >"$work/version3.json"
  printf '{"version": 2, "results": []}' >"$work/empty.json"
  printf '{"version": 2, "results": [{"size": 8, "out_of_place": {"time": 1, "alg_bw": 1, "bus_bw": "fast"}}]}' >"$work/badbw.json"
  printf '{"version": 2, "results": [{"size": 8}]}' >"$work/nooop.json"
  printf '{"version": 2, "results": [{"size": 8, "out_of_place": {"time": null, "alg_bw": null, "bus_bw": null, "nwrong": null}}]}' >"$work/allnull.json"
  printf '{"version": 1, "results": [{"size": -8, "out_of_place": {"time": 1, "alg_bw": 1, "bus_bw": 1}}]}' >"$work/negsize.json"
  printf '{"version": 2, "bounds": [{"host": "h"}], "results": [{"size": 8, "out_of_place": {"time": 1, "alg_bw": 1, "bus_bw": 1}}]}' >"$work/badbound.json"
  printf '{"version": 2, "complete": "yes", "results": [{"size": 8, "out_of_place": {"time": 1, "alg_bw": 1, "bus_bw": 1}}]}' >"$work/badcomplete.json"
  for f in truncated array noversion version3 empty badbw nooop allnull negsize badbound badcomplete missing; do
    "$plot" "$work/$f.json" -o "$work/$f.png" >"$work/log" 2>&1
    rc=$?
    [ $rc -ne 0 ] || fail "$f.json: lanes-plot exited 0"
    grep -q "^lanes-plot: .*$f.json: " "$work/log" || { cat "$work/log"; fail "$f.json: no 'lanes-plot: FILE: why' message"; }
    ! grep -q Traceback "$work/log" || { cat "$work/log"; fail "$f.json: a Python traceback instead of a message"; }
    [ ! -e "$work/$f.png" ] || fail "$f.json: a plot was written anyway"
    echo "ok: $f.json -> exit $rc: $(cat "$work/log")"
  done
  ;;
reexec)
  first=$(command -v python3) || { echo "SKIP: no python3 on PATH"; exit 77; }
  if "$first" -c 'import matplotlib' 2>/dev/null || [ ! -x /usr/bin/python3 ]; then
    echo "SKIP: $first has matplotlib (or there is no /usr/bin/python3): no re-run to show"
    exit 77
  fi
  "$first" "$plot" "$@" -o "$work/plot.png" >"$work/log" 2>&1
  rc=$?
  [ $rc -eq 0 ] || { cat "$work/log"; fail "lanes-plot run by $first (no matplotlib) exited $rc"; }
  sig=$(od -An -tx1 -N8 "$work/plot.png" | tr -d ' \n')
  [ "$sig" = "89504e470d0a1a0a" ] || fail "run by $first: no PNG written"
  echo "ok: run by $first, re-ran under /usr/bin/python3 and wrote a PNG"
  ;;
nompl)
  [ -x /usr/bin/python3 ] || { echo "SKIP: no /usr/bin/python3"; exit 77; }
  # -S: no site-packages, so no matplotlib; the interpreter is /usr/bin/python3
  # itself, so there is nothing to re-run. LANES_PLOT_REEXEC stands for a first
  # interpreter that already re-ran this one.
  for first in "" /opt/venv/bin/python3; do
    LANES_PLOT_REEXEC=$first /usr/bin/python3 -S "$plot" "$@" -o "$work/plot.png" >"$work/log" 2>&1
    rc=$?
    want="tried ${first:+$first and }/usr/bin/python3 "
    [ $rc -eq 1 ] || { cat "$work/log"; fail "without matplotlib: exit $rc, not 1"; }
    grep -q "^lanes-plot: no Python with matplotlib: $want" "$work/log" ||
      { cat "$work/log"; fail "the message does not say '$want'"; }
    ! grep -q Traceback "$work/log" || { cat "$work/log"; fail "a Python traceback"; }
    [ ! -e "$work/plot.png" ] || fail "a plot was written anyway"
    echo "ok: $(cat "$work/log")"
  done
  ;;
*)
  fail "unknown mode $mode"
  ;;
esac
