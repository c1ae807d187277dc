"""From an acting network (an SB3 MLP policy, PTQ- or QAT-quantized, with its VecNormalize and
action head) to the full-integer policy of `quarl.deploy.edge.integer`: the network's stages, their
calibrated or recorded activation ranges, int8 (or packed 4-/2-bit) weights and int32 biases (int16
activations and int64 biases in TFLite's 16x8 scheme)."""

from __future__ import annotations

import logging
import math
from typing import Optional

import numpy as np
import torch
import torch.nn as nn

from quarl.deploy.acting import (
    ActingNetwork,
    Argmax,
    BoxAction,
    CategoricalMode,
)
from quarl.deploy.edge.fixedpoint import ROUNDINGS, quantize_multiplier, round_half_away, tanh_int16_params
from quarl.deploy.edge.integer import (
    ACTIVATION_BITS,
    GRANULARITIES,
    MIN_CALIBRATION_OBS,
    SUPPORTED,
    TANH_SATURATION,
    TANH_SCALE,
    WEIGHT_BITS,
    Dense,
    IntegerPolicy,
    Quant,
    quant_of,
)
from quarl.deploy.edge.stages import Stage, fq_range, observation_step, stages_of, unsupported
from quarl.errors import QuarlError

log = logging.getLogger(__name__)


@torch.no_grad()
def _observe(
    net: ActingNetwork, stages: list[Stage], obs: np.ndarray, statistic: str
) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """Ranges of every Linear's input and output on `obs` (RangeObserver: minmax or percentile)."""
    from quarl.quantize.calibration import RangeObserver  # it imports this package's parent

    ins = [RangeObserver(statistic, seed=i) for i in range(len(stages))]
    outs = [RangeObserver(statistic, seed=100 + i) for i in range(len(stages))]
    handles = []
    for stage, observe_in, observe_out in zip(stages, ins, outs):
        handles.append(stage.linear.register_forward_pre_hook(observe_in))
        handles.append(stage.linear.register_forward_hook(lambda m, i, o, ob=observe_out: ob.observe(o)))
    try:
        for start in range(0, len(obs), 4096):
            net.body(net.prep(torch.from_numpy(net.batch(obs[start : start + 4096]))))
    finally:
        for handle in handles:
            handle.remove()
    return [o.range() for o in ins], [o.range() for o in outs]


def _weights(w: torch.Tensor, bits: int, name: str, granularity: str = "per_channel") -> tuple[np.ndarray, np.ndarray]:
    """Symmetric codes and float32 scales (one per output channel, or one repeated per tensor) of a
    weight matrix [out, in]."""
    w = w.float()
    qmax = 2 ** (bits - 1) - 1
    absmax = w.abs().amax(dim=1)
    if granularity == "per_tensor":
        absmax = absmax.max().expand_as(absmax)
    elif granularity == "per_channel_pow2" and bool((absmax > 0).any()):
        # each channel's scale the layer's largest divided by a power of two (the smallest that still
        # holds the channel): one multiplier per layer, a shift per channel
        top = absmax.max()
        k = torch.floor(torch.log2(top / torch.clamp(absmax, min=top * 2.0**-20)))
        k = torch.where(top * torch.pow(2.0, -k) < absmax, k - 1, k)  # log2's rounding at a power of two
        absmax = torch.where(absmax > 0, top * torch.pow(2.0, -k), absmax)
    if not bool((absmax > 0).any()):
        raise QuarlError(f"Every weight of {name} is zero: the layer's weight range is zero, so it has no int8 scale.")
    scale = (absmax / qmax).float()
    scale = torch.where(absmax > 0, scale, scale[absmax > 0].max())  # a dead channel: any scale codes its zeros
    codes = torch.clamp(torch.round(w.double() / scale.double()[:, None]), -qmax, qmax)  # w: float32, as stored
    return codes.numpy().astype(np.int8), scale.numpy().astype(np.float32)


def _granularity_of(stage: Stage, granularity: str, weight_bits: int) -> str:
    """The weight scales of one layer: `granularity`, or for "auto" per tensor where 8-bit integer
    weights take a layer whose weights lie on at most 256 levels (an 8-bit per-tensor grid)."""
    if granularity != "auto":
        return granularity
    on_grid = weight_bits == 8 and torch.unique(stage.linear.weight.detach()).numel() <= 256
    return "per_tensor" if on_grid else "per_channel_pow2"


def _input_grid(
    net: ActingNetwork, first: Stage, obs: Optional[np.ndarray], statistic: str, bits: int = 8
) -> tuple[np.ndarray, np.ndarray, str]:
    """Per-feature center and step of the observation's int8 (int16) grid: each feature's calibrated
    range [lo, hi] onto codes -qmax..qmax. One scale for every feature would leave a narrow feature
    (CartPole's pole angle next to its cart velocity) a handful of levels."""
    qmax = 2 ** (bits - 1) - 1
    n = int(np.prod(net.obs_shape))
    if obs is not None and len(obs) >= MIN_CALIBRATION_OBS:
        with torch.no_grad():
            x = net.prep(torch.from_numpy(net.batch(obs))).reshape(len(obs), n).double().numpy()
        if statistic == "percentile":
            from quarl.quantize.calibration import PERCENTILE, PERCENTILE_LOW

            lo, hi = np.percentile(x, PERCENTILE_LOW, axis=0), np.percentile(x, PERCENTILE, axis=0)
        else:
            lo, hi = x.min(axis=0), x.max(axis=0)
        why = f"{statistic} per feature of {len(obs)} calibration states"
    elif first.fq is not None:
        lo_t, hi_t = fq_range(first.fq)
        lo, hi = np.full(n, min(lo_t, 0.0)), np.full(n, max(hi_t, 0.0))
        why = "the record's calibrated input range" if hasattr(first.fq, "lo") else "the QAT input range"
    else:
        raise QuarlError(
            f"The observation's range is unknown: pass calibration observations (at least {MIN_CALIBRATION_OBS}; "
            "quarl.deploy.edge.calibration_states gives the states the fp32 policy visits in the record's "
            "calibration episodes), or quantize with quant.act_bits=8 quant.input_bits=8 so the record carries "
            "every layer's range."
        )
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        raise QuarlError("The calibrated observation range is not finite: calibrate on states with finite values.")
    width = hi - lo
    if not np.any(width > 0):
        raise QuarlError(
            "Every observation feature was constant in calibration (range of zero width): the calibration states "
            "give no int8 scale. Calibrate on more or other states (quant.calibration_episodes)."
        )
    center = ((lo + hi) / 2).astype(np.float32)
    step = (width / (2 * qmax)).astype(np.float32)
    constant = width <= 0
    if constant.any():  # a feature that never moved: it keeps its value on a grid of its own size
        step[constant] = np.where(center[constant] != 0, np.abs(center[constant]) / qmax, 1.0).astype(np.float32)
        log.warning("Observation features %s were constant in calibration.", np.flatnonzero(constant).tolist())
    return center, step, why


def _tanh_table(pre: Quant) -> np.ndarray:
    """TFLite's int8 TANH for input quantization `pre`: round(tanh(x) * 128) in float32, clamped."""
    x = pre.dequantize(np.arange(-128, 128))
    return np.clip(round_half_away(np.tanh(x) / np.float32(TANH_SCALE)), -128, 127).astype(np.int8)


def _tanh_saturation(bits: int) -> float:
    """The Tanh output beyond which the int8 (int16) Tanh gives its end code."""
    return TANH_SATURATION if bits == 8 else 32767.0 / 32768.0


def _tanh_input_range(lo: float, hi: float, bits: int = 8) -> tuple[float, float]:
    """The pre-activation range whose tanh covers the post-activation range [lo, hi] (up to saturation)."""
    end = _tanh_saturation(bits)
    lo, hi = max(min(lo, 0.0), -end), min(max(hi, 0.0), end)
    return math.atanh(lo), math.atanh(hi)


def _symmetric(lo: float, hi: float, what: str, bits: int = 8) -> Quant:
    """int8 (int16) scale of [-x, x], x = max(|lo|, |hi|), zero point 0 (a Tanh's input: its int8
    table is odd, so the C policy stores half of it; every int16 activation of TFLite's 16x8 scheme)."""
    x = max(abs(lo), abs(hi))
    if not math.isfinite(x) or x == 0.0:
        raise QuarlError(
            f"The calibrated range of {what} is [{lo}, {hi}]: a range of zero width has no int8 scale. "
            "Calibrate on more or other states (quant.calibration_episodes), or check the policy."
        )
    return Quant(float(np.float32(x / (2 ** (bits - 1) - 1))), 0, bits)


def _bound(stage_in: Quant, codes: np.ndarray, w_scale: np.ndarray, bias: np.ndarray) -> tuple[float, float]:
    """A range that holds every output of an FC layer whatever its int8 input (interval arithmetic)."""
    lo_in, hi_in = stage_in.range()
    w = codes.astype(np.float64) * w_scale.astype(np.float64)[:, None]
    b = bias.astype(np.float64)
    hi = b + np.maximum(w * lo_in, w * hi_in).sum(axis=1)
    lo = b + np.minimum(w * lo_in, w * hi_in).sum(axis=1)
    return float(lo.min()), float(hi.max())


def integer_policy(
    net: ActingNetwork,
    calibration_obs: Optional[np.ndarray] = None,
    statistic: str = "minmax",
    weight_bits: int = 8,
    granularity: str = "auto",
    rounding: str = "gemmlowp",
    activation_bits: int = 8,
) -> IntegerPolicy:
    """The full-integer policy of an acting network (`acting_network(model, obs_transform)`).

    Args:
        net: the acting network of an MLP policy (fp32, PTQ or QAT).
        calibration_obs: raw observations to observe activation ranges on (the states the fp32
            policy visits in quarl's calibration episodes: `calibration_states`). Ranges a PTQ
            record calibrated or a QAT policy froze are used as they are; the rest are observed on
            these. Without them (or with fewer than MIN_CALIBRATION_OBS), the policy must carry
            every layer's input range (quant.act_bits=8 quant.input_bits=8), and the last layer's
            output range is bounded from its input range and weights.
        statistic: "minmax" or "percentile" (quant.calibration), for observed ranges.
        weight_bits: 8, or 4 / 2 for weights packed two / four to a byte (the C policy).
        granularity: the weight scales. "auto" (default): "per_tensor" for a layer whose weights already
            lie on at most 256 levels (a per-tensor 8-bit PTQ record, quarl's default: its grid is then
            rounded onto one of the same step, measured closer to fp32 than per-channel scales: PPO
            CartPole agreement 0.997 against 0.990 at 16x8) when the integer weights are 8-bit, else
            "per_channel_pow2". "per_channel_pow2": one per output channel, each the
            layer's largest divided by a power of two, so the layer has one requantization multiplier
            and a shift per channel (the C policy stores 4 bytes less per channel; a channel loses at
            most one bit of its range); "per_channel": each channel's own max|w| / qmax (a PTQ record
            quantized symmetric per channel at the same bits keeps its codes, the first layer's
            aside); "per_tensor": one scale per layer.
        rounding: the requantization's rounding, as the target runtime rounds (`fixedpoint.ROUNDINGS`):
            "gemmlowp" (TFLite Micro, CMSIS-NN, the C policy), "ruy" (LiteRT's builtin kernels, batch 1)
            or "single" (LiteRT's reference kernels). One .tflite file gives each runtime's actions.
        activation_bits: 8 (TFLite's int8 scheme) or 16 (its 16x8 scheme: int16 activations, zero
            point 0, int64 biases; 8-bit weights only).

    Raises:
        QuarlError: a layer or policy without an integer form (naming it and what is supported),
            calibration that saw no states, a range of zero width, too few ranges.
    """
    if weight_bits not in WEIGHT_BITS:
        raise QuarlError(
            f"weight_bits={weight_bits} is not supported: choose one of {', '.join(map(str, WEIGHT_BITS))}."
        )
    if rounding not in ROUNDINGS:
        raise QuarlError(f"rounding={rounding} is not known: choose one of {', '.join(ROUNDINGS)}.")
    if activation_bits not in ACTIVATION_BITS:
        raise QuarlError(
            f"activation_bits={activation_bits} is not supported: choose one of {', '.join(map(str, ACTIVATION_BITS))}."
        )
    if activation_bits == 16 and weight_bits != 8:
        raise QuarlError(
            f"int16 activations take 8-bit weights (TFLite's 16x8 scheme), not {weight_bits}-bit: use int8 "
            "activations for packed 4-/2-bit weights."
        )
    if granularity not in GRANULARITIES:
        raise QuarlError(f"granularity={granularity} is not supported: choose one of {', '.join(GRANULARITIES)}.")
    if calibration_obs is not None and len(calibration_obs) == 0:
        raise QuarlError(
            "Calibration saw no states: the integer policy's activation scales come from the states the fp32 "
            "policy visits, so calibrate on at least one episode (quant.calibration_episodes >= 1)."
        )
    if net.algo.startswith("recurrent"):
        raise QuarlError(f"Recurrent policies ({net.algo}, LSTM) are not supported: {SUPPORTED}.")
    for name, module in net.body.named_modules():
        if isinstance(module, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
            raise QuarlError(
                f"Convolutional policies are not supported by the integer policy (body.{name} is a "
                f"{type(module).__name__}): {SUPPORTED}; run CNN policies with quant.backend=onnx_int8."
            )
    if len(net.obs_shape) > 1 and net.obs_dtype == np.uint8:
        raise QuarlError(f"Image observations are not supported by the integer policy: {SUPPORTED}.")
    mean, std, clip = observation_step(net)
    stages = stages_of(net)
    head = net.head
    squash_tanh = isinstance(head, BoxAction) and head.tanh
    if squash_tanh:
        if stages[-1].activation != "none":
            raise unsupported(f"A squashing head after {stages[-1].activation}")
        stages[-1].activation = "tanh"  # SAC / gSDE: the squashing tanh runs as an int8 Tanh
    if not isinstance(head, (Argmax, CategoricalMode, BoxAction)):
        raise unsupported(f"The action head {type(head).__name__}")

    observed_in: list[Optional[tuple[float, float]]] = [None] * len(stages)
    observed_out: list[Optional[tuple[float, float]]] = [None] * len(stages)
    source = "observed on the calibration states"
    if calibration_obs is not None and len(calibration_obs) >= MIN_CALIBRATION_OBS:
        ins, outs = _observe(net, stages, np.asarray(calibration_obs), statistic)
        observed_in, observed_out = list(ins), list(outs)
        source = f"{statistic} of {len(calibration_obs)} calibration states"
    ranges: dict[str, str] = {}

    def input_range(i: int) -> tuple[tuple[float, float], str]:
        fq = stages[i].fq
        if fq is not None:
            kind = "calibrated in the record" if hasattr(fq, "lo") else "frozen by QAT"
            return fq_range(fq), kind
        got = observed_in[i]
        if got is None:
            raise QuarlError(
                f"The input range of {stages[i].name} is unknown: pass calibration observations "
                f"(at least {MIN_CALIBRATION_OBS}; quarl.deploy.edge.calibration_states gives the states the fp32 "
                "policy visits in the record's calibration episodes), or quantize with quant.act_bits=8 "
                "quant.input_bits=8 so the record carries every layer's range."
            )
        return got, source

    bits = activation_bits
    center, step, ranges["input"] = _input_grid(net, stages[0], calibration_obs, statistic, bits)
    in_quant = Quant(1.0, 0, bits)
    layers: list[Dense] = []
    for i, stage in enumerate(stages):
        weight = stage.linear.weight.detach().double()
        bias_f = (
            stage.linear.bias.detach().double()
            if stage.linear.bias is not None
            else torch.zeros(weight.shape[0], dtype=torch.float64)
        )
        if i == 0:  # the per-feature grid folded in: W x + b = (W diag(step)) q + (b + W center)
            bias_f = bias_f + weight @ torch.from_numpy(center.astype(np.float64))
            weight = weight * torch.from_numpy(step.astype(np.float64))[None, :]
        codes, w_scale = _weights(weight, weight_bits, stage.name, _granularity_of(stage, granularity, weight_bits))
        bias_f_np = bias_f.numpy()
        bias_scale = np.float64(in_quant.scale) * w_scale.astype(np.float64)
        bias_type = np.int32 if bits == 8 else np.int64
        bias_max = float(np.iinfo(bias_type).max)
        bias = np.clip(np.round(bias_f_np / bias_scale), -bias_max - 1, bias_max).astype(bias_type)
        last = i == len(stages) - 1
        if not last:  # the next layer's input range is this layer's output range (after its activation)
            (lo, hi), why = input_range(i + 1)
            if stage.activation == "tanh":
                lo, hi = _tanh_input_range(lo, hi, bits)
                why += ", through atanh"
        else:
            got = observed_out[i]
            if got is not None:
                (lo, hi), why = got, source
            else:
                real_bias = bias.astype(np.float64) * bias_scale
                (lo, hi), why = _bound(in_quant, codes, w_scale, real_bias), "bounded from its input range and weights"
            if stage.activation == "tanh":  # beyond +-atanh(127/128) the int8 Tanh output saturates anyway
                limit = math.atanh(_tanh_saturation(bits))
                lo, hi = max(lo, -limit), min(hi, limit)
            if isinstance(head, BoxAction) and not head.squash:  # SB3 clips to the bounds anyway
                lo, hi = max(lo, float(head.low.min())), min(hi, float(head.high.max()))
        what = f"the output of {stage.name}"
        symmetric = stage.activation == "tanh" or bits == 16  # TFLite's int16 tensors have zero point 0
        out_quant = _symmetric(lo, hi, what, bits) if symmetric else quant_of(lo, hi, what)
        ranges[stage.name] = why
        real = np.float64(in_quant.scale) * w_scale.astype(np.float64) / np.float64(out_quant.scale)
        mult_shift = [quantize_multiplier(float(r)) for r in real]
        act_min = max(out_quant.qmin, out_quant.zero_point) if stage.activation == "relu" else out_quant.qmin
        layer = Dense(
            name=stage.name,
            weight=codes,
            weight_scale=w_scale,
            weight_bits=weight_bits,
            bias=bias,
            input=in_quant,
            output=out_quant,
            multiplier=np.array([m for m, _ in mult_shift], dtype=np.int32),
            shift=np.array([s for _, s in mult_shift], dtype=np.int32),
            activation=stage.activation,
            act_min=act_min,
            act_max=out_quant.qmax,
            tanh_table=_tanh_table(out_quant) if stage.activation == "tanh" and bits == 8 else None,
            rounding=rounding,
            tanh_int16=tanh_int16_params(out_quant.scale) if stage.activation == "tanh" and bits == 16 else None,
        )
        layers.append(layer)
        in_quant = layer.out_quant
    policy = IntegerPolicy(
        obs_shape=net.obs_shape,
        mean=mean,
        std=std,
        clip=clip,
        center=center,
        step=step,
        input=layers[0].input,
        layers=layers,
        action_kind=net.action_kind,
        action_shape=net.action_shape,
        ranges=ranges,
        algo=net.algo,
    )
    if isinstance(head, BoxAction):
        policy.low, policy.high = head.low.numpy().reshape(-1), head.high.numpy().reshape(-1)
        policy.squash = bool(head.squash)
        if bits == 8:
            codes = np.arange(-128, 128)[:, None].repeat(policy.n_outputs, axis=1)
            policy.action_table = policy.action_values(codes).T.copy()
    if policy.action_kind == "continuous" and policy.n_outputs != int(np.prod(policy.action_shape)):
        raise unsupported(f"An output of {policy.n_outputs} values for actions shaped {policy.action_shape}")
    return policy
