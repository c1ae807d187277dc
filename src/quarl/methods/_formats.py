"""PTQ's number formats (`quant.format`, issue 57): the checks of a format cell, its weight quantizer,
its bytes and its bits per weight, on `quarl.quantize.formats`. A helper of the method plugins (its
name starts with `_`: the registry does not read it); torch is imported only where weights are."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from quarl.config.method_registry import one_of
from quarl.errors import QuarlError

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
DEFAULT_BITS = 8  # QuantConfig.bits: the value quant.bits has where the user did not set it


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


def _bits_typed() -> bool:
    """Whether this run's command line sets quant.bits (Hydra's task overrides; False outside a run)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return False
    return any(o.split("=", 1)[0].lstrip("+~") == "quant.bits" for o in HydraConfig.get().overrides.task)


def check_format(quant: DictConfig) -> None:
    """Refuse a `quant.format` cell PTQ cannot run, in one sentence, before anything is trained."""
    name = format_name(quant)
    one_of("quant.format", name, (INTEGER, *FORMAT_BITS))
    if name == INTEGER:
        return
    bits = FORMAT_BITS[name]
    if quant.bits != bits and (quant.bits != DEFAULT_BITS or _bits_typed()):
        raise QuarlError(
            f"quant.bits={quant.bits} disagrees with quant.format={name}, which implies {bits}-bit weights: "
            f"leave quant.bits out (or set it to {bits})."
        )
    if quant.act_bits != 32 or quant.input_bits != 32:
        raise QuarlError(
            f"quant.format={name} quantizes weights only: activation formats are not supported yet "
            "(leave quant.act_bits and quant.input_bits at 32, or use quant.format=int)."
        )
    if quant.backend != "fake":
        raise QuarlError(
            f"quant.backend={quant.backend} cannot run quant.format={name}: no executing backend runs these "
            "formats yet, so use quant.backend=fake (quantize-dequantize)."
        )
    if quant.layer_bits:
        raise QuarlError(
            f"quant.layer_bits sets integer bits per layer, which quant.format={name} does not take: "
            "leave quant.layer_bits null (every layer in the format), or use quant.format=int."
        )


def weight_format(quant: Any, granularity: str) -> Format:
    """The `Format` of a tensor of granularity `granularity` (FP8's; block formats ignore it)."""
    from quarl.quantize import formats

    name = format_name(quant)
    return formats.get(name, granularity if takes_granularity(name) else None)


def quantize(model: BaseAlgorithm, quant: DictConfig) -> None:
    """Every inference layer's weights (and biases, quant.quantize_bias; per tensor) through the
    format's fake_quantize; a weight quant.min_elements leaves in float stays as it is."""
    from quarl.quantize.weights import quantize_weights

    def tensor(t: torch.Tensor, granularity: str, bits: int) -> torch.Tensor:
        return t.clone() if bits == 32 else weight_format(quant, granularity).fake_quantize(t)

    quantize_weights(model, quant, tensor, with_bias=bool(quant.quantize_bias))


def tensor_bytes(t: torch.Tensor, quant: Any, granularity: str, bits: int) -> int:
    """Bytes of `t` in the format, elements and scales bit-packed (fp32 where left in float)."""
    return 4 * t.numel() if bits == 32 else weight_format(quant, granularity).nbytes(tuple(t.shape))


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
