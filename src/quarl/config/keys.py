"""What identifies a run: a training's budget in env steps and the intervals derived from it,
config nodes as plain dicts, and the content hashes that key a trained policy and a cell of a study."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, cast

from omegaconf import OmegaConf

from quarl.config import method_registry


def train_steps(cfg: Any) -> int:
    """The training budget in env steps: `train.steps`, or the algorithm's tuned budget."""
    return int(cfg.train.steps if cfg.train.steps is not None else cfg.algo.n_timesteps)


def keep_best_every(cfg: Any) -> int:
    """Env steps between keep-best evaluations: `train.eval_every`, or a twentieth of the budget."""
    every = cfg.train.get("eval_every")
    return int(every) if every else max(1, train_steps(cfg) // 20)


def as_dict(node: Any) -> dict[str, Any]:
    """`node` (an OmegaConf mapping node, or a plain mapping) as a plain dict, interpolations resolved."""
    if OmegaConf.is_config(node):
        # OmegaConf types the container of any node (list, dict, ...); a mapping node's is a dict
        return cast(dict[str, Any], OmegaConf.to_container(node, resolve=True))
    return dict(node)


# Bumped when a fix changes what a record's numbers mean, so the fixed measurement runs again instead
# of being skipped as done. 2: executed policies evaluated one observation per call, QAT weight ranges
# from the final weights, action fidelity, E n/a near a zero fp32 reward.
MEASUREMENT = 2


def digest(obj: Any) -> str:
    """A short, stable hash of a JSON-able object."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def slug(text: str) -> str:
    """A file-name-safe form of a label ('atari/breakout' -> 'atari-breakout')."""
    return re.sub(r"[^0-9A-Za-z_.]+", "-", str(text)).strip("-") or "x"


def result_keys(method: str) -> tuple[str, ...]:
    """The `quant.*` keys that change a result of `method` (none for a method quarl does not know)."""
    known = method_registry.REGISTRY.get(method)
    return known.result_keys if known is not None else ()


def shown_settings(method: str, settings: dict[str, Any]) -> dict[str, Any]:
    """Of `settings` that tell `method`'s records apart, those that apply to one record (its label)."""
    known = method_registry.REGISTRY.get(method)
    return known.shown_settings(settings) if known is not None else settings


def quant_spec(cfg: Any) -> dict[str, Any]:
    """The quant settings that change the result."""
    spec = method_registry.of(cfg).spec(cfg)
    if cfg.quant.backend != "fake":  # real execution adds its own columns to the record
        spec["backend"] = cfg.quant.backend
    return spec


MEASUREMENT_ONLY_ENV_KEYS = ("return_scale", "random_return")  # how results are judged, not how the env behaves


def env_spec(cfg: Any) -> dict[str, Any]:
    """The env settings that change a trained policy or an episode."""
    return {k: v for k, v in as_dict(cfg.env).items() if k not in MEASUREMENT_ONLY_ENV_KEYS}


def training_device(cfg: Any) -> str:
    """The device a training really runs on: cuda where asked for (or auto) and present, else cpu."""
    if cfg.train.device not in ("cuda", "auto"):
        return "cpu"
    import torch  # only here: the keys of a CPU run need no torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def training_spec(cfg: Any) -> dict[str, Any]:
    """Everything that changes the trained policy (not progress bars, logging or checkpoints): QAT
    settings count for QAT policies only, so every PTQ cell shares one fp32 policy; a GPU training
    counts as another policy (a CPU one keeps the key it always had)."""
    spec = {
        "algo": OmegaConf.to_container(cfg.algo, resolve=True),
        "env": env_spec(cfg),
        "seed": int(cfg.seed),
        "steps": train_steps(cfg),
    }
    if method_registry.of(cfg).trains_policy:  # its settings shape the policy
        spec[cfg.quant.method] = quant_spec(cfg)
    if cfg.train.get("keep_best"):  # the saved policy is the best evaluated one, not the last
        spec["keep_best"] = {"every": keep_best_every(cfg), "episodes": int(cfg.train.eval_episodes)}
    if cfg.train.get("stop_at_return") is not None:  # ends once it has learned: fewer steps, another policy
        spec["stop_at_return"] = float(cfg.train.stop_at_return)
    if cfg.train.get("robust"):  # trained for quantization robustness (quarl.rl.robust)
        spec["robust"] = robust_spec(cfg.train)
    if cfg.train.get("amp"):  # updates in bfloat16 (quarl.train.amp): another policy
        spec["amp"] = "bfloat16"
    if training_device(cfg) != "cpu":  # GPU kernels round differently: another policy
        spec["device"] = training_device(cfg)
    if cfg.policy.source != "train":  # a pretrained policy is identified by where it comes from
        source = {k: v for k, v in as_dict(cfg.policy).items() if k != "trust"}  # how it is read is no other policy
        spec = {"env": spec["env"], "algo": cfg.algo.name, "source": source}
    return spec


def robust_spec(train: Any) -> dict[str, Any]:
    """A robust training's technique and its setting (SAM's radius, the noise's bits)."""
    setting = {"rho": float(train.robust_rho)} if train.robust == "sam" else {"bits": int(train.robust_bits)}
    return {"technique": train.robust, **setting}


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
            "measurement": MEASUREMENT,
        }
    )
