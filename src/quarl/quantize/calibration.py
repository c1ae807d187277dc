"""Static ranges for post-training quantization of activations and inputs.

`quant.act_bits` quantizes the input of every inference layer but the first (the activations the
policy computes with), `quant.input_bits` the input of the first (the observation entering the
network, after normalisation and /255 for images), each per tensor, affine (zero on the grid),
with a static range:

- calibration: the fp32 policy acts greedily for `quant.calibration_episodes` episodes whose reset
  seeds are drawn from their own stream and never equal an evaluation seed
  (`calibration_seeds`); every inference layer's input is observed on every step;
- `quant.calibration=minmax`: the range is [min, max] of everything observed;
  `quant.calibration=percentile`: [PERCENTILE_LOW, PERCENTILE]th percentiles of it (of a seeded
  uniform sample of at most SAMPLE_CAP values per tensor), which ignores rare outliers.

The quantized model holds each layer as `nn.Sequential(CalibratedFakeQuant, layer)`, so SB3's
`predict`, quarl's acting network (`quarl.deploy.acting_network`), its ONNX export and the int8
backends all run the same quantized activations. The ranges go into the record (`act_ranges`).
"""

from __future__ import annotations

import json
import logging
from typing import Any, Callable, Iterator, Optional, Union

import numpy as np
import torch
import torch.nn as nn
from stable_baselines3.common.base_class import BaseAlgorithm

from quarl.quantize.activations import ActivationFakeQuant, FormatFakeQuant
from quarl.quantize.layers import replace_submodule
from quarl.quantize.weights import inference_layers, qparams
from quarl.rl.envs import make_env
from quarl.rl.seeds import episode_seeds

log = logging.getLogger(__name__)

PERCENTILE = 99.99  # quant.calibration=percentile: the range is the 0.01th .. 99.99th percentile
PERCENTILE_LOW = 100.0 - PERCENTILE
SAMPLE_CAP = 1 << 20  # values kept per tensor for percentiles (a seeded uniform sample beyond that)
INPUT = "input"  # the role of the first layer's input in `act_ranges`

Ranges = dict[str, tuple[float, float]]  # inference layer name -> (lo, hi) of its input


def calibration_seeds(seed: int, episodes: int, eval_episodes: int) -> list[int]:
    """Reset seeds of `episodes` calibration episodes: their own stream of the run seed, skipping any
    seed among the first `eval_episodes` evaluation seeds (`quarl.evaluate.episodes.episode_seeds`)."""
    taken = set(episode_seeds(seed, eval_episodes))
    rng = np.random.default_rng([seed, 0xCA1B])
    seeds: list[int] = []
    while len(seeds) < episodes:
        s = int(rng.integers(0, 2**31 - 1))
        if s not in taken and s not in seeds:
            seeds.append(s)
    return seeds


class RangeObserver:
    """Observes one tensor over many calls: its exact min and max, and a seeded uniform sample of at
    most SAMPLE_CAP of its values (each value kept with the same probability) for percentiles."""

    def __init__(self, statistic: str, seed: int = 0, cap: int = SAMPLE_CAP) -> None:
        if statistic not in ("minmax", "percentile"):
            raise ValueError(f"unknown calibration {statistic!r}")
        self.statistic, self.cap = statistic, cap
        self.lo, self.hi = float("inf"), float("-inf")
        self.kept: list[np.ndarray] = []
        self.count, self.keep = 0, 1.0
        self.rng = np.random.default_rng(seed)

    def observe(self, x: torch.Tensor) -> None:
        values = x.detach().float().reshape(-1).numpy()
        if values.size == 0:
            return
        self.lo, self.hi = min(self.lo, float(values.min())), max(self.hi, float(values.max()))
        if self.statistic != "percentile":
            return
        if self.keep < 1.0:
            values = values[self.rng.random(values.size) < self.keep]
        self.kept.append(values.copy())
        self.count += values.size
        while self.count > self.cap:  # halve the sample and the chance to keep later values
            merged = np.concatenate(self.kept)
            merged = merged[self.rng.random(merged.size) < 0.5]
            self.kept, self.count, self.keep = [merged], merged.size, self.keep / 2

    def __call__(self, module: nn.Module, inputs: tuple[Any, ...]) -> None:  # a forward pre-hook
        self.observe(inputs[0])

    def range(self) -> tuple[float, float]:
        """(lo, hi): min/max, or the percentiles of the sample."""
        if self.lo > self.hi:
            raise ValueError("nothing was observed")
        if self.statistic == "minmax":
            return self.lo, self.hi
        sample = np.concatenate(self.kept)
        return float(np.percentile(sample, PERCENTILE_LOW)), float(np.percentile(sample, PERCENTILE))


def greedy_observations(
    model: BaseAlgorithm,
    env_cfg: Any,
    seeds: list[int],
    obs_transform: Optional[Callable[[np.ndarray], np.ndarray]] = None,
) -> Iterator[np.ndarray]:
    """The raw observations `model` acts on greedily, one episode per seed, each as a batch of one,
    yielded before the model acts on it."""
    env = make_env(env_cfg)
    try:
        for seed in seeds:
            obs, _ = env.reset(seed=seed)
            done = False
            while not done:
                batch = np.asarray(obs)[None]
                yield batch
                action = model.predict(
                    obs_transform(batch) if obs_transform is not None else batch, deterministic=True
                )[0][0]
                obs, _, terminated, truncated, _ = env.step(action)
                done = terminated or truncated
    finally:
        env.close()


def calibrate(
    model: BaseAlgorithm,
    env_cfg: Any,
    seeds: list[int],
    method: str = "minmax",
    obs_transform: Optional[Callable[[np.ndarray], np.ndarray]] = None,
) -> Ranges:
    """Act greedily with `model` (fp32) for one episode per seed and return the observed range of
    every inference layer's input."""
    layers = inference_layers(model)
    observers = {name: RangeObserver(method, seed=i) for i, name in enumerate(layers)}
    handles = [layer.register_forward_pre_hook(observers[name]) for name, layer in layers.items()]
    try:
        steps = sum(1 for _ in greedy_observations(model, env_cfg, seeds, obs_transform))  # the hooks observe
    finally:
        for handle in handles:
            handle.remove()
    log.info("Calibrated activation ranges (%s) on %d steps of %d fp32 episodes.", method, steps, len(seeds))
    return {name: observer.range() for name, observer in observers.items()}


class CalibratedFakeQuant(ActivationFakeQuant):
    """An ActivationFakeQuant whose range came from calibration: it keeps the range, its bit width and
    the layer whose input it quantizes (for the record and for int8 backends)."""

    def __init__(self, layer: str, lo: float, hi: float, bits: int, role: str = "activation") -> None:
        scale, zero_point, qmin, qmax = qparams(torch.tensor([lo]), torch.tensor([hi]), bits, "affine")
        super().__init__(float(scale.item()), int(zero_point.item()), qmin, qmax)
        self.layer, self.lo, self.hi, self.bits, self.role = layer, float(lo), float(hi), int(bits), role


Precision = Union[int, str]  # an integer width (32: left alone), or a number format's name


def quantize_activations(model: BaseAlgorithm, ranges: Optional[Ranges], act: Precision, inputs: Precision) -> None:
    """Put a fake quantizer before every inference layer of `model`, in place: the first layer's
    input at `inputs`, every other layer's at `act`. An integer width gets a CalibratedFakeQuant, a
    number format a FormatFakeQuant (FP8 on its calibrated range, a block format scaled from each input)."""
    layers = list(inference_layers(model).items())
    for index, (name, layer) in enumerate(layers):
        precision = inputs if index == 0 else act
        if precision == 32:
            continue
        lo, hi = ranges[name] if ranges is not None and name in ranges else (None, None)
        role = INPUT if index == 0 else "activation"
        quant: nn.Module
        if isinstance(precision, str):
            quant = FormatFakeQuant(name, precision, role, lo, hi)
        else:
            assert lo is not None and hi is not None, f"integer activations of {name} need calibrated ranges"
            quant = CalibratedFakeQuant(name, lo, hi, precision, role)
        replace_submodule(model.policy, name, nn.Sequential(quant, layer))


def calibrator(cfg: Any, policy: Any) -> Callable[[BaseAlgorithm], Ranges]:
    """What `quantize_policy(model, cfg.quant, calibrate=...)` calls for a cell where its method
    quantizes activations or inputs: ranges from the cell's own calibration settings
    (`quant.calibration`, `quant.calibration_episodes`). `policy`: the CachedPolicy."""

    def run(model: BaseAlgorithm) -> Ranges:
        seeds = calibration_seeds(int(cfg.seed), int(cfg.quant.calibration_episodes), int(cfg.eval.episodes))
        return calibrate(model, cfg.env, seeds, cfg.quant.calibration, policy.obs_transform())

    return run


def record_fields(model: BaseAlgorithm) -> dict[str, Any]:
    """The record's `act_ranges` (JSON: per quantized layer input, keyed by the layer, its role
    "input" or "activation", and its bits and range lo/hi, or its number format and, for FP8, its
    range) for a model `quantize_activations` quantized; {} for any other model."""
    ranges: dict[str, dict[str, Any]] = {}
    for q in model.policy.modules():
        if isinstance(q, CalibratedFakeQuant):
            ranges[q.layer] = {"role": q.role, "bits": q.bits, "lo": q.lo, "hi": q.hi}
        elif isinstance(q, FormatFakeQuant):
            ranges[q.layer] = {"role": q.role, "format": q.number_format, "lo": q.lo, "hi": q.hi}
    return {"act_ranges": json.dumps(ranges, sort_keys=True)} if ranges else {}
