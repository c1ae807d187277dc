"""`quarl.collate.frame`'s `select` and `prepare`: filters matched as text and lists, and the results
notebook (`prepare(select(...))`) on the real sweep and on a store of two trainings."""

from __future__ import annotations

from pathlib import Path

import nbclient
import nbformat
import pytest

from quarl.collate.frame import select
from quarl.store.sqlite import Store
from tests.collate.studies import ENVS, stored, two_trainings
from tests.conftest import ROOT


def test_filters_match_as_text_and_lists(store: Path):
    runs = Store(store).runs()
    picked = select(runs, {"algo": "a2c,ppo", "quant.bits": "8.0", "env": "cartpole"})
    assert (set(picked["algo"]) == {"a2c", "ppo"} and set(picked["quant.bits"]) == {8}
            and set(picked["env"]) == {"cartpole"})
    assert select(runs, {"eval.deterministic": "true"}).shape[0] == len(runs)


def executed_notebook(store: Path, monkeypatch) -> list:
    """Every output of notebooks/results.ipynb run on `store`; none of them an error."""
    nb = nbformat.read(ROOT / "notebooks/results.ipynb", as_version=4)
    monkeypatch.setenv("QUARL_STORE", str(store))
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(ROOT / "notebooks")}})
    client.execute()
    outputs = [o for cell in nb.cells for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    return outputs


def test_notebook_executes_against_the_sweep(store: Path, tmp_path: Path, monkeypatch):
    outputs = executed_notebook(store, monkeypatch)
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= len(ENVS) + 3  # sweet spots, aggregate, heat map, weights
    text = "".join(o.get("text", "") for o in outputs)
    assert f"{len(Store(store).runs())} records selected" in text


def test_notebook_keeps_trainings_apart(tmp_path: Path, monkeypatch):
    """The notebook (prepare(select(...))) on a store of two trainings: separate series and the note."""
    path = stored(tmp_path, two_trainings())
    outputs = executed_notebook(path, monkeypatch)
    text = "".join(o.get("text", "") for o in outputs)
    shown = "".join(str(o.get("data", {}).get("text/markdown", "")) for o in outputs)
    assert "ppo/cartpole holds 2 trainings that differ in train.steps" in text
    assert "### PPO (train.steps=8192)" in shown and "### PPO (train.steps=100000)" in shown


def test_a_store_mixing_integer_and_format_records_labels_each_by_what_applies_to_it(tmp_path: Path):
    """Integer cells (one written before quant.format existed) beside an mxfp4 cell of the same
    policies: the integers keep their scheme labels, the format is labelled by its format alone (it
    has no integer scheme), and no mean pools an integer seed with a format one."""
    from quarl.collate import load
    from tests.records import record

    records = []
    for seed in range(2):
        records.append(record("ppo", "cartpole", bits=4, seed=seed, reward=200.0, scheme="quarl_code"))
        records.append(record("ppo", "cartpole", bits=4, seed=seed, reward=300.0, config={"quant.format": "int"}))
        records.append(record("ppo", "cartpole", bits=4, seed=seed, reward=450.0, config={"quant.format": "mxfp4"}))
    study = load(stored(tmp_path, records))
    means = study.seeds.groupby("method")["reward"].mean().to_dict()
    assert means == {"ptq (scheme=quarl_code)": 200.0, "ptq (scheme=affine)": 300.0, "ptq (format=mxfp4)": 450.0}


def test_collate_draws_reward_against_bits_per_weight_where_a_store_holds_formats(tmp_path: Path):
    """Integer cells at 4 and 8 bits and mxfp4 / fp8_e4m3 cells: a bits-per-weight figure per env, its
    points at each format's recorded bits per weight (integers at their nominal bits), a line per family."""
    import pandas as pd

    from quarl.collate import collate
    from tests.records import record

    records = []
    for seed in range(3):
        records.append(record("ppo", "cartpole", quant="fp32", bits=32, seed=seed, reward=500.0))
        for bits, reward in ((4, 200.0), (8, 490.0)):
            records.append(record("ppo", "cartpole", bits=bits, seed=seed, reward=reward + seed, scheme="quarl_code"))
        for name, bits, bpw in (("mxfp4", 4, 4.35), ("fp8_e4m3", 8, 8.02)):
            rec = record("ppo", "cartpole", bits=bits, seed=seed, reward=400.0 + seed, config={"quant.format": name})
            rec["run"]["bits_per_weight"] = bpw
            records.append(rec)
    out = tmp_path / "out"
    collate(stored(tmp_path, records), out, formats=["png"])
    assert (out / "bits_per_weight" / "cartpole.png").is_file()
    points = pd.read_csv(out / "bits_per_weight" / "points.csv").set_index("method")
    assert points.loc["ptq (format=mxfp4)", "x"] == pytest.approx(4.35) and points.loc["ptq (format=mxfp4)", "n"] == 3
    assert points.loc["ptq (format=mxfp4)", "line"] == "ptq MX float"
    assert points.loc["ptq (format=fp8_e4m3)", "line"] == "ptq FP8"
    integer = points.loc["ptq (scheme=quarl_code)"].set_index("bits")
    assert list(integer["x"]) == [4.0, 8.0] and set(integer["line"]) == {"ptq (scheme=quarl_code)"}
    without = tmp_path / "plain"
    collate(stored(tmp_path / "p", records[:3]), without, formats=["png"])
    assert not (without / "bits_per_weight").exists()  # an integer-only store draws no such figure
