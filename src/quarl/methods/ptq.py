"""Post-training quantization: the fp32 policy's weights (and optionally its activations and input,
with ranges calibrated on fp32 rollouts) quantized after training."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from omegaconf import DictConfig, OmegaConf

from quarl.config.method_registry import Calibrate, QuantConfig, one_of
from quarl.errors import QuarlError
from quarl.methods import _formats
from quarl.methods._formats import Precision
from quarl.methods._integer import check_integer_weights

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm

CALIBRATIONS = ("minmax", "percentile")


@dataclass
class PTQConfig(QuantConfig):
    """Post-training quantization of every inference layer's weights."""

    act_bits: int = 32  # bits of every layer's input activation but the first: 2..16, or 32 for unquantized
    input_bits: int = 32  # bits of the observation entering the network, after normalisation (32: not quantized)
    # activation/input ranges from the min/max (minmax) or 0.01..99.99th percentile of calibration rollouts
    calibration: str = "minmax"
    calibration_episodes: int = 5  # fp32 episodes (seeds disjoint from the evaluation's) the ranges come from
    layer_bits: Any = None  # weight bits of named inference layers, e.g. {q_net.q_net.0: 4} (null: every layer at bits)
    # weights with fewer elements stay in float: 1024 is TFLite's rule for post-training weight
    # quantization, which made QuaRL's published int8 column (0: every weight is quantized)
    min_elements: int = 0
    # int (the integer quantizer above), or a number format of quarl.quantize.formats (docs/formats.md):
    # fp8_e4m3, fp8_e5m2, mxfp8_e4m3, mxfp8_e5m2, mxfp6_e3m2, mxfp6_e2m3, mxfp4, mxint8, nvfp4, nf4;
    # a format implies quant.bits and takes quant.granularity where it is FP8; act_format and input_format below put
    # activations and the input in a format
    format: str = "int"
    # activations (every layer's input but the first's) and the input in a number format instead of
    # act_bits / input_bits: FP8 on the calibrated range, block formats scaled from each input (null: as those say)
    act_format: Optional[str] = None
    input_format: Optional[str] = None


#: keys added after PTQ records existed: part of a cell key only away from these values, so every
#: earlier PTQ cell keeps its key (activations and inputs unquantized, no per-layer weight bits).
OPTIONAL: dict[str, Any] = {
    "act_bits": 32,
    "input_bits": 32,
    "layer_bits": None,
    "min_elements": 0,
    "format": "int",
    "act_format": None,
    "input_format": None,
}
#: part of a cell key only where a calibrated range is used (integer or FP8 activations or inputs)
CALIBRATION_KEYS = ("calibration", "calibration_episodes")


def activation_bits(quant: Any) -> tuple[int, int]:
    """(activation bits, input bits) a PTQ config quantizes to. A config written before PTQ quantized
    activations (it has no `input_bits`) left both in fp32, whatever its `act_bits` (then QAT's only)."""
    if "input_bits" not in quant:
        return 32, 32
    return int(quant.act_bits), int(quant.input_bits)


def activation_precisions(quant: Any) -> tuple[Precision, Precision]:
    """(activations, input) as a PTQ config quantizes them: a number format's name where
    quant.act_format / quant.input_format give one, else the integer bits (32: fp32)."""
    act_bits, input_bits = activation_bits(quant)
    return quant.get("act_format") or act_bits, quant.get("input_format") or input_bits


class PTQ(_formats.FormatWeights):
    name = "ptq"
    config = PTQConfig
    result_keys = ("bits", "scheme", "granularity", "quantize_bias", *OPTIONAL, *CALIBRATION_KEYS)

    def spec(self, cfg: DictConfig) -> dict[str, Any]:
        """The PTQ keys at their defaults left out (see OPTIONAL)."""
        spec = super().spec(cfg)
        spec["act_bits"], spec["input_bits"] = activation_bits(cfg.quant)
        if spec.get("layer_bits"):
            layer_bits = spec["layer_bits"]
            spec["layer_bits"] = (
                OmegaConf.to_container(layer_bits) if OmegaConf.is_config(layer_bits) else dict(layer_bits)
            )
        else:
            spec.pop("layer_bits", None)
        for key, default in OPTIONAL.items():
            if spec.get(key, default) == default:
                spec.pop(key, None)
        if not _formats.calibrated(activation_precisions(cfg.quant)):
            for key in CALIBRATION_KEYS:
                spec.pop(key, None)
        return _formats.format_spec(spec)

    def describe(self, quant: DictConfig) -> str:
        """'ptq 4-bit affine per_tensor', then what else this cell quantizes: activations, input, layers."""
        parts = [super().describe(quant)]  # 'ptq mxfp4', 'ptq fp8_e4m3 per_channel' in a format
        for role, precision in zip(("activations", "input"), activation_precisions(quant)):
            parts += [] if precision == 32 else [f"{role} {precision}" + ("-bit" if isinstance(precision, int) else "")]
        if quant.get("layer_bits"):
            parts.append("layers " + ", ".join(f"{name}: {bits}-bit" for name, bits in quant.layer_bits.items()))
        if quant.get("min_elements"):
            parts.append(f"weights under {quant.min_elements} elements in float")
        return ", ".join(parts)

    def validate(self, cfg: DictConfig) -> None:
        q = cfg.quant
        if not (2 <= q.bits <= 16 or q.bits == 32):
            raise QuarlError(
                f"quant.bits={q.bits} is out of range: use 2..16, or 32 for unchanged weights "
                "(quant=fp16 / quant=bf16 for half precision)."
            )
        check_integer_weights(q)
        _formats.check_format(q)
        _formats.check_activation_formats(q)
        for name in ("act_bits", "input_bits"):
            if not (2 <= q[name] <= 16 or q[name] == 32):
                raise QuarlError(
                    f"quant.{name}={q[name]} is out of range: use 2..16, or 32 for unquantized "
                    f"{'activations' if name == 'act_bits' else 'inputs'}."
                )
        if q.min_elements < 0:
            raise QuarlError(
                f"quant.min_elements={q.min_elements} must be >= 0 (0: every weight quantized; 1024: TFLite's rule)."
            )
        if q.min_elements and q.backend != "fake":
            raise QuarlError(
                f"quant.min_elements={q.min_elements} leaves small weights in float for fake quantization only: "
                "use quant.backend=fake with it (the execution backends quantize every layer they run)."
            )
        one_of("quant.calibration", q.calibration, CALIBRATIONS)
        if q.calibration_episodes < 1:
            raise QuarlError(
                f"quant.calibration_episodes={q.calibration_episodes} must be a positive number of "
                "episodes (the fp32 rollouts activation and input ranges are calibrated on)."
            )
        self._validate_layer_bits(cfg)

    @staticmethod
    def _validate_layer_bits(cfg: DictConfig) -> None:
        q = cfg.quant
        if q.layer_bits is None:
            return
        if not isinstance(q.layer_bits, Mapping):
            raise QuarlError(
                f"quant.layer_bits={q.layer_bits} is not allowed: give {{LAYER:BITS,...}} (names from "
                "quarl sensitivity, bits 2..16 or 32), or null for every layer at quant.bits."
            )
        for layer, bits in q.layer_bits.items():
            if not isinstance(bits, int) or isinstance(bits, bool) or not (2 <= bits <= 16 or bits == 32):
                raise QuarlError(
                    f"quant.layer_bits.{layer}={bits} is out of range: use 2..16, or 32 for unchanged weights."
                )
            if q.backend == "onnx_int8" and bits > 8:
                raise QuarlError(
                    f"quant.backend=onnx_int8 executes integer policies of at most 8 bits, not "
                    f"quant.layer_bits.{layer}={bits}: use layer bits <= 8, or quant.backend=auto."
                )
        if q.layer_bits:
            from quarl.quantize.layers import (
                check_layer_names,  # builds the policy network: only where layers are named
            )

            check_layer_names(cfg)

    def quantize(self, model: BaseAlgorithm, quant: DictConfig, calibrate: Optional[Calibrate] = None) -> None:
        """Weights to `quant.bits`; with activation or input bits below 32, every layer's input too,
        with static ranges `calibrate` (quarl.quantize.calibration.calibrator) measures on the fp32 model."""
        from quarl.quantize.weights import fake_quantize, quantize_weights

        precisions = activation_precisions(quant)
        ranges = None
        if _formats.calibrated(precisions):
            if calibrate is None:
                raise ValueError(
                    "integer or FP8 activations and inputs need calibrate= (quarl.quantize.calibration.calibrator)"
                )
            ranges = calibrate(model)  # on the fp32 weights, before they are quantized
        if _formats.format_name(quant) != _formats.INTEGER:
            _formats.quantize(model, quant)
        else:
            quantize_weights(
                model,
                quant,
                lambda t, granularity, bits: fake_quantize(t, bits, quant.scheme, granularity),
                with_bias=bool(quant.quantize_bias),
            )
        if precisions != (32, 32):
            from quarl.quantize.calibration import quantize_activations

            quantize_activations(model, ranges, *precisions)


METHODS = (PTQ(),)
