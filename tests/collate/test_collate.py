"""`quarl collate` end to end: every output of a real sweep, bad input (a missing baseline, an empty
store, filters matching nothing, mistakes), E n/a, quantizer names, progress lines, light imports."""

from __future__ import annotations

import logging
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import matplotlib.image
import pandas as pd
import pytest

from quarl import cli
from quarl.collate import aggregate_plots as agg_plots
from quarl.collate import collate, load, plots
from quarl.progress import Steps
from quarl.store.sqlite import Store
from tests.collate.studies import ALGOS, ENVS, SEEDS, query, stored
from tests.records import ptq_study, record


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


def test_missing_fp32_baseline_gives_a_message_and_every_other_output(store: Path, tmp_path: Path, caplog):
    copy = tmp_path / "r.sqlite"
    shutil.copy(store, copy)
    with sqlite3.connect(copy) as con:  # ppo/cartpole: fp32 records gone; ppo/mountaincar: no baseline anywhere
        con.execute("DELETE FROM runs WHERE algo='ppo' AND quant='fp32'")
        con.execute("UPDATE runs SET fp32_reward = NULL, rel_error = NULL WHERE algo='ppo' AND env='mountaincar'")
    out = tmp_path / "out"
    with caplog.at_level(logging.WARNING):
        assert cli.main(["collate", "--store", str(copy), "--out", str(out), "--formats", "png", "algo=ppo"]) == 0
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


def test_e_na_is_shown_with_its_note_and_never_enters_a_mean(tmp_path: Path):
    records = ptq_study(algos=("ddpg",), envs=("pendulum",), bits=(4, 8), seeds=(0, 1))
    note = "|R_fp32| = 0.03 is below 1% of the env's reward range (0.99)"
    for seed in (0, 1):
        records.append(record("ddpg", "mountaincar_continuous", "fp32", seed=seed, reward=-0.03, fp32=-0.03))
        for b in (4, 8):
            records.append(record("ddpg", "mountaincar_continuous", "ptq", b, seed, reward=-0.5, fp32=-0.03,
                                  run={"rel_error": None, "rel_error_note": note}, action_agreement=0.9))
    out = tmp_path / "out"
    collate(stored(tmp_path, records), out, formats=["png"])
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
    path = stored(tmp_path, ptq_study(schemes=("affine", "quarl_code")))
    out = tmp_path / "out"
    written = collate(path, out, formats=["png"])
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


def test_long_collation_says_what_it_is_doing(tmp_path: Path, caplog, capsys):
    """Off a terminal every step of a collation is a log line; on one, a tqdm bar names the step."""
    path = stored(tmp_path, ptq_study(algos=("ppo",), envs=("cartpole",), seeds=(0, 1), bits=(4, 8)))
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


def test_importing_collation_loads_no_torch_onnx_or_sb3():
    code = ("import importlib, pkgutil, sys, quarl.collate\n"
            "for m in pkgutil.iter_modules(quarl.collate.__path__): "
            "importlib.import_module(f'quarl.collate.{m.name}')\n"
            "print(sorted({k.split('.')[0] for k in sys.modules} & "
            "{'torch', 'onnx', 'onnxruntime', 'stable_baselines3'}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
