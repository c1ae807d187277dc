"""The full-integer policy: TFLite's int8 scheme, written once in numpy as the reference every edge
target (the C policy, LiteRT, TFLite Micro) is checked against bit for bit.

From an acting network (`quarl.deploy.acting_network` of a PTQ or QAT policy: an MLP of Linear
layers with ReLU, Tanh or no activation between them):

    raw obs -> [VecNormalize, float32] -> int8 input -> FC (int8 weights, int32 bias) -> requantize
            -> ReLU (fused clamp) | Tanh (256-entry table) -> ... -> last FC -> int8 output -> head

- weights: int8 (or 4-/2-bit codes for `weight_bits` 4 / 2), symmetric, one scale per output
  channel (zero point 0), quantized from the policy's own (fake-quantized) weights; a policy PTQ'd
  with quant.scheme=symmetric quant.granularity=per_channel at the same bits keeps its exact codes;
- biases: int32 at scale input scale x weight scale;
- activations: int8, one scale and zero point per tensor, static, from quarl's calibration: the
  ranges a PTQ record calibrated (`CalibratedFakeQuant`, quant.act_bits/input_bits) or a QAT policy
  froze, else the ranges observed on calibration observations (`calibration_states`: the states
  the fp32 policy visits in the record's calibration episodes), with the record's statistic
  (minmax / percentile) and quarl's affine range-to-scale rule (`quarl.quantize.weights.qparams`);
- requantization: TFLite's quantized multiplier and shift (`fixedpoint`);
- Tanh: TFLite's int8 TANH, output scale 1/128, zero point 0 (fixed by TFLite's spec), computed as
  the 256-entry table round(tanh(dequantized input) * 128), which is what LiteRT and TFLite Micro
  compute. Its input range is the calibrated output range mapped back through atanh (tanh is
  monotone, so for minmax and percentile calibration this is the range of the pre-activations
  themselves), cut where the output saturates (|tanh| >= 127/128), made symmetric (zero point 0);
- head: argmax of the int8 output (first maximum) for discrete actions; for continuous ones the
  dequantized output through SB3's clip or squash (a squashing policy's tanh runs as an int8 Tanh
  first), in float32, tabulated per output code so no target does float arithmetic there.

`activation_bits=16` is TFLite's 16x8 scheme instead: every activation int16 with zero point 0, int8
weights as above, int64 biases, requantization of the int64 accumulator (TFLite Micro's 16-bit multiplier,
or LiteRT's float64 product: `fixedpoint.DOUBLE_16X8`),
TFLite's int16 TANH (output scale 1/32768: the interpolated sigmoid table, `fixedpoint.tanh_int16`), and
for continuous actions the head computed in float32 from the dequantized output (no table of 65536
codes). It costs twice the activation memory and keeps 256 times finer activations.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import torch

from quarl.deploy.edge.fixedpoint import (
    DOUBLE_16X8,
    ROUNDINGS,
    multiply_by_quantized_multiplier_int64,
    requantize_in_double,
    round_half_away,
    tanh_int16,
)
from quarl.errors import QuarlError
from quarl.quantize.weights import qparams

log = logging.getLogger(__name__)

WEIGHT_BITS = (8, 4, 2)
WEIGHT_CODINGS = ("packed", "huffman")  # the C policy's storage of the weight codes
ACTIVATION_BITS = (8, 16)  # TFLite's int8 scheme, and its 16x8 scheme (int16 activations, int8 weights)
GRANULARITIES = ("auto", "per_channel", "per_channel_pow2", "per_tensor")
ACTIVATIONS = ("none", "relu", "tanh")
TANH_SCALE = 1.0 / 128.0  # TFLite's int8 TANH output: scale 1/128, zero point 0
TANH_SCALE_16 = 1.0 / 32768.0  # its int16 TANH output: scale 1/32768, zero point 0
# a Tanh's input range ends where its output reaches code +-127: beyond, the output is the end code
# either way (and codes -127..127 of a zero-point-0 input map to an odd table, which the C policy halves)
TANH_SATURATION = 127.0 / 128.0
MIN_CALIBRATION_OBS = 32  # observations below which ranges are not observed (a bound is used or it fails)
SUPPORTED = (
    "the integer policy takes MLP policies: Linear layers with ReLU, Tanh or no activation between "
    "them, Box observations (VecNormalize folded in) and Discrete or Box actions"
)


@dataclass(frozen=True)
class Quant:
    """An int8 (or int16) tensor's quantization: real = scale * (q - zero_point), q in [qmin, qmax]."""

    scale: float  # a float32 value
    zero_point: int
    bits: int = 8

    @property
    def qmin(self) -> int:
        return -(2 ** (self.bits - 1))

    @property
    def qmax(self) -> int:
        return 2 ** (self.bits - 1) - 1

    @property
    def dtype(self) -> type:
        return np.int8 if self.bits == 8 else np.int16

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        return (np.float32(self.scale) * (np.asarray(q, dtype=np.int32) - self.zero_point).astype(np.float32)).astype(
            np.float32
        )

    def range(self) -> tuple[float, float]:
        return self.scale * (self.qmin - self.zero_point), self.scale * (self.qmax - self.zero_point)


def quant_of(lo: float, hi: float, what: str) -> Quant:
    """int8 scale and zero point of the range [lo, hi] by quarl's affine rule (the range widened to
    hold 0); a range of zero width is an error, never a silent scale."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise QuarlError(f"The range of {what} is [{lo}, {hi}]: calibration must give a finite range.")
    if min(lo, 0.0) == max(hi, 0.0):
        raise QuarlError(
            f"The calibrated range of {what} is [0, 0]: the calibration states never moved it, so it has no int8 "
            "scale. Calibrate on more or other states (quant.calibration_episodes), or check the policy."
        )
    scale, zero_point, _, _ = qparams(torch.tensor([lo], dtype=torch.float32), torch.tensor([hi]), 8, "affine")
    return Quant(float(scale.item()), int(zero_point.item()) - 128)


@dataclass
class Dense:
    """One fully connected layer in TFLite's int8 arithmetic, with its activation."""

    name: str
    weight: np.ndarray  # int8 codes [out, in] (within +-(2^(weight_bits-1) - 1))
    weight_scale: np.ndarray  # float32 [out]
    weight_bits: int
    bias: np.ndarray  # int32 [out] (int64 with int16 activations)
    input: Quant
    output: Quant  # the FC's own output (before a Tanh)
    multiplier: np.ndarray  # int32 [out]
    shift: np.ndarray  # int32 [out]
    activation: str  # "none", "relu" or "tanh"
    act_min: int = -128
    act_max: int = 127
    tanh_table: Optional[np.ndarray] = None  # int8 [256]: the Tanh of input code q at [q + 128]
    rounding: str = "gemmlowp"  # the requantization's rounding (fixedpoint.ROUNDINGS)
    tanh_int16: Optional[tuple[int, int]] = None  # int16 Tanh: its input multiplier and left shift

    @property
    def bits(self) -> int:
        """The activations' width: 8, or 16 (TFLite's 16x8 scheme)."""
        return self.output.bits

    @property
    def real_multiplier(self) -> np.ndarray:
        """float64 [out]: input scale x weight scale / output scale, as TFLite's kernels compute it."""
        return np.float64(self.input.scale) * self.weight_scale.astype(np.float64) / np.float64(self.output.scale)

    def requantize(self, acc: np.ndarray) -> np.ndarray:
        """The accumulator on the output's grid (before its zero point), in the layer's rounding."""
        if self.bits == 8:
            return ROUNDINGS[self.rounding](acc, self.multiplier, self.shift)
        if self.rounding in DOUBLE_16X8:
            return requantize_in_double(acc, self.real_multiplier)
        return multiply_by_quantized_multiplier_int64(acc, self.multiplier, self.shift)

    @property
    def out_quant(self) -> Quant:
        """The quantization of what the layer passes on (its Tanh's output where it has one)."""
        if self.activation != "tanh":
            return self.output
        return Quant(TANH_SCALE, 0) if self.bits == 8 else Quant(TANH_SCALE_16, 0, 16)

    def __call__(self, q: np.ndarray) -> np.ndarray:
        acc = (q.astype(np.int64) - self.input.zero_point) @ self.weight.astype(np.int64).T + self.bias
        out = self.requantize(acc) + self.output.zero_point
        out = np.clip(out, self.act_min, self.act_max).astype(self.output.dtype)
        if self.tanh_table is not None:
            out = self.tanh_table[out.astype(np.int64) + 128]
        if self.tanh_int16 is not None:
            out = tanh_int16(out, *self.tanh_int16)
        return out


@dataclass
class IntegerPolicy:
    """A policy in full-integer int8 arithmetic: `act(obs)` is the reference for every edge target.

    Attributes:
        obs_shape: one raw observation's shape (flattened to `obs_dim` values).
        mean, std, clip: VecNormalize's observation normalisation (None: none), float32.
        center, step: the per-feature int8 (int16) grid of the (normalised) observation, float32:
            feature j enters as clamp(round((x_j - center_j) / step_j)) (the first layer's weights
            and bias absorb center and step); round: half away from zero, as TFLite's reference
            QUANTIZE, except in LiteRT's rounding ("ruy"): its builtin QUANTIZE rounds whole blocks
            of 8 features half to even (SIMD), the rest half away.
        input: quantization of the first layer's input (scale 1, zero point 0: the grid above).
        layers: the FC layers in order.
        action_kind: "discrete" (an index) or "continuous" (float32 values).
        action_shape: one action's shape.
        low, high: the action bounds (continuous); squash: SB3 maps [-1, 1] onto them (else clips).
        action_table: float32 [action values, 256]: the action value of each int8 output code
            (continuous policies with int8 activations; index code + 128; `action_values`).
        ranges: where every activation range came from, for the record and the user.
        algo: the SB3 algorithm.
        weight_coding: how the C policy stores the weight codes (`WEIGHT_CODINGS`): "packed" (as
            `weight_bits`-bit fields, rows at byte boundaries) or "huffman" (one canonical Huffman
            stream, `quarl.deploy.edge.huffman`). Storage only: the codes, and so the arithmetic, are
            the same.
    """

    obs_shape: tuple[int, ...]
    mean: Optional[np.ndarray]
    std: Optional[np.ndarray]
    clip: Optional[float]
    center: np.ndarray
    step: np.ndarray
    input: Quant
    layers: list[Dense]
    action_kind: str
    action_shape: tuple[int, ...]
    low: Optional[np.ndarray] = None
    high: Optional[np.ndarray] = None
    squash: bool = False
    action_table: Optional[np.ndarray] = None
    ranges: dict[str, str] = field(default_factory=dict)
    algo: str = ""
    weight_coding: str = "packed"

    @property
    def obs_dim(self) -> int:
        return int(np.prod(self.obs_shape)) if self.obs_shape else 1

    @property
    def n_outputs(self) -> int:
        return int(self.layers[-1].weight.shape[0])

    @property
    def weight_bits(self) -> int:
        return self.layers[0].weight_bits

    @property
    def activation_bits(self) -> int:
        """8 (TFLite's int8 scheme) or 16 (its 16x8 scheme)."""
        return self.input.bits

    @property
    def output(self) -> Quant:
        return self.layers[-1].out_quant

    @property
    def rounding(self) -> str:
        """The requantization's rounding (`fixedpoint.ROUNDINGS`): "gemmlowp" (TFLite Micro, the C
        policy's default), "ruy" (LiteRT's builtin kernels) or "single" (LiteRT's reference kernels)."""
        return self.layers[0].rounding

    def with_rounding(self, rounding: str) -> "IntegerPolicy":
        """The same policy requantizing with another rounding (a copy)."""
        if rounding not in ROUNDINGS:
            raise QuarlError(f"rounding={rounding} is not known: choose one of {', '.join(ROUNDINGS)}.")
        layers = [dataclasses.replace(layer, rounding=rounding) for layer in self.layers]
        return dataclasses.replace(self, layers=layers)

    def batch(self, obs: np.ndarray) -> np.ndarray:
        """`obs` as a (N, obs_dim) float32 batch (one observation gets a batch axis)."""
        obs = np.asarray(obs, dtype=np.float32)
        if obs.shape == self.obs_shape:
            obs = obs[None]
        if obs.shape[1:] != self.obs_shape:
            raise QuarlError(f"Observations of shape {obs.shape} do not fit this policy: it takes {self.obs_shape}.")
        return obs.reshape(len(obs), self.obs_dim)

    def normalize(self, obs: np.ndarray) -> np.ndarray:
        """The float32 observation the network takes: VecNormalize's clip((obs - mean) / std)."""
        x = self.batch(obs)
        if self.mean is not None and self.std is not None and self.clip is not None:
            x = np.clip((x - self.mean) / self.std, np.float32(-self.clip), np.float32(self.clip))
        return x.astype(np.float32)

    def quantize_input(self, obs: np.ndarray) -> np.ndarray:
        """clamp(round((x - center) / step)) in int8 (int16), from float32 (TFLite: SUB, DIV, QUANTIZE)."""
        x = (self.normalize(obs) - self.center) / self.step
        x = np.clip(np.nan_to_num(x, nan=-1e6), -1e6, 1e6)  # NaN enters as the lowest code (the C policy's compare)
        rounded = round_half_away(x)
        if self.rounding == "ruy":  # LiteRT's builtin QUANTIZE: ties to even in its blocks of 8 values
            vectorized = (x.shape[1] // 8) * 8
            rounded[:, :vectorized] = np.rint(x[:, :vectorized].astype(np.float64))
        q = self.input
        return np.clip(rounded + q.zero_point, q.qmin, q.qmax).astype(q.dtype)

    def codes(self, obs: np.ndarray) -> np.ndarray:
        """The int8 (int16) output codes (logits, Q-values or action values) for raw observations."""
        q = self.quantize_input(obs)
        for layer in self.layers:
            q = layer(q)
        return q

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Greedy actions: int64 indices (discrete) or float32 values shaped like the action space."""
        codes = self.codes(obs)
        if self.action_kind == "discrete":
            return np.argmax(codes, axis=1).astype(np.int64)  # ties: the first maximum, as TFLite's ARG_MAX
        if self.action_table is not None:
            values = self.action_table[np.arange(codes.shape[1])[None, :], codes.astype(np.int64) + 128]
        else:
            values = self.action_values(codes)
        return values.reshape((len(codes), *self.action_shape)).astype(np.float32)

    def action_values(self, codes: np.ndarray) -> np.ndarray:
        """SB3's action of output codes [N, n_outputs], in float32 as torch and LiteRT compute it:
        the dequantized output squashed onto the bounds (low + 0.5 (a + 1) span) or clipped."""
        assert self.low is not None and self.high is not None
        out = self.output.dequantize(codes)
        low, high = self.low.astype(np.float32)[None, :], self.high.astype(np.float32)[None, :]
        if self.squash:
            span = (high - low).astype(np.float32)
            return (low + ((np.float32(0.5) * (out + np.float32(1.0))) * span)).astype(np.float32)
        return np.minimum(np.maximum(out, low), high).astype(np.float32)

    def describe(self) -> str:
        """One line per tensor: its int8 scale and zero point, and where its range came from."""
        kind = "int8" if self.activation_bits == 8 else "int16 (16x8)"
        lines = [
            f"{self.rounding} rounding, {kind} activations; input: {self.obs_dim} features, each on its own "
            f"{kind.split()[0]} grid ({self.ranges['input']})"
        ]
        for layer in self.layers:
            lines.append(
                f"{layer.name} ({layer.weight.shape[1]}->{layer.weight.shape[0]}, {layer.weight_bits}-bit weights, "
                f"{layer.activation}): output scale {layer.output.scale:.6g}, zero point {layer.output.zero_point} "
                f"({self.ranges[layer.name]})"
            )
        return "\n".join(lines)


# --- building it from an acting network -------------------------------------------------------------
