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
