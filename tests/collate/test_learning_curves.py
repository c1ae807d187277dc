"""`quarl.collate.learning_curves`: the training curves stored with fp32 and QAT records, drawn per algo
and env."""

from __future__ import annotations

from pathlib import Path

from quarl.collate import collate, load
from quarl.collate.learning_curves import training_curves
from tests.collate.studies import stored
from tests.records import record


def test_training_curves_are_plotted_per_algo_and_env_with_one_line_per_seed(tmp_path: Path):
    """The fp32 baseline (and QAT) records carry their training's curve: collation draws them."""
    curve = [{"step": 100 * i, "reward": float(i), "length": 10} for i in range(1, 30)]
    records = []
    for seed in (0, 1):
        fp32 = record("dqn", "cartpole", "fp32", seed=seed, reward=500.0, fp32=500.0)
        fp32["curve"] = curve
        qat = record("dqn", "cartpole", "qat", 4, seed=seed, reward=480.0, fp32=500.0)
        qat["curve"] = curve[:10]
        records += [fp32, qat, record("dqn", "cartpole", "ptq", 4, seed=seed, reward=490.0, fp32=500.0)]
    path = stored(tmp_path, records)
    out = tmp_path / "out"
    written = {p.relative_to(out).as_posix() for p in collate(path, out)}
    assert {"curves/dqn_cartpole.png", "curves/dqn_cartpole.pdf"} <= written
    points = training_curves(load(path))
    assert set(points["label"]) == {"fp32", "QAT 4-bit"}
    assert points.groupby(["label", "seed"]).size().to_dict() == {("QAT 4-bit", 0): 10, ("QAT 4-bit", 1): 10,
                                                                  ("fp32", 0): 29, ("fp32", 1): 29}
