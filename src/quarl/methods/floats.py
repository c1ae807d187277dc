"""No quantization (fp32, the baseline), and weights cast to half precision (fp16, bf16)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from omegaconf import DictConfig

from quarl.config.method_registry import Calibrate, QuantConfig, QuantMethod

if TYPE_CHECKING:
    import torch
    from stable_baselines3.common.base_class import BaseAlgorithm


class FP32(QuantMethod):
    """The fp32 policy as trained: the baseline every other method is compared with."""

    name = "fp32"
    baseline = True
    float_width = 32

    def node(self) -> QuantConfig:
        return QuantConfig(method=self.name, bits=32)


class HalfPrecision(QuantMethod):
    """Weights and biases of every inference layer cast to a 16-bit float type and back."""

    float_width = 16

    def __init__(self, name: str, dtype: str) -> None:
        self.name, self.dtype = name, dtype  # type: ignore[misc]
        self.auto_backend = f"torch_{name}"  # type: ignore[misc]

    def node(self) -> QuantConfig:
        return QuantConfig(method=self.name, bits=16)

    def quantize(self, model: BaseAlgorithm, quant: DictConfig, calibrate: Optional[Calibrate] = None) -> None:
        import torch

        from quarl.quantize.weights import quantize_weights

        dtype = getattr(torch, self.dtype)
        quantize_weights(model, quant, lambda t, granularity, bits: t.to(dtype).to(t.dtype), with_bias=True)

    def tensor_bytes(self, t: torch.Tensor, quant: DictConfig, granularity: str, bits: int) -> int:
        return 2 * t.numel()

    def quantizes_bias(self, quant: Any) -> bool:
        return True


METHODS = (FP32(), HalfPrecision("fp16", "float16"), HalfPrecision("bf16", "bfloat16"))
