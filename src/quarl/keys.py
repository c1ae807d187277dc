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


def qat_delay(cfg: Any) -> int:
    """Env steps before QAT turns fake quantization on: `quant.delay`, or half the budget."""
    return int(cfg.quant.delay if cfg.quant.delay is not None else train_steps(cfg) // 2)


def quant_spec(cfg: Any) -> dict[str, Any]:
    """The quant settings that change the result (fp32/fp16/bf16 ignore bits, scheme, ...)."""
    quant = cfg.quant
    if quant.method in ("fp32", "fp16", "bf16"):
        return {"method": quant.method}
    spec = {k: quant[k] for k in ("method", "bits", "scheme", "granularity", "quantize_bias")}
    if quant.method == "qat":
        spec.update(act_bits=quant.act_bits, delay=qat_delay(cfg), freeze_after=quant.freeze_after)
    return spec


def training_spec(cfg: Any) -> dict[str, Any]:
    """Everything that changes the trained policy (not the device or progress bars): QAT settings
    count for QAT policies only, so every PTQ cell shares one fp32 policy."""
    spec = {
        "algo": OmegaConf.to_container(cfg.algo, resolve=True),
        "env": OmegaConf.to_container(cfg.env, resolve=True),
        "seed": int(cfg.seed),
        "steps": train_steps(cfg),
    }
    if cfg.quant.method == "qat":
        spec["qat"] = quant_spec(cfg)
    return spec


def policy_key(cfg: Any) -> str:
    """Key of the policy cache."""
    return digest(training_spec(cfg))


def cell_key(cfg: Any) -> str:
    """Key of one cell: the policy, how it is quantized and how it is evaluated."""
    return digest(
        {
            "policy": policy_key(cfg),
            "quant": quant_spec(cfg),
            "eval": {"episodes": int(cfg.eval.episodes), "deterministic": bool(cfg.eval.deterministic)},
        }
    )
