#!/usr/bin/env python3
"""Prints each rank's call durations, in order, from Lanes trace files.

    LANES_FLIGHT_RECORDER=4096 LANES_TRACE_FILE=PREFIX <run the job>
    python3 bench/observe/call_times.py PREFIX

One line per rank file: the rank, the calls' plan names, then every call's
duration in microseconds. A fresh communicator's first calls show what its
cold start costs against the calls after them.
"""
import glob
import json
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    files = sorted(glob.glob(sys.argv[1] + ".*.rank*.json"))
    if not files:
        sys.exit(f"call_times.py: no trace files match {sys.argv[1]}.*.rank*.json")
    for path in files:
        with open(path) as f:
            doc = json.load(f)
        events = doc["traceEvents"] if isinstance(doc, dict) else doc
        lanes = {e["tid"]: e["args"]["name"] for e in events
                 if e.get("ph") == "M" and e.get("name") == "thread_name"}
        calls = [e for e in events if e.get("ph") == "X" and lanes.get(e.get("tid")) == "calls"]
        calls.sort(key=lambda e: e["ts"])
        plans = sorted({e["args"].get("plan", "?") for e in calls})
        rank = path.rsplit(".rank", 1)[1].removesuffix(".json")
        print(f"rank {rank} ({', '.join(plans)}), {len(calls)} calls, us:",
              " ".join(f"{e['dur']:.0f}" for e in calls))


if __name__ == "__main__":
    main()
