#!/usr/bin/env python3
"""paired_stats.py (bench/paired.py's statistics) on made-up rounds (no GPU): the alternating order, each system's
median, the per-round ratios and their range, the table, and the errors for rounds that cannot be paired.
Run: python3 bench/test_paired.py"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import paired_stats as ps  # noqa: E402

POINT = {"dtype": "f16", "D": 64, "causal": 1, "N": 4096, "B": 4, "H": 32}


class AlternatingOrders(unittest.TestCase):
    def test_each_round_swaps_who_goes_first(self):
        self.assertEqual(ps.alternating_orders(4),
                         [("kiln", "peer"), ("peer", "kiln"), ("kiln", "peer"), ("peer", "kiln")])
        self.assertEqual(ps.alternating_orders(1), [("kiln", "peer")])

    def test_rounds_must_be_a_positive_integer(self):
        for bad in (0, -3, 2.5, "7", None):
            with self.assertRaisesRegex(ValueError, "rounds must be a positive integer"):
                ps.alternating_orders(bad)


class Summarize(unittest.TestCase):
    def test_ratios_are_the_peers_time_over_kilns_round_by_round(self):
        # Round 2 ran slow for both (a clock dip): its ratio stays 1.1 while the medians move.
        s = ps.summarize([1.0, 2.0, 1.0], [1.1, 2.2, 0.9])
        self.assertEqual(s["rounds"], 3)
        self.assertAlmostEqual(s["kiln_ms"], 1.0)
        self.assertAlmostEqual(s["peer_ms"], 1.1)
        for got, want in zip(s["ratios"], [1.1, 1.1, 0.9]):
            self.assertAlmostEqual(got, want)
        self.assertAlmostEqual(s["ratio"], 1.1)
        self.assertAlmostEqual(s["ratio_lo"], 0.9)
        self.assertAlmostEqual(s["ratio_hi"], 1.1)

    def test_an_even_number_of_rounds_takes_the_middle_pair(self):
        s = ps.summarize([1.0, 1.0, 1.0, 1.0], [0.9, 1.0, 1.2, 1.3])
        self.assertAlmostEqual(s["ratio"], 1.1)
        self.assertAlmostEqual(s["peer_ms"], 1.1)

    def test_rounds_that_cannot_be_paired_are_errors(self):
        with self.assertRaisesRegex(ValueError, "kiln has 2 rounds and the peer 1"):
            ps.summarize([1.0, 1.0], [1.0])
        with self.assertRaisesRegex(ValueError, "kiln: no round was timed"):
            ps.summarize([], [])
        for bad in (0.0, -1.0, float("inf"), float("nan"), None):
            with self.assertRaisesRegex(ValueError, "peer: a round's time must be a positive finite number"):
                ps.summarize([1.0], [bad])


class Matches(unittest.TestCase):
    def test_every_word_must_be_a_word_of_the_label(self):
        bf16 = dict(POINT, dtype="bf16")
        self.assertTrue(ps.matches(POINT, "f16 D64"))
        self.assertFalse(ps.matches(bf16, "f16 D64"))  # "f16" is inside "bf16", but not a word of its label
        self.assertTrue(ps.matches(bf16, "bf16 causal N4096"))
        self.assertTrue(ps.matches(POINT, "B4 H32"))
        self.assertFalse(ps.matches(dict(POINT, causal=0), "causal"))
        self.assertFalse(ps.matches(POINT, "D6"))
        self.assertTrue(ps.matches(POINT, ""))


class Markdown(unittest.TestCase):
    def test_rows_the_summary_line_and_an_untimed_point(self):
        timed = dict(POINT, checks="kiln 3.1e-04, cudnn 3.0e-04", summary=ps.summarize([2.0, 2.0], [2.1, 1.9]))
        slower = dict(POINT, causal=0, checks="kiln 3.1e-04, cudnn 3.0e-04", summary=ps.summarize([1.0], [0.9]))
        failed = dict(POINT, N=1024, B=16, error="a check failed: kiln 1.0e+00 FAILED, cudnn 3.0e-04")
        text = ps.markdown([timed, slower, failed], "cuDNN")
        self.assertIn("| point | kiln ms | cuDNN ms | cuDNN / kiln (median of rounds) | lowest | highest |", text)
        self.assertIn("| f16 D64 causal N4096 (B4 H32) | 2.000 | 2.000 | 1.000 | 0.950 | 1.050 | 2 | kiln 3.1e-04",
                      text)
        self.assertIn("| f16 D64 N4096 (B4 H32) | 1.000 | 0.900 | 0.900 | 0.900 | 0.900 | 1 |", text)
        self.assertIn("| f16 D64 causal N1024 (B16 H32) | — | — | — | — | — | 0 | a check failed: kiln 1.0e+00 FAILED",
                      text)
        self.assertIn("2 points: cuDNN / kiln 0.900–1.000, geomean 0.949; kiln at least as fast at 1.", text)


if __name__ == "__main__":
    unittest.main(verbosity=2)
