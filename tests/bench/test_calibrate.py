"""bench/planner/calibrate.py's order of runs in a pass, its repeatability figures and its
per-pass times read back from a run's files, on points made by hand."""
import importlib.util
import json
import os
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


if __name__ == "__main__":
    unittest.main()
