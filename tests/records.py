"""Hand-made records written through `quarl.store.sqlite.Store`: collation and query tests without training.

The numbers are invented but shaped like real ones (a reward per seed, E against that seed's fp32
record, action agreement rising with bits); every config key a real record has for the tested
behaviour is set, so the records flow through the same code as a sweep's.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from quarl.store.query import float_bits
from quarl.store.record_files import write_json
from quarl.store.sqlite import Store

ENV_IDS = {"cartpole": "CartPole-v1", "acrobot": "Acrobot-v1", "mountaincar_continuous": "MountainCarContinuous-v0",
           "pendulum": "Pendulum-v1"}


def key(*parts: Any) -> str:
    """A 16-hex cell or policy key from anything."""
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]


def record(algo: str, env: str, quant: str = "ptq", bits: int = 8, seed: int = 0, reward: float = 100.0,
           fp32: float | None = 100.0, steps: int | None = 1000, episodes: int = 10, scheme: str = "affine",
           status: str = "done", run: dict | None = None, config: dict | None = None, **extra: Any) -> dict:
    """One record as the pipeline writes it: `run` fields, the nested `config`, per-episode rewards.
    E is computed from `fp32` as the pipeline does (None: no baseline, E blank)."""
    bits = float_bits().get(quant, bits)
    cfg = {
        "algo": {"name": algo, "n_envs": 4}, "env": {"name": env, "id": ENV_IDS.get(env, env)},
        "quant": {"method": quant, "bits": bits, "scheme": scheme, "granularity": "per_tensor",
                  "quantize_bias": False, "backend": "fake"},
        "seed": seed, "train": {"steps": steps, "progress": False}, "eval": {"episodes": episodes, "n_envs": 2},
        "store": {"path": "outputs/results.sqlite", "policies": "outputs/policies"},
    }
    for dotted, value in (config or {}).items():
        node = cfg
        *path, last = dotted.split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    policy = key(algo, env, seed, steps)
    fields = {
        "cell_key": key(policy, quant, bits, scheme, episodes, sorted((config or {}).items())), "status": status,
        "algo": algo, "env": env, "quant": quant, "policy_key": policy, "reward_mean": reward, "reward_std": 1.0,
        "n_episodes": episodes, "fp32_reward": fp32,
        "rel_error": None if not fp32 else (fp32 - reward) / abs(fp32), "versions": {},
        "started_at": f"2026-01-01T00:00:{seed:02d}", **extra, **(run or {}),
    }
    return {"run": fields, "config": cfg,
            "episodes": [{"episode": i, "seed": 100 * seed + i, "reward": reward, "length": 10} for i in range(2)]}


def write(store: Store, records: list[dict], run_root: Path | None = None) -> list[dict]:
    """Write `records` into `store` (and their JSON copies, one run dir each, under `run_root`)."""
    for i, rec in enumerate(records):
        store.write(rec)
        if run_root is not None:
            write_json(rec, run_root / f"job{i}" / "record.json")
    return records


def ptq_study(algos=("dqn", "ppo"), envs=("cartpole", "acrobot"), seeds=(0, 1, 2), bits=(2, 4, 6, 8),
              schemes=("affine",), rng: int = 0) -> list[dict]:
    """fp32, fp16 and PTQ records of a small study with action agreement (more bits: closer to fp32)."""
    gen = np.random.default_rng(rng)
    out = []
    for algo in algos:
        for env in envs:
            scale = 500.0 if env == "cartpole" else -100.0
            for seed in seeds:
                fp32 = scale * (0.9 + 0.1 * gen.random())
                out.append(record(algo, env, "fp32", seed=seed, reward=fp32, fp32=fp32))
                out.append(record(algo, env, "fp16", seed=seed, reward=fp32, fp32=fp32, action_agreement=1.0,
                                  agreement_states=200))
                for scheme in schemes:
                    for b in bits:
                        loss = 0.5 / 2 ** (b - 1) * (1 + gen.random())
                        agree = 1 - 1.2 / 2 ** b - 0.02 * gen.random()
                        out.append(record(algo, env, "ptq", b, seed, reward=fp32 - abs(fp32) * loss, fp32=fp32,
                                          scheme=scheme, action_agreement=agree, agreement_states=200,
                                          action_kl=(0.3 / 2 ** b) if algo == "ppo" else None))
    return out
