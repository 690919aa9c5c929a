#!/usr/bin/env python3
"""lanes-plot: bus bandwidth (and latency) against message size from perf JSON files.

Reads the files written by the lanes_*_perf tools with -J (JSON version 1 or 2,
docs/benchmarks.md and bench/schema/perf_result.schema.json) and draws one line
per (file, backend): out-of-place solid, in-place dashed with --in-place. The
copy bounds measured in the same run ("bounds") are drawn as horizontal lines,
and the per-size "bound_bus_bw" as a dotted curve. A second panel shows the
time per operation (log-log) unless --no-latency.

Only python3 and matplotlib (Agg backend, no display, no network) are needed.
Exit status: 0 on success, 2 on bad arguments or a malformed file, 1 when the
plot cannot be written.
"""

import argparse
import importlib.util
import json
import math
import os
import sys

PROG = "lanes-plot"


class Malformed(Exception):
    """A JSON file that is not a perf result; the message says where and why."""


def fail(message, code=2):
    print(f"{PROG}: {message}", file=sys.stderr)
    sys.exit(code)


# ---------------------------------------------------------------------------
# Loading and validation: every error names the file and the offending key.


def _number(value, where, allow_null=False):
    if value is None and allow_null:
        return None
    # bool is an int in Python; a true/false bandwidth is a bug upstream.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        kind = "null" if value is None else type(value).__name__
        raise Malformed(f"{where} is {kind}, expected a number")
    if not math.isfinite(value):
        raise Malformed(f"{where} is {value}, expected a finite number")
    return float(value)


def _timing(row, key, where, required):
    """time/alg_bw/bus_bw may each be null (not measured, e.g. no in-place form)."""
    t = row.get(key)
    if t is None:
        if required:
            raise Malformed(f"{where}.{key} is missing")
        return None
    if not isinstance(t, dict):
        raise Malformed(f"{where}.{key} is {type(t).__name__}, expected an object")
    out = {}
    for field in ("time", "alg_bw", "bus_bw"):
        if field not in t:
            raise Malformed(f"{where}.{key}.{field} is missing")
        out[field] = _number(t[field], f"{where}.{key}.{field}", allow_null=True)
        if out[field] is not None and out[field] < 0:
            raise Malformed(f"{where}.{key}.{field} is negative ({t[field]})")
    nwrong = t.get("nwrong")
    out["nwrong"] = 0 if nwrong is None else int(_number(nwrong, f"{where}.{key}.nwrong"))
    return out


BOUND_RATES = ("h2d", "d2h", "both_h2d", "both_d2h")


def load(path):
    """Returns the validated report: dict with meta, bounds and rows."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise Malformed(f"cannot read it: {e.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise Malformed(f"not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise Malformed(f"top level is {type(doc).__name__}, expected an object")
    if "version" not in doc:
        raise Malformed("version is missing: not a lanes_*_perf -J file?")
    version = doc["version"]
    if isinstance(version, bool) or version not in (1, 2):
        raise Malformed(f"version is {version!r}; this lanes-plot reads versions 1 and 2")
    results = doc.get("results")
    if not isinstance(results, list):
        raise Malformed("results is missing or not a list")

    rows = []
    for i, row in enumerate(results):
        where = f"results[{i}]"
        if not isinstance(row, dict):
            raise Malformed(f"{where} is {type(row).__name__}, expected an object")
        if "size" not in row:
            raise Malformed(f"{where}.size is missing")
        size = _number(row["size"], f"{where}.size")
        if size < 0:
            raise Malformed(f"{where}.size is {row['size']}; sizes cannot be negative")
        backend = row.get("backend", "lanes") if version >= 2 else "lanes"
        if not isinstance(backend, str) or not backend:
            raise Malformed(f"{where}.backend is {backend!r}, expected a name such as \"lanes\"")
        bound = None
        if version >= 2 and "bound_bus_bw" in row:
            bound = _number(row["bound_bus_bw"], f"{where}.bound_bus_bw", allow_null=True)
        out = _timing(row, "out_of_place", where, required=True)
        inp = _timing(row, "in_place", where, required=False)
        if size == 0:
            continue  # a log axis has no place for 0 bytes (nccl-tests -b 0)
        rows.append({"size": size, "backend": backend, "bound": bound, "out": out, "in": inp})
    if not any(r["out"]["bus_bw"] is not None for r in rows):
        raise Malformed("results hold no out-of-place bus_bw above 0 bytes: nothing to plot")

    bounds = doc.get("bounds", [])
    if bounds is None:
        bounds = []
    if not isinstance(bounds, list):
        raise Malformed("bounds is not a list")
    parsed_bounds = []
    for i, b in enumerate(bounds):
        where = f"bounds[{i}]"
        if not isinstance(b, dict):
            raise Malformed(f"{where} is {type(b).__name__}, expected an object")
        entry = {"host": str(b.get("host", "?")), "gpu": b.get("gpu", "?")}
        # GPU rates are null in a host-memory entry (gpu -1), which has host_copy instead.
        for key in BOUND_RATES:
            if key not in b:
                raise Malformed(f"{where}.{key} is missing")
            entry[key] = _number(b[key], f"{where}.{key}", allow_null=True)
        entry["host_copy"] = _number(b.get("host_copy"), f"{where}.host_copy", allow_null=True)
        parsed_bounds.append(entry)

    # false: the run was stopped part-way (written after every size); absent: an older file.
    complete = doc.get("complete", True)
    if not isinstance(complete, bool):
        raise Malformed(f"complete is {complete!r}, expected true or false")

    return {
        "version": version,
        "complete": complete,
        "collective": str(doc.get("collective", "?")),
        "nranks": doc.get("nranks", "?"),
        "memory": str(doc.get("memory", "?")),
        "bounds": parsed_bounds,
        "rows": rows,
    }


# ---------------------------------------------------------------------------
# Plotting.


def size_label(nbytes):
    """8B, 1KiB, 512KiB, 1MiB, 1GiB: powers of 1024 as the tools' -b/-e read them."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= (1 << shift):
            value = nbytes / (1 << shift)
            return f"{value:g}{unit}"
    return f"{nbytes:g}B"


def size_ticks(lo, hi, max_ticks=14):
    """Powers of two covering [lo, hi]: every 1st, 2nd, 5th or 10th exponent, the
    densest that fits max_ticks. Those steps divide 10, so 1KiB, 1MiB, 1GiB show."""
    first = math.floor(math.log2(lo))
    last = math.ceil(math.log2(hi))
    for step in (1, 2, 5, 10, 20):
        ks = [k for k in range(first - first % step, last + 1, step) if lo <= 2.0**k <= hi]
        if len(ks) <= max_ticks:
            break
    return [2.0**k for k in ks] or [lo]


def values(rows, kind, field):
    """One field of each row's timing; NaN (a gap in the line) where it is null."""
    nan = float("nan")
    return [nan if r[kind] is None or r[kind][field] is None else r[kind][field] for r in rows]


def series(report):
    """Rows grouped by backend, in first-seen order, sorted by size."""
    groups = {}
    for row in report["rows"]:
        groups.setdefault(row["backend"], []).append(row)
    for rows in groups.values():
        rows.sort(key=lambda r: r["size"])
    return groups


def file_label(path, labels, index):
    if labels and index < len(labels):
        return labels[index]
    name = os.path.basename(path)
    return name[:-5] if name.endswith(".json") else name


# JSON v2 "collective" keys (v1 wrote the display name, which passes through).
COLLECTIVE_NAMES = {
    "allreduce": "all-reduce", "allgather": "all-gather", "reducescatter": "reduce-scatter",
    "broadcast": "broadcast", "reduce": "reduce", "alltoall": "all-to-all", "gather": "gather",
    "scatter": "scatter", "sendrecv": "send/recv", "hypercube": "hypercube",
}


def default_title(reports):
    kinds = {(r["collective"], r["nranks"], r["memory"]) for r in reports}
    if len(kinds) == 1:
        coll, nranks, memory = next(iter(kinds))
        coll = COLLECTIVE_NAMES.get(coll, coll)
        return f"{coll}: {nranks} ranks, {memory} memory"
    return "bus bandwidth"


def _slowest(bounds, *keys):
    """The lowest of `keys` over the GPUs that report them: a collective waits for its slowest."""
    values = [b[k] for b in bounds for k in keys if b.get(k) is not None]
    return min(values) if values else None


def draw_bounds(ax, report, prefix, color):
    """Horizontal lines: PCIe both ways and H2D (device memory), host memcpy (host memory)."""
    bounds = report["bounds"]
    lines = [
        (_slowest(bounds, "both_h2d", "both_d2h"), (0, (6, 2, 1, 2)), "PCIe both ways"),
        (_slowest(bounds, "h2d"), (0, (1, 3)), "PCIe H2D"),
        (_slowest(bounds, "host_copy"), (0, (4, 3)), "host memcpy"),
    ]
    for value, style, what in lines:
        if value is not None and value > 0:
            ax.axhline(value, color=color, linestyle=style, linewidth=1.0,
                       label=f"{prefix}{what} {value:.1f} GB/s")


def plot(reports, paths, args):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    panels = 2 if args.latency else 1
    fig, axes = plt.subplots(panels, 1, figsize=(10, 5.5 * panels), squeeze=False)
    bw_ax = axes[0][0]
    lat_ax = axes[1][0] if args.latency else None
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    multi = len(reports) > 1
    sizes = []
    line = 0
    drawn = set()  # bounds already on the plot: files of one run share them
    for index, (report, path) in enumerate(zip(reports, paths)):
        label = file_label(path, args.label, index)
        prefix = f"{label}: " if multi else ""
        groups = series(report)
        first_line = line
        for backend, rows in groups.items():
            color = colors[line % len(colors)]
            line += 1
            name = f"{prefix}{backend}" + ("" if report["complete"] else " (partial)")
            xs = [r["size"] for r in rows]
            sizes += xs
            bw_ax.plot(xs, values(rows, "out", "bus_bw"), color=color, marker="o",
                       markersize=3, linestyle="-", label=f"{name} out-of-place")
            if lat_ax is not None:
                lat_ax.plot(xs, values(rows, "out", "time"), color=color, marker="o",
                            markersize=3, linestyle="-", label=f"{name} out-of-place")
            # Rows whose data check failed are marked: a fast wrong answer is no result.
            wrong = [r for r in rows if r["out"]["nwrong"] > 0 and r["out"]["bus_bw"] is not None]
            if wrong:
                bw_ax.plot([r["size"] for r in wrong], [r["out"]["bus_bw"] for r in wrong],
                           linestyle="none", marker="x", color="red", markersize=9,
                           label=f"{name} wrong results")
            if args.in_place:
                # time 0 or null: the collective has no in-place form (all-to-all, send/recv).
                inp = [r for r in rows if r["in"] and r["in"]["bus_bw"] is not None
                       and r["in"]["time"]]
                if inp:
                    bw_ax.plot([r["size"] for r in inp], values(inp, "in", "bus_bw"),
                               color=color, marker="s", markersize=3, linestyle="--",
                               label=f"{name} in-place")
                    if lat_ax is not None:
                        lat_ax.plot([r["size"] for r in inp], values(inp, "in", "time"),
                                    color=color, marker="s", markersize=3, linestyle="--",
                                    label=f"{name} in-place")
        # The bound is a property of the run (its GPUs and sizes), not of a backend:
        # one curve per file, from the first backend that reports it per size.
        bound_by_size = {}
        for row in report["rows"]:
            if row["bound"] is not None:
                bound_by_size.setdefault(row["size"], row["bound"])
        bound_color = "0.25" if not multi else colors[first_line % len(colors)]
        if bound_by_size:
            xs = sorted(bound_by_size)
            ys = [bound_by_size[x] for x in xs]
            if (tuple(xs), tuple(ys)) not in drawn:
                drawn.add((tuple(xs), tuple(ys)))
                bw_ax.plot(xs, ys, color=bound_color, linestyle=":", linewidth=1.6,
                           label=f"{prefix}bound (bound_bus_bw)")
        key = tuple(sorted(repr(sorted(b.items())) for b in report["bounds"]))
        if key not in drawn:
            drawn.add(key)
            draw_bounds(bw_ax, report, prefix, bound_color)

    lo, hi = min(sizes), max(sizes)
    ticks = size_ticks(lo, hi)
    for ax in [a for a in (bw_ax, lat_ax) if a is not None]:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: size_label(x)))
        ax.set_xlim(lo / 1.4, hi * 1.4)
        ax.grid(True, which="major", alpha=0.3)
        ax.set_xlabel("message size")
        ax.legend(fontsize="small", loc="best")
    bw_ax.set_ylabel("bus bandwidth (GB/s)")
    # Headroom so the bound lines do not sit on the frame.
    bw_ax.set_ylim(0, bw_ax.get_ylim()[1] * 1.08)
    bw_ax.set_title(args.title if args.title is not None else default_title(reports))
    if lat_ax is not None:
        lat_ax.set_yscale("log")
        lat_ax.set_ylabel("time per operation (µs)")
        lat_ax.grid(True, which="minor", axis="y", alpha=0.15)
        lat_ax.set_title("latency")
    fig.tight_layout()
    try:
        fig.savefig(args.output, dpi=args.dpi)
    except OSError as e:
        fail(f"cannot write {args.output}: {e.strerror}", code=1)
    plt.close(fig)


SYSTEM_PYTHON = "/usr/bin/python3"


def reexec_with_system_python():
    """A pyenv/venv python3 first on PATH often lacks Debian's python3-matplotlib;
    the system interpreter has it. Tried once: LANES_PLOT_REEXEC, set to the
    first interpreter, guards the loop and lets the failure name both."""
    if os.environ.get("LANES_PLOT_REEXEC") or not os.access(SYSTEM_PYTHON, os.X_OK):
        return
    if os.path.realpath(sys.executable) == os.path.realpath(SYSTEM_PYTHON):
        return
    os.environ["LANES_PLOT_REEXEC"] = sys.executable or "python3"
    os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON, os.path.abspath(sys.argv[0])] + sys.argv[1:])


def no_matplotlib():
    """Names every interpreter tried, so the user knows which one to fix."""
    tried = []
    for py in (os.environ.get("LANES_PLOT_REEXEC"), sys.executable):
        if py and py not in tried:
            tried.append(py)
    how = "Debian: apt-get install python3-matplotlib"
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        how = f"there is no {SYSTEM_PYTHON}; {tried[0]} -m pip install matplotlib"
    elif os.path.realpath(tried[0]) != os.path.realpath(SYSTEM_PYTHON):
        how += f", or {tried[0]} -m pip install matplotlib"
    fail(f"no Python with matplotlib: tried {' and '.join(tried)} ({how})", code=1)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Plot bus bandwidth and latency against message size from "
        "lanes_*_perf -J JSON files (one line per file and backend).",
    )
    parser.add_argument("files", nargs="+", metavar="FILE.json")
    parser.add_argument("-o", "--output", default="lanes-plot.png", help="PNG to write")
    parser.add_argument("--title", default=None, help="title of the bandwidth panel")
    parser.add_argument("--latency", dest="latency", action="store_true", default=True,
                        help="add the latency panel (default)")
    parser.add_argument("--no-latency", dest="latency", action="store_false",
                        help="bandwidth panel only")
    parser.add_argument("--in-place", action="store_true",
                        help="also draw the in-place results (dashed)")
    parser.add_argument("--label", action="append", default=[],
                        help="legend name of the next file (repeatable; default: file name)")
    parser.add_argument("--dpi", type=int, default=110)
    args = parser.parse_args(argv)

    reports = []
    for path in args.files:
        try:
            reports.append(load(path))
        except Malformed as e:
            fail(f"{path}: {e}")
    if importlib.util.find_spec("matplotlib") is None:
        reexec_with_system_python()
        no_matplotlib()
    for report, path in zip(reports, args.files):
        if not report["complete"]:
            rows = report["rows"]
            print(f"{PROG}: {path}: partial run (\"complete\": false: stopped part-way or still "
                  f"running): {len(rows)} result(s) up to "
                  f"{size_label(max(r['size'] for r in rows))}; plotting those", file=sys.stderr)
    plot(reports, args.files, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
