"""Content hashes that identify a trained policy and a cell of a study."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from omegaconf import OmegaConf


def digest(obj: Any) -> str:
    """A short, stable hash of a JSON-able object."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def train_steps(cfg: Any) -> int:
    """The training budget in env steps: `train.steps`, or the algorithm's tuned budget."""
    return int(cfg.train.steps if cfg.train.steps is not None else cfg.algo.n_timesteps)


def training_spec(cfg: Any) -> dict[str, Any]:
    """Everything that changes the trained fp32 policy (not the device or progress bars)."""
    return {
        "algo": OmegaConf.to_container(cfg.algo, resolve=True),
        "env": OmegaConf.to_container(cfg.env, resolve=True),
        "seed": int(cfg.seed),
        "steps": train_steps(cfg),
    }


def quant_spec(quant: Any) -> dict[str, Any]:
    """The quant settings that change the result (fp32/fp16/bf16 ignore bits, scheme, ...)."""
    if quant.method != "ptq":
        return {"method": quant.method}
    return {k: quant[k] for k in ("method", "bits", "scheme", "granularity", "quantize_bias")}


def policy_key(cfg: Any) -> str:
    """Key of the fp32 policy cache."""
    return digest(training_spec(cfg))


def cell_key(cfg: Any, quant: Any | None = None) -> str:
    """Key of one cell: the policy, how it is quantized and how it is evaluated."""
    return digest(
        {
            "policy": policy_key(cfg),
            "quant": quant_spec(quant if quant is not None else cfg.quant),
            "eval": {"episodes": int(cfg.eval.episodes), "deterministic": bool(cfg.eval.deterministic)},
        }
    )
