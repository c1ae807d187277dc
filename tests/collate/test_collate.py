"""`quarl collate`: plots and tables from a real sweep, numbers checked against the store, interval
code checked against an independent computation, bad input, the sweep callback, the notebook."""

from __future__ import annotations

import dataclasses
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

from quarl import cli
from quarl.collate import aggregate_plots as agg_plots
from quarl.collate import collate, load, plots, published, stats, tables, weight_distributions
from quarl.collate.callback import CollateCallback
from quarl.collate.frame import Notes, select
from quarl.errors import QuarlError
from quarl.quantize.weights import fake_quantize
from quarl.store.sqlite import Store
from quarl.train import cache as policies
from tests.conftest import ROOT, run_quarl

ALGOS, ENVS, BITS, SEEDS = ("a2c", "ppo"), ("cartpole", "mountaincar"), (2, 4, 8), (0, 1)
SWEEP = [
    "-m", f"algo={','.join(ALGOS)}", f"env={','.join(ENVS)}", "quant=ptq,fp16",
    f"quant.bits={','.join(map(str, BITS))}", f"seed={','.join(map(str, SEEDS))}", "train.steps=500", "algo.n_envs=4",
    "eval.episodes=2", "eval.n_envs=2",
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
            int8 = query(store, f'SELECT AVG(reward_mean) FROM runs WHERE {where} AND quant = \'ptq\' '
                                'AND "quant.bits" = 8', algo, env)
            e8 = query(store, f'SELECT 100 * AVG(rel_error) FROM runs WHERE {where} AND quant = \'ptq\' '
                              'AND "quant.bits" = 8', algo, env)
            row = table.loc[env]
            assert row["fp32"] == pytest.approx(fp32) and row["fp16"] == pytest.approx(fp16)
            assert (row["E_fp16 (%)"] == pytest.approx(e16, abs=1e-9)
                    and row["E_int8 (%)"] == pytest.approx(e8, abs=1e-9))
            assert row["int8"] == pytest.approx(int8) and int(row["seeds"]) == len(SEEDS)
        mean = table.loc["mean"]
        assert pd.isna(mean["fp32"]) and pd.isna(mean["int8"])  # rewards of different envs are not averaged
        assert mean["E_int8 (%)"] == pytest.approx(table.loc[list(ENVS), "E_int8 (%)"].mean())
        # published beside ours: the paper's CartPole row, blank for an env the paper did not run
        assert table.loc["cartpole", "fp32 (paper)"] == 500 and table.loc["cartpole", "E_int8 (%, paper)"] == 0
        assert pd.isna(table.loc["mountaincar", "fp32 (paper)"])
        # the Markdown and LaTeX tables are the same frame
        md, tex = ((collated / f"tables/errors_{algo}.md").read_text(),
                   (collated / f"tables/errors_{algo}.tex").read_text())
        assert (f"| {table.loc['cartpole', 'fp32']:.2f}" in md.replace("  ", " ")
                or f"{table.loc['cartpole', 'fp32']:.2f}" in md)
        assert f"cartpole & {table.loc['cartpole', 'fp32']:.2f} & 500.00" in tex
        assert "affine, per_tensor, bias fp32" in md and "affine, per\\_tensor, bias fp32" in tex
        # bits x env table
        bits = pd.read_csv(collated / f"tables/e_by_bits_{algo}.csv").astype({"bits": str}).set_index("bits")
        assert list(bits.index) == [str(b) for b in BITS] + ["fp16"]
        for b in BITS:
            for env in ENVS:
                direct = query(store, 'SELECT 100 * AVG(rel_error) FROM runs WHERE algo = ? AND env = ? '
                                      'AND quant = \'ptq\' AND "quant.bits" = ?', algo, env, b)
                assert bits.loc[str(b), env] == pytest.approx(direct, abs=1e-9)
    pub = pd.read_csv(collated / "tables/published_vs_reproduced.csv")
    assert sorted(pub["algo"]) == sorted(ALGOS) and set(pub["env"]) == {"cartpole"}


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


def test_sweep_callback_wrote_the_same_collation_into_the_sweep_dir(sweep: Path, collated: Path):
    outs = list((sweep / "outputs/multirun").glob("*/*/collate"))
    assert len(outs) == 1, outs
    readme = (outs[0] / "README.md").read_text()
    assert "quarl collate --store" in readme and f"--sweep {outs[0].parent}" in readme
    for name in ("tables/errors_ppo.csv", "tables/e_by_bits_a2c.csv", "aggregate/aggregate.csv",
                 "sweet_spot/points.csv"):
        assert (outs[0] / name).read_text() == (collated / name).read_text(), name


def test_weight_report_statistics_equal_a_direct_computation(collated: Path, store: Path):
    layers = pd.read_csv(collated / "weights/layers.csv")
    runs = Store(store).runs()
    row = runs[(runs["algo"] == "ppo") & (runs["env"] == "cartpole") & (runs["quant"] == "fp32")
               & (runs["seed"] == 0)].iloc[0]
    cfg = OmegaConf.create(json.loads(row["config"]))
    model = policies.cached(cfg, store.parent.parent / row["store.policies"]).load()
    w = model.policy.action_net.weight.detach()
    stat = layers[(layers["policy_key"] == row["policy_key"]) & (layers["layer"] == "action_net")].iloc[0]
    assert (stat["min"] == pytest.approx(float(w.min()), rel=1e-6)
            and stat["max"] == pytest.approx(float(w.max()), rel=1e-6))
    assert stat["std"] == pytest.approx(float(w.double().std(unbiased=False)), rel=1e-6)
    q = fake_quantize(w.double(), 8, "affine")
    assert stat["zero_frac"] == pytest.approx(float(((q == 0) & (w != 0)).double().mean()))
    assert stat["clipped_frac"] == 0  # a min/max-calibrated affine grid clips nothing
    assert stat["step"] == pytest.approx(float((max(w.max(), 0) - min(w.min(), 0)) / 255), rel=1e-5)
    spread = pd.read_csv(collated / "weights/spread_vs_E.csv")
    e8 = runs[(runs["quant"] == "ptq") & (runs["quant.bits"] == 8)].set_index("policy_key")["rel_error"]
    assert len(spread) == len(ALGOS) * len(ENVS) * len(SEEDS)
    for _, p in spread.iterrows():
        assert p["E (%)"] == pytest.approx(100 * e8[p["policy_key"]], abs=1e-9, nan_ok=True)  # n/a stays n/a


def test_spread_vs_error_correlation_and_grid(store: Path):
    study = load(store)
    rep = weight_distributions.report(study, bits=2)
    corr = weight_distributions.correlation(rep.policies)
    d = rep.policies.dropna(subset=["E (%)"])
    if corr is None:  # every policy lost the same reward at 2 bits: nothing to correlate, and the plot says so
        assert "no fit" in weight_distributions.spread_figure(rep.policies, 2).axes[0].get_title()
    else:
        assert corr["pearson_r"] == pytest.approx(np.corrcoef(d["widest_range"], d["E (%)"])[0, 1])
        assert "Pearson r" in weight_distributions.spread_figure(rep.policies, 2).axes[0].get_title()
    w = torch.from_numpy(rep.weights[0].layers[next(iter(rep.weights[0].layers))])
    levels = weight_distributions.grid(w, 2, "affine")
    assert len(levels) <= 4 and set(np.unique(fake_quantize(w.double(), 2, "affine").numpy())) <= set(levels)


def test_weight_report_loads_from_policy_dir_and_older_records_from_the_current_folder(
        sweep: Path, store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A record's policy_dir is where its policy is read, wherever collation runs; a record without
    one (written before runs recorded it) is looked for in store.policies from the current folder
    only, and the notes name it."""
    study = load(store, {"algo": "ppo", "env": "cartpole"})
    cfgs = [OmegaConf.create(json.loads(c)) for c in study.done["config"]]
    dirs = [str(policies.folder_of(cfg, sweep / cfg.store.policies)) for cfg in cfgs]
    recorded = dataclasses.replace(study, done=study.done.assign(policy_dir=dirs), notes=Notes())
    older = dataclasses.replace(study, done=study.done.drop(columns="policy_dir", errors="ignore"), notes=Notes())
    monkeypatch.chdir(tmp_path)  # neither the launch folder nor the repository
    assert len(weight_distributions.report(recorded).weights) == len(SEEDS) and not recorded.notes
    assert weight_distributions.report(older).weights == []
    assert any("without policy_dir" in n and "ppo/cartpole seed=0" in n and str(tmp_path) in n for n in older.notes)
    monkeypatch.chdir(sweep)
    assert len(weight_distributions.report(older, notes=Notes()).weights) == len(SEEDS)


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
        lo, hi = by_hand_stratified(samples, lambda p, fn=fn: fn(p), 20_000, seed=7)
        width = hi - lo
        assert ci.estimate == pytest.approx(fn(np.concatenate(samples)))
        assert ci.low == pytest.approx(lo, abs=0.05 * width) and ci.high == pytest.approx(hi, abs=0.05 * width), name
        assert ci.n_runs == 16 and ci.n_tasks == 4
    again = stats.stratified_bootstrap(samples, stats.iqm, n_resamples=20_000)
    assert again == stats.stratified_bootstrap(samples, stats.iqm, n_resamples=20_000)  # fixed random state


def test_seed_interval_is_student_t_and_one_seed_has_no_interval():
    # two seeds: mean 20, s = 14.14, standard error 10, t(0.975, 1) = 12.706
    ci = stats.seed_interval([10.0, 30.0])
    assert ci.estimate == 20.0 and ci.n_runs == 2
    assert ci.low == pytest.approx(20 - 127.062, abs=1e-3) and ci.high == pytest.approx(20 + 127.062, abs=1e-3)
    x = np.array([3.0, 4.5, 2.0, 5.0])
    lo, hi = sps.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=sps.sem(x))
    assert stats.seed_interval(x).low == pytest.approx(lo) and stats.seed_interval(x).high == pytest.approx(hi)
    assert stats.seed_interval([7.0, 7.0, 7.0]).low == 7.0  # every seed the same: zero width
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
    agg = agg_plots.aggregate_table(study)
    assert agg["low"].isna().all() and "no confidence interval" in agg_plots.aggregate(agg)._suptitle.get_text()


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
    done = subprocess.run([sys.executable, "-m", "quarl.cli", "collate", "--store", str(empty),
                           "--out", str(tmp_path / "d")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr and "holds no records yet" in done.stderr


def test_filters_match_as_text_and_lists(store: Path):
    runs = Store(store).runs()
    picked = select(runs, {"algo": "a2c,ppo", "quant.bits": "8.0", "env": "cartpole"})
    assert (set(picked["algo"]) == {"a2c", "ppo"} and set(picked["quant.bits"]) == {8}
            and set(picked["env"]) == {"cartpole"})
    assert select(runs, {"eval.deterministic": "true"}).shape[0] == len(runs)


# ---------------------------------------------------------------- callback, published data, notebook

def test_a_failing_callback_never_fails_the_sweep(tmp_path: Path, caplog):
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


def test_importing_collation_loads_no_torch_onnx_or_sb3():
    code = ("import importlib, pkgutil, sys, quarl.collate\n"
            "for m in pkgutil.iter_modules(quarl.collate.__path__): "
            "importlib.import_module(f'quarl.collate.{m.name}')\n"
            "print(sorted({k.split('.')[0] for k in sys.modules} & "
            "{'torch', 'onnx', 'onnxruntime', 'stable_baselines3'}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout


# ---------------------------------------------------------------- hand-made records (no training)

from tests.records import ptq_study, record  # noqa: E402
from tests.records import write as write_records  # noqa: E402


def _store(tmp_path: Path, records: list[dict], name: str = "r.sqlite") -> Path:
    path = tmp_path / name
    write_records(Store(path), records)
    return path


def _percentile_bootstrap(x: np.ndarray, rng: np.random.Generator, n: int = 400) -> tuple[float, float]:
    means = x[rng.integers(0, len(x), (n, len(x)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def test_seed_intervals_cover_at_their_stated_level_for_3_to_10_seeds():
    """Simulated coverage of the per-cell interval: within 2 points of 95% for normal data at n = 3,
    5, 10 (8000 draws each: the simulation's own standard error is 0.25 points); on a skewed
    distribution (lognormal, sigma 0.5) it stays within 5 points, where a percentile bootstrap of
    the mean misses by far more at n = 3."""
    rng = np.random.default_rng(12)
    for n in (3, 5, 10):
        draws = rng.normal(3.0, 2.0, (8000, n))
        cover = np.mean([(ci := stats.seed_interval(x)).low <= 3.0 <= ci.high for x in draws])
        assert abs(cover - 0.95) <= 0.02, (n, cover)
    mu = float(np.exp(0.5**2 / 2))
    for n in (3, 5, 10):
        draws = rng.lognormal(0.0, 0.5, (3000, n))
        cover = np.mean([(ci := stats.seed_interval(x)).low <= mu <= ci.high for x in draws])
        assert cover >= 0.90, (n, cover)
    boot = np.mean([lo <= 3.0 <= hi for lo, hi in (_percentile_bootstrap(x, rng) for x in rng.normal(3, 2, (1500, 3)))])
    assert boot < 0.85  # what the t interval replaced: a percentile bootstrap covers ~76% at n = 3


def test_e_na_is_shown_with_its_note_and_never_enters_a_mean(tmp_path: Path):
    records = ptq_study(algos=("ddpg",), envs=("pendulum",), bits=(4, 8), seeds=(0, 1))
    note = "|R_fp32| = 0.03 is below 1% of the env's reward range (0.99)"
    for seed in (0, 1):
        records.append(record("ddpg", "mountaincar_continuous", "fp32", seed=seed, reward=-0.03, fp32=-0.03))
        for b in (4, 8):
            records.append(record("ddpg", "mountaincar_continuous", "ptq", b, seed, reward=-0.5, fp32=-0.03,
                                  run={"rel_error": None, "rel_error_note": note}, action_agreement=0.9))
    out = tmp_path / "out"
    collate(_store(tmp_path, records), out)
    md = (out / "tables/errors_ddpg.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| mountaincar_continuous"))
    assert row.count("n/a") == 1 and note in md  # E_int8 n/a (E_fp16: no fp16 record there, a dash)
    table = pd.read_csv(out / "tables/errors_ddpg.csv").set_index("env")
    assert table.loc["mean", "E_int8 (%)"] == pytest.approx(table.loc["pendulum", "E_int8 (%)"])
    bits = pd.read_csv(out / "tables/e_by_bits_ddpg.csv").astype({"bits": str}).set_index("bits")
    assert bits.loc["8", "mean"] == pytest.approx(bits.loc["8", "pendulum"])
    assert "n/a" in (out / "tables/e_by_bits_ddpg.md").read_text()
    agg = pd.read_csv(out / "aggregate/aggregate.csv")
    assert set(agg["n_tasks"]) == {1} and set(agg[agg["method"] == "ptq"]["n_runs"]) == {2}  # pendulum's only
    points = pd.read_csv(out / "sweet_spot/points.csv")
    mc = points[(points["env"] == "mountaincar_continuous") & (points["method"] == "ptq")]
    assert mc["e_mean"].isna().all() and (mc["e_n"] == 0).all() and (mc["n"] == 2).all()
    readme = (out / "README.md").read_text()
    assert "E is n/a for 4 records" in readme and note in readme
    heat = agg_plots.heatmap(load(tmp_path / "r.sqlite"))
    assert "n/a" in [t.get_text() for t in heat.axes[0].texts] and "n/a: E undefined" in heat.axes[0].get_title()


def test_every_table_and_plot_names_its_quantizer_and_table_names_stay_stable(tmp_path: Path):
    path = _store(tmp_path, ptq_study(schemes=("affine", "quarl_code")))
    out = tmp_path / "out"
    written = collate(path, out)
    tables_written = sorted(p.name for p in written if p.parent.name == "tables")
    assert tables_written == (
        sorted(f"{t}_{a}.{x}" for t in ("errors", "e_by_bits", "agreement") for a in ("dqn", "ppo")
               for x in ("md", "csv", "tex"))
        + [f"published_vs_reproduced.{x}" for x in ("csv", "md", "tex")]
        + [f"verdicts.{x}" for x in ("csv", "md", "tex")])
    for stem in ("errors_ppo", "e_by_bits_ppo", "agreement_ppo"):
        md = (out / f"tables/{stem}.md").read_text()
        assert "affine, per_tensor, bias fp32" in md and "quarl_code, per_tensor, bias fp32" in md, stem
    errors = pd.read_csv(out / "tables/errors_ppo.csv")
    assert set(errors["quantizer"]) == {"ptq (scheme=affine): affine, per_tensor, bias fp32",
                                        "ptq (scheme=quarl_code): quarl_code, per_tensor, bias fp32"}
    study = load(path)
    titles = [plots.sweet_spot(study, "cartpole", ["ppo"]).axes[0].get_title(),
              plots.sweet_spot(study, "cartpole").axes[0].get_title(),
              agg_plots.heatmap(study).axes[0].get_title(),
              agg_plots.aggregate(agg_plots.aggregate_table(study, n_resamples=200),
                                  study.quantizers())._suptitle.get_text(),
              plots.agreement(study, "cartpole", "ppo")._suptitle.get_text()]
    for title in titles:
        assert "affine, per_tensor, bias fp32" in title and "quarl_code" in title, title
    assert "- quantizers: ptq: affine" in (out / "README.md").read_text()


def test_error_table_mean_row_averages_e_only_and_evaluation_settings_are_kept_apart(tmp_path: Path):
    """Records of one training that differ in an evaluation setting are never averaged: each setting
    is its own method line, named by the key (a different training: see the trainings tests)."""
    records = [record("ppo", "cartpole", "fp32", seed=0, reward=186.0, fp32=186.0),
               record("ppo", "cartpole", "ptq", 8, 0, reward=180.0, fp32=186.0),
               record("ppo", "acrobot", "fp32", seed=0, reward=-500.0, fp32=-500.0),
               record("ppo", "acrobot", "ptq", 8, 0, reward=-510.0, fp32=-500.0),
               record("ppo", "acrobot", "ptq", 8, 0, reward=-520.0, fp32=-500.0, episodes=20)]
    study = load(_store(tmp_path, records))
    table = tables.error_table(study, "ppo", "ptq (eval.episodes=10)").set_index("env")
    assert pd.isna(table.loc["mean", "fp32"]) and pd.isna(table.loc["mean", "int8"])  # not (186 - 500) / 2
    assert table.loc["mean", "E_int8 (%)"] == pytest.approx(table.loc[["acrobot", "cartpole"], "E_int8 (%)"].mean())
    assert table.loc["acrobot", "int8"] == -510.0  # not the mean of -510 and -520
    twenty = tables.error_table(study, "ppo", "ptq (eval.episodes=20)").set_index("env")
    assert twenty.loc["acrobot", "int8"] == -520.0
    assert any("ptq records differ in eval.episodes" in n for n in study.notes)
    assert not any("cells have several records" in n for n in study.notes)


def test_agreement_table_and_plot(tmp_path: Path):
    path = _store(tmp_path, ptq_study())
    study = load(path)
    table = tables.agreement_table(study, "ppo")
    cp = table[(table["env"] == "cartpole") & (table["method"] == "ptq")].set_index("bits")
    assert list(cp.index) == [2, 4, 6, 8] and cp.loc[8, "agreement"] >= cp.loc[2, "agreement"]
    direct = study.seeds[(study.seeds["algo"] == "ppo") & (study.seeds["env"] == "cartpole")
                         & (study.seeds["bits"] == 4) & (study.seeds["method"] == "ptq")]["action_agreement"]
    lo, hi = sps.t.interval(0.95, len(direct) - 1, loc=direct.mean(), scale=sps.sem(direct))
    assert cp.loc[4, "agreement"] == pytest.approx(direct.mean()) and cp.loc[4, "low"] == pytest.approx(lo)
    assert "KL" in table.columns and "MAD" not in table.columns  # PPO measured KL; nobody measured MAD
    assert "KL" not in tables.agreement_table(study, "dqn").columns
    fig = plots.agreement(study, "cartpole", "ppo")
    assert len(fig.axes) == 2 and "agreement" in fig.axes[1].get_ylabel()
    out = tmp_path / "out"
    written = {p.relative_to(out).as_posix() for p in collate(path, out)}
    assert {"agreement/ppo_cartpole.png", "tables/agreement_ppo.md"} <= written
    old = _store(tmp_path, [record("ppo", "cartpole", "fp32"), record("ppo", "cartpole", bits=4)], "old.sqlite")
    written = {p.relative_to(tmp_path / "o2").as_posix() for p in collate(old, tmp_path / "o2")}
    assert not [w for w in written if "agreement" in w] and "tables/errors_ppo.md" in written


def test_collate_out_is_a_clean_folder(tmp_path: Path, caplog):
    path = _store(tmp_path, ptq_study(algos=("ppo",), envs=("cartpole", "acrobot")))
    out = tmp_path / "out"
    first = collate(path, out)
    assert (out / "sweet_spot/ppo_acrobot.png").is_file()
    (out / "notes.txt").write_text("mine")  # a user's file beside the collation stays
    second = collate(path, out, {"env": "cartpole"})
    on_disk = {p for p in out.rglob("*") if p.is_file()}
    assert on_disk == set(second) | {out / ".quarl-collate.json", out / "notes.txt"}
    assert not (out / "sweet_spot/ppo_acrobot.png").exists() and len(first) > len(second)
    listed = {line.split("](")[1][:-1] for line in (out / "README.md").read_text().splitlines()
              if line.startswith("- [")}
    assert {out / f for f in listed} | {out / "README.md"} == set(second)
    other = tmp_path / "other"
    other.mkdir()
    (other / "thesis.tex").write_text("keep")
    with caplog.at_level(logging.ERROR):
        assert cli.main(["collate", "--store", str(path), "--out", str(other)]) == 1
    assert "non-empty folder that no collation wrote" in caplog.text and "--overwrite" in caplog.text
    assert (other / "thesis.tex").read_text() == "keep" and len(list(other.iterdir())) == 1
    assert cli.main(["collate", "--store", str(path), "--out", str(other), "--overwrite"]) == 0
    assert not (other / "thesis.tex").exists() and (other / "README.md").is_file()


def test_an_unchanged_collation_is_not_drawn_again(tmp_path: Path, caplog):
    """The same records, settings and code: the files stay as they are; a new record, other
    settings or force draw again."""
    records = ptq_study(algos=("ppo",), envs=("cartpole", "acrobot"))
    path = _store(tmp_path, records[:-1])
    out, readme = tmp_path / "out", tmp_path / "out" / "README.md"

    def drawn(**kw) -> bool:
        before = readme.stat().st_mtime_ns if readme.exists() else None
        written = collate(path, out, **kw)
        assert readme in written and all(p.is_file() for p in written)
        return readme.stat().st_mtime_ns != before

    assert drawn()
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    with caplog.at_level(logging.INFO, logger="quarl.collate"):
        assert not drawn()
    assert "up to date" in caplog.text and {p: p.stat().st_mtime_ns for p in out.rglob("*")} == stamps
    assert drawn(bits=4) and not drawn(bits=4)
    write_records(Store(path), records[-1:])
    assert drawn(bits=4) and not drawn(bits=4) and drawn(bits=4, force=True)
    (out / "sweet_spot/ppo_acrobot.png").unlink()  # a file of the collation gone: drawn again
    assert drawn(bits=4) and (out / "sweet_spot/ppo_acrobot.png").is_file()


def test_sweep_collation_takes_the_sweep_own_cells(tmp_path: Path):
    """Records of an earlier run in the same store (dqn/acrobot) stay out; the sweep's fp32
    baselines come along although the sweep dir holds only its quantized cells' records."""
    path = tmp_path / "r.sqlite"
    earlier = ptq_study(algos=("dqn",), envs=("acrobot",), seeds=(0,), bits=(8,))
    sweep = ptq_study(algos=("ppo",), envs=("cartpole",), seeds=(0, 1), bits=(2, 8))
    write_records(Store(path), earlier)
    write_records(Store(path), [r for r in sweep if r["run"]["quant"] == "fp32"])  # baselines from before
    write_records(Store(path), [r for r in sweep if r["run"]["quant"] != "fp32"], run_root=tmp_path / "sweep")
    out = tmp_path / "sweep/collate"
    collate(path, out, sweep=tmp_path / "sweep")
    study = load(path, cells={r["run"]["cell_key"] for r in sweep if r["run"]["quant"] != "fp32"})
    assert set(study.done["algo"]) == {"ppo"} and (study.done["quant"] == "fp32").sum() == 2
    assert not list(out.rglob("*dqn*")) and not list(out.rglob("*acrobot*"))
    table = pd.read_csv(out / "tables/errors_ppo.csv").set_index("env")
    assert table.loc["cartpole", "seeds"] == 2 and pd.notna(table.loc["cartpole", "fp32"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(QuarlError, match="--sweep .* holds no job"):
        collate(path, tmp_path / "o", sweep=tmp_path / "empty")


def _actorq_record(bits: int, seed: int, reach_at: float | None, end: float = 100.0) -> dict:
    """An ActorQ DQN Acrobot record whose training return jumps from -300 to -50 at `reach_at` seconds
    (None: never; the paper's target there is -107.45)."""
    times = np.linspace(1, end, 60)
    returns = [-50.0 if reach_at is not None and t >= reach_at else -300.0 for t in times]
    rec = record("dqn", "acrobot", "actorq", seed=seed, reward=-60.0, fp32=None,
                 config={"quant.actor_bits": bits, "actorq.update_period": 100},
                 run={"train_time_s": end}, actor_action_agreement=0.95 if bits == 8 else None)
    rec["curve"] = [{"step": int(10 * t), "reward": r, "length": 10, "wall_s": float(t), "actor": 0}
                    for t, r in zip(times, returns)]
    return rec


def test_actorq_time_to_reward_is_censored_not_averaged_over_survivors(tmp_path: Path):
    from quarl.collate import actorq_timing

    fp32 = [_actorq_record(32, s, reach_at=t) for s, t in zip((0, 1, 2), (40.0, 50.0, 60.0))]
    int8 = [_actorq_record(8, s, reach_at=t) for s, t in zip((0, 1, 2), (20.0, None, 25.0))]
    study = load(_store(tmp_path, fp32 + int8))
    ttr = actorq_timing.time_to_reward(study, Store(study.store).curves()).set_index("precision")
    assert not ttr.loc["fp32", "censored"] and ttr.loc["int8", "censored"] and ttr.loc["int8", "reached"] == "2/3"
    def reached(rec: dict) -> float:  # the first time the 10-episode mean return is at the paper's -107.45
        c = pd.DataFrame(rec["curve"])
        return float(c["wall_s"][c["reward"].rolling(10, min_periods=1).mean() >= -107.45].iloc[0])

    assert ttr.loc["int8", "time_s"] == pytest.approx(
        np.mean([reached(int8[0]), 100.0, reached(int8[2])]))  # missed: run time
    assert ttr.loc["fp32", "time_s"] == pytest.approx(np.mean([reached(r) for r in fp32]))
    assert ttr.loc["int8", "speedup_bound"] == "<="  # int8's time is a lower bound: the speedup an upper one
    assert ttr.loc["int8", "speedup_vs_fp32"] == pytest.approx(ttr.loc["fp32", "time_s"] / ttr.loc["int8", "time_s"])
    assert ttr.loc["int8", "actor_agreement"] == pytest.approx(0.95)
    shown = actorq_timing.ttr_display(ttr.reset_index()).set_index("precision")
    assert shown.loc["int8", "time_s"].startswith("≥ ") and shown.loc["int8", "speedup_vs_fp32"].startswith("≤ ")
    assert not shown.loc["fp32", "time_s"].startswith("≥")
    out = tmp_path / "out"
    collate(study.store, out)
    assert ("≥ " in (out / "actorq/time_to_reward.md").read_text()
            and "Censored" in (out / "actorq/time_to_reward.md").read_text())


def test_actorq_runs_with_other_networks_are_not_pooled_as_seeds(tmp_path: Path):
    """Two sweeps of one task with different actor networks: two settings, each with its own fp32
    baseline and speedup, never one setting with twice the seeds."""
    from quarl.collate import actorq_timing

    records = []
    for widths, fp32_at, int8_at in (([2048, 2048], 60.0, 30.0), ([64, 64], 40.0, 40.0)):
        for bits, at in ((32, fp32_at), (8, int8_at)):
            rec = _actorq_record(bits, 0, reach_at=at)
            rec["run"]["cell_key"] = f"{rec['run']['cell_key']}-{widths[0]}"
            rec["config"]["algo"]["hyperparams"] = {"policy_kwargs": {"net_arch": widths}}
            records.append(rec)
    study = load(_store(tmp_path, records))
    ttr = actorq_timing.time_to_reward(study, Store(study.store).curves()).set_index(["network", "precision"])
    assert len(ttr) == 4 and (ttr["seeds"] == 1).all()
    assert ttr.loc[("2048x2048", "int8"), "speedup_vs_fp32"] > 1.5
    assert ttr.loc[("64x64", "int8"), "speedup_vs_fp32"] == pytest.approx(1.0)


def test_plots_stay_readable(tmp_path: Path):
    """Bit ticks evenly spaced (4..8 no longer run together), heat-map labels wrapped, the weight
    grid thinned where its ticks would merge, the ActorQ legend named as the log, beside the bars."""
    from quarl.collate import actorq_timing

    scale = plots.bit_scale([2, 3, 4, 5, 6, 7, 8, 16, 32])
    assert np.allclose(np.diff([scale[b] for b in sorted(scale)]), 1.0)
    assert agg_plots._wrap("ptq (scheme=quarl_code) 4") == "ptq\nscheme=\nquarl_code\n4 bits"
    levels = np.linspace(-1, 1, 256)
    drawn, every = weight_distributions._drawn_levels(levels, ax_width_px=320, span=2.2)
    assert every > 1 and len(drawn) < 256 and np.median(np.diff(drawn)) / 2.2 * 320 >= weight_distributions.MIN_TICK_PX
    assert weight_distributions._drawn_levels(levels[::64], 320, 2.2)[1] == 1  # a 2-bit grid: every level
    fig = actorq_timing.breakdown_figure(pd.DataFrame([{"algo": "dqn", "env": "acrobot", "network": "default",
                                                 "update_period": 100, "precision": p,
                                                 **{f"{n} (ms/step)": 1.0 for n in actorq_timing.PART_NAMES.values()}}
                                                for p in actorq_timing.ORDER]), "dqn", "acrobot")
    legend = fig.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == ["send", "load", "deserialize", "pull", "env", "inference"]
    fig.canvas.draw()
    box, bars = legend.get_window_extent(), fig.axes[0].get_window_extent()
    assert box.x0 >= bars.x1  # beside the bars, not over them


def test_training_curves_are_plotted_per_algo_and_env_with_one_line_per_seed(tmp_path: Path):
    """The fp32 baseline (and QAT) records carry their training's curve: collation draws them."""
    from quarl.collate.learning_curves import training_curves

    curve = [{"step": 100 * i, "reward": float(i), "length": 10} for i in range(1, 30)]
    records = []
    for seed in (0, 1):
        fp32 = record("dqn", "cartpole", "fp32", seed=seed, reward=500.0, fp32=500.0)
        fp32["curve"] = curve
        qat = record("dqn", "cartpole", "qat", 4, seed=seed, reward=480.0, fp32=500.0)
        qat["curve"] = curve[:10]
        records += [fp32, qat, record("dqn", "cartpole", "ptq", 4, seed=seed, reward=490.0, fp32=500.0)]
    path = _store(tmp_path, records)
    out = tmp_path / "out"
    written = {p.relative_to(out).as_posix() for p in collate(path, out)}
    assert {"curves/dqn_cartpole.png", "curves/dqn_cartpole.pdf"} <= written
    points = training_curves(load(path))
    assert set(points["label"]) == {"fp32", "QAT 4-bit"}
    assert points.groupby(["label", "seed"]).size().to_dict() == {("QAT 4-bit", 0): 10, ("QAT 4-bit", 1): 10,
                                                                  ("fp32", 0): 29, ("fp32", 1): 29}


# ---------------------------------------------------------------- trainings: never averaged together

def _two_trainings() -> list[dict]:
    """PPO on CartPole trained twice per seed, as `python run.py` then the README's activation sweep
    leave it: 100k steps (the algorithm's default budget, train.steps null) and train.steps=8192;
    PPO on Acrobot trained once. Each number is known, so any pooling shows."""
    default = {"algo.n_timesteps": 100_000}
    records = []
    for seed in (0, 1):
        records += [
            record("ppo", "cartpole", "fp32", seed=seed, reward=500.0, fp32=500.0, steps=None, config=default),
            record("ppo", "cartpole", "ptq", 8, seed, reward=490.0 + seed, fp32=500.0, steps=None, config=default),
            record("ppo", "cartpole", "fp32", seed=seed, reward=300.0, fp32=300.0, steps=8192, config=default),
            record("ppo", "acrobot", "fp32", seed=seed, reward=-100.0, fp32=-100.0),
            record("ppo", "acrobot", "ptq", 8, seed, reward=-110.0, fp32=-100.0),
        ]
        for act in (4, 32):
            records.append(record("ppo", "cartpole", "ptq", 8, seed, reward=240.0 + act, fp32=300.0, steps=8192,
                                  config={**default, "quant.act_bits": act, "quant.input_bits": 32}))
    return records


def test_two_trainings_of_one_algo_and_env_are_separate_series_named_by_what_differs(tmp_path: Path):
    path = _store(tmp_path, _two_trainings())
    study = load(path)
    long, short = "ppo (train.steps=100000)", "ppo (train.steps=8192)"
    assert set(study.done.loc[study.done["env"] == "cartpole", "algo"]) == {long, short}
    assert set(study.done.loc[study.done["env"] == "acrobot", "algo"]) == {"ppo"}  # one training: the plain name
    assert set(study.done["base_algo"]) == {"ppo"}
    base = study.baselines.set_index(["algo", "env", "seed"])["fp32"]
    assert base[(long, "cartpole", 0)] == 500.0 and base[(short, "cartpole", 0)] == 300.0  # each its own fp32
    ptq8 = study.seeds[(study.seeds["method"] != "fp32") & (study.seeds["env"] == "cartpole")]
    assert set(ptq8.loc[ptq8["algo"] == long, "reward"]) == {490.0, 491.0}
    assert ((ptq8["algo"] == short) == ptq8["reward"].isin([244.0, 272.0])).all()
    note = next(n for n in study.notes if "2 trainings" in n)
    assert "differ in train.steps" in note
    for label, steps, records in ((long, "100000", 4), (short, "8192", 6)):
        typed = f"algo=ppo env=cartpole train.steps={steps}"
        assert f"'{label}' ({records} records: `quarl collate {typed}`)" in note
        picked = load(path, dict(kv.split("=") for kv in typed.split()))  # the label is the filter a user types
        assert set(picked.done["algo"]) == {"ppo"} and len(picked.done) == records
    assert len(load(path, {"train.steps": "null"}).done) == 4  # the stored null still selects the default budget

    out = tmp_path / "out"
    collate(path, out)
    errors = {s: pd.read_csv(out / f"tables/errors_ppo-train-steps-{s}.csv").set_index("env").loc[["cartpole"]]
              for s in ("100000", "8192")}  # ptq at 8 bits with fp32 activations (act_bits=32) in both
    errors = {s: rows[rows["quantizer"].str.startswith("ptq (act_bits=32)")].iloc[0] for s, rows in errors.items()}
    assert errors["100000"]["fp32"] == 500.0 and errors["100000"]["int8"] == pytest.approx(490.5)
    assert errors["100000"]["E_int8 (%)"] == pytest.approx(100 * (500 - 490.5) / 500)
    assert errors["8192"]["fp32"] == 300.0 and errors["8192"]["int8"] == pytest.approx(272.0)
    assert errors["8192"]["E_int8 (%)"] == pytest.approx(100 * (300 - 272) / 300)
    assert errors["8192"]["fp32 (paper)"] == 500  # the paper's row is found by the plain algo name
    assert list(pd.read_csv(out / "tables/errors_ppo.csv")["env"]) == ["acrobot", "mean"]
    md = (out / "tables/errors_ppo-train-steps-8192.md").read_text()
    assert md.startswith("## PPO (train.steps=8192): fp32, fp16 and int8")
    grid = (out / "precision/ppo-train-steps-8192_cartpole.md").read_text()  # the activation grid of 8192 only
    assert "244.0" in grid and "272.0" in grid and "490" not in grid
    assert "490.5" in (out / "precision/ppo-train-steps-100000_cartpole.md").read_text()
    points = pd.read_csv(out / "sweet_spot/points.csv")
    assert set(points["algo"]) == {"ppo", long, short} and (points["n"] == 2).all()
    assert {f"sweet_spot/ppo-train-steps-{s}_cartpole.png" for s in ("100000", "8192")} <= {
        p.relative_to(out).as_posix() for p in out.rglob("*.png")}
    readme = (out / "README.md").read_text()
    assert f"| {short} | cartpole |" in readme and "`quarl collate algo=ppo env=cartpole train.steps=8192`" in readme


def test_what_counts_as_another_training(tmp_path: Path):
    """Keys of the training (hyperparameters, keep-best, its effective interval, a pretrained
    source) split series; the seed, the quantizer and a key an older record lacks do not."""
    from quarl.collate import trainings

    def labels(*configs: dict) -> list[str]:
        records = [record("dqn", "cartpole", "fp32", seed=i % 2, steps=10_000, config=c)
                   for i, c in enumerate(configs)]
        runs = Store(_store(tmp_path, records, f"t{len(list(tmp_path.iterdir()))}.sqlite")).runs()
        return list(trainings.trainings(runs.sort_values("started_at"))[0])

    assert labels({}, {}) == ["dqn", "dqn"]  # two seeds of one training
    lr = "algo.hyperparams.learning_rate"
    assert labels({}, {lr: 0.001}) == [f"dqn ({lr}=null)", f"dqn ({lr}=0.001)"]  # unset: the algorithm's default
    keep = {"train.keep_best": True, "train.eval_episodes": 5}
    assert labels({**keep, "train.eval_every": None}, {**keep, "train.eval_every": 500}) == ["dqn", "dqn"]  # 10000//20
    assert labels({**keep, "train.eval_every": 500}, {**keep, "train.eval_every": 1000}) == [
        "dqn (train.eval_every=500)", "dqn (train.eval_every=1000)"]
    assert labels({}, {"train.keep_best": True}) == ["dqn (train.keep_best=false)", "dqn (train.keep_best=true)"]
    assert labels({"env.return_scale": 500}, {"env.return_scale": 200}) == ["dqn", "dqn"]  # measurement only
    assert labels({"env.frame_stack": 1}, {"env.frame_stack": 4}) == [
        "dqn (env.frame_stack=1)", "dqn (env.frame_stack=4)"]
    zoo = {"policy.source": "path", "policy.path": "logs/dqn/CartPole-v1_1"}
    assert labels({"policy.source": "train"}, zoo) == [
        "dqn (policy.source=train)", "dqn (policy.source=path, policy.path=logs/dqn/CartPole-v1_1)"]
    sb2 = {"zoo": "sb2", lr: 0.001, "algo.hyperparams.policy_kwargs.net_arch": [64]}
    assert labels({}, sb2) == ["dqn (zoo=rl_zoo3)", "dqn (zoo=sb2)"]  # the zoo names what it sets
    assert labels({}, {"train.robust": "sam", "train.robust_rho": 0.05}) == [
        "dqn (train.robust=null)", "dqn (train.robust=sam)"]
    sam = {"train.robust": "sam", "train.robust_rho": 0.05}
    assert labels(sam, {**sam, "train.robust_rho": 0.1}) == [
        "dqn (train.robust_rho=0.05)", "dqn (train.robust_rho=0.1)"]
    old = record("dqn", "cartpole", "fp32", seed=0, steps=10_000)  # written before train.keep_best existed
    new = record("dqn", "cartpole", "fp32", seed=1, steps=10_000, config={"train.keep_best": False,
                                                                         "algo.normalize": False})
    runs = Store(_store(tmp_path, [old, new], "old.sqlite")).runs()
    assert set(trainings.trainings(runs)[0]) == {"dqn"}


def test_the_campaign_records_hold_one_training_per_algo_and_env():
    """The committed records of quarl's default trainings collate as before: no (algo, env) of theirs
    but ActorQ's holds two trainings; the published agents' (zoo=sb2) and the robust ones are told
    apart from them by exactly that setting."""
    from quarl.collate import trainings
    from quarl.store.record_files import rebuild

    with __import__("tempfile").TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "r.sqlite")
        rebuild(ROOT / "docs/reproduction/records", store)
        runs = store.runs()
    runs = runs[(runs["status"] == "done") & (runs["quant"] != "actorq")]
    zoo = runs["zoo"].fillna("rl_zoo3") if "zoo" in runs.columns else pd.Series("rl_zoo3", index=runs.index)
    robust = runs["train.robust"] if "train.robust" in runs.columns else pd.Series(None, index=runs.index)
    defaults = runs[(zoo == "rl_zoo3") & robust.isna()]
    labels, found = trainings.trainings(defaults)
    assert found == [] and (labels == defaults["algo"]).all()
    _, every = trainings.trainings(runs)
    assert {key for t in every for key in t.keys} <= {"zoo", "train.robust"}


def test_notebook_keeps_trainings_apart(tmp_path: Path, monkeypatch):
    """The notebook (prepare(select(...))) on a store of two trainings: separate series and the note."""
    path = _store(tmp_path, _two_trainings())
    nb = nbformat.read(ROOT / "notebooks/results.ipynb", as_version=4)
    monkeypatch.setenv("QUARL_STORE", str(path))
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(ROOT / "notebooks")}})
    client.execute()
    outputs = [o for cell in nb.cells for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs)
    shown = "".join(str(o.get("data", {}).get("text/markdown", "")) for o in outputs)
    assert "ppo/cartpole holds 2 trainings that differ in train.steps" in text
    assert "### PPO (train.steps=8192)" in shown and "### PPO (train.steps=100000)" in shown


# ---------------------------------------------------------------- plots: legends, labels, interval bounds

def _activation_sweep() -> list[dict]:
    """The README's activation sweep shape (weights 4, 8 x activations 4, 8, 32 x inputs 4, 8, 32: 18
    PTQ cells) for PPO on CartPole, three seeds far apart (500, 480, 420): t-intervals run past 500,
    and DQN on Acrobot at 2..8 bits."""
    records = []
    for seed, reward in ((0, 500.0), (1, 480.0), (2, 420.0)):
        records.append(record("ppo", "cartpole", "fp32", seed=seed, reward=reward, fp32=reward))
        records.append(record("dqn", "acrobot", "fp32", seed=seed, reward=-90.0 - seed, fp32=-90.0 - seed))
        for bits in (2, 4, 6, 8):
            records.append(record("dqn", "acrobot", "ptq", bits, seed, reward=-95.0 - seed, fp32=-90.0 - seed,
                                  action_agreement=0.9))
        for bits in (4, 8):
            for act in (4, 8, 32):
                for inp in (4, 8, 32):
                    records.append(record("ppo", "cartpole", "ptq", bits, seed, reward=reward, fp32=reward,
                                          config={"quant.act_bits": act, "quant.input_bits": inp},
                                          action_agreement=1.0 - 0.2 * seed))
    return records


def _inside(fig, artist) -> bool:
    box, width, height = artist.get_window_extent(), fig.bbox.width, fig.bbox.height
    return box.x0 >= -1 and box.x1 <= width + 1 and box.y0 >= -1 and box.y1 <= height + 1


def test_legends_titles_and_heat_map_labels_are_never_cut_off_or_overlapping(tmp_path: Path):
    study = load(_store(tmp_path, _activation_sweep()))
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


def test_reward_intervals_are_clipped_to_the_env_return_range_and_say_so(tmp_path: Path):
    from quarl.collate import bounds

    assert bounds.return_range("CartPole-v1") == (0.0, 500.0)
    assert bounds.return_range("Acrobot-v1") == (-500.0, 0.0)
    assert bounds.return_range("MountainCarContinuous-v0") == pytest.approx((-99.9, 100.0))
    assert bounds.return_range("Pendulum-v1").low == pytest.approx(-200 * (np.pi**2 + 6.4 + 0.004))
    assert bounds.return_range("dm_control/cartpole-balance-v0") == (0.0, 1000.0)
    assert bounds.return_range("LunarLander-v3") is None and bounds.return_range("CartPole-v1", 200).high == 200
    path = _store(tmp_path, _activation_sweep())
    out = tmp_path / "out"
    collate(path, out)
    points = pd.read_csv(out / "sweet_spot/points.csv")
    cartpole = points[points["env"] == "cartpole"]
    raw = stats.seed_interval([500.0, 480.0, 420.0])
    assert raw.high > 500 and raw.low > 0  # unclipped, the interval runs past CartPole's 500
    assert (cartpole["reward_high"] == 500.0).all() and np.allclose(cartpole["reward_low"], raw.low)
    assert np.allclose(cartpole["reward_mean"], 1400 / 3)  # means are never clipped
    assert (points["agreement_low"].dropna() >= 0).all() and (points["agreement_high"].dropna() <= 1).all()
    acrobot = points[points["env"] == "acrobot"]
    assert (acrobot["reward_high"] <= 0).all()
    study = load(path)
    fig = plots.sweet_spot(study, "cartpole", ["ppo"])
    assert "\nreward intervals clipped to the env's return range [0, 500]" in fig.axes[0].get_title()
    bands = [c for c in fig.axes[0].collections if isinstance(c, PolyCollection)]
    assert bands and max(p.vertices[:, 1].max() for c in bands for p in c.get_paths()) <= 500.0
    readme = (out / "README.md").read_text()
    assert "clipped to the env's return range (Acrobot-v1 [-500, 0], CartPole-v1 [0, 500];" in readme
    agreement = tables.agreement_table(study, "ppo")
    assert (agreement["low"] >= 0).all() and (agreement["high"] <= 1).all()


def test_long_collation_says_what_it_is_doing(tmp_path: Path, caplog, capsys):
    """Off a terminal every step of a collation is a log line; on one, a tqdm bar names the step."""
    from quarl.progress import Steps

    path = _store(tmp_path, ptq_study(algos=("ppo",), envs=("cartpole",), seeds=(0, 1), bits=(4, 8)))
    with caplog.at_level(logging.INFO, logger="quarl"):
        collate(path, tmp_path / "out")
    lines = [r.getMessage() for r in caplog.records if r.name == "quarl.progress"]
    assert lines[0].endswith(": the sweet-spot plots (1/7)") and lines[0].startswith("Collating 8 records into")
    assert any(line.endswith("the weight report (6/7)") for line in lines) and " done in " in lines[-1]
    with Steps("Drawing", total=2, interactive=True) as steps:
        steps.next("first")
        steps.next("second")
    bar = capsys.readouterr().err
    assert "Drawing" in bar and "1/2" in bar and "step=second" in bar


def test_actorq_runs_of_other_trainings_are_not_pooled_as_seeds(tmp_path: Path):
    """Two ActorQ sweeps of one task and network, one with 4 actors and one with 8: two settings,
    each with its own fp32 baseline and speedup, never one with twice the seeds."""
    from quarl.collate import actorq_timing

    records = []
    for actors, fp32_at, int8_at in ((4, 60.0, 30.0), (8, 40.0, 40.0)):
        for bits, at in ((32, fp32_at), (8, int8_at)):
            rec = _actorq_record(bits, 0, reach_at=at)
            rec["run"]["cell_key"] = f"{rec['run']['cell_key']}-{actors}"
            rec["config"]["actorq"]["actors"] = actors
            rec["config"]["actorq"]["log_interval_s"] = actors  # watching a run does not make it another training
            records.append(rec)
    ttr = actorq_timing.time_to_reward(load(_store(tmp_path, records)), Store(tmp_path / "r.sqlite").curves())
    ttr = ttr.set_index(["training", "precision"])
    assert len(ttr) == 4 and (ttr["seeds"] == 1).all()
    assert ttr.loc[("dqn (actorq.actors=4)", "int8"), "speedup_vs_fp32"] == pytest.approx(2.0, rel=0.2)
    assert ttr.loc[("dqn (actorq.actors=8)", "int8"), "speedup_vs_fp32"] == pytest.approx(1.0)
