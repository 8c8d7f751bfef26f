"""test_paired.py — bench/paired.py (bench_speed.sh's
paired fraction) on hand-made sgemm_kernels and `packtrain bench` output,
with every expected figure worked out by hand in the comments; and the
statistics line of the real bench/sgemm_kernels against the invariants its
definitions imply.
  python3 tests/bench/test_paired.py [BENCH_DIR]   (default build/bench)
Prints "N passed, N failed" last (suite "bench" of tests/run_all.sh)."""
import json
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import paired as pf  # noqa: E402


def proc(impl_rates):
    """sgemm_kernels lines of one process: {impl: (best, mean, wall, median_round, best_round)}"""
    lines = [{"openblas_core": "SKYLAKEX", "U": 10, "N": 4, "filter_rows_per_call": 10, "rounds": 7}]
    for impl, (best, mean, wall, med, top) in impl_rates.items():
        lines.append({"op": "node_fwd", "m": 4, "n": 100, "k": 100, "impl": impl, "gflops": best})
        lines.append({"impl": impl, "weighted_gflops": best})
    for impl, (best, mean, wall, med, top) in impl_rates.items():
        lines.append({"impl": impl, "stats": {"mean": mean, "wall": wall, "best_round": top,
                                              "median_round": med, "wall_s": 6.0,
                                              "rounds": [med] * 7}})
    return lines


class Yardstick(unittest.TestCase):
    def test_sums_each_statistic_over_processes(self):
        y = pf.yardstick_sum([proc({"avx512": (170, 160, 150, 161, 168)}),
                              proc({"avx512": (150, 140, 130, 141, 149)})])
        self.assertEqual(y, {"avx512": {"best": 320, "mean": 300, "wall": 280,
                                        "median_round": 302, "best_round": 317}})

    def test_an_implementation_missing_in_one_process_is_left_out(self):
        y = pf.yardstick_sum([proc({"avx512": (1, 1, 1, 1, 1), "avx2": (2, 2, 2, 2, 2)}),
                              proc({"avx512": (1, 1, 1, 1, 1)})])
        self.assertEqual(list(y), ["avx512"])

    def test_old_output_without_stats_keeps_best_only(self):
        lines = [{"impl": "auto", "weighted_gflops": 150.0}]
        self.assertEqual(pf.yardstick_sum([lines, lines]), {"auto": {"best": 300.0}})
        with self.assertRaises(ValueError):
            pf.best_impl(pf.yardstick_sum([lines]), "mean")

    def test_best_impl_by_the_statistic_asked(self):
        # avx512 has the best envelope, auto the best mean
        y = pf.yardstick_sum([proc({"avx512": (200, 150, 150, 150, 190),
                                    "auto": (190, 160, 155, 160, 180)})])
        self.assertEqual(pf.best_impl(y, "best"), "avx512")
        self.assertEqual(pf.best_impl(y, "mean"), "auto")

    def test_bracket_is_the_mean_of_both_neighbours(self):
        before = {"auto": {"wall": 300.0}}
        after = {"auto": {"wall": 280.0}}
        self.assertEqual(pf.bracket(before, after, "auto", "wall"), 290.0)

    def test_empty(self):
        self.assertEqual(pf.yardstick_sum([]), {})


class Windows(unittest.TestCase):
    def test_window_rates(self):
        # steps of 10 graphs in 10, 20, 10, 40 ms: 2-step windows 20/30, 20/30, 20/50 graphs/ms
        r = pf.window_rates([10, 10, 10, 10], [10.0, 20.0, 10.0, 40.0], 2)
        self.assertEqual(len(r), 3)
        self.assertAlmostEqual(r[0], 1000 * 20 / 30)
        self.assertAlmostEqual(r[1], 1000 * 20 / 30)
        self.assertAlmostEqual(r[2], 1000 * 20 / 50)

    def test_mean_rate_is_total_over_total_not_mean_of_rates(self):
        # 30 graphs in 10 ms and 10 in 30 ms: 40 graphs in 40 ms = 1000/s
        # (the mean of the two steps' rates would be (3000 + 333) / 2)
        self.assertAlmostEqual(pf.mean_rate([30, 10], [10.0, 30.0]), 1000.0)

    def test_window_longer_than_the_run_is_the_whole_run(self):
        self.assertEqual(pf.window_rates([5, 5], [5.0, 5.0], 10), [1000.0])

    def test_bad_per_step(self):
        with self.assertRaises(ValueError):
            pf.window_rates([1, 2], [1.0], 1)
        with self.assertRaises(ValueError):
            pf.window_rates([], [], 5)


class Fraction(unittest.TestCase):
    def test_fraction(self):
        # 500 graphs/s x 400 MFLOP = 200 GF/s of 250 GF/s
        self.assertAlmostEqual(pf.fraction(500.0, 400e6, 250.0), 0.8)

    def test_cpu_graphs_per_s(self):
        # 32 graphs a step, 40 ms of process CPU a step on 2 cores: 32 / 0.020 s
        run = {"graphs": 320, "steps": 10, "cpu_ms_per_step": 40.0}
        self.assertAlmostEqual(pf.cpu_graphs_per_s(run, 2), 1600.0)
        with self.assertRaises(ValueError):
            pf.cpu_graphs_per_s({"graphs": 1, "steps": 1, "cpu_ms_per_step": 0.0}, 2)

    def test_spread(self):
        self.assertEqual(pf.spread([0.8, 0.7, 0.75]), {"median": 0.75, "range": [0.7, 0.8]})
        self.assertEqual(pf.spread([0.8, 0.7]), {"median": 0.75, "range": [0.7, 0.8]})
        with self.assertRaises(ValueError):
            pf.spread([])


class AB(unittest.TestCase):
    def test_ms_lower_is_better(self):
        # ratios 0.9, 1.05, 0.95, 1.0: median (0.95 + 1.0) / 2; B wins 2, A wins 1, one tie
        s = pf.ab_summary([(10.0, 9.0), (20.0, 21.0), (10.0, 9.5), (8.0, 8.0)])
        self.assertEqual(s["pairs"], 4)
        self.assertEqual((s["b_better"], s["a_better"], s["ties"]), (2, 1, 1))
        self.assertAlmostEqual(s["b_over_a_median"], 0.975)
        self.assertEqual((s["a_median"], s["b_median"]), (10.0, 9.25))
        self.assertEqual((s["a_min"], s["b_min"]), (8.0, 8.0))

    def test_rate_higher_is_better(self):
        s = pf.ab_summary([(100.0, 110.0), (100.0, 90.0), (100.0, 105.0)], lower_is_better=False)
        self.assertEqual((s["b_better"], s["a_better"]), (2, 1))
        self.assertAlmostEqual(s["b_over_a_median"], 1.05)

    def test_a_zero_is_left_out_of_the_ratio(self):
        # a profile part that rounds to 0.000 ms on A
        s = pf.ab_summary([(0.0, 0.001), (2.0, 1.0)])
        self.assertEqual(s["b_over_a_median"], 0.5)
        self.assertIsNone(pf.ab_summary([(0.0, 0.0)])["b_over_a_median"])

    def test_no_pairs(self):
        with self.assertRaises(ValueError):
            pf.ab_summary([])


def run(gps, cpu_ms_per_step, graphs=100, steps=10):
    """a `packtrain bench` result with the fields one_core_round reads"""
    return {"graphs_per_s": gps, "graphs": graphs, "steps": steps, "cpu_ms_per_step": cpu_ms_per_step}


def yard(wall, mean, impl="auto"):
    return {impl: {"wall": wall, "mean": mean}}


class OneCore(unittest.TestCase):
    def test_known_split(self):
        # one core: 1000 graphs/s x 200 MFLOP = 200 GF/s against a bracket of
        # (240 + 260) / 2 = 250 GF/s: 0.8.  By CPU: 100 graphs in 10 steps of
        # 12.5 ms CPU on 1 core = 800 graphs/s = 160 GF/s of (190 + 210) / 2: 0.8.
        # Two replicas: 1800 graphs/s over 2 x 1000 = 0.9; the yardstick's 2
        # processes (470 + 480) / 2 = 475 over 2 x 250 = 0.95; 1800 x 200e6 =
        # 360 GF/s over 475: 0.7579 = 0.8 x 0.9 / 0.95.
        r = pf.one_core_round(run(1000.0, 12.5), run(1800.0, 99.0), 200e6, 200e6,
                              (yard(240.0, 190.0), yard(260.0, 210.0)),
                              (yard(470.0, 1.0), yard(480.0, 1.0)), "auto", 2)
        self.assertAlmostEqual(r["fraction_one_core"], 0.8)
        self.assertAlmostEqual(r["fraction_one_core_cpu"], 0.8)
        self.assertAlmostEqual(r["two_core_over_one_core"], 0.9)
        self.assertAlmostEqual(r["yardstick_two_over_one"], 0.95)
        self.assertAlmostEqual(r["fraction_many"], 360.0 / 475.0)
        self.assertAlmostEqual(r["fraction_many"], 0.8 * 0.9 / 0.95)

    def test_perfect_scaling_keeps_the_fraction(self):
        # both sides scale by exactly `cores`: the paired fraction is one core's
        r = pf.one_core_round(run(500.0, 10.0), run(2000.0, 10.0), 1e8, 1e8,
                              (yard(100.0, 100.0), yard(100.0, 100.0)),
                              (yard(400.0, 400.0), yard(400.0, 400.0)), "auto", 4)
        self.assertAlmostEqual(r["two_core_over_one_core"], 1.0)
        self.assertAlmostEqual(r["yardstick_two_over_one"], 1.0)
        self.assertAlmostEqual(r["fraction_many"], r["fraction_one_core"])
        self.assertAlmostEqual(r["fraction_one_core"], 0.5)

    def test_the_implementation_asked_is_used(self):
        y = {"auto": {"wall": 100.0, "mean": 100.0}, "avx512": {"wall": 200.0, "mean": 200.0}}
        r = pf.one_core_round(run(1000.0, 10.0), run(2000.0, 10.0), 1e8, 1e8,
                              (y, y), (y, y), "avx512", 2)
        self.assertAlmostEqual(r["fraction_one_core"], 0.5)

    def test_bad_inputs(self):
        y = (yard(100.0, 100.0), yard(100.0, 100.0))
        with self.assertRaises(ValueError):
            pf.one_core_round(run(0.0, 10.0), run(1.0, 10.0), 1e8, 1e8, y, y, "auto", 2)
        with self.assertRaises(ValueError):
            pf.one_core_round(run(1.0, 10.0), run(1.0, 10.0), 1e8, 1e8, y, y, "auto", 0)
        with self.assertRaises(ValueError):
            pf.one_core_round(run(1.0, 10.0), run(1.0, 10.0), 1e8, 1e8,
                              (yard(0.0, 1.0), yard(0.0, 1.0)), y, "auto", 2)
        with self.assertRaises(ValueError):   # no CPU time: cpu_graphs_per_s refuses
            pf.one_core_round(run(1.0, 0.0), run(1.0, 10.0), 1e8, 1e8, y, y, "auto", 2)
        with self.assertRaises(KeyError):     # an implementation the yardstick lacks
            pf.one_core_round(run(1.0, 10.0), run(1.0, 10.0), 1e8, 1e8, y, y, "avx2", 2)


SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "bench_speed.sh")


class BenchSpeedScript(unittest.TestCase):
    """bench_speed.sh without running it: its bash and embedded Python parse,
    and a CASES it does not know stops it before any work."""
    def test_bash_syntax(self):
        subprocess.run(["bash", "-n", SCRIPT], check=True)

    def test_embedded_python_compiles(self):
        with open(SCRIPT) as f:
            text = f.read()
        blocks = re.findall(r"<<'PY'\n(.*?)\nPY\n", text, re.S)
        self.assertGreaterEqual(len(blocks), 4)
        for i, b in enumerate(blocks):
            compile(b, f"bench_speed.sh heredoc {i}", "exec")
        # the summary reads the one-core split through paired.py
        self.assertTrue(any("one_core_round" in b for b in blocks))

    def test_unknown_case_refused(self):
        for cases in ("qm9", "qm9_lpfhp nope", " "):
            p = subprocess.run(["bash", SCRIPT, "/bin/true", "/nonexistent"],
                               env=dict(os.environ, CASES=cases),
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 2, cases)
            self.assertIn("CASES", p.stderr, cases)


class SgemmKernelsStats(unittest.TestCase):
    """One short run of the real program: every implementation's stats line
    holds, by construction, mean <= best (a product's mean rate over the
    rounds is at most its best round's; the same step weights over both),
    median_round <= best_round <= best (a round's rates are each at most
    their product's best), 7 rounds, and wall <= mean up to the clocks'
    granularity (a thread's CPU time never exceeds the wall clock)."""
    def test_stats_line(self):
        prog = os.path.join(BENCH_DIR, "sgemm_kernels")
        out = subprocess.run([prog, "300", "40", "0.05", "openblas,auto", "100"],
                             capture_output=True, text=True, check=True).stdout
        lines = [json.loads(l) for l in out.splitlines()]
        y = pf.yardstick_sum([lines])
        self.assertEqual(sorted(y), ["auto", "openblas"])
        for impl, v in y.items():
            self.assertEqual(sorted(v), ["best", "best_round", "mean", "median_round", "wall"], impl)
            self.assertLessEqual(v["mean"], v["best"] * 1.0001, impl)
            self.assertLessEqual(v["best_round"], v["best"] * 1.0001, impl)
            self.assertLessEqual(v["median_round"], v["best_round"], impl)
            self.assertLessEqual(v["wall"], v["mean"] * 1.01, impl)
            self.assertGreater(v["wall"], 0, impl)
        stats = [l for l in lines if "stats" in l]
        self.assertTrue(all(len(l["stats"]["rounds"]) == 7 for l in stats))
        # no stats line carries the key the old readers sum
        self.assertFalse(any("weighted_gflops" in l for l in stats))


if __name__ == "__main__":
    BENCH_DIR = sys.argv[1] if len(sys.argv) > 1 else "build/bench"
    res = unittest.main(argv=sys.argv[:1], exit=False, verbosity=1).result
    failed = len(res.failures) + len(res.errors) + len(res.unexpectedSuccesses) + len(res.skipped)
    print(f"bench: {res.testsRun - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
