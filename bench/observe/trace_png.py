"""Renders a merged Lanes trace (lanes-trace -o) to a PNG: a row per rank
and track, each stage a bar, as a trace viewer draws it.

Usage: trace_png.py TRACE.json OUT.png [--calls N] [--min-bytes B] [--title TEXT]
  --calls N      show the span of rank 0's first N calls after the first one
                 (default 6; the first call carries the set-up)
  --min-bytes B  count only calls of at least B bytes (a perf tool's own
                 small calls between sizes are left out)
"""
import argparse
import json
import sys

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    if sys.executable != "/usr/bin/python3":
        import os
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise

COLORS = {1: "#4c72b0", 2: "#dd8452", 3: "#55a868", 4: "#c44e52"}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("trace")
    p.add_argument("out")
    p.add_argument("--calls", type=int, default=6)
    p.add_argument("--title", default="Lanes trace")
    p.add_argument("--min-bytes", type=int, default=0,
                   help="count only rank 0's calls of at least this many bytes")
    a = p.parse_args()
    events = json.load(open(a.trace))["traceEvents"]
    names, tracks, stages = {}, {}, []
    for e in events:
        if e["ph"] == "M" and e["name"] == "process_name":
            names[e["pid"]] = e["args"]["name"]
        elif e["ph"] == "M" and e["name"] == "thread_name":
            tracks[(e["pid"], e["tid"])] = e["args"]["name"]
        elif e["ph"] == "X":
            stages.append(e)
    calls0 = sorted((e for e in stages if e["pid"] == 0 and e["tid"] == 1 and
                     e["args"].get("bytes", 0) >= a.min_bytes), key=lambda e: e["ts"])
    if len(calls0) < 2:
        sys.exit("fewer than 2 calls on rank 0")
    shown = calls0[1:1 + a.calls]
    t0 = shown[0]["ts"]
    t1 = shown[-1]["ts"] + shown[-1]["dur"]
    used = sorted({(e["pid"], e["tid"]) for e in stages if e["ts"] < t1 and e["ts"] + e["dur"] > t0})
    rows = {key: i for i, key in enumerate(reversed(used))}
    fig, ax = plt.subplots(figsize=(12, 0.35 * len(rows) + 1.6))
    for e in stages:
        key = (e["pid"], e["tid"])
        if key not in rows or e["ts"] >= t1 or e["ts"] + e["dur"] <= t0:
            continue
        y = rows[key]
        ax.broken_barh([(e["ts"] - t0, max(e["dur"], 0.5))], (y - 0.4, 0.8),
                       facecolors=COLORS.get(e["tid"], "#8172b3"), edgecolors="white",
                       linewidth=0.5)
        if e["dur"] > (t1 - t0) / 25:
            ax.text(e["ts"] - t0 + e["dur"] / 2, y, e["name"], ha="center", va="center",
                    fontsize=7, color="white", clip_on=True)
    ax.set_yticks(list(rows.values()))
    ax.set_yticklabels(["rank %d: %s" % (pid, tracks.get((pid, tid), tid))
                        for (pid, tid) in rows])
    ax.set_xlim(0, t1 - t0)
    ax.set_xlabel("microseconds (on rank 0's clock)")
    ax.set_title(a.title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print("wrote %s: %d rows, %.0f us" % (a.out, len(rows), t1 - t0))


if __name__ == "__main__":
    main()
