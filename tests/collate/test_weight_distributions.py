"""`quarl.collate.weight_distributions`: per-layer statistics against the loaded policy, spread vs E, the
quantization grid, and where a record's policy is read from."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from omegaconf import OmegaConf

from quarl.collate import load, weight_distributions
from quarl.collate.frame import Notes
from quarl.quantize.weights import fake_quantize
from quarl.store.sqlite import Store
from quarl.train import cache as policies
from tests.collate.studies import ALGOS, ENVS, SEEDS


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
    title = weight_distributions.spread_figure(rep.policies, 2).axes[0].get_title()
    if len(d) >= 3 and d["E (%)"].nunique() > 1 and d["widest_range"].nunique() > 1:  # the data decide the branch
        assert corr is not None and "Pearson r" in title
        assert corr["pearson_r"] == pytest.approx(np.corrcoef(d["widest_range"], d["E (%)"])[0, 1])
        fit = np.polyfit(d["widest_range"], d["E (%)"], 1)
        assert (corr["slope"], corr["intercept"]) == pytest.approx(tuple(fit))
    else:  # every policy lost the same reward at 2 bits: nothing to correlate, and the plot says so
        assert corr is None and "no fit" in title
    constant = rep.policies.assign(**{"E (%)": 10.0})
    assert weight_distributions.correlation(constant) is None  # a constant E has no correlation
    assert "no fit" in weight_distributions.spread_figure(constant, 2).axes[0].get_title()
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
