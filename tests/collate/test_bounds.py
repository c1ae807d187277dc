"""`quarl.collate.bounds`: env return ranges, and reward intervals clipped to them in points, plots and
the README."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection

from quarl.collate import bounds, collate, load, plots, stats, tables
from tests.collate.studies import activation_sweep, stored


def test_reward_intervals_are_clipped_to_the_env_return_range_and_say_so(tmp_path: Path):
    assert bounds.return_range("CartPole-v1") == (0.0, 500.0)
    assert bounds.return_range("Acrobot-v1") == (-500.0, 0.0)
    assert bounds.return_range("MountainCarContinuous-v0") == pytest.approx((-99.9, 100.0))
    assert bounds.return_range("Pendulum-v1").low == pytest.approx(-200 * (np.pi**2 + 6.4 + 0.004))
    assert bounds.return_range("dm_control/cartpole-balance-v0") == (0.0, 1000.0)
    assert bounds.return_range("LunarLander-v3") is None and bounds.return_range("CartPole-v1", 200).high == 200
    path = stored(tmp_path, activation_sweep())
    out = tmp_path / "out"
    collate(path, out, formats=["png"])
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
