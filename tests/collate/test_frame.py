"""`quarl.collate.frame`'s `select` and `prepare`: filters matched as text and lists, and the results
notebook (`prepare(select(...))`) on the real sweep and on a store of two trainings."""

from __future__ import annotations

from pathlib import Path

import nbclient
import nbformat

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
