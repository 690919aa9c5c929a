"""bench/planner/repredict_all.py: which stored calibrations it re-prices, and its report."""
import importlib.util
import json
import os
import tempfile
import unittest

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "repredict_all", os.path.join(here, "..", "..", "bench", "planner", "repredict_all.py"))
repredict_all = importlib.util.module_from_spec(spec)
spec.loader.exec_module(repredict_all)


class Stored(unittest.TestCase):
    def make(self, root, folder, memory, topology=True):
        path = os.path.join(root, folder)
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "calibration.json"), "w") as f:
            json.dump({"memory": memory, "points": []}, f)
        if topology:
            with open(os.path.join(path, "topology.json"), "w") as f:
                f.write("{}")

    def test_calibrations_beside_their_machine_not_copies_already_repriced(self):
        with tempfile.TemporaryDirectory() as root:
            self.make(root, "a", "host")
            self.make(root, "a/inner", "host")
            self.make(root, "a/repredicted", "host")      # a copy already re-priced
            self.make(root, "a/repredicted_x/deeper", "host")
            self.make(root, "b", "host", topology=False)  # no machine to price for
            self.make(root, "c", "device")
            unpriced = []
            found = [os.path.relpath(d, root)
                     for d in repredict_all.stored(root, "host", unpriced)]
            self.assertEqual(found, ["a", "a/inner"])
            self.assertEqual([os.path.relpath(d, root) for d in unpriced], ["b"])
            found = [os.path.relpath(d, root) for d in repredict_all.stored(root, "all")]
            self.assertEqual(found, ["a", "a/inner", "c"])


class Report(unittest.TestCase):
    def priced(self, ring, choice=1.0):
        return {"errors": {"ring": ring}, "choice_within_1_05": choice, "choice_max": 1.0}

    def test_means_over_what_both_passes_priced(self):
        before = {"a": self.priced(0.20)}
        after = {"a": self.priced(0.10), "b": self.priced(0.40)}  # b is new
        lines = repredict_all.report(after, before)
        self.assertIn("a: choice 1.00->1.00 worst 1.00->1.00 | ring 0.20->0.10", lines)
        self.assertIn("b: choice 1.00 worst 1.00 | ring 0.40", lines)
        self.assertIn("errors better by more than a point: 1, worse: 0", lines)
        self.assertIn("ring: mean of medians 0.200 -> 0.100 over 1", lines)

    def test_without_a_baseline_the_mean_of_this_pass(self):
        lines = repredict_all.report({"a": self.priced(0.2), "b": self.priced(0.4)}, {})
        self.assertIn("ring: mean of medians 0.300 over 2", lines)


if __name__ == "__main__":
    unittest.main()
