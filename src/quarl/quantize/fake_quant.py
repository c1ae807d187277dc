"""Quantization-aware training: fake-quant modules inserted into the networks an algorithm trains.

Each weight layer (Linear, Conv) is wrapped in a `QuantLayer` that fake-quantizes its input
activation (per tensor, moving-average min/max) and its weights (per tensor or per channel, ranges
from the current weights) on PyTorch's core fake-quant ops, so the gradient is the straight-through
estimator. Every `FakeQuant` has three switches: observing ranges, applying fake quant (`enabled`)
and `frozen` ranges. In a number format (`quant.format`, quarl.quantize.formats) the weights go
through the format's fake_quantize instead (`FormatQuant`), its scales taken from the current
weights at every step, and the input activations stay fp32. `QATSchedule` turns fake quant on
after `quant.delay` env steps and freezes ranges after `quant.freeze_after`; after training
everything is on and frozen.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Optional, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback

from quarl.errors import QuarlError
from quarl.quantize.formats import Format
from quarl.quantize.layers import replace_submodule
from quarl.quantize.weights import (
    FORMULA_SCHEMES,
    LAYER_TYPES,
    WeightLayer,
    formula_quantize,
    qparams,
    quantize_with,
    ranges,
)

log = logging.getLogger(__name__)

ACT_MOMENTUM = 0.01  # weight of the newest batch in the activations' moving-average range
NORM_TYPES = (nn.LayerNorm, nn.BatchNorm1d, nn.BatchNorm2d)  # kept in float, as in int8 deployment


class FakeQuant(nn.Module):
    """Fake quantization of one tensor with observed ranges (`channels` > 1: per output channel)."""

    lo: torch.Tensor  # buffers, registered in __init__
    hi: torch.Tensor
    observed: torch.Tensor
    enabled: torch.Tensor
    frozen: torch.Tensor

    def __init__(self, bits: int, scheme: str = "affine", channels: int = 1, momentum: Optional[float] = None) -> None:
        super().__init__()
        self.bits, self.scheme, self.momentum = bits, scheme, momentum
        self.register_buffer("lo", torch.zeros(channels))
        self.register_buffer("hi", torch.zeros(channels))
        self.register_buffer("observed", torch.tensor(False))
        self.register_buffer("enabled", torch.tensor(False))
        self.register_buffer("frozen", torch.tensor(False))

    @torch.no_grad()
    def observe(self, x: torch.Tensor) -> None:
        """Update the range from `x`: replaced (weights) or moving average (activations)."""
        granularity = "per_channel" if self.lo.numel() > 1 else "per_tensor"
        lo, hi = ranges(x.detach(), granularity)
        if self.momentum is None or not self.observed:
            self.lo.copy_(lo)
            self.hi.copy_(hi)
        else:
            self.lo.lerp_(lo, self.momentum)
            self.hi.lerp_(hi, self.momentum)
        self.observed.fill_(True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.frozen:
            self.observe(x)
        if not self.enabled:
            return x
        if self.scheme in FORMULA_SCHEMES:  # QuaRL's formulas (exactly their values), straight-through gradient
            return formula_quantize(x.detach(), self.bits, self.scheme) + (x - x.detach())
        return quantize_with(x, *qparams(self.lo, self.hi, self.bits, self.scheme))

    def extra_repr(self) -> str:
        return f"bits={self.bits}, scheme={self.scheme}, channels={self.lo.numel()}"


class FormatQuant(nn.Module):
    """Fake quantization of one tensor in a number format: its scales come from the tensor at every
    call, so there are no ranges to observe or freeze; the gradient passes straight through."""

    enabled: torch.Tensor  # buffers, registered in __init__, switched as a FakeQuant's are
    frozen: torch.Tensor

    def __init__(self, fmt: Format) -> None:
        super().__init__()
        self.fmt = fmt
        self.register_buffer("enabled", torch.tensor(False))
        self.register_buffer("frozen", torch.tensor(False))

    def observe(self, x: torch.Tensor) -> None:
        """Nothing to observe: the format scales each tensor as it comes."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fmt.fake_quantize(x) if self.enabled else x

    def extra_repr(self) -> str:
        return f"format={self.fmt.name}, granularity={self.fmt.granularity}"


#: a cell's number format by granularity (quarl.methods' quant.format), or None for integers
Formats = Optional[Callable[[str], Format]]
Quantizer = Union[FakeQuant, FormatQuant]


class QuantLayer(nn.Module):
    """A Linear or Conv layer computing with fake-quantized input and weights (`formats`: weights
    and biases in a number format, inputs in fp32)."""

    def __init__(self, layer: WeightLayer, quant: Any, formats: Formats = None) -> None:
        super().__init__()
        self.layer = layer
        bias = bool(quant.quantize_bias and layer.bias is not None)
        self.weight_fq: Quantizer
        self.bias_fq: Optional[Quantizer]
        self.input_fq: Optional[FakeQuant] = None
        if formats is not None:
            self.weight_fq = FormatQuant(formats(quant.granularity))
            self.bias_fq = FormatQuant(formats("per_tensor")) if bias else None
            return
        channels = layer.weight.shape[0] if quant.granularity == "per_channel" else 1
        self.weight_fq = FakeQuant(quant.bits, quant.scheme, channels)
        self.input_fq = FakeQuant(quant.act_bits, "affine", 1, ACT_MOMENTUM) if quant.act_bits < 32 else None
        self.bias_fq = FakeQuant(quant.bits, quant.scheme) if bias else None

    def fake_quants(self) -> list[Quantizer]:
        return [fq for fq in (self.weight_fq, self.input_fq, self.bias_fq) if fq is not None]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.input_fq is not None:
            x = self.input_fq(x)
        weight = self.weight_fq(self.layer.weight)
        bias = self.bias_fq(self.layer.bias) if self.bias_fq is not None else self.layer.bias
        if isinstance(self.layer, nn.Linear):
            return F.linear(x, weight, bias)
        return self.layer._conv_forward(x, weight, bias)


def _trained_layers(model: BaseAlgorithm) -> dict[str, WeightLayer]:
    """Weight layers of every network the algorithm trains (target networks excluded)."""
    layers: dict[str, WeightLayer] = {}
    for name, module in model.policy.named_modules():
        if "_target" in name or not name:
            continue
        if isinstance(module, LAYER_TYPES):
            layers[name] = module
        elif any(True for _ in module.parameters(recurse=False)) and not isinstance(module, (QuantLayer, *NORM_TYPES)):
            raise QuarlError(
                f"quant=qat cannot quantize layer {name} ({type(module).__name__}): "
                "QAT handles Linear and Conv layers (MLP and CNN policies)."
            )
    return layers


def attach(model: BaseAlgorithm, quant: Any, formats: Formats = None) -> dict[str, QuantLayer]:
    """Wrap every trained weight layer of `model` in a QuantLayer (observing, fake quant off)."""
    wrapped = {}
    for name, layer in _trained_layers(model).items():
        wrapped[name] = QuantLayer(layer, quant, formats)
        replace_submodule(model.policy, name, wrapped[name])
    return wrapped


def detach(model: BaseAlgorithm) -> dict[str, dict[str, torch.Tensor]]:
    """Put the plain layers back (so SB3 can save the model) and return the fake-quant states."""
    states = {}
    for name, module in list(model.policy.named_modules()):
        if isinstance(module, QuantLayer):
            states[name] = {k: v for k, v in module.state_dict().items() if not k.startswith("layer.")}
            replace_submodule(model.policy, name, module.layer)
    return states


def restore(
    model: BaseAlgorithm, quant: Any, states: dict[str, dict[str, torch.Tensor]], formats: Formats = None
) -> dict[str, QuantLayer]:
    """Re-insert the fake-quant graph saved by `detach`, on and frozen, for evaluation."""
    wrapped = attach(model, quant, formats)
    if set(wrapped) != set(states):
        raise QuarlError("The saved QAT ranges do not match this policy's layers.")
    for name, layer in wrapped.items():
        layer.load_state_dict({**states[name], **{f"layer.{k}": v for k, v in layer.layer.state_dict().items()}})
        reobserve_weights(layer)
    set_switches(wrapped, enabled=True, frozen=True)
    return wrapped


def reobserve_weights(layer: QuantLayer) -> None:
    """Take weight (and bias) ranges from the layer's final weights unless they were frozen on
    purpose (`quant.freeze_after`): the ranges seen last were observed in the forward pass before
    the last optimizer step, and would clip the final weights."""
    if not bool(layer.weight_fq.frozen):
        layer.weight_fq.observe(layer.layer.weight)
    if layer.bias_fq is not None and layer.layer.bias is not None and not bool(layer.bias_fq.frozen):
        layer.bias_fq.observe(layer.layer.bias)


def set_switches(layers: dict[str, QuantLayer], enabled: Optional[bool] = None, frozen: Optional[bool] = None) -> None:
    """Turn fake quant and range freezing on or off in every layer."""
    for layer in layers.values():
        for fq in layer.fake_quants():
            if enabled is not None:
                fq.enabled.fill_(enabled)
            if frozen is not None:
                fq.frozen.fill_(frozen)


class QATSchedule(BaseCallback):
    """Fake quant on at `delay` env steps; ranges frozen at `freeze_after` (None: never during training)."""

    def __init__(self, layers: dict[str, QuantLayer], delay: int, freeze_after: Optional[int]) -> None:
        super().__init__()
        self.layers, self.delay, self.freeze_after = layers, delay, freeze_after
        self.enabled_at: Optional[int] = None
        self.frozen_at: Optional[int] = None

    def _update(self) -> None:
        if self.enabled_at is None and self.num_timesteps >= self.delay:
            set_switches(self.layers, enabled=True)
            self.enabled_at = self.num_timesteps
            log.info("QAT: fake quantization on at step %d", self.num_timesteps)
        if self.freeze_after is not None and self.frozen_at is None and self.num_timesteps >= self.freeze_after:
            set_switches(self.layers, frozen=True)
            self.frozen_at = self.num_timesteps
            log.info("QAT: ranges frozen at step %d", self.num_timesteps)

    def _on_training_start(self) -> None:
        self._update()

    def _on_step(self) -> bool:
        self._update()
        return True
