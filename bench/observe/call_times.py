#!/usr/bin/env python3
"""Prints each rank's call durations, in order, from Lanes trace files.

    LANES_FLIGHT_RECORDER=4096 LANES_TRACE_FILE=PREFIX <run the job>
    python3 bench/observe/call_times.py PREFIX

One line per rank file and message size, in the order the sizes first
appear: the communicator, the rank, the bytes per call, the plans, then every
call's duration in microseconds. A fresh communicator's first calls show
what its cold start costs against the calls after them. A file cut short
(its process killed) is reported and the others are still printed; the exit
status is then 1.
"""
import glob
import json
import sys


def events_of(path):
    with open(path) as f:
        doc = json.load(f)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    files = sorted(glob.glob(sys.argv[1] + ".*.rank*.json"))
    if not files:
        sys.exit(f"call_times.py: no trace files match {sys.argv[1]}.*.rank*.json")
    status = 0
    for path in files:
        comm, rank = path[len(sys.argv[1]) + 1:].removesuffix(".json").rsplit(".rank", 1)
        try:
            events = events_of(path)
        except (OSError, ValueError) as e:
            print(f"{comm} rank {rank}: unreadable ({e})")
            status = 1
            continue
        lanes = {e["tid"]: e["args"]["name"] for e in events
                 if e.get("ph") == "M" and e.get("name") == "thread_name"}
        calls = sorted((e for e in events
                        if e.get("ph") == "X" and lanes.get(e.get("tid")) == "calls"),
                       key=lambda e: e["ts"])
        by_size = {}
        for e in calls:
            by_size.setdefault(e["args"].get("bytes", -1), []).append(e)
        for size, group in by_size.items():
            plans = sorted({e["args"].get("plan", "?") for e in group})
            print(f"{comm} rank {rank}, {size} B x {len(group)} ({', '.join(plans)}), us:",
                  " ".join(f"{e['dur']:.0f}" for e in group))
    sys.exit(status)


if __name__ == "__main__":
    main()
