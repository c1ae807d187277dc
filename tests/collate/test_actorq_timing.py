"""`quarl.collate.actorq_timing`: time to reward, censored where a run never reached it, per ActorQ
setting (network, actors) rather than pooled as seeds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import gmean

from quarl.collate import actorq_timing, collate, load
from quarl.store.sqlite import Store
from tests.collate.studies import stored
from tests.records import record


def _actorq_record(bits: int, seed: int, reach_at: float | None, end: float = 100.0, **run: float) -> dict:
    """An ActorQ DQN Acrobot record whose training return jumps from -300 to -50 at `reach_at` seconds
    (None: never; the paper's target there is -107.45); `run`: more of its run fields."""
    times = np.linspace(1, end, 60)
    returns = [-50.0 if reach_at is not None and t >= reach_at else -300.0 for t in times]
    rec = record("dqn", "acrobot", "actorq", seed=seed, reward=-60.0, fp32=None,
                 config={"quant.actor_bits": bits, "actorq.update_period": 100},
                 run={"train_time_s": end, **run}, actor_action_agreement=0.95 if bits == 8 else None)
    rec["curve"] = [{"step": int(10 * t), "reward": r, "length": 10, "wall_s": float(t), "actor": 0}
                    for t, r in zip(times, returns)]
    return rec


def test_actorq_time_to_reward_is_censored_not_averaged_over_survivors(tmp_path: Path):
    fp32 = [_actorq_record(32, s, reach_at=t) for s, t in zip((0, 1, 2), (40.0, 50.0, 60.0))]
    int8 = [_actorq_record(8, s, reach_at=t) for s, t in zip((0, 1, 2), (20.0, None, 25.0))]
    study = load(stored(tmp_path, fp32 + int8))
    ttr = actorq_timing.time_to_reward(study, Store(study.store).curves()).set_index("precision")
    assert not ttr.loc["fp32", "censored"] and ttr.loc["int8", "censored"] and ttr.loc["int8", "reached"] == "2/3"
    def reached(rec: dict) -> float:  # the first time the 10-episode mean return is at the paper's -107.45
        c = pd.DataFrame(rec["curve"])
        return float(c["wall_s"][c["reward"].rolling(10, min_periods=1).mean() >= -107.45].iloc[0])

    assert ttr.loc["int8", "time_s"] == pytest.approx(
        gmean([reached(int8[0]), 100.0, reached(int8[2])]))  # missed: run time; seeds' geometric mean
    assert ttr.loc["fp32", "time_s"] == pytest.approx(gmean([reached(r) for r in fp32]))
    assert ttr.loc["int8", "speedup_bound"] == "<="  # int8's time is a lower bound: the speedup an upper one
    assert ttr.loc["int8", "speedup_vs_fp32"] == pytest.approx(ttr.loc["fp32", "time_s"] / ttr.loc["int8", "time_s"])
    assert ttr.loc["int8", "actor_agreement"] == pytest.approx(0.95)
    shown = actorq_timing.ttr_display(ttr.reset_index()).set_index("precision")
    assert shown.loc["int8", "time_s"].startswith("≥ ") and shown.loc["int8", "speedup_vs_fp32"].startswith("≤ ")
    assert not shown.loc["fp32", "time_s"].startswith("≥")
    out = tmp_path / "out"
    collate(study.store, out, formats=["png"])
    assert ("≥ " in (out / "actorq/time_to_reward.md").read_text()
            and "Censored" in (out / "actorq/time_to_reward.md").read_text())


def test_a_target_reached_in_the_first_episodes_gives_no_ratio(tmp_path: Path):
    """int8's seeds return -50 from their first episode, as their first experience arrives: a time of
    0 s, which no speedup divides (it was shown as "inf"); the table says "–"."""
    fp32 = [_actorq_record(32, s, reach_at=30.0) for s in (0, 1)]
    int8 = [_actorq_record(8, s, reach_at=0.0, first_experience_s=1.0) for s in (0, 1)]
    study = load(stored(tmp_path, fp32 + int8))
    with np.errstate(all="raise"):  # no division by zero on the way
        ttr = actorq_timing.time_to_reward(study, Store(study.store).curves()).set_index("precision")
    assert ttr.loc["int8", "time_s"] == 0.0 and ttr.loc["int8", "reached"] == "2/2"
    assert np.isnan(ttr.loc["int8", "speedup_vs_fp32"]) and ttr.loc["int8", "speedup_bound"] == ""
    assert actorq_timing.ttr_display(ttr.reset_index()).set_index("precision").loc["int8", "speedup_vs_fp32"] == "–"


def test_actorq_runs_with_other_networks_are_not_pooled_as_seeds(tmp_path: Path):
    """Two sweeps of one task with different actor networks: two settings, each with its own fp32
    baseline and speedup, never one setting with twice the seeds."""
    records = []
    for widths, fp32_at, int8_at in (([2048, 2048], 60.0, 30.0), ([64, 64], 40.0, 40.0)):
        for bits, at in ((32, fp32_at), (8, int8_at)):
            rec = _actorq_record(bits, 0, reach_at=at)
            rec["run"]["cell_key"] = f"{rec['run']['cell_key']}-{widths[0]}"
            rec["config"]["algo"]["hyperparams"] = {"policy_kwargs": {"net_arch": widths}}
            records.append(rec)
    study = load(stored(tmp_path, records))
    ttr = actorq_timing.time_to_reward(study, Store(study.store).curves()).set_index(["network", "precision"])
    assert len(ttr) == 4 and (ttr["seeds"] == 1).all()
    assert ttr.loc[("2048x2048", "int8"), "speedup_vs_fp32"] > 1.5
    assert ttr.loc[("64x64", "int8"), "speedup_vs_fp32"] == pytest.approx(1.0)


def test_actorq_runs_of_other_trainings_are_not_pooled_as_seeds(tmp_path: Path):
    """Two ActorQ sweeps of one task and network, one with 4 actors and one with 8: two settings,
    each with its own fp32 baseline and speedup, never one with twice the seeds."""
    records = []
    for actors, fp32_at, int8_at in ((4, 60.0, 30.0), (8, 40.0, 40.0)):
        for bits, at in ((32, fp32_at), (8, int8_at)):
            rec = _actorq_record(bits, 0, reach_at=at)
            rec["run"]["cell_key"] = f"{rec['run']['cell_key']}-{actors}"
            rec["config"]["actorq"]["actors"] = actors
            rec["config"]["actorq"]["log_interval_s"] = actors  # watching a run does not make it another training
            records.append(rec)
    ttr = actorq_timing.time_to_reward(load(stored(tmp_path, records)), Store(tmp_path / "r.sqlite").curves())
    ttr = ttr.set_index(["training", "precision"])
    assert len(ttr) == 4 and (ttr["seeds"] == 1).all()
    assert ttr.loc[("dqn (actorq.actors=4)", "int8"), "speedup_vs_fp32"] == pytest.approx(2.0, rel=0.2)
    assert ttr.loc[("dqn (actorq.actors=8)", "int8"), "speedup_vs_fp32"] == pytest.approx(1.0)


def test_runs_of_one_training_on_two_days_stay_apart_and_figure(tmp_path: Path):
    """A second machine's run of the same setting, on another day: its own rows (`batch`), each with
    its own fp32 baseline, and the breakdown figure draws a panel per day (it failed on duplicate
    precisions: "cannot reindex on an axis with duplicate labels")."""
    records = []
    for day, fp32_at, int8_at in (("2026-11-27", 60.0, 30.0), ("2026-11-28", 40.0, 40.0)):
        for bits, at in ((32, fp32_at), (8, int8_at)):
            rec = _actorq_record(bits, 0, reach_at=at)
            rec["run"]["cell_key"] = f"{rec['run']['cell_key']}-{day}"
            rec["run"]["started_at"] = f"{day}T10:00:00+00:00"
            rec["actors"] = [{"actor": 0, "steps": 100, "steps_per_s": 10.0, "wall_s": 10.0, "inference_s": 1.0}]
            records.append(rec)
    study = load(stored(tmp_path, records))
    ttr = actorq_timing.time_to_reward(study, Store(study.store).curves()).set_index(["batch", "precision"])
    assert len(ttr) == 4 and (ttr["seeds"] == 1).all()
    assert ttr.loc[("2026-11-27", "int8"), "speedup_vs_fp32"] == pytest.approx(2.0, rel=0.2)
    assert ttr.loc[("2026-11-28", "int8"), "speedup_vs_fp32"] == pytest.approx(1.0)
    table = actorq_timing.breakdown(study, Store(study.store).actors())
    assert len(actorq_timing.breakdown_figure(table, "dqn", "acrobot").axes) >= 2


def test_format_actors_are_never_fp32_seeds(tmp_path: Path):
    """mxfp4 actors run in fp32 and are recorded at actor_bits=32: without `formats` they are left out
    (fp32 keeps its own 3 seeds), with it they are their own precision, timed against fp32."""
    fp32 = [_actorq_record(32, s, reach_at=40.0) for s in (0, 1, 2)]
    mxfp4 = [_actorq_record(32, s, reach_at=80.0) for s in (0, 1, 2)]
    for rec in mxfp4:
        rec["config"]["quant"]["actor_format"] = "mxfp4"
        rec["run"]["cell_key"] += "-mxfp4"
    study = load(stored(tmp_path, fp32 + mxfp4))
    curves = Store(study.store).curves()
    paper = actorq_timing.time_to_reward(study, curves).set_index("precision")
    assert list(paper.index) == ["fp32"] and paper.loc["fp32", "seeds"] == 3
    both = actorq_timing.time_to_reward(study, curves, formats=True).set_index("precision")
    assert set(both.index) == {"fp32", "mxfp4"} and both.loc["mxfp4", "seeds"] == 3
    ratio = both.loc["fp32", "time_s"] / both.loc["mxfp4", "time_s"]
    assert both.loc["mxfp4", "speedup_vs_fp32"] == pytest.approx(ratio)
    assert both.loc["mxfp4", "speedup_vs_fp32"] < 1  # the format's seeds reached the target later
