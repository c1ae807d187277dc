"""Simulated coverage of the intervals quarl prints, on data shaped like its seeds': the share of
draws whose nominal 95% interval holds the population's value, which a caption states where such
data do not keep the nominal level.

The data (each drawn with a fixed seed, `REPS` samples of n values):

- `solve_or_fail`: returns on a 0..1 scale where 4 seeds in 5 solve the task (1 - |N(0, 0.03)|)
  and 1 in 5 fails (uniform on 0.04..0.5): DQN's seeds on CartPole (500, 500, 133, 208 of 500).
- `lognormal`: skewed positive values, exp(N(0, 0.5)): wall times, rates.
- `slow_seeds`: times where 1 seed in 5 takes 2.5 times as long (bimodal times), lognormal
  around each mode (sigma 0.15).

The ratio intervals draw the fp32 side at twice the int8 side's scale; `stratified_coverage` and
`improvement_coverage` draw `TASKS` tasks of `solve_or_fail` runs, the aggregate plots' shape;
`cluster_coverage` draws series of widths that share their seeds (`seeds_across_widths`), the
report's aggregates' shape.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable

import numpy as np

from quarl.collate import stats

LEVEL = 0.95
REPS = 4000  # draws per coverage: the estimate's own standard error is about 0.35 points at 0.95
BOOTSTRAP_REPS, BOOTSTRAP_RESAMPLES = 400, 1000  # a bootstrap per draw: fewer draws (about 1.5 points)
TASKS = 8
SEED = 2026
SCALE = 2.0  # the ratio the two groups of a ratio interval are drawn at

Sampler = Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]


def solve_or_fail(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Returns where 4 seeds in 5 solve (1 - |N(0, 0.03)|) and 1 fails (uniform on 0.04..0.5)."""
    solved = 1 - np.abs(rng.normal(0.0, 0.03, shape))
    return np.where(rng.random(shape) < 0.2, rng.uniform(0.04, 0.5, shape), solved)


def lognormal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """exp(N(0, 0.5)): skewed positive values."""
    return rng.lognormal(0.0, 0.5, shape)


def slow_seeds(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Times where 1 seed in 5 takes 2.5 times as long, each mode lognormal (sigma 0.15)."""
    return rng.lognormal(0.0, 0.15, shape) * np.where(rng.random(shape) < 0.2, 2.5, 1.0)


SAMPLERS: dict[str, Sampler] = {"solve_or_fail": solve_or_fail, "lognormal": lognormal, "slow_seeds": slow_seeds}
#: What each sampler's data look like, in the words a caption uses.
WORDS = {
    "solve_or_fail": "returns where 1 seed in 5 fails",
    "lognormal": "lognormal values",
    "slow_seeds": "times where 1 seed in 5 is 2.5 times slower",
}


def _population(kind: str, statistic: Callable[..., np.ndarray | float]) -> float:
    """`statistic` of a million draws of `kind` (fixed seed): the value an interval should hold."""
    return float(statistic(SAMPLERS[kind](np.random.default_rng(SEED + 1), (1_000_000,))))


@lru_cache(maxsize=None)
def t_coverage(kind: str, n: int) -> float:
    """Coverage of `stats.seed_interval` (Student-t over n seeds) of the mean of `kind`."""
    truth = _population(kind, np.mean)
    draws = SAMPLERS[kind](np.random.default_rng(SEED), (REPS, n))
    return float(np.mean([(ci := stats.seed_interval(x)).low <= truth <= ci.high for x in draws]))


@lru_cache(maxsize=None)
def ratio_coverage(kind: str, n: int) -> float:
    """Coverage of `stats.ratio_interval` (Welch on logs) of the ratio of geometric means, n runs a
    side, the numerator drawn at SCALE times the denominator's scale (so the ratio is SCALE)."""
    rng = np.random.default_rng(SEED)
    slow, fast = SCALE * SAMPLERS[kind](rng, (REPS, n)), SAMPLERS[kind](rng, (REPS, n))
    return float(np.mean([(ci := stats.ratio_interval(a, b)).low <= SCALE <= ci.high for a, b in zip(slow, fast)]))


@lru_cache(maxsize=None)
def stratified_coverage(n: int) -> float:
    """Coverage of `stats.stratified_bootstrap` of the IQM over TASKS tasks of n `solve_or_fail`
    runs each (the tasks' runs pooled, as the aggregate plots and tables pool them)."""
    truth = _population("solve_or_fail", stats.iqm)
    rng = np.random.default_rng(SEED)
    hits = 0
    for _ in range(BOOTSTRAP_REPS):
        tasks = list(solve_or_fail(rng, (TASKS, n)))
        ci = stats.stratified_bootstrap(tasks, stats.iqm, n_resamples=BOOTSTRAP_RESAMPLES)
        hits += ci.low <= truth <= ci.high
    return hits / BOOTSTRAP_REPS


@lru_cache(maxsize=None)
def improvement_coverage(n: int) -> float:
    """Coverage of `stats.probability_of_improvement` over TASKS tasks of n `solve_or_fail` runs a
    side, one side's returns scaled by 0.9 (its population value from a million pairs)."""
    rng = np.random.default_rng(SEED + 1)
    a, b = solve_or_fail(rng, (1_000_000,)), 0.9 * solve_or_fail(rng, (1_000_000,))
    truth = float(np.mean(a > b))
    rng = np.random.default_rng(SEED)
    hits = 0
    for _ in range(BOOTSTRAP_REPS):
        xs, ys = solve_or_fail(rng, (TASKS, n)), 0.9 * solve_or_fail(rng, (TASKS, n))
        ci = stats.probability_of_improvement(list(xs), list(ys), n_resamples=BOOTSTRAP_RESAMPLES)
        hits += ci.low <= truth <= ci.high
    return hits / BOOTSTRAP_REPS


CLUSTERS, WIDTHS = 3, 4  # seed-cluster data: 3 series (algorithms), 4 widths each from the same seeds


def seeds_across_widths(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """`solve_or_fail` seeds shared by the last axis (the widths): a seed solves at every width
    (1 - |N(0, 0.03)| each) or fails at every width, around its own level (uniform on 0.04..0.5,
    N(0, 0.05) a width)."""
    seed_shape = (*shape[:-1], 1)
    solved = 1 - np.abs(rng.normal(0.0, 0.03, shape))
    failed = np.clip(rng.uniform(0.04, 0.5, seed_shape) + rng.normal(0.0, 0.05, shape), 0.0, 1.0)
    return np.where(rng.random(seed_shape) < 0.2, failed, solved)


@lru_cache(maxsize=None)
def cluster_coverage(n: int) -> tuple[float, float]:
    """Coverage of `stats.seed_cluster_aggregate`'s IQM and probability-of-improvement intervals over
    CLUSTERS series of WIDTHS widths, n seeds each (`seeds_across_widths`), one side scaled by 0.9,
    the sides drawn apart (their population values from a million seeds)."""
    rng = np.random.default_rng(SEED + 1)
    one, two = seeds_across_widths(rng, (1_000_000, 1)), 0.9 * seeds_across_widths(rng, (1_000_000, 1))
    truth_iqm, truth_better = float(stats.iqm(one.ravel())), float(np.mean(one > two))
    rng = np.random.default_rng(SEED)
    hits = np.zeros(2)
    for _ in range(BOOTSTRAP_REPS):
        xs = seeds_across_widths(rng, (CLUSTERS, n, WIDTHS))
        ys = 0.9 * seeds_across_widths(rng, (CLUSTERS, n, WIDTHS))
        first, _, better = stats.seed_cluster_aggregate(list(xs), list(ys), n_resamples=BOOTSTRAP_RESAMPLES)
        hits += [first.low <= truth_iqm <= first.high, better.low <= truth_better <= better.high]
    return float(hits[0] / BOOTSTRAP_REPS), float(hits[1] / BOOTSTRAP_REPS)


def cluster_note() -> str:
    """What the seed-cluster bootstrap's intervals cover in simulation, for a caption."""
    shown = [" and ".join(f"{cluster_coverage(n)[k]:.2f} at n = {n}" for n in (3, 5)) for k in (0, 1)]
    return (
        f"simulated coverage of these 95% intervals (`quarl.collate.coverage`) over {CLUSTERS} series of "
        f"{WIDTHS} widths from the same seeds, {WORDS['solve_or_fail']} at every width, n seeds a series: "
        f"the IQM's {shown[0]}, the probability of improvement's {shown[1]}"
    )


def _pair(coverage: Callable[..., float], *kind: str) -> str:
    """'0.49 at n = 3 and 0.67 at n = 5': `coverage(*kind, n)` at each n."""
    return " and ".join(f"{coverage(*kind, n):.2f} at n = {n}" for n in (3, 5))


def seed_note() -> str:
    """What the Student-t interval over seeds covers in simulation, for a caption."""
    kinds = ("solve_or_fail", "lognormal")
    shapes = "; ".join(f"{WORDS[k]}, {_pair(t_coverage, k)}" for k in kinds)
    return (
        f"A Student-t interval covers {LEVEL:.0%} for normal values; simulated (`quarl.collate.coverage`) on {shapes}: "
        "below its level, so read an interval over a handful of seeds of such values as narrower than it is."
    )


def ratio_note() -> str:
    """What the ratio interval (Welch on logs) covers in simulation, for a caption."""
    kinds = ("lognormal", "slow_seeds")
    shapes = "; ".join(f"{WORDS[k]}, {_pair(ratio_coverage, k)}" for k in kinds)
    return f"Simulated coverage of this 95% interval (`quarl.collate.coverage`), n runs a side: {shapes}."


def stratified_note() -> str:
    """What the stratified bootstraps (the IQM's, the probability of improvement's) cover in
    simulation, for a caption."""
    return (
        f"simulated coverage of these 95% intervals (`quarl.collate.coverage`) over {TASKS} tasks of "
        f"{WORDS['solve_or_fail']}, n runs a task: the IQM's {_pair(stratified_coverage)}, the probability "
        f"of improvement's {_pair(improvement_coverage)}"
    )
