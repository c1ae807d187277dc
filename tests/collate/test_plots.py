"""`quarl.collate.plots` and `quarl.collate.aggregate_plots`: sweet-spot points and the aggregate against
the store, one seed drawn without a band, legends and labels inside the figure, readable ticks."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection
from scipy import stats as sps

from quarl.collate import actorq_timing, load, plots, weight_distributions
from quarl.collate import aggregate_plots as agg_plots
from tests.collate.studies import BITS, SEEDS, activation_sweep, stored


def test_sweet_spot_points_and_aggregate_equal_the_store(collated: Path, store: Path):
    points = pd.read_csv(collated / "sweet_spot/points.csv")
    row = points[(points["algo"] == "ppo") & (points["env"] == "cartpole") & (points["method"] == "ptq")
                 & (points["bits"] == 2)].iloc[0]
    with sqlite3.connect(store) as con:
        rewards = [r for (r,) in con.execute(
            "SELECT reward_mean FROM runs WHERE algo='ppo' AND env='cartpole' AND quant='ptq' AND \"quant.bits\"=2")]
        scores = pd.read_sql_query("SELECT algo, env, \"quant.bits\" AS bits, 1 - rel_error AS score FROM runs "
                                   "WHERE quant = 'ptq' AND status = 'done'", con)
    assert row["n"] == len(SEEDS) and row["reward_mean"] == pytest.approx(np.mean(rewards))
    assert row["reward_low"] <= row["reward_mean"] <= row["reward_high"]
    agg = pd.read_csv(collated / "aggregate/aggregate.csv")
    for b in BITS:
        defined = scores[(scores["bits"] == b)].dropna(subset=["score"])  # an E that is n/a enters no aggregate
        s = defined["score"].to_numpy()
        iqm = agg[(agg["method"] == "ptq") & (agg["bits"] == b) & (agg["statistic"] == "IQM")].iloc[0]
        mean = agg[(agg["method"] == "ptq") & (agg["bits"] == b) & (agg["statistic"] == "mean")].iloc[0]
        assert iqm["estimate"] == pytest.approx(sps.trim_mean(s, 0.25)) and mean["estimate"] == pytest.approx(s.mean())
        assert iqm["n_runs"] == len(s) and iqm["n_tasks"] == len(defined.groupby(["algo", "env"]))
        assert iqm["low"] <= iqm["estimate"] <= iqm["high"]


def test_one_seed_gives_no_interval_and_the_plot_says_so(store: Path, tmp_path: Path):
    study = load(store, {"seed": 0, "algo": "ppo"})
    fig = plots.sweet_spot(study, "cartpole", ["ppo"])
    ax = fig.axes[0]
    assert "no confidence interval" in ax.get_title()
    assert not [c for c in ax.collections if isinstance(c, PolyCollection)]  # no band drawn
    assert any("single seed" in n for n in study.notes)
    agg = agg_plots.aggregate_table(study)
    assert agg["low"].isna().all() and "no confidence interval" in agg_plots.aggregate(agg)._suptitle.get_text()


def _inside(fig, artist) -> bool:
    box, width, height = artist.get_window_extent(), fig.bbox.width, fig.bbox.height
    return box.x0 >= -1 and box.x1 <= width + 1 and box.y0 >= -1 and box.y1 <= height + 1


def test_legends_titles_and_heat_map_labels_are_never_cut_off_or_overlapping(tmp_path: Path):
    study = load(stored(tmp_path, activation_sweep()))
    assert len(study.integer_methods()) == 9
    figures = {"sweet_spot": plots.sweet_spot(study, "cartpole", ["ppo"]),
               "agreement": plots.agreement(study, "cartpole", "ppo"),
               "aggregate": agg_plots.aggregate(agg_plots.aggregate_table(study, n_resamples=200), study.quantizers())}
    for name, fig in figures.items():
        fig.canvas.draw()
        assert fig.legends and all(_inside(fig, legend) for legend in fig.legends), name
        texts = [fig._suptitle] if fig._suptitle is not None else [fig.axes[0].title]
        assert all(_inside(fig, t) for t in texts), name
        labels = [t.get_text() for t in fig.legends[0].get_texts()]
        assert any(label.startswith("ptq (act_bits=32, input_bits=4)") for label in labels), name
    heat = agg_plots.heatmap(study)
    heat.canvas.draw()
    ticks = [t for t in heat.axes[0].get_xticklabels() if t.get_text()]
    boxes = [t.get_window_extent() for t in ticks]
    assert len(boxes) == 9 * 2 + 2 and all(_inside(heat, t) for t in ticks)  # + DQN's 2 and 6 bits
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def test_plots_stay_readable(tmp_path: Path):
    """Bit ticks evenly spaced (4..8 no longer run together), heat-map labels wrapped, the weight
    grid thinned where its ticks would merge, the ActorQ legend named as the log, beside the bars."""
    scale = plots.bit_scale([2, 3, 4, 5, 6, 7, 8, 16, 32])
    assert np.allclose(np.diff([scale[b] for b in sorted(scale)]), 1.0)
    assert agg_plots._wrap("ptq (scheme=quarl_code) 4") == "ptq\nscheme=\nquarl_code\n4 bits"
    levels = np.linspace(-1, 1, 256)
    drawn, every = weight_distributions._drawn_levels(levels, ax_width_px=320, span=2.2)
    assert every > 1 and len(drawn) < 256 and np.median(np.diff(drawn)) / 2.2 * 320 >= weight_distributions.MIN_TICK_PX
    assert weight_distributions._drawn_levels(levels[::64], 320, 2.2)[1] == 1  # a 2-bit grid: every level
    fig = actorq_timing.breakdown_figure(pd.DataFrame([{"algo": "dqn", "env": "acrobot", "network": "default",
                                                 "update_period": 100, "precision": p, "training": "dqn",
                                                 **{f"{n} (ms/step)": 1.0 for n in actorq_timing.PART_NAMES.values()}}
                                                for p in actorq_timing.ORDER]), "dqn", "acrobot")
    legend = fig.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == ["send", "load", "deserialize", "pull", "env", "inference"]
    fig.canvas.draw()
    box, bars = legend.get_window_extent(), fig.axes[0].get_window_extent()
    assert box.x0 >= bars.x1  # beside the bars, not over them


def test_the_actorq_breakdown_draws_each_training_of_one_network_apart():
    """The GPU script's store: one network and update period, trained three ways (samples per insert
    8, 128 and the default): a panel each (one bar per precision and panel, never pooled)."""
    rows = [{"algo": "dqn", "env": "cartpole", "network": "2048x2048x2048", "update_period": 100, "precision": p,
             "training": f"dqn (actorq.samples_per_insert={spi})",
             **{f"{n} (ms/step)": 1.0 + i for n in actorq_timing.PART_NAMES.values()}}
            for i, spi in enumerate((8, 128, "null")) for p in ("fp32", "int8")]
    fig = actorq_timing.breakdown_figure(pd.DataFrame(rows), "dqn", "cartpole")
    assert len(fig.axes) == 3 and all(len(ax.patches) == 2 * len(actorq_timing.PARTS) for ax in fig.axes)
    assert "samples_per_insert=128" in fig.axes[0].get_title()


def test_a_weak_fp32_baseline_is_marked_in_the_aggregate_and_the_heat_map(tmp_path: Path):
    """DQN CartPole's fp32 did not learn in 2 of 3 seeds: its row of the heat map, the aggregate's
    table and its legend carry the mark; A2C's sound baseline carries none."""
    from tests.records import record

    weak = {"env.return_scale": 500.0, "env.random_return": 23.7}
    records = []
    for seed, fp32 in enumerate((20.0, 22.0, 500.0)):
        records += [record("dqn", "cartpole", "fp32", seed=seed, reward=fp32, fp32=fp32, config=weak),
                    record("dqn", "cartpole", "ptq", 8, seed, reward=fp32 * 0.9, fp32=fp32, config=weak),
                    record("a2c", "cartpole", "fp32", seed=seed, reward=500.0, fp32=500.0, config=weak),
                    record("a2c", "cartpole", "ptq", 8, seed, reward=490.0, fp32=500.0, config=weak)]
    study = load(stored(tmp_path, records))
    assert study.flag("dqn", "cartpole").startswith("† fp32 not learned in 2 of 3 seeds")
    heat = agg_plots.heatmap(study)
    rows = [t.get_text() for t in heat.axes[0].get_yticklabels()]
    assert sorted(rows) == ["A2C / cartpole", "DQN / cartpole †"]
    table = agg_plots.aggregate_table(study, n_resamples=100)
    assert set(table["weak_fp32"]) == {"† in 1 task"}
    fig = agg_plots.aggregate(table, study.quantizers())
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("weak fp32: † in 1 task" in label for label in labels), labels


def test_a_full_store_draws_one_all_algorithms_figure_per_method_with_short_names(tmp_path: Path):
    """Two schemes x two algorithms on one env: one all-algorithms figure per scheme, each with a
    line per algorithm and a one-quantizer title, never one crowded figure; file names stay short."""
    from quarl.collate import collate
    from quarl.collate.trainings import MAX_STEM
    from tests.records import ptq_study

    out = tmp_path / "coll"
    collate(stored(tmp_path, ptq_study(envs=("cartpole",), schemes=("affine", "quarl_code"))), out, formats=["png"])
    figures = sorted(p.name for p in (out / "sweet_spot").glob("cartpole_all-algos*.png"))
    assert figures == ["cartpole_all-algos_ptq-scheme-affine.png", "cartpole_all-algos_ptq-scheme-quarl_code.png"]
    study = load(tmp_path / "r.sqlite")
    fig = plots.sweet_spot(study, "cartpole", ["dqn", "ppo"], ["ptq (scheme=quarl_code)"])
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert len([label for label in labels if "ptq" in label.lower() or label in ("DQN", "PPO")]) <= 2, labels
    assert fig.axes[0].get_title().count("\n") <= 4
    assert all(len(p.stem) <= MAX_STEM for p in out.rglob("*.*"))
