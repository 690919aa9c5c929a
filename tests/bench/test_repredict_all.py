"""bench/planner/repredict_all.py: which stored calibrations it re-prices."""
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
            found = [os.path.relpath(d, root) for d in repredict_all.stored(root, "host")]
            self.assertEqual(found, ["a", "a/inner"])
            found = [os.path.relpath(d, root) for d in repredict_all.stored(root, "all")]
            self.assertEqual(found, ["a", "a/inner", "c"])


if __name__ == "__main__":
    unittest.main()
