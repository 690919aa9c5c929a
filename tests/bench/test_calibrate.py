"""bench/planner/calibrate.py's order of runs in a pass, its repeatability figures and its
per-pass times read back from a run's files, on points made by hand; the settings a run
records and a re-prediction applies (with a stand-in lanes-topo)."""
import argparse
import contextlib
import importlib.util
import io
import json
import os
import sys
import tempfile
import unittest

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "calibrate", os.path.join(here, "..", "..", "bench", "planner", "calibrate.py"))
calibrate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(calibrate)


def point(chosen, passes, disallowed=()):
    """A point whose candidates ran `passes` (name -> each pass's time)."""
    cands = [{"name": n, "measured_us": min(ts), "passes_us": ts, "predicted_us": min(ts),
              "allowed": n not in disallowed} for n, ts in passes.items()]
    best = min(c["measured_us"] for c in cands if c["allowed"])
    return {"collective": "broadcast", "nranks": 4, "size": 8, "chosen": chosen,
            "default_us": best, "regret": 1.0, "candidates": cands}


class PassOrder(unittest.TestCase):
    def test_each_pass_starts_one_place_further_the_default_first(self):
        names = ["chain", "direct", "tree"]
        orders = [calibrate.pass_order(names, rep) for rep in range(5)]
        self.assertEqual(orders[0], ["default", "chain", "direct", "tree"])
        self.assertEqual(orders[1], ["chain", "direct", "tree", "default"])
        self.assertEqual(orders[2], ["direct", "tree", "default", "chain"])
        self.assertEqual(orders[4], orders[0])
        # Over as many passes as runs, each run takes every place once.
        for i in range(4):
            self.assertEqual(sorted(o[i] for o in orders[:4]), sorted(orders[0]))


class Repeatability(unittest.TestCase):
    def test_one_pass_oracle_and_misses_within_spread(self):
        points = [
            # y wins pass 0 but not the others: every pass's pick misses in the rest;
            # choosing x misses by 10/9, within y's spread (12/9).
            point("x", {"x": [10, 10, 10], "y": [9, 11, 12]}),
            # Steady: the oracle picks right, the choice too.
            point("x", {"x": [5, 5], "y": [10, 10]}),
            # Steady and chosen wrong: a miss of 2x, outside both spreads.
            point("x", {"x": [10, 10], "y": [5, 5.1]}),
            # A candidate the default may not choose is left out of both.
            point("x", {"x": [5, 5], "y": [6, 6], "z": [1, 1]}, disallowed={"z"}),
        ]
        oracle, misses, within = calibrate.repeatability(points)
        self.assertEqual(len(oracle), 3 + 2 + 2 + 2)
        self.assertEqual(sum(r <= 1.05 for r in oracle), 6)
        self.assertAlmostEqual(oracle[0], 11 / 10)
        self.assertAlmostEqual(oracle[1], 10 / 9)
        self.assertEqual((misses, within), (2, 1))
        summary = calibrate.summarize(points)
        self.assertEqual(summary["choice_regret_one_pass_oracle_within_1_05"], 0.667)
        self.assertEqual(summary["choice_regret_misses_within_spread"], "1 of 2")

    def test_no_passes_no_figures(self):
        p = point("x", {"x": [5], "y": [6]})
        for c in p["candidates"]:
            del c["passes_us"]
        self.assertEqual(calibrate.repeatability([p]), ([], 0, 0))
        self.assertNotIn("choice_regret_one_pass_oracle_within_1_05", calibrate.summarize([p]))


class PassesFromRuns(unittest.TestCase):
    def run_files(self, out, files):
        runs = os.path.join(out, "runs")
        os.makedirs(runs, exist_ok=True)
        for name, times, complete in files:
            doc = {"complete": complete,
                   "results": [{"size": 8, "out_of_place": {"time": t}} for t in times]}
            with open(os.path.join(runs, name), "w") as f:
                json.dump(doc, f)

    def test_each_pass_keeps_its_fastest_cycle(self):
        with tempfile.TemporaryDirectory() as out:
            self.run_files(out, [
                ("allreduce_2_recursive_doubling_8_0.json", [3.0, 2.5], True),
                ("allreduce_2_recursive_doubling_8_1.json", [4.0], True),
                # Cut short by the time budget: measure() dropped it.
                ("allreduce_2_recursive_doubling_8_2.json", [1.0], False),
                ("allreduce_2_ring_8_0.json", [5.0], True),
                ("allreduce_2_direct_8_0.json", [6.0], True),
                ("a_b_c_d_e.json", [1.0], True),  # not measure()'s naming
            ])
            with open(os.path.join(out, "runs", "notes.txt"), "w") as f:
                f.write("not a run")
            points = [{"collective": "allreduce", "nranks": 2, "size": 8, "candidates": [
                {"name": "recursive_doubling", "measured_us": 2.5},
                {"name": "ring", "measured_us": 5.0, "passes_us": [5.0, 7.0]},  # kept
                {"name": "direct", "measured_us": 5.5},  # another calibration's file
                {"name": "pairwise", "measured_us": 1.0},  # no file
            ]}]
            calibrate.passes_from_runs(out, points)
            c = points[0]["candidates"]
            self.assertEqual(c[0]["passes_us"], [2.5, 4.0])
            self.assertEqual(c[1]["passes_us"], [5.0, 7.0])
            self.assertNotIn("passes_us", c[2])
            self.assertNotIn("passes_us", c[3])


class RunSettings(unittest.TestCase):
    """A re-prediction prices the set-up the run measured, whatever the caller's settings."""

    def fake_build(self, root):
        # A lanes-topo that prices "staged" by LANES_P2P_DISABLE, as the real
        # one puts the staging slots in host memory then, and writes down the
        # LANES_* variables it saw.
        bindir = os.path.join(root, "bin")
        os.makedirs(bindir)
        tool = os.path.join(bindir, "lanes-topo")
        with open(tool, "w") as f:
            f.write("""#!/usr/bin/env python3
import json, os, sys
seen = {k: v for k, v in os.environ.items() if k.startswith("LANES_")}
if os.environ.get("LANES_P2P_DISABLE") not in (None, "0", "1"):
    print("lanes: LANES_P2P_DISABLE: not 0 or 1; ignored", file=sys.stderr, flush=True)
with open(os.path.join(os.path.dirname(__file__), "seen.json"), "w") as f:
    json.dump(seen, f)
staged = 90.0 if os.environ.get("LANES_P2P_DISABLE") == "1" else 45.0
rows = [{"size": 8, "chosen": "simple", "candidates": [
    {"path": "staged", "predicted_us": staged}, {"path": "simple", "predicted_us": 60.0}]}]
print(json.dumps({"inputs": {}, "device": rows}))
""")
        os.chmod(tool, 0o755)
        return root, os.path.join(bindir, "seen.json")

    def test_run_env_keeps_the_set_up_and_leaves_out_the_rest(self):
        env = {"LANES_P2P_DISABLE": "1", "LANES_SIMPLE_MAX_BYTES": "1M", "LANES_ALGO": "ring",
               "LANES_PROTO": "staged", "LANES_TOPO_CACHE": "/x", "LANES_BOOTSTRAP_SECRET": "s",
               "LANES_DEBUG": "INFO", "LANES_TIMEOUT": "60", "LANES_DEBUG_FILE": "/tmp/x",
               "PATH": "/bin"}
        self.assertEqual(calibrate.run_env(env),
                         {"LANES_P2P_DISABLE": "1", "LANES_SIMPLE_MAX_BYTES": "1M"})

    def test_the_record_holds_the_settings(self):
        with tempfile.TemporaryDirectory() as out:
            saved = dict(os.environ)
            for k in [k for k in os.environ if k.startswith("LANES_")]:
                del os.environ[k]
            os.environ.update(LANES_P2P_DISABLE="1", LANES_DEBUG="INFO")
            try:
                args = argparse.Namespace(memory="device", launch="processes")
                calibrate.write(out, args, {}, [], [], [])
            finally:
                os.environ.clear()
                os.environ.update(saved)
            with open(os.path.join(out, "calibration.json")) as f:
                self.assertEqual(json.load(f)["env"], {"LANES_P2P_DISABLE": "1"})

    def repredict(self, root, recorded, extra=()):
        """What the fake lanes-topo saw, and the point's predictions, after a
        re-prediction of a run that recorded `recorded` (None: no record)."""
        build, seen = self.fake_build(os.path.join(root, "build"))
        out = os.path.join(root, "out")
        os.makedirs(out)
        with open(os.path.join(out, "topology.json"), "w") as f:
            f.write("{}")
        cands = [{"name": "staged", "measured_us": 98.0, "predicted_us": 0},
                 {"name": "simple", "measured_us": 60.0, "predicted_us": 0}]
        doc = {"format": "lanes-calibration-1", "memory": "device", "launch": "processes",
               "points": [{"collective": "allreduce", "nranks": 2, "size": 8,
                           "default_us": 60.0, "chosen": "staged", "candidates": cands}]}
        if recorded is not None:
            doc["env"] = recorded
        with open(os.path.join(out, "calibration.json"), "w") as f:
            json.dump(doc, f)
        saved = dict(os.environ)
        os.environ.update(LANES_P2P_DISABLE="0", LANES_LL_MAX_BYTES="4K")
        try:
            args = argparse.Namespace(out=out, topology=None, build=build, env=list(extra))
            with contextlib.redirect_stdout(io.StringIO()):
                calibrate.repredict(args)
        finally:
            os.environ.clear()
            os.environ.update(saved)
        with open(seen) as f:
            saw = json.load(f)
        with open(os.path.join(out, "calibration.json")) as f:
            p = json.load(f)["points"][0]
        return saw, {c["name"]: c["predicted_us"] for c in p["candidates"]}, p["chosen"]

    def test_a_record_without_settings_is_priced_with_none(self):
        with tempfile.TemporaryDirectory() as root:
            saw, predicted, _ = self.repredict(root, None)
            self.assertEqual(saw, {})
            self.assertEqual(predicted["staged"], 45.0)

    def test_env_asks_what_if(self):
        with tempfile.TemporaryDirectory() as root:
            saw, predicted, _ = self.repredict(root, {"LANES_P2P_DISABLE": "1"},
                                               ["LANES_P2P_DISABLE=0"])
            self.assertEqual(saw, {"LANES_P2P_DISABLE": "0"})
            self.assertEqual(predicted["staged"], 45.0)
            with open(os.path.join(root, "out", "calibration.json")) as f:
                doc = json.load(f)
            self.assertEqual(doc["env"], {"LANES_P2P_DISABLE": "1"}, "the run's record stays")
            self.assertEqual(doc["repredicted_env"], {"LANES_P2P_DISABLE": "0"})

    def test_a_warning_before_the_plan_is_skipped(self):
        with tempfile.TemporaryDirectory() as root:
            saw, predicted, _ = self.repredict(root, None, ["LANES_P2P_DISABLE=maybe"])
            self.assertEqual(saw, {"LANES_P2P_DISABLE": "maybe"})
            self.assertEqual(predicted["staged"], 45.0)

    def test_a_malformed_env_is_refused(self):
        for argv in (["--repredict", "--env", "P2P_DISABLE"], ["--repredict", "--env", "PATH=/x"],
                     ["--env", "LANES_P2P_DISABLE=1"]):
            saved = sys.argv
            sys.argv = ["calibrate.py", "--out", "/nonexistent"] + argv
            try:
                with contextlib.redirect_stderr(io.StringIO()) as err:
                    with self.assertRaises(SystemExit) as e:
                        calibrate.main()
            finally:
                sys.argv = saved
            self.assertEqual(e.exception.code, 2, argv)
            self.assertIn("--env", err.getvalue(), argv)

    def test_repredict_uses_the_runs_settings_not_the_callers(self):
        with tempfile.TemporaryDirectory() as root:
            saw, predicted, chosen = self.repredict(root, {"LANES_P2P_DISABLE": "1"})
            self.assertEqual(saw, {"LANES_P2P_DISABLE": "1"})
            self.assertEqual(predicted, {"staged": 90.0, "simple": 60.0})
            self.assertEqual(chosen, "simple")

if __name__ == "__main__":
    unittest.main()
