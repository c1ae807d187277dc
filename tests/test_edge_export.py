"""From a stored PTQ record to a .tflite file and a C policy, the way `quarl export --format
tflite|c` does it: the record's config, its cached fp32 policy, its own calibration states."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from quarl import results
from quarl.calibration import calibration_seeds
from quarl.deploy.edge import calibration_states
from quarl.deploy.edge.export import export_edge
from quarl.methods import policy_config
from quarl.policies import cached
from quarl.quantize import quantize_policy
from tests.conftest import FAST, run_quarl


def _record(scratch: Path, shared_policies: Path):
    run_quarl(scratch, *FAST, policies=shared_policies)
    df = results.load(scratch / "outputs/results.sqlite", quant="ptq")
    cfg = OmegaConf.create(json.loads(df.iloc[0]["config"]))
    policy = cached(policy_config(cfg), Path(cfg.store.policies))
    model = policy.load()
    quantize_policy(model, cfg.quant)
    return cfg, policy, model


def test_a_records_calibration_states_are_its_fp32_policys_calibration_episodes(scratch, shared_policies):
    cfg, policy, _ = _record(scratch, shared_policies)
    states = calibration_states(cfg, policy)
    assert states.shape[1:] == (4,) and len(states) >= 5 * 8  # five CartPole episodes
    seeds = calibration_seeds(int(cfg.seed), int(cfg.quant.calibration_episodes), int(cfg.eval.episodes))
    import gymnasium as gym

    first, _ = gym.make("CartPole-v1").reset(seed=seeds[0])
    assert np.array_equal(states[0], first)  # the first calibration episode's first state


@pytest.mark.parametrize("fmt", ["c", "tflite"])
def test_export_from_a_record_writes_a_checked_policy(fmt, scratch, shared_policies):
    if fmt == "tflite":
        pytest.importorskip("ai_edge_litert", reason="ai-edge-litert is not installed: pip install 'quarl[edge]'")
    cfg, policy, model = _record(scratch, shared_policies)
    states = calibration_states(cfg, policy)
    out = scratch / ("policy.tflite" if fmt == "tflite" else "policy")
    report = export_edge(model, out, fmt, obs_transform=policy.obs_transform(), calibration_obs=states,
                         statistic=cfg.quant.calibration, metadata={"env_id": cfg.env.id})
    assert out.exists() and all(v == 0 for v in report.checked.values()) and report.checked
    text = report.text()
    assert str(out) in text and "identical to the integer reference" in text
