"""`quarl collate`: plots and tables from a real sweep, numbers checked against the store, interval
code checked against an independent computation, bad input, the sweep callback, the notebook."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import matplotlib.image
import nbclient
import nbformat
import numpy as np
import pandas as pd
import pytest
import torch
from filelock import FileLock
from matplotlib.collections import PolyCollection
from omegaconf import OmegaConf
from scipy import stats as sps

from quarl import cli, policies
from quarl.collate import load, plots, published, stats, weights
from quarl.collate.callback import CollateCallback, sweep_filters
from quarl.collate.frame import select
from quarl.quantize import fake_quantize
from quarl.store import Store
from tests.conftest import ROOT, run_quarl

ALGOS, ENVS, BITS, SEEDS = ("a2c", "ppo"), ("cartpole", "mountaincar"), (2, 4, 8), (0, 1)
SWEEP = [
    "-m", f"algo={','.join(ALGOS)}", f"env={','.join(ENVS)}", "quant=ptq,fp16", f"quant.bits={','.join(map(str, BITS))}",
    f"seed={','.join(map(str, SEEDS))}", "train.steps=500", "algo.n_envs=4", "eval.episodes=2", "eval.n_envs=2",
]


# ---------------------------------------------------------------- the sweep, built once for all workers

@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2 algos x 2 envs x 3 bit widths (+ fp16, fp32) x 2 seeds sweep of the real app, shared by the
    xdist workers (the first builds it under a file lock, the others reuse it)."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "collate-sweep"  # this session's
    with FileLock(str(shared) + ".lock"):
        if not (shared / "done").exists():
            shutil.rmtree(shared, ignore_errors=True)
            shared.mkdir()
            done = run_quarl(shared, *SWEEP)
            (shared / "sweep.log").write_text(done.stdout + done.stderr)
            (shared / "done").touch()
    return shared


@pytest.fixture(scope="module")
def store(sweep: Path) -> Path:
    return sweep / "outputs/results.sqlite"


@pytest.fixture(scope="module")
def collated(sweep: Path, store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`quarl collate` on the sweep's store (no filters), into a fresh folder."""
    out = tmp_path_factory.mktemp("collate") / "out"
    assert cli.main(["collate", "--store", str(store), "--out", str(out)]) == 0
    return out


def query(store: Path, sql: str, *args: object) -> float | None:
    with sqlite3.connect(store) as con:
        return con.execute(sql, args).fetchone()[0]


# ---------------------------------------------------------------- outputs and their numbers

def test_collate_writes_plots_tables_and_aggregate(collated: Path):
    expected = [f"sweet_spot/{a}_{e}.{x}" for a in ALGOS for e in ENVS for x in ("png", "pdf")]
    expected += [f"sweet_spot/{e}_all-algos.png" for e in ENVS] + ["sweet_spot/points.csv"]
    expected += [f"tables/{t}_{a}.{x}" for t in ("errors", "e_by_bits") for a in ALGOS for x in ("md", "csv", "tex")]
    expected += [f"tables/published_vs_reproduced.{x}" for x in ("md", "csv", "tex")]
    expected += [f"aggregate/{n}" for n in ("aggregate.png", "aggregate.pdf", "aggregate.csv", "heatmap_E.png")]
    expected += ["weights/layers.csv", "weights/spread_vs_E.png", "weights/spread_vs_E.csv", "README.md"]
    missing = [p for p in expected if not (collated / p).is_file()]
    assert not missing, missing
    assert len(list((collated / "weights").glob("a2c_cartpole_seed*.png"))) == len(SEEDS)
    for png in collated.rglob("*.png"):
        height, width = matplotlib.image.imread(png).shape[:2]
        assert width >= 600 and height >= 300, png
    readme = (collated / "README.md").read_text()
    assert "Could not write" not in readme and "quarl collate --store" in readme


def test_error_table_numbers_equal_a_direct_computation_from_the_store(collated: Path, store: Path):
    for algo in ALGOS:
        table = pd.read_csv(collated / f"tables/errors_{algo}.csv").set_index("env")
        for env in ENVS:
            where = "status = 'done' AND algo = ? AND env = ?"
            fp32 = query(store, f"SELECT AVG(reward_mean) FROM runs WHERE {where} AND quant = 'fp32'", algo, env)
            fp16 = query(store, f"SELECT AVG(reward_mean) FROM runs WHERE {where} AND quant = 'fp16'", algo, env)
            e16 = query(store, f"SELECT 100 * AVG(rel_error) FROM runs WHERE {where} AND quant = 'fp16'", algo, env)
            int8 = query(store, f'SELECT AVG(reward_mean) FROM runs WHERE {where} AND quant = \'ptq\' AND "quant.bits" = 8', algo, env)
            e8 = query(store, f'SELECT 100 * AVG(rel_error) FROM runs WHERE {where} AND quant = \'ptq\' AND "quant.bits" = 8', algo, env)
            row = table.loc[env]
            assert row["fp32"] == pytest.approx(fp32) and row["fp16"] == pytest.approx(fp16)
            assert row["E_fp16 (%)"] == pytest.approx(e16, abs=1e-9) and row["E_int8 (%)"] == pytest.approx(e8, abs=1e-9)
            assert row["int8"] == pytest.approx(int8) and int(row["seeds"]) == len(SEEDS)
        mean = table.loc["mean"]
        assert mean["fp32"] == pytest.approx(table.loc[list(ENVS), "fp32"].mean())
        assert mean["E_int8 (%)"] == pytest.approx(table.loc[list(ENVS), "E_int8 (%)"].mean())
        # published beside ours: the paper's CartPole row, blank for an env the paper did not run
        assert table.loc["cartpole", "fp32 (paper)"] == 500 and table.loc["cartpole", "E_int8 (%, paper)"] == 0
        assert pd.isna(table.loc["mountaincar", "fp32 (paper)"])
        # the Markdown and LaTeX tables are the same frame
        md, tex = (collated / f"tables/errors_{algo}.md").read_text(), (collated / f"tables/errors_{algo}.tex").read_text()
        assert f"| {table.loc['cartpole', 'fp32']:.2f}" in md.replace("  ", " ") or f"{table.loc['cartpole', 'fp32']:.2f}" in md
        assert f"cartpole & {table.loc['cartpole', 'fp32']:.2f} & 500.00" in tex
        # bits x env table
        bits = pd.read_csv(collated / f"tables/e_by_bits_{algo}.csv").astype({"bits": str}).set_index("bits")
        assert list(bits.index) == [str(b) for b in BITS] + ["fp16"]
        for b in BITS:
            for env in ENVS:
                direct = query(store, 'SELECT 100 * AVG(rel_error) FROM runs WHERE algo = ? AND env = ? AND quant = \'ptq\' '
                                      'AND "quant.bits" = ?', algo, env, b)
                assert bits.loc[str(b), env] == pytest.approx(direct, abs=1e-9)
    pub = pd.read_csv(collated / "tables/published_vs_reproduced.csv")
    assert sorted(pub["algo"]) == sorted(ALGOS) and set(pub["env"]) == {"cartpole"}


def test_sweet_spot_points_and_aggregate_equal_the_store(collated: Path, store: Path):
    points = pd.read_csv(collated / "sweet_spot/points.csv")
    row = points[(points["algo"] == "ppo") & (points["env"] == "cartpole") & (points["method"] == "ptq") & (points["bits"] == 2)].iloc[0]
    with sqlite3.connect(store) as con:
        rewards = [r for (r,) in con.execute(
            "SELECT reward_mean FROM runs WHERE algo='ppo' AND env='cartpole' AND quant='ptq' AND \"quant.bits\"=2")]
        scores = pd.read_sql_query("SELECT algo, env, \"quant.bits\" AS bits, 1 - rel_error AS score FROM runs "
                                   "WHERE quant = 'ptq' AND status = 'done'", con)
    assert row["n"] == len(SEEDS) and row["reward_mean"] == pytest.approx(np.mean(rewards))
    assert row["reward_low"] <= row["reward_mean"] <= row["reward_high"]
    agg = pd.read_csv(collated / "aggregate/aggregate.csv")
    for b in BITS:
        s = scores[scores["bits"] == b]["score"].to_numpy()
        iqm = agg[(agg["method"] == "ptq") & (agg["bits"] == b) & (agg["statistic"] == "IQM")].iloc[0]
        mean = agg[(agg["method"] == "ptq") & (agg["bits"] == b) & (agg["statistic"] == "mean")].iloc[0]
        assert iqm["estimate"] == pytest.approx(sps.trim_mean(s, 0.25)) and mean["estimate"] == pytest.approx(s.mean())
        assert iqm["n_runs"] == len(ALGOS) * len(ENVS) * len(SEEDS) and iqm["n_tasks"] == len(ALGOS) * len(ENVS)
        assert iqm["low"] <= iqm["estimate"] <= iqm["high"]


def test_sweep_callback_wrote_the_same_collation_into_the_sweep_dir(sweep: Path, collated: Path):
    outs = list((sweep / "outputs/multirun").glob("*/*/collate"))
    assert len(outs) == 1, outs
    readme = (outs[0] / "README.md").read_text()
    assert "quarl collate --store" in readme and "algo=a2c,ppo" in readme
    for name in ("tables/errors_ppo.csv", "tables/e_by_bits_a2c.csv", "aggregate/aggregate.csv", "sweet_spot/points.csv"):
        assert (outs[0] / name).read_text() == (collated / name).read_text(), name


def test_weight_report_statistics_equal_a_direct_computation(collated: Path, store: Path):
    layers = pd.read_csv(collated / "weights/layers.csv")
    runs = Store(store).runs()
    row = runs[(runs["algo"] == "ppo") & (runs["env"] == "cartpole") & (runs["quant"] == "fp32") & (runs["seed"] == 0)].iloc[0]
    cfg = OmegaConf.create(json.loads(row["config"]))
    model = policies.cached(cfg, store.parent.parent / row["store.policies"]).load()
    w = model.policy.action_net.weight.detach()
    stat = layers[(layers["policy_key"] == row["policy_key"]) & (layers["layer"] == "action_net")].iloc[0]
    assert stat["min"] == pytest.approx(float(w.min()), rel=1e-6) and stat["max"] == pytest.approx(float(w.max()), rel=1e-6)
    assert stat["std"] == pytest.approx(float(w.double().std(unbiased=False)), rel=1e-6)
    q = fake_quantize(w.double(), 8, "affine")
    assert stat["zero_frac"] == pytest.approx(float(((q == 0) & (w != 0)).double().mean()))
    assert stat["clipped_frac"] == 0  # a min/max-calibrated affine grid clips nothing
    assert stat["step"] == pytest.approx(float((max(w.max(), 0) - min(w.min(), 0)) / 255), rel=1e-5)
    spread = pd.read_csv(collated / "weights/spread_vs_E.csv")
    e8 = runs[(runs["quant"] == "ptq") & (runs["quant.bits"] == 8)].set_index("policy_key")["rel_error"]
    assert len(spread) == len(ALGOS) * len(ENVS) * len(SEEDS)
    for _, p in spread.iterrows():
        assert p["E (%)"] == pytest.approx(100 * e8[p["policy_key"]], abs=1e-9)


def test_spread_vs_error_correlation_and_grid(store: Path):
    study = load(store)
    rep = weights.report(study, bits=2)
    corr = weights.correlation(rep.policies)
    d = rep.policies.dropna(subset=["E (%)"])
    if corr is None:  # every policy lost the same reward at 2 bits: nothing to correlate, and the plot says so
        assert "no fit" in weights.spread_figure(rep.policies, 2).axes[0].get_title()
    else:
        assert corr["pearson_r"] == pytest.approx(np.corrcoef(d["widest_range"], d["E (%)"])[0, 1])
        assert "Pearson r" in weights.spread_figure(rep.policies, 2).axes[0].get_title()
    w = torch.from_numpy(rep.weights[0].layers[next(iter(rep.weights[0].layers))])
    levels = weights.grid(w, 2, "affine")
    assert len(levels) <= 4 and set(np.unique(fake_quantize(w.double(), 2, "affine").numpy())) <= set(levels)


# ---------------------------------------------------------------- interval code vs independent computations

def by_hand_stratified(samples: list[np.ndarray], statistic, n: int, seed: int) -> tuple[float, float]:
    """rliable's stratified bootstrap written out: resample runs within each task, pool, percentile."""
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(n):
        pooled = np.concatenate([s[rng.integers(0, len(s), len(s))] for s in samples])
        values.append(statistic(pooled))
    return float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))


def test_iqm_is_the_mean_of_the_middle_half():
    x = np.array([9.0, 1, 7, 3, 100, 5, 2, 8])  # sorted: 1 2 3 5 7 8 9 100 -> middle half 3 5 7 8
    assert stats.iqm(x) == pytest.approx((3 + 5 + 7 + 8) / 4)


def test_stratified_bootstrap_matches_an_independent_computation():
    rng = np.random.default_rng(42)
    samples = [rng.normal(1.0, 0.3, 5), rng.normal(0.5, 0.1, 4), rng.normal(0.8, 0.5, 6), np.array([0.9])]
    for name, fn in stats.STATISTICS.items():
        ci = stats.stratified_bootstrap(samples, fn, n_resamples=20_000)
        lo, hi = by_hand_stratified(samples, lambda p: fn(p), 20_000, seed=7)
        width = hi - lo
        assert ci.estimate == pytest.approx(fn(np.concatenate(samples)))
        assert ci.low == pytest.approx(lo, abs=0.05 * width) and ci.high == pytest.approx(hi, abs=0.05 * width), name
        assert ci.n_runs == 16 and ci.n_tasks == 4
    again = stats.stratified_bootstrap(samples, stats.iqm, n_resamples=20_000)
    assert again == stats.stratified_bootstrap(samples, stats.iqm, n_resamples=20_000)  # fixed random state


def test_bootstrap_of_two_seeds_is_exact_and_one_seed_has_no_interval():
    # resampled means of {a, b}: a (1/4), (a+b)/2 (1/2), b (1/4) -> the 95% percentile interval is [a, b]
    ci = stats.seed_interval([10.0, 30.0])
    assert (ci.estimate, ci.low, ci.high, ci.n_runs) == (20.0, 10.0, 30.0, 2)
    one = stats.seed_interval([12.5])
    assert one.estimate == 12.5 and np.isnan(one.low) and np.isnan(one.high) and not one.has_ci
    none = stats.stratified_bootstrap([[1.0], [2.0], [4.0]], stats.mean)
    assert none.estimate == pytest.approx(7 / 3) and not none.has_ci and none.n_tasks == 3


# ---------------------------------------------------------------- bad input

def test_one_seed_gives_no_interval_and_the_plot_says_so(store: Path, tmp_path: Path):
    study = load(store, {"seed": 0, "algo": "ppo"})
    fig = plots.sweet_spot(study, "cartpole", ["ppo"])
    ax = fig.axes[0]
    assert "no confidence interval" in ax.get_title()
    assert not [c for c in ax.collections if isinstance(c, PolyCollection)]  # no band drawn
    assert any("single seed" in n for n in study.notes)
    agg = plots.aggregate_table(study)
    assert agg["low"].isna().all() and "no confidence interval" in plots.aggregate(agg)._suptitle.get_text()


def test_missing_fp32_baseline_gives_a_message_and_every_other_output(store: Path, tmp_path: Path, caplog):
    copy = tmp_path / "r.sqlite"
    shutil.copy(store, copy)
    with sqlite3.connect(copy) as con:  # ppo/cartpole: fp32 records gone; ppo/mountaincar: no baseline anywhere
        con.execute("DELETE FROM runs WHERE algo='ppo' AND quant='fp32'")
        con.execute("UPDATE runs SET fp32_reward = NULL, rel_error = NULL WHERE algo='ppo' AND env='mountaincar'")
    out = tmp_path / "out"
    with caplog.at_level(logging.WARNING):
        assert cli.main(["collate", "--store", str(copy), "--out", str(out), "algo=ppo"]) == 0
    assert "No fp32 record in the selection for ppo/cartpole seeds 0,1" in caplog.text
    assert "No fp32 baseline at all for ppo/mountaincar seeds 0,1" in caplog.text
    table = pd.read_csv(out / "tables/errors_ppo.csv").set_index("env")
    carried = query(copy, "SELECT AVG(fp32_reward) FROM runs WHERE algo='ppo' AND env='cartpole' AND quant='ptq'")
    assert table.loc["cartpole", "fp32"] == pytest.approx(carried)
    assert pd.isna(table.loc["mountaincar", "fp32"]) and pd.isna(table.loc["mountaincar", "E_int8 (%)"])
    assert pd.notna(table.loc["mountaincar", "int8"])
    for name in ("sweet_spot/ppo_cartpole.png", "sweet_spot/ppo_mountaincar.png", "aggregate/aggregate.png",
                 "aggregate/heatmap_E.png", "tables/e_by_bits_ppo.md"):
        assert (out / name).is_file(), name
    assert "No fp32 baseline at all" in (out / "README.md").read_text()


def test_empty_store_filters_matching_nothing_and_mistakes(store: Path, tmp_path: Path, caplog):
    empty = tmp_path / "empty.sqlite"
    Store(empty)
    with caplog.at_level(logging.WARNING):
        assert cli.main(["collate", "--store", str(empty), "--out", str(tmp_path / "a")]) == 0
        assert "holds no records yet" in caplog.text
        assert cli.main(["collate", "--store", str(store), "--out", str(tmp_path / "b"), "algo=sac"]) == 0
        assert "No records" in caplog.text and "match algo=sac" in caplog.text
    assert "match algo=sac" in (tmp_path / "b/README.md").read_text()
    assert not (tmp_path / "b/tables").exists()
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        assert cli.main(["collate", "--store", str(store), "--out", str(tmp_path / "c"), "quant.bitz=4"]) == 1
        assert "No column 'quant.bitz'" in caplog.text and "quant.bits" in caplog.text
        assert cli.main(["collate", "--store", str(tmp_path / "nope.sqlite")]) == 1
        assert "There is no results store" in caplog.text
        assert cli.main(["collate", "--store", str(store), "--bits", "1"]) == 1
        assert "--bits=1 is out of range" in caplog.text
    done = subprocess.run([sys.executable, "-m", "quarl.cli", "collate", "--store", str(empty), "--out", str(tmp_path / "d")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr and "holds no records yet" in done.stderr


def test_filters_match_as_text_and_lists(store: Path):
    runs = Store(store).runs()
    picked = select(runs, {"algo": "a2c,ppo", "quant.bits": "8.0", "env": "cartpole"})
    assert set(picked["algo"]) == {"a2c", "ppo"} and set(picked["quant.bits"]) == {8} and set(picked["env"]) == {"cartpole"}
    assert select(runs, {"eval.deterministic": "true"}).shape[0] == len(runs)


# ---------------------------------------------------------------- callback, published data, notebook

def test_sweep_filters_and_a_failing_callback_never_fails_the_sweep(tmp_path: Path, caplog):
    assert sweep_filters(["algo=dqn,ppo", "quant.bits=2,4", "quant=ptq,fp16", "seed=range(0,3)", "+sweep=x",
                          "env=atari/breakout", "train.steps=5000", "store.path=s.sqlite"], {"seed": "5"}) == {
        "algo": "dqn,ppo", "seed": "0,1,2", "env": "atari/breakout,breakout", "train.steps": "5000"}
    cfg = OmegaConf.create({"store": {"path": str(tmp_path / "missing.sqlite")},
                            "hydra": {"sweep": {"dir": str(tmp_path / "sweep")}, "overrides": {"task": []},
                                      "runtime": {"cwd": str(tmp_path)}}})
    cb = CollateCallback()
    cb.on_multirun_start(cfg)
    with caplog.at_level(logging.WARNING):
        cb.on_multirun_end(cfg)  # no store: a warning, no exception
    assert "Collation after the sweep failed" in caplog.text and "quarl collate" in caplog.text


def test_published_numbers_match_env_names_across_suites():
    assert published.bare_name("atari/breakout") == published.bare_name("BreakoutNoFrameskip-v4") == "breakout"
    assert published.bare_name("Walker2DBulletEnv-v0") == published.bare_name("bullet/walker2d") == "walker2d"
    assert published.lookup("dqn", "atari/breakout")["e_int8_pct"] == pytest.approx(63.55)
    assert published.lookup("ddpg", "mountaincar_continuous", "MountainCarContinuous-v0")["fp32"] == 92
    assert published.lookup("ppo", "acrobot", "Acrobot-v1") is None


def test_notebook_executes_against_the_sweep(store: Path, tmp_path: Path, monkeypatch):
    nb = nbformat.read(ROOT / "notebooks/results.ipynb", as_version=4)
    monkeypatch.setenv("QUARL_STORE", str(store))
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(ROOT / "notebooks")}})
    client.execute()
    outputs = [o for cell in nb.cells for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= len(ENVS) + 3  # sweet spots, aggregate, heat map, weights
    text = "".join(o.get("text", "") for o in outputs)
    assert f"{len(Store(store).runs())} records selected" in text
