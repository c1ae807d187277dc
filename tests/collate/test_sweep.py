"""Collating a sweep (`quarl.collate.callback`, `quarl.collate.sweep`): the end-of-sweep callback, which
never fails the sweep, and a sweep's own cells."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from quarl.collate import collate, load
from quarl.collate.callback import CollateCallback
from quarl.errors import QuarlError
from quarl.store.sqlite import Store
from tests.records import ptq_study
from tests.records import write as write_records


def test_sweep_callback_wrote_the_same_collation_into_the_sweep_dir(sweep: Path, collated: Path):
    outs = list((sweep / "outputs/multirun").glob("*/*/collate"))
    assert len(outs) == 1, outs
    readme = (outs[0] / "README.md").read_text()
    assert "quarl collate --store" in readme and f"--sweep {outs[0].parent}" in readme
    for name in ("tables/errors_ppo.csv", "tables/e_by_bits_a2c.csv", "aggregate/aggregate.csv",
                 "sweet_spot/points.csv"):
        assert (outs[0] / name).read_text() == (collated / name).read_text(), name


def test_a_failing_callback_never_fails_the_sweep(tmp_path: Path, caplog):
    cfg = OmegaConf.create({"store": {"path": str(tmp_path / "missing.sqlite")},
                            "hydra": {"sweep": {"dir": str(tmp_path / "sweep")}, "overrides": {"task": []},
                                      "runtime": {"cwd": str(tmp_path)}}})
    job = tmp_path / "sweep/0/.hydra/config.yaml"
    job.parent.mkdir(parents=True)
    job.write_text("seed: 0\n")
    cb = CollateCallback()
    cb.on_multirun_start(cfg)
    with caplog.at_level(logging.WARNING):
        cb.on_multirun_end(cfg)  # no store: a warning, no exception
    assert "Collation after the sweep failed" in caplog.text and "quarl collate" in caplog.text


def test_a_sweep_that_launched_no_job_is_no_alarm(tmp_path: Path, caplog):
    """A finished search run again launches nothing: the callback says so, and warns of nothing."""
    cfg = OmegaConf.create({"store": {"path": str(tmp_path / "r.sqlite")},
                            "hydra": {"sweep": {"dir": str(tmp_path / "sweep")}, "overrides": {"task": []},
                                      "runtime": {"cwd": str(tmp_path)}}})
    (tmp_path / "sweep").mkdir()
    cb = CollateCallback()
    cb.on_multirun_start(cfg)
    with caplog.at_level(logging.INFO):
        cb.on_multirun_end(cfg)
    assert "launched no job" in caplog.text and not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_records_left_out_are_counted_by_state_and_n_a_only_where_skipped(tmp_path: Path):
    path = tmp_path / "r.sqlite"
    records = ptq_study(algos=("ppo",), envs=("cartpole",), seeds=(0,), bits=(8,))
    pruned = [{**r, "run": {**r["run"], "status": "pruned", "cell_key": f"p{i}"}} for i, r in enumerate(records)]
    write_records(Store(path), records + pruned)
    assert any(n.startswith(f"{len(pruned)} selected records are not done ({len(pruned)} pruned): left out")
               for n in load(path).notes)
    skipped = [{**r, "run": {**r["run"], "status": "skipped", "cell_key": "s0"}} for r in records[:1]]
    write_records(Store(path), skipped)
    assert any("1 skipped; skipped = the paper's n/a): left out" in n for n in load(path).notes)


def test_sweep_collation_takes_the_sweep_own_cells(tmp_path: Path):
    """Records of an earlier run in the same store (dqn/acrobot) stay out; the sweep's fp32
    baselines come along although the sweep dir holds only its quantized cells' records."""
    path = tmp_path / "r.sqlite"
    earlier = ptq_study(algos=("dqn",), envs=("acrobot",), seeds=(0,), bits=(8,))
    sweep = ptq_study(algos=("ppo",), envs=("cartpole",), seeds=(0, 1), bits=(2, 8))
    write_records(Store(path), earlier)
    write_records(Store(path), [r for r in sweep if r["run"]["quant"] == "fp32"])  # baselines from before
    write_records(Store(path), [r for r in sweep if r["run"]["quant"] != "fp32"], run_root=tmp_path / "sweep")
    optuna = pytest.importorskip("optuna")  # an unrelated search beside the store: not the sweep's
    search = optuna.create_study(study_name="other", storage=f"sqlite:///{tmp_path / 'optuna.db'}")
    search.tell(search.ask({"x": optuna.distributions.FloatDistribution(0, 1)}), 1.0)
    out = tmp_path / "sweep/collate"
    collate(path, out, sweep=tmp_path / "sweep", formats=["png"])
    assert not list(out.rglob("search_*"))
    study = load(path, cells={r["run"]["cell_key"] for r in sweep if r["run"]["quant"] != "fp32"})
    assert set(study.done["algo"]) == {"ppo"} and (study.done["quant"] == "fp32").sum() == 2
    assert not list(out.rglob("*dqn*")) and not list(out.rglob("*acrobot*"))
    table = pd.read_csv(out / "tables/errors_ppo.csv").set_index("env")
    assert table.loc["cartpole", "seeds"] == 2 and pd.notna(table.loc["cartpole", "fp32"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(QuarlError, match="--sweep .* holds no job"):
        collate(path, tmp_path / "o", sweep=tmp_path / "empty")
