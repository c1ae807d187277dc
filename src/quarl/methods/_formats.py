"""The number formats of PTQ and QAT (`quant.format`, issue 57): the checks of a format cell, its
key, its weight quantizer, its bytes and its bits per weight, on `quarl.quantize.formats`. A helper
of the method plugins (its name starts with `_`: the registry does not read it); torch is imported
only where weights are."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from omegaconf import DictConfig

from quarl.config.method_registry import one_of
from quarl.errors import QuarlError
from quarl.methods._integer import IntegerWeights

if TYPE_CHECKING:
    import torch
    from stable_baselines3.common.base_class import BaseAlgorithm

    from quarl.quantize.formats import Format

INTEGER = "int"  # quant.format's default: the integer quantizer of quant.bits, quant.scheme, quant.granularity
#: every format of quarl.quantize.formats with the bits of its elements (the quant.bits it implies),
#: written out so that a refused run ends before torch loads (tests/methods/test_formats_ptq.py
#: checks it against the registry)
FORMAT_BITS = {
    "fp8_e4m3": 8,
    "fp8_e5m2": 8,
    "mxfp8_e4m3": 8,
    "mxfp8_e5m2": 8,
    "mxfp6_e3m2": 6,
    "mxfp6_e2m3": 6,
    "mxfp4": 4,
    "mxint8": 8,
    "nvfp4": 4,
    "nf4": 4,
}
Precision = Union[int, str]  # activations' or inputs' integer bits (32: fp32), or a number format's name
DEFAULT_BITS = 8  # QuantConfig.bits: the value quant.bits has where the user did not set it
#: PTQ's activation settings with their defaults (fp32 activations and input)
PTQ_ACTIVATIONS = {"act_bits": 32, "input_bits": 32}
#: what a format cell's key leaves out: a format has no integer scheme, and no integer activations or inputs
NOT_IN_A_FORMAT = ("scheme", "act_bits", "input_bits")


def format_name(quant: Any) -> str:
    """The cell's `quant.format` (`int` for a config written before formats existed)."""
    return str(quant.get("format") or INTEGER)


def takes_granularity(name: str) -> bool:
    """FP8 formats are scaled per tensor or per channel (quant.granularity); block formats ignore it."""
    return name.startswith("fp8_")


def implied_bits(quant: Any) -> int | None:
    """The weight bits `quant.format` implies (its elements' bits); None for integers."""
    name = format_name(quant)
    return None if name == INTEGER else FORMAT_BITS.get(name)


def _typed(key: str) -> bool:
    """Whether this run's command line sets quant.`key` (Hydra's task overrides; False outside a run)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return False
    return any(o.split("=", 1)[0].lstrip("+~") == f"quant.{key}" for o in HydraConfig.get().overrides.task)


def set_apart(quant: Any, key: str, wanted: int, default: int) -> bool:
    """Whether quant.`key` is set to other than `wanted`: a value the user typed, or one other than
    the method's `default` (a default stands for what the format implies)."""
    return bool(quant[key] != wanted and (quant[key] != default or _typed(key)))


def check_format(quant: DictConfig, activations: Mapping[str, int] = PTQ_ACTIVATIONS) -> None:
    """Refuse a `quant.format` cell the method cannot run, in one sentence, before anything is
    trained; `activations`: the method's activation settings and their defaults."""
    name = format_name(quant)
    one_of("quant.format", name, (INTEGER, *FORMAT_BITS))
    if name == INTEGER:
        return
    bits = FORMAT_BITS[name]
    if set_apart(quant, "bits", bits, DEFAULT_BITS):
        raise QuarlError(
            f"quant.bits={quant.bits} disagrees with quant.format={name}, which implies {bits}-bit weights: "
            f"leave quant.bits out (or set it to {bits})."
        )
    if any(set_apart(quant, key, 32, default) for key, default in activations.items()):
        keys = " and ".join(f"quant.{key}" for key in activations)
        also = " (quant.act_format / quant.input_format put them in a number format)" if "act_format" in quant else ""
        raise QuarlError(
            f"quant.format={name} takes no integer activations or inputs: leave {keys} out or at 32{also}, "
            "or use quant.format=int."
        )
    runs = executing_backends(name)
    if quant.backend != "fake" and quant.backend not in runs:
        raise QuarlError(
            f"quant.backend={quant.backend} cannot run quant.format={name}: use "
            + " or ".join(f"quant.backend={b}" for b in ("fake", *runs))
            + (" (quantize-dequantize)." if not runs else ".")
        )
    if quant.get("layer_bits"):
        raise QuarlError(
            f"quant.layer_bits sets integer bits per layer, which quant.format={name} does not take: "
            "leave quant.layer_bits null (every layer in the format), or use quant.format=int."
        )


def executing_backends(name: str) -> list[str]:
    """The registered backends that execute weights in the number format `name` for real."""
    from quarl.config import backend_registry

    return [b.name for b in backend_registry.registry().values() if name in b.formats]


def check_activation_formats(quant: DictConfig) -> None:
    """Refuse a PTQ cell's quant.act_format / quant.input_format it cannot run, in one sentence."""
    for key, bits_key in (("act_format", "act_bits"), ("input_format", "input_bits")):
        name = quant.get(key)
        if name is None:
            continue
        one_of(f"quant.{key}", name, tuple(FORMAT_BITS))
        if quant[bits_key] != 32:
            raise QuarlError(
                f"quant.{key}={name} and quant.{bits_key}={quant[bits_key]} both quantize the same tensors: "
                f"give one of them (quant.{bits_key}=32 with a format)."
            )
        if quant.backend != "fake":
            raise QuarlError(
                f"quant.backend={quant.backend} cannot run quant.{key}={name}: no executing backend runs number "
                "formats yet, so use quant.backend=fake (quantize-dequantize)."
            )


def calibrated(precisions: tuple[Precision, ...]) -> bool:
    """Whether activations or inputs at these precisions need calibrated ranges: integers below 32
    bits and FP8 formats (a static scale) do; block formats scale from each input."""
    return any(p != 32 and (isinstance(p, int) or p.startswith("fp8_")) for p in precisions)


def format_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A cell key's quant settings with the format's: none for `int` (every integer cell keeps its
    key), and for a format neither the integer scheme, activation bits nor, for a block format,
    quant.granularity (it has its own blocks)."""
    name = spec.pop("format", INTEGER)
    if name == INTEGER:
        return spec
    dropped = NOT_IN_A_FORMAT if takes_granularity(name) else (*NOT_IN_A_FORMAT, "granularity")
    return {**{k: v for k, v in spec.items() if k not in dropped}, "format": name}


def weight_format(quant: Any, granularity: str) -> Format:
    """The `Format` of a tensor of granularity `granularity` (FP8's; block formats ignore it)."""
    from quarl.quantize import formats

    name = format_name(quant)
    return formats.get(name, granularity if takes_granularity(name) else None)


def weight_formats(quant: Any) -> Optional[Callable[[str], Format]]:
    """granularity -> the cell's `Format` (`weight_format`), or None for integers."""
    if format_name(quant) == INTEGER:
        return None
    return lambda granularity: weight_format(quant, granularity)


def quantize(model: BaseAlgorithm, quant: DictConfig) -> None:
    """Every inference layer's weights (and biases, quant.quantize_bias; per tensor) through the
    format's fake_quantize; a weight quant.min_elements leaves in float stays as it is."""
    from quarl.quantize.weights import quantize_weights

    def tensor(t: torch.Tensor, granularity: str, bits: int) -> torch.Tensor:
        return t.clone() if bits == 32 else weight_format(quant, granularity).fake_quantize(t)

    quantize_weights(model, quant, tensor, with_bias=bool(quant.quantize_bias))


def bits_per_weight(model: BaseAlgorithm, quant: Any) -> float:
    """Storage bits per quantized weight of the policy's inference layers, every scale counted: their
    total bits over their total weights (biases and weights left in float aside)."""
    from quarl.quantize.weights import bits_of, inference_layers

    bits = weights = 0
    for name, layer in inference_layers(model).items():
        if bits_of(name, quant, layer.weight.numel()) != 32:
            bits += weight_format(quant, quant.granularity).storage_bits(tuple(layer.weight.shape))
            weights += layer.weight.numel()
    return bits / weights if weights else 0.0


class FormatWeights(IntegerWeights):
    """What PTQ and QAT share for `quant.format`: integer weights at `int`, else the format's
    weights, named, sized and recorded as the format stores them (docs/formats.md)."""

    def describe(self, quant: DictConfig) -> str:
        """'ptq 4-bit affine per_tensor'; in a format 'qat mxfp4', 'ptq fp8_e4m3 per_channel'."""
        name = format_name(quant)
        if name == INTEGER:
            return super().describe(quant)
        return f"{self.name} {name}" + (f" {quant.granularity}" if takes_granularity(name) else "")

    def used_bits(self, quant: DictConfig) -> Optional[int]:
        """A number format's element bits (quant.format implies quant.bits); None for integers."""
        return implied_bits(quant)

    def implies_bits(self, quant: DictConfig) -> bool:
        return implied_bits(quant) is not None

    def tensor_bytes(self, t: torch.Tensor, quant: DictConfig, granularity: str, bits: int) -> int:
        """Bytes of `t` in the format, elements and scales bit-packed (fp32 where left in float)."""
        if format_name(quant) == INTEGER:
            return super().tensor_bytes(t, quant, granularity, bits)
        return 4 * t.numel() if bits == 32 else weight_format(quant, granularity).nbytes(tuple(t.shape))

    def shown_settings(self, settings: dict[str, Any]) -> dict[str, Any]:
        """An integer record's label leaves quant.format (`int`, or absent in records from before
        formats) out; a format record's leaves out what its key does (`format_spec`)."""
        name = settings.get("format")
        if not isinstance(name, str) or name == INTEGER:
            return {k: v for k, v in settings.items() if k != "format"}
        dropped = NOT_IN_A_FORMAT if takes_granularity(name) else (*NOT_IN_A_FORMAT, "granularity")
        return {k: v for k, v in settings.items() if k not in dropped}

    def record_fields(self, model: BaseAlgorithm, quant: DictConfig) -> dict[str, Any]:
        """A number format's bits per quantized weight, its scales counted (docs/formats.md)."""
        if format_name(quant) == INTEGER:
            return {}
        return {"bits_per_weight": bits_per_weight(model, quant)}
