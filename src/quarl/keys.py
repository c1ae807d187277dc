"""Content hashes that identify a trained policy and a cell of a study."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from omegaconf import OmegaConf


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


def train_steps(cfg: Any) -> int:
    """The training budget in env steps: `train.steps`, or the algorithm's tuned budget."""
    return int(cfg.train.steps if cfg.train.steps is not None else cfg.algo.n_timesteps)


def qat_delay(cfg: Any) -> int:
    """Env steps before QAT turns fake quantization on: `quant.delay`, or half the budget."""
    return int(cfg.quant.delay if cfg.quant.delay is not None else train_steps(cfg) // 2)


def keep_best_every(cfg: Any) -> int:
    """Env steps between keep-best evaluations: `train.eval_every`, or a twentieth of the budget."""
    every = cfg.train.get("eval_every")
    return int(every) if every else max(1, train_steps(cfg) // 20)


#: PTQ keys added after PTQ records existed: part of a cell key only away from these values, so every
#: earlier PTQ cell keeps its key (activations and inputs unquantized, no per-layer weight bits).
PTQ_OPTIONAL: dict[str, Any] = {"act_bits": 32, "input_bits": 32, "layer_bits": None}
#: Part of a PTQ cell key only where activations or inputs are quantized (they set those ranges).
CALIBRATION_KEYS = ("calibration", "calibration_episodes")


def ptq_activation_bits(quant: Any) -> tuple[int, int]:
    """(activation bits, input bits) a PTQ config quantizes to. A config written before PTQ quantized
    activations (it has no `input_bits`) left both in fp32, whatever its `act_bits` (then QAT's only)."""
    if "input_bits" not in quant:
        return 32, 32
    return int(quant.act_bits), int(quant.input_bits)


def _ptq_spec(quant: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """`spec` with the PTQ-only keys at their defaults left out (see PTQ_OPTIONAL)."""
    spec["act_bits"], spec["input_bits"] = ptq_activation_bits(quant)
    if spec.get("layer_bits"):
        layer_bits = spec["layer_bits"]
        spec["layer_bits"] = OmegaConf.to_container(layer_bits) if OmegaConf.is_config(layer_bits) else dict(layer_bits)
    else:
        spec.pop("layer_bits", None)
    for key, default in PTQ_OPTIONAL.items():
        if spec.get(key, default) == default:
            spec.pop(key, None)
    if "act_bits" not in spec and "input_bits" not in spec:
        for key in CALIBRATION_KEYS:
            spec.pop(key, None)
    return spec


def result_keys(method: str) -> tuple[str, ...]:
    """The `quant.*` keys that change a result of `method` (fp32/fp16/bf16 ignore bits, scheme, ...)."""
    if method == "ptq":
        return ("bits", "scheme", "granularity", "quantize_bias", *PTQ_OPTIONAL, *CALIBRATION_KEYS)
    if method == "qat":
        return ("bits", "scheme", "granularity", "quantize_bias", "act_bits", "delay", "freeze_after")
    if method == "actorq":
        return ("actor_bits",)
    return ()


def quant_spec(cfg: Any) -> dict[str, Any]:
    """The quant settings that change the result."""
    spec = {"method": cfg.quant.method, **{k: cfg.quant[k] for k in result_keys(cfg.quant.method) if k in cfg.quant}}
    if cfg.quant.method == "ptq":
        spec = _ptq_spec(cfg.quant, spec)
    if cfg.quant.backend != "fake":  # real execution adds its own columns to the record
        spec["backend"] = cfg.quant.backend
    if cfg.quant.method == "qat":
        spec["delay"] = qat_delay(cfg)
    if cfg.quant.method == "actorq":  # the distributed run shapes the policy and its curve
        spec["actorq"] = OmegaConf.to_container(cfg.actorq, resolve=True)
    return spec


MEASUREMENT_ONLY_ENV_KEYS = ("return_scale",)  # how results are judged, not how the env behaves


def env_spec(cfg: Any) -> dict[str, Any]:
    """The env settings that change a trained policy or an episode."""
    env = OmegaConf.to_container(cfg.env, resolve=True)
    assert isinstance(env, dict)
    return {k: v for k, v in env.items() if k not in MEASUREMENT_ONLY_ENV_KEYS}


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
    if cfg.quant.method in ("qat", "actorq"):
        spec[cfg.quant.method] = quant_spec(cfg)
    if cfg.train.get("keep_best"):  # the saved policy is the best evaluated one, not the last
        spec["keep_best"] = {"every": keep_best_every(cfg), "episodes": int(cfg.train.eval_episodes)}
    if training_device(cfg) != "cpu":  # GPU kernels round differently: another policy
        spec["device"] = training_device(cfg)
    if cfg.policy.source != "train":  # a pretrained policy is identified by where it comes from
        spec = {"env": spec["env"], "algo": cfg.algo.name, "source": OmegaConf.to_container(cfg.policy, resolve=True)}
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
            "measurement": MEASUREMENT,
        }
    )
