"""What collation concludes: means over seeds only, flags that travel, one name per budget, and
verdicts that state their power (checked against hand-worked numbers)."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from quarl import cli
from quarl.collate import collate, load, tables, verdicts
from quarl.errors import QuarlError
from quarl.store import listing, query
from quarl.store.records import make_record
from tests.collate.studies import stored
from tests.conftest import compose_cfg
from tests.records import record

NOT_LEARNED = "the fp32 policy did not learn: its reward 18.3 is no better than a random policy's (23.7 on CartPole-v1)"


def test_two_backends_of_one_policy_are_shown_apart_never_as_their_mean(tmp_path: Path):
    agreement = {"c": 0.945, "tflite": 0.946, "c_16x8": 0.997, "tflite_16x8": 0.997}
    records = [record("ppo", "cartpole", "fp32", reward=500.0, fp32=500.0)]
    records += [
        record("ppo", "cartpole", "ptq", 8, reward=500.0, fp32=500.0, config={"quant.backend": backend},
               action_agreement=0.99, backend_action_agreement=value)
        for backend, value in agreement.items()
    ]
    path = stored(tmp_path, records)
    study = load(path)
    table = tables.agreement_table(study, "ppo").set_index("method")
    assert {f"ptq (backend={b})" for b in agreement} == set(table.index)
    for backend, value in agreement.items():
        assert table.loc[f"ptq (backend={backend})", "backend agreement"] == pytest.approx(value)
    assert not np.isclose(table["backend agreement"], np.mean(list(agreement.values()))).any()  # never 0.971
    assert any("ptq records differ in quant.backend" in n for n in study.notes)
    assert not any("outside the config" in n for n in study.notes)


def test_an_unlearned_baseline_is_flagged_in_errors_tables_plots_and_quarl_results(tmp_path: Path, capsys, caplog):
    records = [
        record("dqn", "cartpole", "fp32", seed=s, reward=r, fp32=r, fp32_note=NOT_LEARNED if r < 25 else None)
        for s, r in ((0, 18.3), (1, 500.0))
    ]
    records += [record("dqn", "cartpole", "ptq", 8, seed=s, reward=r, fp32=f, fp32_note=NOT_LEARNED if f < 25 else None)
                for s, r, f in ((0, 16.2, 18.3), (1, 500.0, 500.0))]
    path = stored(tmp_path, records)
    out = tmp_path / "out"
    collate(path, out, formats=["png"])
    md = (out / "tables/errors_dqn.md").read_text()
    csv = pd.read_csv(out / "tables/errors_dqn.csv").set_index("env")
    assert csv.loc["cartpole", "fp32 flag"] == "† fp32 not learned in 1 of 2 seeds"
    assert "† the fp32 policy of at least one seed is no better than a random policy" in md  # the legend
    assert "cartpole †" in (out / "tables/e_by_bits_dqn.md").read_text()
    points = pd.read_csv(out / "sweet_spot/points.csv")
    assert set(points["fp32_flag"]) == {"† fp32 not learned in 1 of 2 seeds"}
    pub = pd.read_csv(out / "tables/published_vs_reproduced.csv")
    assert pub.loc[0, "fp32 flag"].startswith("†")
    capsys.readouterr()
    with caplog.at_level(logging.INFO, logger="quarl"):
        cli.main(["results", "--store", str(path), "algo=dqn", "seed=0"])
    assert "† not learned" in capsys.readouterr().out  # the flag in the table (stdout)
    assert "† fp32 not learned:" in caplog.text  # its legend, as a log line (stderr)


def test_the_default_budget_has_one_name_in_results_collate_and_the_stored_record(tmp_path: Path):
    old = [record("ppo", "cartpole", q, seed=0, steps=None, config={"algo.n_timesteps": 100000})
           for q in ("fp32", "ptq")]
    other = [record("ppo", "cartpole", q, seed=0, steps=8192, config={"algo.n_timesteps": 100000}, reward=90.0)
             for q in ("fp32", "ptq")]
    path = stored(tmp_path, old + other)
    for typed in ("100000", "null"):
        found = query.load(path, {"train.steps": typed})
        assert len(found) == 2 and set(found["reward_mean"]) == {100.0}, typed
        assert set(found["train.steps"].astype(int)) == {100000}  # shown by its effective value
    assert len(query.load(path, {"train.steps": "8192"})) == 2
    assert set(load(path).seeds["algo"]) == {"ppo (train.steps=100000)", "ppo (train.steps=8192)"}
    assert set(load(path, {"train.steps": "100000"}).seeds["reward"]) == {100.0}
    grid, _ = listing.status(path)
    assert set(grid.index.get_level_values("train.steps")) == {"100000", "8192"}  # never null
    cfg = compose_cfg("algo=ppo", "env=cartpole")
    rec = make_record(cfg, "done", "2026-01-01", tmp_path)
    assert cfg.train.steps is None and rec["config"]["train"]["steps"] == 100000  # stored as run, cfg untouched
    hub = compose_cfg("algo=ppo", "env=cartpole", "policy.source=hub", "policy.repo=sb3/ppo-CartPole-v1")
    assert make_record(hub, "done", "2026-01-01", tmp_path)["config"]["train"]["steps"] is None  # trained elsewhere


# ---------------------------------------------------------------- verdicts, against hand-worked numbers


def test_tost_agrees_exactly_when_the_90_percent_interval_lies_inside_the_margin():
    x = np.array([1.0, 2.0, 3.0, 2.0, 2.0])  # mean 2, sd sqrt(0.5), n 5
    half = sps.t.ppf(0.95, 4) * math.sqrt(0.5) / math.sqrt(5)  # 0.674: the 90% interval is [1.326, 2.674]
    assert verdicts.compare(x, 0.0, 2.68).kind == "agrees"  # 2.674 <= 2.68
    assert verdicts.compare(x, 0.0, 2.67).kind == "inconclusive"  # 2.674 > 2.67
    assert half == pytest.approx(0.6742, abs=1e-4)
    # two one-sided tests at 5%: both p-values below 0.05 exactly when the interval is inside
    p_low = sps.ttest_1samp(x, -2.68, alternative="greater").pvalue
    p_high = sps.ttest_1samp(x, 2.68, alternative="less").pvalue
    assert max(p_low, p_high) < 0.05


def test_disagrees_only_where_the_95_percent_interval_lies_beyond_the_margin():
    x = np.array([10.0, 11.0, 12.0])  # 95% interval 11 ± 4.303 / sqrt(3) = [8.52, 13.48]
    assert verdicts.compare(x, 0.0, 8.5).kind == "disagrees"
    assert verdicts.compare(x, 0.0, 8.6).kind == "inconclusive"


def test_inconclusive_states_the_per_seed_picture_and_the_seeds_a_decision_needs():
    seeds = [500, 133, 208, 497, 223]  # DQN CartPole int8 in the audit
    verdict = verdicts.compare(seeds, 500.0, 25.0)
    assert verdict.kind == "inconclusive"
    assert "3 of 5 seeds lie more than 25 below 500" in verdict.text
    assert verdict.seeds_needed is not None and verdict.seeds_needed > 5
    d, s, m = np.mean(seeds) - 500, np.std(seeds, ddof=1), 25.0
    n = verdict.seeds_needed  # the power reaches 0.8 there and not one seed earlier (noncentral t)
    for k, reaches in ((n, True), (n - 1, False)):
        crit = sps.t.ppf(0.975, k - 1)
        power = sps.nct.sf(crit, k - 1, (abs(d) - m) * math.sqrt(k) / s)
        assert (power >= 0.8) == reaches


def test_the_minimum_detectable_difference_matches_the_textbook_approximation():
    # for large n the noncentral t gives (z_{1-a/2} + z_power) * sd / sqrt(n)
    approx = (sps.norm.ppf(0.975) + sps.norm.ppf(0.8)) * 2.0 / math.sqrt(400)
    assert verdicts.detectable(2.0, 400) == pytest.approx(approx, rel=0.01)
    verdict = verdicts.paired([378.0, 374.0, 46.0], 25.0, ("QAT", "PTQ"))  # QAT - PTQ, DQN 8 bits
    assert verdict.kind == "underpowered" and "not detectable at n = 3" in verdict.text
    smallest = verdicts.detectable(float(np.std([378.0, 374.0, 46.0], ddof=1)), 3)  # about 1,170: past CartPole's 500
    assert smallest > 500
    bounded = verdicts.paired([378.0, 374.0, 46.0], 25.0, ("QAT", "PTQ"), largest=500.0)
    assert bounded.text.startswith("underpowered: no possible difference (none exceeds 500) is detectable at n = 3")
    assert verdicts.paired([378.0, 374.0, 46.0], 25.0, largest=2000.0).text.startswith(
        f"underpowered: differences below {smallest:.3g} are not detectable")


def test_holm_keeps_only_what_the_step_down_procedure_keeps():
    # m = 4: 0.01 <= 0.05/4; 0.012 <= 0.05/3; 0.03 > 0.05/2 stops, so 0.04 is not kept either
    assert verdicts.holm([0.04, 0.01, 0.03, 0.012]) == [False, True, False, True]
    assert verdicts.holm([]) == []
    assert verdicts.paired([5.0, 6.0, 7.0], 1.0, significant=False).kind == "underpowered"


@pytest.mark.parametrize("margin,power,field", [(-1.0, 0.8, "margin"), (5.0, 1.5, "power"), (5.0, 0.0, "power")])
def test_bad_verdict_settings_are_one_sentence(margin: float, power: float, field: str):
    with pytest.raises(QuarlError, match=field):
        verdicts.compare([1.0, 2.0], 0.0, margin, power=power)


def test_intervals_stay_inside_what_reward_and_e_can_be_and_the_verdicts_table_says_so(tmp_path: Path):
    """DQN CartPole int8 of the audit: seeds 500, 133, 208, 497, 223 against fp32 500. The t interval
    of the reward runs to 527 and E's to -5.4%; CartPole returns at most 500, so E >= 0 here."""
    rewards = [500.0, 133.0, 208.0, 497.0, 223.0]
    records = [record("dqn", "cartpole", "fp32", seed=s, reward=500.0, fp32=500.0) for s in range(5)]
    records += [record("dqn", "cartpole", "ptq", 8, seed=s, reward=r, fp32=500.0) for s, r in enumerate(rewards)]
    out = tmp_path / "out"
    collate(stored(tmp_path, records), out, formats=["png"])
    point = pd.read_csv(out / "sweet_spot/points.csv").set_index("bits").loc[8]
    low, high = sps.t.interval(0.95, 4, loc=np.mean(rewards), scale=sps.sem(rewards))
    assert high > 500 and point["reward_high"] == 500.0 and point["reward_low"] == pytest.approx(low)
    assert point["e_low"] == pytest.approx(0.0) and point["e_high"] == pytest.approx((500 - low) / 500)
    judged = pd.read_csv(out / "tables/verdicts.csv").set_index("quantity")
    assert judged.loc["int8", "high"] == 500.0 and judged.loc["int8", "interval"] == "clipped"
    assert judged.loc["E_int8 (%)", "low"] == pytest.approx(0.0)
    assert judged.loc["int8", "per seed"] == "500, 133, 208, 497, 223"
    assert judged.loc["int8", "verdict"].startswith("inconclusive within ±25 at n = 5: 3 of 5 seeds lie more than 25")
    assert int(judged.loc["int8", "seeds needed"]) > 5


def test_the_seeds_a_decision_needs_come_with_the_range_the_spread_allows():
    """DQN CartPole int8 over 5 seeds: about 11 seeds at the observed spread, but the spread itself
    is uncertain at n = 5: its 95% interval gives 6 to 76 (as a referee computed by hand)."""
    verdict = verdicts.compare([500.0, 133.3, 208.2, 496.5, 222.9], 500.0, 25.0)
    assert verdict.seeds_needed == 11
    assert "about 11 seeds would decide (power 0.8 at the observed mean and spread; 6 to 76 over the spread's " \
           "95% interval)" in verdict.text
    holm = verdicts.paired([5.0, 6.0, 7.0], 1.0, significant=False)
    assert "not after Holm's correction; without the correction, about" in holm.text  # an n, not silence
