"""Simulated coverage of the intervals quarl prints (`quarl.collate.coverage`), on skewed and bimodal
data like its seeds': the ratio interval of ActorQ's speedups keeps its level at 3 and 5 runs a side
where the percentile bootstrap it replaced did not; the Student-t and stratified-bootstrap intervals
are stated with their simulated coverage (computed, never typed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from quarl.collate import coverage, stats


@pytest.mark.parametrize("kind", ["lognormal", "slow_seeds"])
@pytest.mark.parametrize("n", [3, 5])
def test_the_speedup_interval_covers_at_its_level_on_skewed_and_bimodal_times(kind: str, n: int):
    assert coverage.ratio_coverage(kind, n) >= 0.93


def test_the_percentile_bootstrap_of_a_ratio_of_means_it_replaced_does_not():
    """What ActorQ's speedups printed before: about 80% at n = 3 on lognormal times."""
    rng = np.random.default_rng(5)
    reps, resamples, n = 2000, 500, 3
    slow, fast = 2.0 * rng.lognormal(0, 0.5, (reps, n)), rng.lognormal(0, 0.5, (reps, n))
    pick = lambda x: np.take_along_axis(x[:, None, :], rng.integers(0, n, (reps, resamples, n)), 2).mean(-1)  # noqa: E731
    ratios = pick(slow) / pick(fast)
    low, high = np.percentile(ratios, [2.5, 97.5], axis=1)
    assert np.mean((low <= 2.0) & (2.0 <= high)) < 0.88


def test_the_speedup_interval_is_welchs_on_the_logs():
    """Acrobot's times: the ratio of geometric means, Welch's interval on the log times (SciPy's)."""
    fp32, int8 = [51.9, 64.8, 70.0], [24.8, 32.7, 29.8]
    ci = stats.ratio_interval(fp32, int8)
    welch = sps.ttest_ind(np.log(fp32), np.log(int8), equal_var=False).confidence_interval(0.95)
    assert ci.estimate == pytest.approx(sps.gmean(fp32) / sps.gmean(int8))
    assert (ci.low, ci.high) == pytest.approx((np.exp(welch.low), np.exp(welch.high)))
    assert (round(ci.low, 2), round(ci.high, 2)) == (1.52, 2.99)
    assert not stats.ratio_interval([1.0, 2.0], [1.0, 2.0]).has_ci  # fewer than 3 a side
    assert np.isnan(stats.ratio_interval([1.0, 0.0, 2.0], [1.0, 1.0, 1.0]).estimate)  # no log of 0
    same = stats.ratio_interval([4.0] * 3, [2.0] * 3)
    assert (same.low, same.estimate, same.high) == (2.0, 2.0, 2.0)


def test_the_seed_interval_keeps_its_level_on_normal_values_and_is_stated_elsewhere():
    assert coverage.t_coverage("lognormal", 5) >= 0.90
    assert coverage.t_coverage("solve_or_fail", 3) < 0.6  # 4 seeds in 5 solve: often no failure drawn
    note = coverage.seed_note()
    for kind in ("solve_or_fail", "lognormal"):
        for n in (3, 5):
            assert f"{coverage.t_coverage(kind, n):.2f} at n = {n}" in note


def test_the_stratified_bootstrap_is_stated_with_its_simulated_coverage():
    note = coverage.stratified_note()
    for n in (3, 5):
        for simulated in (coverage.stratified_coverage(n), coverage.improvement_coverage(n)):
            assert 0.5 < simulated <= 1.0
            assert f"{simulated:.2f} at n = {n}" in note
    assert coverage.ratio_note().count(" at n = ") == 4
    docs = (Path(__file__).resolve().parents[2] / "docs" / "collation.md").read_text()
    assert coverage.stratified_note()[1:] in " ".join(docs.split())  # the aggregate plots' intervals, stated there


def test_the_report_states_each_intervals_simulated_coverage():
    """The intro states the Student-t interval's, the ActorQ caption the ratio's, every aggregate the
    stratified bootstraps': the numbers of this module, as the committed report was built."""
    from tests.conftest import ROOT

    text = (ROOT / "docs/reproduction/README.md").read_text()
    assert coverage.seed_note() in text.split("## Summary", 1)[0]
    assert coverage.ratio_note() in text.split("## ActorQ", 1)[1]
    assert text.count("Aggregated over") == text.count(coverage.cluster_note())


def test_the_seed_cluster_bootstrap_is_stated_with_its_simulated_coverage():
    note = coverage.cluster_note()
    for n in (3, 5):
        for simulated in coverage.cluster_coverage(n):
            assert 0.5 < simulated <= 1.0
            assert f"{simulated:.2f} at n = {n}" in note


def test_widths_that_share_their_seeds_count_as_one_draw_of_those_seeds():
    """Four widths that are copies of one width's seeds carry no more information than that width:
    the seed-cluster bootstrap gives them the one width's intervals, while resampling the widths as
    independent tasks (rliable's stratified bootstrap) narrows them."""
    rng = np.random.default_rng(3)
    plain, better = rng.normal(0.7, 0.2, 4), rng.normal(0.8, 0.2, 4)  # 4 seeds: the IQM of 4 copies is theirs
    one = stats.seed_cluster_aggregate([plain[:, None]], [better[:, None]])
    four = stats.seed_cluster_aggregate([np.tile(plain[:, None], 4)], [np.tile(better[:, None], 4)])
    for single, copies in zip(one, four):
        assert (copies.low, copies.estimate, copies.high) == pytest.approx((single.low, single.estimate, single.high))
    assert four[0].n_tasks == 4 and one[0].n_tasks == 1
    independent = stats.stratified_bootstrap([plain] * 4, stats.iqm)
    assert independent.high - independent.low < 0.8 * (four[0].high - four[0].low)
    assert not stats.seed_cluster_aggregate([plain[:1, None]], [better[:1, None]])[2].has_ci  # one seed
