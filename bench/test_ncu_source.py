#!/usr/bin/env python3
"""ncu_source.py on a small export written here in ncu's shape (no GPU, no ncu): opcodes read past predicates and
modifiers, executed counts and stall shares summed, the hottest instructions ranked, two kernels' opcodes compared
per unit of work, and a file that is not a source page refused with what was expected.
Run: python3 bench/test_ncu_source.py"""

import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncu_source  # noqa: E402

HEADER = ('"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed",'
          '"stall_wait","stall_barrier","stall_wait (Not Issued)"')


def export(rows, kernel="k"):
    lines = [f'"Kernel Name","{kernel}",', HEADER]
    for address, sass, samples, executed, wait, barrier in rows:
        lines.append(f'"{address}","{sass}","{samples}","{executed}","{wait}","{barrier}","0"')
    return io.StringIO("\n".join(lines) + "\n")


FUSED = [("0x10", "STS.U16 [R21+UR25], R24", "30", "1,000", "20", "10"),
         ("0x20", "@!P0  BRA 0x7fa3", "60", "500", "0", "60"),
         ("0x30", "HGMMA.64x32x16.F32 R152, gdesc[UR16].tnspB, RZ, !UPT", "10", "200", "10", "0"),
         ("0x40", "", "", "", "", "")]
BASE = [("0x10", "HGMMA.64x64x16.F32 R56, gdesc[UR16], RZ, !UPT", "5", "100", "5", "0"),
        ("0x20", "BRA 0x10", "5", "500", "5", "0")]


class NcuSource(unittest.TestCase):
    def test_opcode_drops_predicates_and_modifiers(self):
        self.assertEqual(ncu_source.opcode("@!P0  BRA 0x7fa3"), "BRA")
        self.assertEqual(ncu_source.opcode("HGMMA.64x32x16.F32 R152, gdesc[UR16]"), "HGMMA")
        self.assertEqual(ncu_source.opcode("   "), "")

    def test_summary_sums_counts_and_stall_shares(self):
        kernel, rows = ncu_source.load(export(FUSED, "fa2_bwd_dkdv"))
        self.assertEqual(kernel, "fa2_bwd_dkdv")
        s = ncu_source.summary(rows)
        self.assertEqual(s["executed"], 1700)  # "1,000" read with its comma; the empty row adds nothing
        self.assertEqual(s["samples"], 100)
        self.assertAlmostEqual(s["reasons"]["wait"], 0.3)
        self.assertAlmostEqual(s["reasons"]["barrier"], 0.7)
        self.assertNotIn("wait (Not Issued)", s["reasons"])
        self.assertEqual(s["opcodes"]["STS"], 1000)
        top = ncu_source.hottest(rows, 2)
        self.assertEqual([t[0] for t in top], [0, 1])  # the two most sampled, in program order
        self.assertAlmostEqual(top[1][1], 0.6)
        self.assertEqual(top[1][3], ["barrier"])  # reasons with no samples are left out

    def test_differences_per_unit_largest_first(self):
        a = ncu_source.summary(ncu_source.load(export(FUSED))[1])
        b = ncu_source.summary(ncu_source.load(export(BASE))[1])
        diff = ncu_source.opcode_differences(a, b, units=10)
        self.assertEqual(diff[0], ("STS", 100.0, 0.0, 100.0))
        self.assertIn(("HGMMA", 20.0, 10.0, 10.0), diff)
        self.assertIn(("BRA", 50.0, 50.0, 0.0), diff)

    def test_main_prints_both_kernels_and_refuses_other_files(self):
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for name, rows in (("fused.csv", FUSED), ("base.csv", BASE)):
                path = os.path.join(d, name)
                with open(path, "w") as f:
                    f.write(export(rows).getvalue())
                paths.append(path)
            out = io.StringIO()
            self.assertEqual(ncu_source.main([paths[0], paths[1], "--units", "10", "--top", "3"], out=out), 0)
            text = out.getvalue()
            self.assertIn("1700 instructions executed (170.0 a unit)", text)
            self.assertIn("STS", text)
            self.assertIn("against", text)
            other = os.path.join(d, "details.txt")
            with open(other, "w") as f:
                f.write("Section: GPU Speed Of Light Throughput\n")
            with self.assertRaisesRegex(ValueError, "expected ncu's source page as CSV"):
                ncu_source.load(other)
            with contextlib.redirect_stderr(io.StringIO()) as err, self.assertRaises(SystemExit) as exit_:
                ncu_source.main([other], out=io.StringIO())
            self.assertEqual(exit_.exception.code, 2)
            self.assertIn("expected ncu's source page as CSV", err.getvalue())


if __name__ == "__main__":
    unittest.main(verbosity=2)
