"""paired.py — the arithmetic of paired measurements on a host whose speed
drifts: bench_speed.sh's paired fraction (fraction_paired and its
neighbours) and bench/ab_step.sh's interleaved A/B pairs, apart from the
scripts so that tests/bench/test_paired.py can check it on hand-made inputs.

Why a paired fraction: fraction_of_best_gemm divides packtrain's best round
(a mean over --steps steps) by a yardstick measured minutes away (setup and
the end of the run) as each product's *best* ~70 ms round, summed
step-weighted.  On a host whose speed drifts 5-10% from second to second
that compares a mean against an envelope of lucky moments taken at another
time.  The paired fraction re-measures the yardstick right before and right
after each packtrain round and divides that round by the mean of its two
neighbours, with the same statistic on both sides: the *mean* rate (FLOPs
over time of the whole measurement: packtrain's graphs_per_s, the
yardstick's "mean"/"wall" statistics of bench/sgemm_kernels).  A mean does
not depend on the window's length, a best window does (the shorter the
window, the luckier its best), and packtrain's rounds (0.3 s of QM9, ~3 s
of water) and the yardstick's (~6 s) are not the same length; so means it
is (docs/performance.md, "Session 16 (pair)", has the measured biases).

The same arithmetic splits it (one_core_round): one replica on one pinned
core against one pinned yardstick process gives one core's fraction, and the
2-replica step's rate over twice the one-core run's, beside the yardstick's
own 2-over-1 scaling, gives what running beside the other replica costs.

Inputs are the parsed JSON lines of the programs: `sgemm_kernels` (one list
of lines per process run at once) and `packtrain bench` (one object).
"""
import statistics


def yardstick_sum(processes):
    """The yardstick of `len(processes)` sgemm_kernels processes run at once:
    per implementation the sum over the processes of each statistic —
    "best" (the step-weighted best-per-product rate, bench_speed's old
    yardstick) and the "stats" line's "mean", "wall", "median_round",
    "best_round" — in GF/s.  An implementation absent from any process is
    left out (a sum over fewer processes would understate it)."""
    per = []
    for lines in processes:
        got = {}
        for r in lines:
            if "weighted_gflops" in r:
                got.setdefault(r["impl"], {})["best"] = r["weighted_gflops"]
            elif "stats" in r:
                s = r["stats"]
                got.setdefault(r["impl"], {}).update(
                    {k: s[k] for k in ("mean", "wall", "median_round", "best_round")})
        per.append(got)
    if not per:
        return {}
    impls = set(per[0]).intersection(*per[1:])
    return {i: {k: sum(p[i][k] for p in per) for k in per[0][i]
                if all(k in p[i] for p in per)} for i in sorted(impls)}


def best_impl(yard, stat):
    """The implementation with the highest `stat` in a yardstick_sum."""
    have = {i: v[stat] for i, v in yard.items() if stat in v}
    if not have:
        raise ValueError(f"no implementation has the statistic '{stat}'")
    return max(have, key=have.get)


def bracket(before, after, impl, stat):
    """The yardstick around a packtrain round: the mean of the rates right
    before and right after it (a drift linear in time cancels)."""
    return 0.5 * (before[impl][stat] + after[impl][stat])


def window_rates(graphs, ms, k):
    """graphs/s of every window of k consecutive steps (per_step of
    `packtrain bench`); one window of all steps when there are fewer."""
    if len(graphs) != len(ms) or not graphs:
        raise ValueError("per_step: graphs and ms must be non-empty and of one length")
    k = min(k, len(graphs))
    return [1000.0 * sum(graphs[i:i + k]) / sum(ms[i:i + k]) for i in range(len(graphs) - k + 1)]


def mean_rate(graphs, ms):
    """graphs/s over all steps: `packtrain bench`'s graphs_per_s"""
    return window_rates(graphs, ms, len(graphs))[0]


def cpu_graphs_per_s(run, cores):
    """graphs per second of CPU time spread over the cores: a `packtrain
    bench` run's graphs a step over its process CPU time a step (every
    thread: replicas, their spinning waits, the loader) divided by `cores`.
    Equal to graphs_per_s when every core is busy with the run all along
    (a quiet machine); on a shared one the preempted slices drop out, as
    they do from the yardstick's thread CPU time."""
    if run["cpu_ms_per_step"] <= 0:
        raise ValueError("cpu_ms_per_step must be positive")
    return run["graphs"] / run["steps"] / (run["cpu_ms_per_step"] * 1e-3 / cores)


def fraction(graphs_per_s, flops_per_graph, gflops):
    """executed FLOP/s over a yardstick rate in GF/s"""
    return graphs_per_s * flops_per_graph / (gflops * 1e9)


def spread(values):
    """median and range of per-round figures"""
    if not values:
        raise ValueError("no rounds")
    return {"median": round(statistics.median(values), 3),
            "range": [round(min(values), 3), round(max(values), 3)]}


def ab_summary(pairs, lower_is_better=True):
    """A/B pairs [(a, b), ...] of one metric, each pair run back to back:
    both sides' medians, the median of the per-pair ratios b / a (a pair
    shares its minute of the host's speed, so its ratio is the evidence, not
    the ratio of the medians; over the pairs whose a is not 0, None if none)
    and how many pairs went which way."""
    if not pairs:
        raise ValueError("no pairs")
    better = (lambda a, b: b < a) if lower_is_better else (lambda a, b: b > a)
    return {"pairs": len(pairs),
            "a_median": statistics.median(a for a, _ in pairs),
            "b_median": statistics.median(b for _, b in pairs),
            "a_min": min(a for a, _ in pairs), "b_min": min(b for _, b in pairs),
            "b_over_a_median": (statistics.median(b / a for a, b in pairs if a > 0)
                                if any(a > 0 for a, _ in pairs) else None),
            "b_better": sum(1 for a, b in pairs if better(a, b)),
            "a_better": sum(1 for a, b in pairs if better(b, a)),
            "ties": sum(1 for a, b in pairs if a == b)}


def one_core_round(one, many, flops_one, flops_many, yard_one, yard_many, impl, cores):
    """One round's split of the paired fraction into one core's and what
    running `cores` replicas at once adds (bench_speed.sh's one-core run).

    one:  the `packtrain bench` run of 1 replica x 1 thread pinned to one
          CPU, on the packs one replica runs in the `cores`-replica step;
    many: that round's `cores`-replica run;
    flops_one, flops_many: each run's executed FLOPs per graph;
    yard_one:  (before, after) yardstick_sum of 1 sgemm_kernels process
               pinned to the same CPU, right before and after `one`;
    yard_many: (before, after) of the `cores` processes around `many`.

    Returns fraction_one_core (one's executed FLOP/s over its bracket, both
    by the wall clock), its CPU-time variant, two_core_over_one_core (many's
    graphs/s over `cores` x one's: 1 is perfect scaling) and
    yardstick_two_over_one (the yardstick's own scaling, `cores` processes'
    summed rate over `cores` x one's).  With these, when flops_one ==
    flops_many, many's paired fraction is exactly
    fraction_one_core * two_core_over_one_core / yardstick_two_over_one:
    below one core's fraction by what the step loses to running beside
    other replicas beyond what the products alone lose."""
    if cores < 1:
        raise ValueError("cores must be at least 1")
    if one["graphs_per_s"] <= 0:
        raise ValueError("the one-core run's graphs_per_s must be positive")
    w1 = bracket(yard_one[0], yard_one[1], impl, "wall")
    wn = bracket(yard_many[0], yard_many[1], impl, "wall")
    if w1 <= 0:
        raise ValueError("the one-core yardstick's rate must be positive")
    return {"fraction_one_core": fraction(one["graphs_per_s"], flops_one, w1),
            "fraction_one_core_cpu": fraction(cpu_graphs_per_s(one, 1), flops_one,
                                              bracket(yard_one[0], yard_one[1], impl, "mean")),
            "two_core_over_one_core": many["graphs_per_s"] / (cores * one["graphs_per_s"]),
            "yardstick_two_over_one": wn / (cores * w1),
            "fraction_many": fraction(many["graphs_per_s"], flops_many, wn)}
