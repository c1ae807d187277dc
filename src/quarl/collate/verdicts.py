"""Verdicts that state their power: what a handful of seeds can and cannot show.

Every verdict compares seeds' values with a reference (a published number, or 0 for a paired
difference) within a stated margin m (5 points of E, or 5% of the env's return scale for rewards):

- **agrees within ±m**: an equivalence test passes. TOST (Schuirmann, 1987) at level α: both
  one-sided t tests reject a difference beyond the margin, which is the same as the 1 - 2α Student-t
  interval of the mean lying inside reference ± m.
- **disagrees**: the 1 - α interval lies wholly outside reference ± m (the difference is larger than
  the margin, shown).
- **inconclusive** otherwise, with the seeds that would decide at the observed mean and spread:
  the smallest n whose power reaches `POWER` (0.8) for the claim the data lean to (equivalence when
  the observed difference is inside the margin, a difference beyond it when outside), from the
  noncentral t distribution (Colas, Sigaud and Oudeyer, 2018, "How many random seeds?"), and the
  per-seed picture ("3 of 5 seeds lie more than 25 below 500").

A paired comparison (QAT - PTQ, robust - plain, seed by seed) reads "higher" or "lower" where its
1 - α interval excludes 0 (in a family, only where Holm's step-down correction keeps the test
significant), "equivalent within ±m" where TOST passes, and otherwise "underpowered": the smallest
difference the test would detect with power 0.8 at this n and spread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats

from quarl.errors import QuarlError

ALPHA = 0.05
POWER = 0.8
MAX_SEEDS = 1000  # past this many seeds a claim is reported as out of reach
E_MARGIN = 5.0  # points of E (in %) within which a quantized policy counts as keeping its fp32 reward
SCALE_MARGIN = 0.05  # a reward's margin: this fraction of the env's return scale


def check_settings(margin: float, alpha: float = ALPHA, power: float = POWER) -> None:
    """Refuse a negative margin, or a level or power outside (0, 1), in one sentence."""
    if not (isinstance(margin, (int, float)) and math.isfinite(margin) and margin >= 0):
        raise QuarlError(f"The equivalence margin must be a number >= 0, not {margin!r}.")
    if not 0 < alpha < 1:
        raise QuarlError(f"The significance level alpha must lie in (0, 1), not {alpha!r}.")
    if not 0 < power < 1:
        raise QuarlError(f"The power must lie in (0, 1), not {power!r}.")


@dataclass(frozen=True)
class Verdict:
    """A verdict's kind ('agrees', 'disagrees', 'inconclusive', 'higher', 'lower', 'equivalent',
    'underpowered', 'no data'), the sentence that states it, and the seeds a decision needs (None
    where the data decide, or where no number of seeds would at the observed spread)."""

    kind: str
    text: str
    seeds_needed: int | None = None


def _clean(values: Sequence[float] | np.ndarray) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    return x[~np.isnan(x)]


def t_interval(x: np.ndarray, confidence: float) -> tuple[float, float]:
    """The Student-t interval of the mean of `x` at `confidence`."""
    half = float(stats.t.ppf(0.5 + confidence / 2, x.size - 1)) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return float(x.mean()) - half, float(x.mean()) + half


def equivalence_power(diff: float, sd: float, n: int, margin: float, alpha: float = ALPHA) -> float:
    """Power of TOST at level `alpha` with `n` seeds, when the true difference is `diff` and the
    seeds' standard deviation `sd` (the usual approximation P(lower rejects) + P(upper rejects) - 1)."""
    if n < 2 or margin <= abs(diff):
        return 0.0
    if sd <= 0:
        return 1.0
    df, se = n - 1, sd / math.sqrt(n)
    crit = float(stats.t.ppf(1 - alpha, df))
    lower = float(stats.nct.sf(crit, df, (diff + margin) / se))
    upper = float(stats.nct.cdf(-crit, df, (diff - margin) / se))
    return max(0.0, lower + upper - 1.0)


def difference_power(diff: float, sd: float, n: int, margin: float, alpha: float = ALPHA) -> float:
    """Power with `n` seeds of a 1 - `alpha` interval lying wholly beyond the margin, when the true
    difference is `diff` (|diff| > margin) and the seeds' standard deviation `sd`."""
    if n < 2 or abs(diff) <= margin:
        return 0.0
    if sd <= 0:
        return 1.0
    df = n - 1
    crit = float(stats.t.ppf(1 - alpha / 2, df))
    return float(stats.nct.sf(crit, df, (abs(diff) - margin) * math.sqrt(n) / sd))


def seeds_needed(diff: float, sd: float, margin: float, alpha: float = ALPHA, power: float = POWER) -> int | None:
    """The fewest seeds (2..MAX_SEEDS) that decide, with probability `power`, the claim the observed
    difference leans to: equivalence inside the margin, a difference beyond it outside; None where
    no number up to MAX_SEEDS does (the difference sits on the margin)."""
    check_settings(margin, alpha, power)
    test = equivalence_power if abs(diff) < margin else difference_power
    if abs(diff) == margin or test(diff, sd, MAX_SEEDS, margin, alpha) < power:
        return None
    low, high = 2, MAX_SEEDS  # power grows with n: bisect for the first n that reaches it
    while low < high:
        mid = (low + high) // 2
        if test(diff, sd, mid, margin, alpha) >= power:
            high = mid
        else:
            low = mid + 1
    return low


def detectable(sd: float, n: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest true difference a two-sided paired t test at `alpha` detects with probability
    `power` at `n` seeds and spread `sd` (the minimum detectable effect, by the noncentral t)."""
    if n < 2:
        return math.inf
    if sd <= 0:
        return 0.0
    df, se = n - 1, sd / math.sqrt(n)
    crit = float(stats.t.ppf(1 - alpha / 2, df))
    low, high = 0.0, 1.0
    while stats.nct.sf(crit, df, high) < power:
        high *= 2
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if stats.nct.sf(crit, df, mid) < power else (low, mid)
    return high * se


def _needed(x: np.ndarray, diff: float, margin: float, alpha: float, power: float) -> tuple[int | None, str]:
    """`seeds_needed` at the observed spread, and the sentence that states it with the range it takes
    over the spread's own 95% interval (chi-square, n - 1 degrees of freedom): with a handful of
    seeds the spread, and so the seeds a decision needs, is itself uncertain."""
    sd, df = float(x.std(ddof=1)), x.size - 1
    needed = seeds_needed(diff, sd, margin, alpha, power)
    if needed is None:
        return None, f"no number of seeds up to {MAX_SEEDS} decides at this spread"
    text = f"about {needed} seeds would decide (power {power:g} at the observed mean and spread"
    if sd > 0:
        ends = [
            seeds_needed(diff, sd * math.sqrt(df / stats.chi2.ppf(q, df)), margin, alpha, power) for q in (0.975, 0.025)
        ]
        shown = [str(e) if e is not None else f"more than {MAX_SEEDS}" for e in ends]
        text += f"; {shown[0]} to {shown[1]} over the spread's 95% interval" if shown[0] != shown[1] else ""
    return needed, text + ")"


def picture(values: np.ndarray, reference: float, margin: float, unit: str = "") -> str:
    """'3 of 5 seeds lie more than 25 below 500': the seeds outside reference ± margin, by side."""
    below = int((values < reference - margin).sum())
    above = int((values > reference + margin).sum())
    parts = []
    if below:
        parts.append(f"{below} of {values.size} seeds lie more than {margin:g}{unit} below {reference:g}")
    if above:
        parts.append(f"{above} of {values.size} seeds lie more than {margin:g}{unit} above {reference:g}")
    return "; ".join(parts) or f"every seed lies within {margin:g}{unit} of {reference:g}"


def compare(
    values: Sequence[float] | np.ndarray,
    reference: float,
    margin: float,
    unit: str = "",
    alpha: float = ALPHA,
    power: float = POWER,
) -> Verdict:
    """The verdict on seeds' `values` against `reference` within ±`margin` (module docstring)."""
    check_settings(margin, alpha, power)
    x = _clean(values)
    if x.size == 0:
        return Verdict("no data", "not run yet")
    band = f"±{margin:g}{unit}"
    if x.size == 1:
        return Verdict("inconclusive", "inconclusive: one seed, no interval to judge by (run at least 3 seeds)")
    low90, high90 = t_interval(x, 1 - 2 * alpha)
    if reference - margin <= low90 and high90 <= reference + margin:
        return Verdict("agrees", f"agrees within {band} (TOST, α = {alpha:g})")
    low, high = t_interval(x, 1 - alpha)
    if low > reference + margin or high < reference - margin:
        return Verdict("disagrees", f"disagrees: the {1 - alpha:.0%} interval lies beyond {band}")
    needed, decides = _needed(x, float(x.mean()) - reference, margin, alpha, power)
    return Verdict(
        "inconclusive",
        f"inconclusive within {band} at n = {x.size}: {picture(x, reference, margin, unit)}; {decides}",
        needed,
    )


def t_test_p(differences: Sequence[float] | np.ndarray) -> float:
    """Two-sided p-value of a one-sample t test of mean 0 (1 for fewer than 2 values; 0 or 1 where
    every value is the same: nonzero or zero)."""
    x = _clean(differences)
    if x.size < 2:
        return 1.0
    if float(x.std(ddof=1)) == 0.0:
        return 0.0 if float(x.mean()) != 0.0 else 1.0
    return float(stats.ttest_1samp(x, 0.0).pvalue)


def holm(p_values: Sequence[float], alpha: float = ALPHA) -> list[bool]:
    """Holm's step-down correction (Holm, 1979): which tests of a family stay significant at family-wise
    level `alpha` (sorted ascending, the k-th smallest p must be below alpha / (m - k); the first that
    is not stops the procedure)."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    keep = [False] * len(p_values)
    for rank, i in enumerate(order):
        if p_values[i] > alpha / (len(p_values) - rank):
            break
        keep[i] = True
    return keep


def paired(
    differences: Sequence[float] | np.ndarray,
    margin: float,
    names: tuple[str, str] = ("A", "B"),
    significant: bool | None = None,
    alpha: float = ALPHA,
    power: float = POWER,
    largest: float = math.inf,
) -> Verdict:
    """The verdict on paired `differences` (A - B, seed by seed): higher, lower, equivalent within
    ±`margin`, or underpowered. `significant` is a family's Holm decision for this test (None: the
    test stands alone, significant where its 1 - alpha interval excludes 0); `largest`: the largest
    |A - B| the quantity can take (a reward's range), past which no difference is called detectable."""
    check_settings(margin, alpha, power)
    x = _clean(differences)
    first, second = names
    if x.size < 2:
        return Verdict("no data", "too few paired seeds to tell" if x.size else "not run yet")
    low, high = t_interval(x, 1 - alpha)
    shown = significant if significant is not None else (low > 0 or high < 0)
    holm_note = " after Holm's correction" if significant is not None else ""
    if shown and float(x.mean()) > 0:
        return Verdict("higher", f"{first} higher (paired interval above 0{holm_note})")
    if shown and float(x.mean()) < 0:
        return Verdict("lower", f"{second} higher (paired interval below 0{holm_note})")
    if significant is False and (low > 0 or high < 0):
        needed, decides = _needed(x, float(x.mean()), margin, alpha, power)
        return Verdict(
            "underpowered",
            f"underpowered: the paired interval excludes 0, but not after Holm's correction; "
            f"without the correction, {decides}",
            needed,
        )
    low90, high90 = t_interval(x, 1 - 2 * alpha)
    if -margin <= low90 and high90 <= margin:
        return Verdict("equivalent", f"equivalent within ±{margin:g} (TOST, α = {alpha:g})")
    smallest = detectable(float(x.std(ddof=1)), int(x.size), alpha, power)
    needed, decides = _needed(x, float(x.mean()), margin, alpha, power)
    undetected = (
        f"no possible difference (none exceeds {largest:g}) is detectable at n = {x.size}"
        if smallest >= largest
        else f"differences below {smallest:.3g} are not detectable at n = {x.size}"
    )
    return Verdict("underpowered", f"underpowered: {undetected} (power {power:g}); {decides}", needed)
