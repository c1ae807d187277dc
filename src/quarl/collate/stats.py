"""Statistics across seeds and tasks: means, IQM and confidence intervals.

One cell across its seeds (`seed_interval`, `summarise`): the Student-t interval of the mean,
mean ± t(0.975, n-1) · s / sqrt(n). It covers at its stated level for normal data at any n >= 2;
a percentile bootstrap of the mean does not at the 3-10 seeds a study has (it covers about 76% at
n = 3, 84% at n = 5, 90% at n = 10, because a resample of n values is less spread than the
population), which tests/collate/test_stats.py simulates.

Two methods across tasks (`probability_of_improvement`): rliable's probability that a run of one
beats a run of the other, averaged over tasks, with the same stratified bootstrap.

Two groups of runs (`ratio_interval`, ActorQ's speedups): the ratio of their geometric means,
exp(mean log a - mean log b), with the Welch t interval of that difference of mean logs. Times and
rates are skewed; on their logs Welch's interval covers at its level at 3 and 5 runs a side, where
a percentile bootstrap of the ratio of plain means covers about 80% and 87%
(`quarl.collate.coverage` simulates both).

Across tasks (`stratified_bootstrap`, the aggregate plot): the definitions are rliable's (Agarwal et
al., 2021): scores form one stratum per task (an (algo, env) pair), each with one score per run
(seed); a bootstrap resample draws runs with replacement *within* every task; IQM is the 25%-trimmed
mean of all scores pooled; the interval is the percentile interval of the resampled statistic.
rliable itself does not import next to pandas 3, so this builds on SciPy: `scipy.stats.bootstrap`
resamples each task's sample independently (its multi-sample mode is exactly the stratified
bootstrap) and `scipy.stats.trim_mean` is the IQM. A task with a single run has nothing to resample:
it enters every resample unchanged. When no task has two runs there is no interval at all (NaN
bounds), never a made-up one.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Sequence, Union

import numpy as np
import pandas as pd
from scipy import stats

#: Runs per task: one sequence (or array) of scores per task.
Runs = Sequence[Union[Sequence[float], np.ndarray]]

CONFIDENCE = 0.95
N_RESAMPLES = 10_000
SEED = 0  # fixed random state: the same store always gives the same intervals


def iqm(scores: np.ndarray, axis: int | None = None) -> np.ndarray | float:
    """Interquartile mean: the mean of the middle 50% of `scores` (rliable's IQM)."""
    return stats.trim_mean(scores, proportiontocut=0.25, axis=axis)


def mean(scores: np.ndarray, axis: int | None = None) -> np.ndarray | float:
    """The plain mean (a function of the same shape as `iqm`)."""
    return np.mean(scores, axis=axis)


STATISTICS: dict[str, Callable[..., np.ndarray | float]] = {"IQM": iqm, "mean": mean}


@dataclass(frozen=True)
class Interval:
    """A point estimate with its confidence interval and how many runs and tasks stand behind it."""

    estimate: float
    low: float  # NaN when there is no interval (no task with two runs or more)
    high: float
    n_runs: int
    n_tasks: int

    @property
    def has_ci(self) -> bool:
        """True when an interval could be computed."""
        return not (np.isnan(self.low) or np.isnan(self.high))


def stratified_bootstrap(
    samples: Runs,
    statistic: Callable[..., np.ndarray | float] = mean,
    *,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = SEED,
) -> Interval:
    """`statistic` of all runs pooled, with a stratified-bootstrap percentile interval.

    `samples` holds one sequence of scores per task (stratum); `statistic(x, axis=...)` reduces
    the pooled scores (`iqm` or `mean`). Tasks with one run are held fixed in every resample;
    with no task of two runs or more the interval is (NaN, NaN).
    """
    arrays = [np.asarray(s, dtype=float) for s in samples]
    arrays = [a[~np.isnan(a)] for a in arrays]
    arrays = [a for a in arrays if a.size]
    if not arrays:
        return Interval(float("nan"), float("nan"), float("nan"), 0, 0)
    pooled = np.concatenate(arrays)
    estimate = float(statistic(pooled, axis=-1))
    varying = [a for a in arrays if a.size >= 2]
    fixed = np.concatenate([a for a in arrays if a.size < 2] or [np.empty(0)])
    if not varying:
        return Interval(estimate, float("nan"), float("nan"), pooled.size, len(arrays))

    def pooled_statistic(*resampled: np.ndarray, axis: int = -1) -> np.ndarray | float:
        batch = resampled[0].shape[:-1]
        parts = [*resampled, np.broadcast_to(fixed, (*batch, fixed.size))]
        return statistic(np.concatenate(parts, axis=-1), axis=-1)

    low, high = _percentile_bootstrap(tuple(varying), pooled_statistic, n_resamples, confidence, seed)
    return Interval(estimate, low, high, pooled.size, len(arrays))


def _percentile_bootstrap(
    samples: tuple[np.ndarray, ...], statistic: Callable[..., Any], n_resamples: int, confidence: float, seed: int
) -> tuple[float, float]:
    """`scipy.stats.bootstrap`'s percentile interval of `statistic`, each sample resampled on its own."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant samples: SciPy warns, the interval is still exact
        result = stats.bootstrap(
            samples,
            statistic,
            n_resamples=n_resamples,
            vectorized=True,
            axis=-1,
            confidence_level=confidence,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


@lru_cache(maxsize=256)
def t_quantile(confidence: float, dof: int) -> float:
    """The two-sided Student-t quantile t(1 - α/2, dof) of a `confidence` interval."""
    return float(stats.t.ppf(0.5 + confidence / 2, df=dof))


def seed_interval(values: Sequence[float] | np.ndarray, confidence: float = CONFIDENCE) -> Interval:
    """Mean over the seeds of one cell with its Student-t interval, mean ± t(1 - α/2, n - 1) · s / sqrt(n)
    (none for one seed; zero width when every seed gave the same value). NaN values are left out."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0, 0)
    estimate = float(x.mean())
    if x.size < 2:
        return Interval(estimate, float("nan"), float("nan"), 1, 1)
    half = t_quantile(confidence, x.size - 1) * float(x.std(ddof=1)) / np.sqrt(x.size)
    return Interval(estimate, estimate - half, estimate + half, int(x.size), 1)


def clip(summary: pd.DataFrame, low: float, high: float) -> pd.DataFrame:
    """`summarise`'s intervals (`low`, `high`) clipped to what the quantity can be, [low, high]: a
    Student-t interval over a few seeds can run past it (the means are left as they are)."""
    out = summary.copy()
    for column in ("low", "high"):
        out[column] = pd.to_numeric(out[column], errors="coerce").clip(lower=low, upper=high)
    return out


def summarise(df: pd.DataFrame, by: list[str], value: str, **kw: Any) -> pd.DataFrame:
    """Per group of `by`: mean of `value` over its rows (seeds), its Student-t 95% interval and n
    (the rows with a value: an E that is n/a is not counted).

    Columns: `by`..., ``mean``, ``low``, ``high`` (NaN with a single seed), ``n``.
    """
    rows = []
    for key, group in df.groupby(by, dropna=False, sort=True):
        values = pd.to_numeric(group[value], errors="coerce").dropna().to_numpy(dtype=float)
        ci = seed_interval(values, **kw)
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(by, key)), "mean": ci.estimate, "low": ci.low, "high": ci.high, "n": ci.n_runs})
    return pd.DataFrame(rows, columns=[*by, "mean", "low", "high", "n"])


def geometric_mean(values: Sequence[float] | np.ndarray) -> float:
    """exp(mean log x) of `values` (NaN left out); 0 where one is 0, NaN where one is negative or none
    is given."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    if not x.size or (x < 0).any():
        return float("nan")
    return 0.0 if (x == 0).any() else float(np.exp(np.log(x).mean()))


def ratio_interval(
    numerator: Sequence[float], denominator: Sequence[float], confidence: float = CONFIDENCE
) -> Interval:
    """The ratio of the geometric means of two independent groups of runs (a speedup: fp32 times
    over int8 times), with the Welch t interval of the difference of their mean logs, exponentiated
    (Satterthwaite's degrees of freedom); NaN where a value is not positive, no interval where a
    group has fewer than 3 runs, zero width where both groups are constant."""
    a, b = (np.asarray(x, dtype=float) for x in (numerator, denominator))
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    n = int(min(a.size, b.size))
    if not n or (a <= 0).any() or (b <= 0).any():
        return Interval(float("nan"), float("nan"), float("nan"), n, 2)
    la, lb = np.log(a), np.log(b)
    difference = float(la.mean() - lb.mean())
    if n < 3:
        return Interval(float(np.exp(difference)), float("nan"), float("nan"), n, 2)
    va, vb = la.var(ddof=1) / la.size, lb.var(ddof=1) / lb.size
    if va + vb == 0:
        return Interval(float(np.exp(difference)), float(np.exp(difference)), float(np.exp(difference)), n, 2)
    dof = (va + vb) ** 2 / (va**2 / (la.size - 1) + vb**2 / (lb.size - 1))
    half = float(stats.t.ppf(0.5 + confidence / 2, df=dof)) * float(np.sqrt(va + vb))
    return Interval(float(np.exp(difference)), float(np.exp(difference - half)), float(np.exp(difference + half)), n, 2)


def probability_of_improvement(
    xs: Runs,
    ys: Runs,
    *,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = SEED,
) -> Interval:
    """rliable's probability of improvement of X over Y: per task, P(X > Y) + P(X = Y) / 2 over every
    pair of one run of X and one of Y (the Mann-Whitney U statistic over n m), averaged over the
    tasks (`xs[k]`, `ys[k]` are task k's runs), with the percentile interval of a stratified
    bootstrap that resamples each task's X and Y runs on their own; no interval where no task has
    two runs on both sides."""
    tasks = [(np.asarray(x, float), np.asarray(y, float)) for x, y in zip(xs, ys)]
    tasks = [(x[~np.isnan(x)], y[~np.isnan(y)]) for x, y in tasks]
    tasks = [(x, y) for x, y in tasks if x.size and y.size]
    if not tasks:
        return Interval(float("nan"), float("nan"), float("nan"), 0, 0)

    def improvement(x: np.ndarray, y: np.ndarray) -> np.ndarray:  # (..., n) against (..., m): shape (...)
        diff = x[..., :, None] - y[..., None, :]
        return ((diff > 0) + 0.5 * (diff == 0)).mean(axis=(-2, -1))

    estimate = float(np.mean([improvement(x, y) for x, y in tasks]))
    runs = sum(x.size + y.size for x, y in tasks)
    if not any(x.size >= 2 and y.size >= 2 for x, y in tasks):
        return Interval(estimate, float("nan"), float("nan"), runs, len(tasks))
    rng = np.random.default_rng(seed)
    total = np.zeros(n_resamples)
    for x, y in tasks:
        xr = x[rng.integers(0, x.size, (n_resamples, x.size))]
        yr = y[rng.integers(0, y.size, (n_resamples, y.size))]
        total += improvement(xr, yr)
    low, high = np.percentile(total / len(tasks), [50 * (1 - confidence), 50 * (1 + confidence)])
    return Interval(estimate, float(low), float(high), runs, len(tasks))


def _improvement(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(X > Y) + P(X = Y) / 2 over every pair of a task's runs: (..., n, T) against (..., m, T) -> (..., T)."""
    diff = x[..., :, None, :] - y[..., None, :, :]
    return ((diff > 0) + 0.5 * (diff == 0)).mean(axis=(-3, -2))


def seed_cluster_aggregate(
    first: Sequence[np.ndarray],
    second: Sequence[np.ndarray],
    *,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = SEED,
) -> tuple[Interval, Interval, Interval]:
    """The IQM of each side's pooled scores and the probability that a run of `first` beats one of
    `second` (per task, averaged over the tasks), with the percentile intervals of a bootstrap over
    seeds: `first[c]` and `second[c]` are cluster c's scores, seeds x tasks (one seed's training
    behind every task of its cluster), and a resample draws each cluster's seeds with replacement,
    taking each drawn seed's whole row. Tasks that share seeds are not independent, so resampling
    them one by one (`stratified_bootstrap`) gives intervals too narrow. The two sides are drawn
    apart: the probability compares every run of one side with every run of the other, and a seed
    drawn twice on both sides would weigh its own pairing; where the sides' seeds are positively
    correlated (QAT and PTQ of one training), this errs wide. No interval where no cluster has two
    seeds on both sides."""
    clusters = [(np.asarray(a, float), np.asarray(b, float)) for a, b in zip(first, second)]
    clusters = [(a, b) for a, b in clusters if a.ndim == b.ndim == 2 and a.size and b.size and a.shape[1] == b.shape[1]]
    if not clusters:
        nothing = Interval(float("nan"), float("nan"), float("nan"), 0, 0)
        return nothing, nothing, nothing

    def summary(pairs: list[tuple[np.ndarray, np.ndarray]]) -> list[np.ndarray]:  # (..., n, T) each
        one, two = (np.concatenate([p[k].reshape(*p[k].shape[:-2], -1) for p in pairs], axis=-1) for k in (0, 1))
        better = np.concatenate([_improvement(a, b) for a, b in pairs], axis=-1).mean(axis=-1)
        return [np.asarray(iqm(one, axis=-1)), np.asarray(iqm(two, axis=-1)), better]

    estimates = [float(v) for v in summary(clusters)]
    runs, tasks = sum(a.size + b.size for a, b in clusters), sum(a.shape[1] for a, _ in clusters)
    if not any(min(a.shape[0], b.shape[0]) >= 2 for a, b in clusters):
        return tuple(Interval(e, float("nan"), float("nan"), runs, tasks) for e in estimates)  # type: ignore[return-value]
    rng = np.random.default_rng(seed)

    def draw(side: np.ndarray) -> np.ndarray:  # n_resamples x seeds x tasks: whole seeds, with replacement
        return side[rng.integers(0, len(side), (n_resamples, len(side)))]

    resampled = summary([(draw(a), draw(b)) for a, b in clusters])
    cuts = [50 * (1 - confidence), 50 * (1 + confidence)]
    bounds = [np.percentile(values, cuts) for values in resampled]
    return tuple(Interval(e, float(lo), float(hi), runs, tasks) for e, (lo, hi) in zip(estimates, bounds))  # type: ignore[return-value]
