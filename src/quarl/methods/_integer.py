"""What the integer-weight methods (PTQ, QAT) share: the weight quantizer's checks and sizes. A
helper of the method plugins (its name starts with `_`: the registry does not read it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from omegaconf import DictConfig

from quarl.config.method_registry import GRANULARITIES, SCHEMES, QuantMethod, one_of
from quarl.errors import QuarlError

if TYPE_CHECKING:
    import torch


def check_integer_weights(quant: DictConfig) -> None:
    """The weight quantizer's settings PTQ and QAT share."""
    if quant.scheme == "paper":
        raise QuarlError(
            "quant.scheme=paper is ambiguous and no longer accepted: use quant.scheme=quarl_code (the formula "
            "of QuaRL's released code, which quarl called paper before) or quant.scheme=published (the "
            "formula printed in the paper)."
        )
    one_of("quant.scheme", quant.scheme, SCHEMES)
    one_of("quant.granularity", quant.granularity, GRANULARITIES)
    if quant.scheme in ("quarl_code", "published") and quant.granularity != "per_tensor":
        raise QuarlError(
            f"quant.scheme={quant.scheme} is one of QuaRL's per-tensor formulas: use quant.granularity=per_tensor, "
            "or quant.scheme=affine/symmetric for per_channel."
        )


class IntegerWeights(QuantMethod):
    """What PTQ and QAT share: integer weights from one quantizer, sized as their codes."""

    integer = True

    def describe(self, quant: DictConfig) -> str:
        return f"{self.name} {quant.bits}-bit {quant.scheme} {quant.granularity}"

    def tensor_bytes(self, t: torch.Tensor, quant: DictConfig, granularity: str, bits: int) -> int:
        from quarl.quantize.weights import integer_tensor_bytes

        return integer_tensor_bytes(t, quant, granularity, bits)

    def quantizes_bias(self, quant: DictConfig) -> bool:
        return bool(quant.quantize_bias)
