#!/usr/bin/env python3
"""Golden test of summarize.py: python3 scripts/gpu/summarize_test.py
[--update] (--update rewrites testdata/summary.golden). Standard library only."""
import contextlib
import io
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import summarize  # noqa: E402

UPDATE = "--update" in sys.argv


class SummarizeTest(unittest.TestCase):
    def test_golden(self):
        """Every gotune line names its load (none, partial, full, a fraction)
        and says stalled where a step waited for the kernel."""
        data = os.path.join(HERE, "testdata")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = summarize.main(["summarize.py", os.path.join(data, "gotune.jsonl"), os.path.join(data, "baselines.jsonl")])
        self.assertEqual(code, 0)
        golden = os.path.join(data, "summary.golden")
        if UPDATE:
            with open(golden, "w") as f:
                f.write(out.getvalue())
            return
        with open(golden) as f:
            self.assertEqual(out.getvalue(), f.read(), "summary.golden differs (--update rewrites it)")

    def test_load_label(self):
        for spec, point, want in [
            ({}, {}, "load none"),
            ({"gpu_load": 0.5}, {}, "load partial"),
            ({"gpu_load": 1}, {"load_stalled": True}, "load full stalled"),
            ({"gpu_load": 0.25}, {"load_stalled": False}, "load 0.25"),
        ]:
            self.assertEqual(summarize.load_label(spec, point), want, (spec, point))


if __name__ == "__main__":
    unittest.main(argv=[a for a in sys.argv if a != "--update"])
